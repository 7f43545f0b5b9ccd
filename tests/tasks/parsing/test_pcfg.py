"""`keras_transformer.tasks.parsing.pcfg`: the treebank PCFG baseline of the parsing task.

Checked: word signatures; the grammar's binarized form undone gives back every gold tree of the
sample; CKY finds the same best tree and score as nltk's `ViterbiParser` on the same grammar (a
hand-made treebank, a sentence with an unknown word); on the sample's grammar the parse of a
training sentence scores at least its gold tree; the parse command with --baseline=pcfg writes
trees over the input's words and scores them.

k-best (Huang & Chiang 2005): on a tiny ambiguous treebank the k best derivations are exactly the
derivations an exhaustive enumerator finds from the grammar's rules (with an infinite beam, and with
a beam: those over the items CKY's chart keeps), with their scores; the best is Viterbi's tree and
score, also when two derivations tie (a binary rule, a unary chain); scores never rise, derivations
are distinct and each is scored as `log_score` scores it; a smaller k gives the first ones;
`parse_kbest` gives the distinct output trees in the order of their best derivations, first
`parse`'s; an underivable sentence gets the fallback alone. The same on sample sentences with the
parse command's grammar. The sample (../shared/data) is skipped without it.
"""

import collections
import math

import nltk
import numpy as np
import pytest
from nltk import Tree
from nltk.grammar import Nonterminal, ProbabilisticProduction

from keras_transformer.pipelines import treebank
from keras_transformer.tasks.parsing import parse_files, pcfg
from tests.helpers.commands import run_command
from tests.helpers.treebank import one_line

HAND_TREES = [  # a small treebank: tags, unary chains, a flat NP to binarize, a one-word sentence
    "(S (NP (DT the) (NN dog)) (VP (VBZ barks)) (. .))",
    "(S (NP (DT the) (JJ big) (JJ red) (NN dog)) (VP (VBZ sees) (NP (DT a) (NN cat))) (. .))",
    "(S (NP (NNP Fido)) (VP (VBD saw) (NP (DT the) (NN cat)) (PP (IN with) (NP (DT a) (NN telescope)))) (. .))",
    "(S (NP (DT a) (NN cat)) (VP (VBZ sleeps) (ADVP (RB quietly))) (. .))",
    "(S (NP (PRP it)) (VP (VBD ran) (PP (IN into) (NP (DT the) (JJ old) (NN house)))) (. .))",
    "(S (VP (VB Go)) (. !))",
]


def hand_sentences():
    return [treebank.clean(Tree.fromstring(t)) for t in HAND_TREES]


@pytest.mark.parametrize("word, first, expected", [
    ("Running", False, "UNK-CAPS-ing"), ("Running", True, "UNK-INITC-ing"), ("quickly", False, "UNK-ly"),
    ("1,234", False, "UNK-NUM"), ("well-known", False, "UNK-DASH"), ("iPod", False, "UNK-MIXC"),
    ("cats", False, "UNK-s"), ("ox", False, "UNK")])
def test_signature(word, first, expected):
    assert pcfg.signature(word, first) == expected


def test_binarized_trees_come_back(sample):
    for sentence in sample["train"][:400]:
        tagged = sentence.tagged_tree()
        form = pcfg.binarized(tagged, horizontal=2, vertical=1)
        assert all(len(node) <= 2 for node in form.subtrees())
        assert pcfg.debinarized(form) == sentence.tree
        assert tagged == sentence.tagged_tree()  # the input is not changed


