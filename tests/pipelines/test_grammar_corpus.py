"""Tests for pipelines/grammar_corpus.py: determinism, splits, golden grammar, corpus statistics."""

import re

import pytest

from keras_transformer.pipelines import grammar_corpus as g
from keras_transformer.pipelines.grammar_corpus import Clause, NounPhrase, Pronoun, adjective, noun, verb
from tests.helpers.commands import run_command

# Bounds on the corpus statistics; the values measured at the time of writing are in comments.
MAX_ENGLISH_TYPES = 450  # 20,000 pairs: 388 English word types (lower-cased, punctuation stripped).
MAX_GERMAN_TYPES = 1000  # 820 German word types.


@pytest.fixture(scope="module")
def corpus():
    return g.generate_pairs(2000, seed=0)


def word_types(sentences):
    return {word for text in sentences for word in re.findall(r"[\w']+", text.lower())}


# --- Determinism and splits ------------------------------------------------------------------------


def test_same_seed_same_pairs_different_seed_different_pairs():
    assert g.generate_pairs(200, seed=3) == g.generate_pairs(200, seed=3)
    assert g.generate_pairs(200, seed=3) != g.generate_pairs(200, seed=4)
    assert g.generate_pairs(50, seed=3) == g.generate_pairs(200, seed=3)[:50]


def test_pairs_identical_in_a_fresh_process_with_another_hash_seed():
    code = "from keras_transformer.pipelines import grammar_corpus as g; print(repr(g.generate_pairs(30, seed=7)))"
    result = run_command("-c", code, env={"PYTHONHASHSEED": "12345"}, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == repr(g.generate_pairs(30, seed=7))


def test_splits_have_requested_sizes_and_are_disjoint():
    data = g.splits(seed=1, train_size=2000, validation_size=100, test_size=150)
    assert {name: len(pairs) for name, pairs in data.items()} == {"train": 2000, "validation": 100, "test": 150}
    english = {name: [en for en, _ in pairs] for name, pairs in data.items()}
    for name in english:
        assert len(set(english[name])) == len(english[name]), name
    assert not set(english["train"]) & set(english["validation"])
    assert not set(english["train"]) & set(english["test"])
    assert not set(english["validation"]) & set(english["test"])


def test_test_split_does_not_depend_on_train_size():
    small = g.splits(seed=2, train_size=10, validation_size=20, test_size=30)
    large = g.splits(seed=2, train_size=500, validation_size=20, test_size=30)
    assert small["test"] == large["test"] and small["validation"] == large["validation"]


# --- Golden noun phrases ---------------------------------------------------------------------------


@pytest.mark.parametrize("phrase, case, english, german", [
    (NounPhrase(noun("Hund"), "the", adjective("groß")), "acc", "the big dog", "den großen Hund"),
    (NounPhrase(noun("Hund"), "the", adjective("groß")), "nom", "the big dog", "der große Hund"),
    (NounPhrase(noun("Kind"), "a", adjective("klein")), "nom", "a small child", "ein kleines Kind"),
    (NounPhrase(noun("Mann"), "a", adjective("alt")), "nom", "an old man", "ein alter Mann"),
    (NounPhrase(noun("Frau"), "a", adjective("müde")), "dat", "a tired woman", "einer müden Frau"),
    (NounPhrase(noun("Hund"), "no"), "acc", "no dog", "keinen Hund"),
    (NounPhrase(noun("Hund"), "two", adjective("groß"), plural=True), "nom", "two big dogs", "zwei große Hunde"),
    (NounPhrase(noun("Buch"), "", adjective("neu"), plural=True), "dat", "new books", "neuen Büchern"),
    (NounPhrase(noun("Milch"), "", adjective("kalt")), "acc", "cold milk", "kalte Milch"),
    (NounPhrase(noun("Tee"), "", adjective("süß")), "dat", "sweet tea", "süßem Tee"),
    (NounPhrase(noun("Mann"), "this", plural=True), "nom", "these men", "diese Männer"),
    (NounPhrase(noun("Mädchen"), "our", plural=True), "dat", "our girls", "unseren Mädchen"),
    (NounPhrase(noun("Bär"), "the"), "acc", "the bear", "den Bären"),
    (NounPhrase(noun("Kind"), "many", plural=True), "dat", "many children", "vielen Kindern"),
])
def test_noun_phrase_agreement(phrase, case, english, german):
    assert (phrase.english(), phrase.german(case)) == (english, german)


@pytest.mark.parametrize("en_prep, de_prep, phrase, case, expected", [
    ("with", "mit", NounPhrase(noun("Kind"), "the", adjective("klein"), plural=True), "dat",
     ("with the small children", "mit den kleinen Kindern")),
    ("for", "für", NounPhrase(noun("Mann"), "the"), "acc", ("for the man", "für den Mann")),
    ("without", "ohne", Pronoun(2), "acc", ("without him", "ohne ihn")),
    ("from", "von", NounPhrase(noun("Frau"), "the"), "dat", ("from the woman", "von der Frau")),
    ("from", "von", NounPhrase(noun("Vater"), "the"), "dat", ("from the father", "vom Vater")),
    ("with", "mit", Pronoun(0), "dat", ("with me", "mit mir")),
])
def test_prepositions_govern_case(en_prep, de_prep, phrase, case, expected):
    assert g.prepositional_phrase(en_prep, de_prep, phrase, case) == expected


def test_location_dative_and_direction_accusative_with_contractions():
    park, street = NounPhrase(noun("Park")), NounPhrase(noun("Straße"))
    assert g.place_phrase(park, "loc") == ("in the park", "im Park")
    assert g.place_phrase(park, "dir") == ("to the park", "in den Park")
    assert g.place_phrase(street, "loc") == ("on the street", "auf der Straße")
    assert g.place_phrase(NounPhrase(noun("Café")), "dir") == ("to the café", "ins Café")
    assert g.place_phrase(NounPhrase(noun("Bahnhof")), "dir") == ("to the station", "zum Bahnhof")
    assert g.place_phrase(NounPhrase(noun("Brücke"), "a"), "dir") == ("to a bridge", "zu einer Brücke")


# --- Golden verbs and clauses ----------------------------------------------------------------------


def test_present_agreement_with_every_person():
    expected = ["ich sehe", "du siehst", "er sieht", "wir sehen", "ihr seht", "sie sehen"]
    persons = [0, 1, 2, 4, 5, 6]  # Rows of lexicon.PRONOUNS: ich, du, er, wir, ihr, sie (plural).
    clauses = [Clause(Pronoun(i), verb("sehen"), accusative=NounPhrase(noun("Hund"))) for i in persons]
    assert [g.german_main(c).rsplit(" ", 2)[0] for c in clauses] == expected
    assert g.english_clause(clauses[2]) == "he sees the dog"
    assert g.english_clause(clauses[4]) == "you all see the dog"


def test_verb_second_after_fronted_adverb():
    clause = Clause(NounPhrase(noun("Mann")), verb("sehen"), accusative=NounPhrase(noun("Hund")))
    assert g.declarative(clause) == ("The man sees the dog.", "Der Mann sieht den Hund.")
    assert g.declarative(clause, ("today", "heute")) == ("Today the man sees the dog.",
                                                          "Heute sieht der Mann den Hund.")
    me = Clause(NounPhrase(noun("Mann")), verb("sehen"), accusative=Pronoun(0))
    assert g.declarative(me, ("today", "heute")) == ("Today the man sees me.", "Heute sieht mich der Mann.")


def test_separable_verb_splits_in_main_clause_and_joins_in_subordinate():
    opens = Clause(NounPhrase(noun("Frau")), verb("aufmachen"), accusative=NounPhrase(noun("Tür")))
    assert g.declarative(opens) == ("The woman opens the door.", "Die Frau macht die Tür auf.")
    picks_up = Clause(NounPhrase(noun("Mutter")), verb("abholen"), accusative=Pronoun(2))
    assert g.declarative(picks_up) == ("The mother picks him up.", "Die Mutter holt ihn ab.")
    laughs = Clause(NounPhrase(noun("Kind")), verb("lachen"))
    assert g.with_subordinate(laughs, g.BECAUSE, opens) == (
        "The child laughs because the woman opens the door.",
        "Das Kind lacht, weil die Frau die Tür aufmacht.")


def test_verb_final_in_subordinate_clause_and_fronted_subordinate_clause():
    reads = Clause(NounPhrase(noun("Kind")), verb("lesen"), accusative=NounPhrase(noun("Buch"), "a"))
    sleeps = Clause(NounPhrase(noun("Mann")), verb("schlafen"))
    assert g.with_subordinate(sleeps, g.BECAUSE, reads) == (
        "The man sleeps because the child reads a book.", "Der Mann schläft, weil das Kind ein Buch liest.")
    assert g.with_subordinate(reads, g.WHEN["present"], sleeps, fronted=True) == (
        "When the man sleeps, the child reads a book.", "Wenn der Mann schläft, liest das Kind ein Buch.")


def test_past_when_is_als_with_preterite():
    sees = Clause(Pronoun(0), verb("sehen"), "past", accusative=NounPhrase(noun("Bär")))
    gets_up = Clause(NounPhrase(noun("Mädchen")), verb("aufstehen"), "past")
    assert g.with_subordinate(gets_up, g.WHEN["past"], sees, fronted=True) == (
        "When I saw the bear, the girl got up.", "Als ich den Bären sah, stand das Mädchen auf.")


def test_perfect_participle_at_the_end_with_haben_and_sein():
    seen = Clause(NounPhrase(noun("Mann")), verb("sehen"), "perfect", accusative=NounPhrase(noun("Hund")))
    assert g.declarative(seen) == ("The man has seen the dog.", "Der Mann hat den Hund gesehen.")
    gone = Clause(Pronoun(4), verb("gehen"), "perfect", pp=g.place_phrase(NounPhrase(noun("Schule")), "dir"))
    assert g.declarative(gone) == ("We have gone to the school.", "Wir sind zur Schule gegangen.")
    laughs = Clause(Pronoun(3), verb("lachen"))
    assert g.with_subordinate(laughs, g.BECAUSE, seen)[1] == "Sie lacht, weil der Mann den Hund gesehen hat."


def test_dative_and_ditransitive_objects():
    gives = Clause(NounPhrase(noun("Mann")), verb("geben"), dative=NounPhrase(noun("Kind")),
                   accusative=NounPhrase(noun("Buch"), "a"))
    assert g.declarative(gives) == ("The man gives the child a book.", "Der Mann gibt dem Kind ein Buch.")
    helps = Clause(NounPhrase(noun("Junge")), verb("helfen"), "past", dative=NounPhrase(noun("Frau")))
    assert g.declarative(helps) == ("The boy helped the woman.", "Der Junge half der Frau.")


def test_negation_with_nicht_and_kein():
    dog = Clause(NounPhrase(noun("Mann")), verb("sehen"), accusative=NounPhrase(noun("Hund"), "a"), negated=True)
    assert g.declarative(dog) == ("The man does not see a dog.", "Der Mann sieht keinen Hund.")
    door = Clause(NounPhrase(noun("Frau")), verb("aufmachen"), "perfect", accusative=NounPhrase(noun("Tür")),
                  negated=True)
    assert g.declarative(door) == ("The woman has not opened the door.", "Die Frau hat die Tür nicht aufgemacht.")


def test_questions_copula_and_that_clause():
    reads = Clause(NounPhrase(noun("Kind")), verb("lesen"), accusative=NounPhrase(noun("Zeitung")))
    assert g.question(reads) == ("Does the child read the newspaper?", "Liest das Kind die Zeitung?")
    tired = Clause(NounPhrase(noun("Hund"), "my"), verb("sein"), predicate=adjective("müde"))
    assert g.question(tired) == ("Is my dog tired?", "Ist mein Hund müde?")
    says = Clause(NounPhrase(noun("Frau")), verb("wissen"), "past", that=tired)
    assert g.declarative(says) == ("The woman knew that my dog is tired.", "Die Frau wusste, dass mein Hund müde ist.")


# --- Corpus statistics -----------------------------------------------------------------------------


def test_sentences_are_capitalised_and_punctuated(corpus):
    for english, german in corpus:
        for text in (english, german):
            assert text[0].isupper() and text[-1] in ".?", text
            assert "  " not in text and " ," not in text, text


def test_corpus_has_every_special_letter(corpus):
    german = "".join(de for _, de in corpus)
    for letter in "äöüßé":
        assert letter in german, letter


def test_lengths_are_within_bounds(corpus):
    lengths = [len(text.split()) for pair in corpus for text in pair]
    assert min(lengths) >= g.MIN_WORDS and max(lengths) <= g.MAX_WORDS
    assert 7 <= sum(lengths) / len(lengths) <= 14


def test_vocabulary_is_small():
    pairs = g.generate_pairs(20000, seed=0)
    english, german = word_types(en for en, _ in pairs), word_types(de for _, de in pairs)
    print(f"word types in 20,000 pairs: English {len(english)}, German {len(german)}")
    assert len(english) <= MAX_ENGLISH_TYPES and len(german) <= MAX_GERMAN_TYPES