def viterbi_by_nltk(grammar: pcfg.Grammar, words):
    """nltk's ViterbiParser on the same grammar: the phrase rules as they are; a tag's word rules
    get exp(lexicon score) x a constant small enough that each tag's rules sum to at most 1 (the
    rest goes to a word outside the sentence), so the best tree is the same and its log-probability
    is the score plus len(words) x log(constant)."""
    scores = {w: np.exp(grammar.lexicon.log_scores(w, i == 0)) for i, w in enumerate(words)}
    scale = 0.5 / max(sum(s[t] for s in scores.values()) for t in range(len(grammar.lexicon.tag_ids)))
    productions = []
    for (parent, left, right), log_p in zip(grammar.binary.tolist(), grammar.binary_log_p):
        productions.append(ProbabilisticProduction(
            Nonterminal(grammar.symbols[parent]),
            [Nonterminal(grammar.symbols[left]), Nonterminal(grammar.symbols[right])], prob=math.exp(log_p)))
    for (parent, child), log_p in grammar.unary.items():
        productions.append(ProbabilisticProduction(Nonterminal(grammar.symbols[parent]),
                                                   [Nonterminal(grammar.symbols[child])], prob=math.exp(log_p)))
    for tag, column in grammar.lexicon.tag_ids.items():
        mass = 0.0
        for word, score in scores.items():
            if score[column] > 0:
                productions.append(ProbabilisticProduction(Nonterminal(tag), [word], prob=score[column] * scale))
                mass += score[column] * scale
        productions.append(ProbabilisticProduction(Nonterminal(tag), [f"<other {tag}>"], prob=1 - mass))
    parser = nltk.ViterbiParser(nltk.PCFG(Nonterminal(pcfg.START), productions))
    best = next(parser.parse(words), None)
    if best is None:
        return None, -math.inf
    return Tree.convert(best), math.log(best.prob()) - len(words) * math.log(scale)


@pytest.mark.parametrize("sentence, derived", [  # derived by the (1, 0) and by the (2, 1) grammar
    ("the cat barks .", (True, True)), ("Fido saw a red cat .", (True, True)),
    ("the gorilla sleeps quietly .", (True, True)),  # gorilla: an unknown word
    ("a big dog saw the old cat with Fido .", (True, False)),
    ("it ran into the big red house .", (True, False))])
@pytest.mark.parametrize("horizontal, vertical", [(1, 0), (2, 1)])
def test_cky_equals_nltk_viterbi(sentence, derived, horizontal, vertical):
    grammar = pcfg.Grammar.induce(hand_sentences(), horizontal, vertical, beam=math.inf)
    words = sentence.split()
    tree, score = grammar.viterbi(words)
    expected_tree, expected_score = viterbi_by_nltk(grammar, words)
    assert (tree is not None) == derived[vertical]
    assert tree == expected_tree
    if tree is None:
        assert score == expected_score == -math.inf and grammar.parse(words) is None
        return
    assert score == pytest.approx(expected_score, abs=1e-4)
    assert grammar.log_score(tree, words) == pytest.approx(score, abs=1e-4)
    parsed = grammar.parse(words)
    assert parsed.leaves() == words and parsed == pcfg.debinarized(tree)


def test_a_sentence_the_grammar_cannot_derive_gets_the_fallback():
    grammar = pcfg.Grammar.induce(hand_sentences()[:1], 2, 1)  # one tree: the dog barks .
    assert grammar.parse("barks the dog".split()) is None
    trees, failed = pcfg.parse_all(grammar, [["the", "dog", "barks", "."], ["barks", "the", "dog"], []],
                                   parse_files.right_branching)
    assert failed == 1
    assert parse_files.format_tree(trees[0]) == "(S (NP the dog) (VP barks) .)"
    assert trees[1] == parse_files.right_branching(["barks", "the", "dog"]) and trees[2] is None


def test_the_parse_scores_at_least_the_gold_tree(sample):
    grammar = pcfg.Grammar.induce(sample["train"], 2, 1, beam=math.inf)
    short = [s for s in sample["train"] if 6 <= len(s.words) <= 12][:5]
    assert len(short) == 5
    for sentence in short:
        tree, score = grammar.viterbi(sentence.words)
        gold = grammar.log_score(pcfg.binarized(sentence.tagged_tree(), 2, 1), sentence.words)
        assert np.isfinite(gold)
        assert score >= gold - 1e-3
        assert grammar.log_score(tree, sentence.words) == pytest.approx(score, abs=1e-3)


def test_parse_command_with_the_pcfg_baseline(ptb, sample, tmp_path):
    gold = sample["test"][:3]
    (tmp_path / "sentences.txt").write_text("".join(s.sentence + "\n" for s in gold), encoding="utf-8")
    (tmp_path / "gold.trees").write_text("".join(parse_files.format_tree(s.tagged_tree()) + "\n" for s in gold),
                                         encoding="utf-8")
    result = run_command("-m", "keras_transformer.parse", "--baseline=pcfg", f"--data_dir={ptb}",
                         f"--input={tmp_path / 'sentences.txt'}", f"--reference={tmp_path / 'gold.trees'}",
                         f"--output={tmp_path / 'trees.txt'}", "--pcfg_horizontal=1", "--pcfg_vertical=0")
    assert result.returncode == 0, result.stderr[-3000:]
    trees = [Tree.fromstring(line) for line in (tmp_path / "trees.txt").read_text(encoding="utf-8").splitlines()]
    assert [t.leaves() for t in trees] == [list(s.words) for s in gold]
    expected = parse_files.Gold(tuple(gold)).report(trees)
    assert result.stdout.startswith(f"pcfg (the {ptb} training split, horizontal 1, vertical 0: ")
    assert expected in result.stdout


AMBIGUOUS_TREES = [  # words of two tags (saw, fish, flies, like) and phrases to attach in two places
    "(S (NP (DT the) (NN man)) (VP (VBD saw) (NP (NP (DT the) (NN dog)) (PP (IN with) (NP (DT a) (NN telescope)))))"
    " (. .))",
    "(S (NP (PRP I)) (VP (VBD saw) (NP (DT the) (NN man)) (PP (IN with) (NP (DT a) (NN saw)))) (. .))",
    "(S (NP (NNS fish)) (VP (VBP fish) (NP (NNS fish))) (. .))",
    "(S (NP (NN time)) (VP (VBZ flies) (PP (IN like) (NP (DT an) (NN arrow)))) (. .))",
    "(S (NP (NN fruit) (NNS flies)) (VP (VBP like) (NP (DT a) (NN banana))) (. .))",
]


def ambiguous_grammar(horizontal=1, vertical=0, beam=math.inf):
    trees = HAND_TREES + AMBIGUOUS_TREES
    return pcfg.Grammar.induce([treebank.clean(Tree.fromstring(t)) for t in trees], horizontal, vertical, beam)


def every_derivation(grammar: pcfg.Grammar, words, keep=None) -> list:
    """[(tree, score)] of every derivation of START over `words`, enumerated exhaustively from the
    grammar's rules (not its chart or its unary chains): per span, a tag over the word or a binary
    rule over two smaller spans' trees, then at most one unary chain of one or two rules that does
    not come back to the symbol it starts from (what CKY closes once per span); with `keep`, only
    the spans' symbols `keep(i, j, symbol)` accepts after that chain."""
    binary = collections.defaultdict(list)
    for (parent, left, right), log_p in zip(grammar.binary.tolist(), grammar.binary_log_p.tolist()):
        binary[left, right].append((parent, log_p))
    unary = collections.defaultdict(list)
    for (parent, child), log_p in grammar.unary.items():
        unary[child].append((parent, log_p))
    name = grammar.symbols
    closed = {}  # (i, j): [(symbol, tree, score)]
    n = len(words)
    for length in range(1, n + 1):
        for i in range(n - length + 1):
            j = i + length
            bare = []
            if length == 1:
                scores = grammar.lexicon.log_scores(words[i], i == 0)
                bare = [(grammar.ids[tag], Tree(tag, [words[i]]), float(scores[column]))
                        for tag, column in grammar.lexicon.tag_ids.items() if scores[column] > -math.inf]
            for k in range(i + 1, j):
                for left, left_tree, left_score in closed[i, k]:
                    for right, right_tree, right_score in closed[k, j]:
                        for parent, log_p in binary.get((left, right), ()):
                            bare.append((parent, Tree(name[parent], [left_tree, right_tree]),
                                         left_score + right_score + log_p))
            closed[i, j] = list(bare)
            for child, tree, score in bare:
                for middle, log_p in unary.get(child, ()):
                    closed[i, j].append((middle, Tree(name[middle], [tree]), score + log_p))
                    for parent, log_p2 in unary.get(middle, ()):
                        if parent != child:
                            closed[i, j].append((parent, Tree(name[parent], [Tree(name[middle], [tree])]),
                                                 score + log_p + log_p2))
            if keep is not None:
                closed[i, j] = [entry for entry in closed[i, j] if keep(i, j, entry[0])]
    return [(tree, score) for symbol, tree, score in closed[0, n] if symbol == grammar.start]


def assert_derivations_are_sound(grammar, words, derivations):
    """Best first, pairwise distinct, each scored as `log_score` scores its tree."""
    scores = [score for _, score in derivations]
    assert all(a >= b for a, b in zip(scores, scores[1:]))
    strings = [one_line(tree) for tree, _ in derivations]
    assert len(set(strings)) == len(strings)
    for tree, score in derivations:
        assert tree.leaves() == list(words)
        assert grammar.log_score(tree, words) == pytest.approx(score, abs=1e-3)


@pytest.mark.parametrize("horizontal, vertical, beam, sentence", [
    (1, 0, math.inf, "I saw the man with a saw ."),  # 1,875 derivations, many of them tied
    (1, 0, math.inf, "the gorilla saw a man ."),  # gorilla: an unknown word, tagged as its signature is
    (2, 1, math.inf, "fish fish fish ."),
    (1, 0, 8.0, "I saw the man with a saw ."),  # the beam keeps about a third of them
])
def test_kbest_derivations_are_every_derivation_of_a_tiny_grammar(horizontal, vertical, beam, sentence):
    grammar = ambiguous_grammar(horizontal, vertical, beam)
    words = sentence.split()
    keep = None
    if beam < math.inf:  # the items the beam keeps in CKY's chart, and only they
        closed = grammar._chart(words).closed  # pylint: disable=protected-access
        keep = lambda i, j, symbol: closed[i, j, symbol] > -math.inf  # noqa: E731
        assert len(every_derivation(grammar, words, keep)) < len(every_derivation(grammar, words))
    expected = every_derivation(grammar, words, keep)
    assert len(expected) > 10
    found = grammar.kbest_derivations(words, 10**6)
    assert collections.Counter(one_line(t) for t, _ in found) == collections.Counter(one_line(t) for t, _ in expected)
    score_of = {one_line(tree): score for tree, score in expected}
    assert [score for _, score in found] == pytest.approx([score_of[one_line(t)] for t, _ in found], abs=1e-4)
    assert_derivations_are_sound(grammar, words, found)
    assert found[0] == grammar.viterbi(words)
    assert grammar.kbest_derivations(words, 7) == found[:7]  # a smaller k: the same first ones


@pytest.mark.parametrize("beam", [math.inf, 20.0])
@pytest.mark.parametrize("horizontal, vertical", [(1, 0), (2, 1)])
def test_the_best_derivation_is_viterbi(horizontal, vertical, beam):
    grammar = ambiguous_grammar(horizontal, vertical, beam)
    for sentence in ["the cat barks .", "Fido saw a red cat .", "the gorilla sleeps quietly .",  # gorilla: unknown
                     "time flies like an arrow .", "a big dog saw the old cat with Fido .", "barks the dog", "Go !"]:
        words = sentence.split()
        best = grammar.viterbi(words)
        assert best[0] is not None
        assert grammar.kbest_derivations(words, 1) == [best]
        derivations = grammar.kbest_derivations(words, 50)
        assert derivations[0] == best
        assert_derivations_are_sound(grammar, words, derivations)


def test_tied_derivations_come_in_viterbis_order():
    # fish is as often NN as VB, so the two derivations of each sentence tie exactly: a binary rule
    # (S -> NN VBZ or S -> VB VBZ) in the first, a unary chain (START -> NP -> NN or VB) in the second.
    trees = ["(S (NN fish) (VBZ swims))", "(S (VB fish) (VBZ swims))", "(NP (NN fish))", "(NP (VB fish))"]
    grammar = pcfg.Grammar.induce([treebank.clean(Tree.fromstring(t)) for t in trees], 1, 0, beam=math.inf)
    for words, expected in [
            (["fish", "swims"], ["(START (S (NN fish) (VBZ swims)))", "(START (S (VB fish) (VBZ swims)))"]),
            (["fish"], ["(START (NP (NN fish)))", "(START (NP (VB fish)))"])]:
        derivations = grammar.kbest_derivations(words, 10)
        assert [one_line(tree) for tree, _ in derivations] == expected
        assert derivations[0][1] == derivations[1][1]
        assert derivations[0] == grammar.viterbi(words)


def test_parse_kbest_gives_distinct_trees_best_first():
    grammar = ambiguous_grammar()
    words = "I saw the man with a saw .".split()
    best_score = {}  # each output tree's best derivation, in the order of the derivations
    for derivation, score in every_derivation(grammar, words):
        tree = one_line(pcfg.debinarized(derivation))
        best_score[tree] = max(score, best_score.get(tree, -math.inf))
    ranked = sorted(best_score, key=best_score.get, reverse=True)
    assert len(ranked) > 20
    found = grammar.parse_kbest(words, 10)
    assert len(found) == 10
    assert [one_line(tree) for tree, _ in found] == ranked[:10]  # no two best scores tie among the first 11
    assert [score for _, score in found] == pytest.approx([best_score[t] for t in ranked[:10]], abs=1e-4)
    assert found[0][0] == grammar.parse(words)
    assert all(tree.leaves() == words for tree, _ in found)
    everything = grammar.parse_kbest(words, 10**4, max_derivations=10**6)
    assert sorted(one_line(tree) for tree, _ in everything) == sorted(ranked)
    first_five = {one_line(pcfg.debinarized(tree)) for tree, _ in grammar.kbest_derivations(words, 5)}
    assert {one_line(tree) for tree, _ in grammar.parse_kbest(words, 10, max_derivations=5)} == first_five
    with pytest.raises(ValueError, match="k is 0"):
        grammar.parse_kbest(words, 0)
    with pytest.raises(ValueError, match="k is 0"):
        grammar.kbest_derivations(words, 0)


def test_a_sentence_the_grammar_cannot_derive_gets_the_fallback_as_its_only_candidate():
    grammar = pcfg.Grammar.induce(hand_sentences()[:1], 2, 1)  # one tree: the dog barks .
    lists, failed = pcfg.parse_all_kbest(grammar, [["the", "dog", "barks", "."], ["barks", "the", "dog"], []], 3,
                                         parse_files.right_branching)
    assert failed == 1
    assert grammar.kbest_derivations(["barks", "the", "dog"], 5) == []
    assert grammar.kbest_derivations([], 5) == [] and grammar.parse_kbest([], 5) == []
    assert [(parse_files.format_tree(tree), score) for tree, score in lists[0]] == [
        ("(S (NP the dog) (VP barks) .)", grammar.viterbi(["the", "dog", "barks", "."])[1])]
    assert lists[1] == [(parse_files.right_branching(["barks", "the", "dog"]), -math.inf)] and lists[2] == []


@pytest.fixture(scope="module")
def sample_grammar(sample):
    """The sample's grammar with the parse command's defaults (horizontal 1, vertical 1, beam 20)."""
    return pcfg.Grammar.induce(sample["train"])


def test_kbest_on_the_sample(sample, sample_grammar):
    sentences = [s for s in sample["validation"] if 8 <= len(s.words) <= 20][:4]
    assert len(sentences) == 4
    unknown = [w for s in sentences for w in s.words if w not in sample_grammar.lexicon.word_tags]
    assert unknown  # some words are scored by their signature
    for sentence in sentences:
        words = sentence.words
        best = sample_grammar.viterbi(words)
        assert sample_grammar.kbest_derivations(words, 1) == [best]
        derivations = sample_grammar.kbest_derivations(words, 100)
        assert len(derivations) == 100 and derivations[0] == best
        assert_derivations_are_sound(sample_grammar, words, derivations)
        trees = sample_grammar.parse_kbest(words, 20)
        assert len(trees) == 20 and trees[0] == (sample_grammar.parse(words), best[1])
        assert len({one_line(tree) for tree, _ in trees}) == 20
        assert all(tree.leaves() == list(words) for tree, _ in trees)
        scores = [score for _, score in trees]
        assert all(a >= b for a, b in zip(scores, scores[1:]))
