"""The word tables of the embedded English-German corpus (`grammar_corpus`).

Only data lives here: nouns with gender and irregular plurals, verbs with their
stem changes, preterites, participles, perfect auxiliary and argument frame,
adjectives, places with the prepositions they take, pronouns and time adverbs.
The rules that inflect and order these words are in `grammar_corpus.py`.

Semantic tags keep sentences sensible: a verb lists the tags of the subjects and
objects it accepts (people read books, dogs do not), an adjective the tags of the
nouns it describes. Tags: person, animal, thing, food, drink, place, plus the
narrower read, open, bake, cook, and mass (no plural, no indefinite article).
"""

from __future__ import annotations

from typing import NamedTuple


class Noun(NamedTuple):
    en: str
    en_plural: str | None  # None: a mass noun, used in the singular only.
    de: str
    de_plural: str | None
    gender: str  # "m", "f" or "n".
    tags: tuple[str, ...]
    weak: bool = False  # Weak masculine: accusative and dative singular take the plural form (den Bären).


class Verb(NamedTuple):
    en: str  # Base form; a particle may follow ("pick up"): only the first word inflects.
    en_past: str
    en_participle: str
    de: str  # Infinitive; "+" marks a separable prefix: "auf+machen".
    de_past: str  # Preterite stem (1st/3rd person singular) without the prefix: "machte".
    de_participle: str  # With the prefix: "aufgemacht".
    frame: str  # intr, acc, dat, dat_acc, dir (motion with a direction), that, be.
    subjects: tuple[str, ...]
    objects: tuple[tuple[str, ...], ...] = ()  # One tag tuple per object, in (dative, accusative) order.
    du_er: tuple[str, str] | None = None  # Stem-changing present: ("siehst", "sieht").
    aux: str = "haben"  # Perfect auxiliary: "haben" or "sein".
    adjuncts: tuple[str, ...] = ()  # Optional prepositional phrases: loc, bei, mit, fuer, ohne, von.


class Adjective(NamedTuple):
    en: str
    de: str
    tags: tuple[str, ...]


_P, _A, _PA = ("person",), ("animal",), ("person", "animal")


def _n(en, en_plural, de, de_plural, gender, tags, weak=False):
    return Noun(en, en_plural, de, de_plural, gender, tuple(tags.split()), weak)


NOUNS = (
    # English, plural, German, plural, gender, tags.
    _n("man", "men", "Mann", "Männer", "m", "person"),
    _n("woman", "women", "Frau", "Frauen", "f", "person"),
    _n("child", "children", "Kind", "Kinder", "n", "person"),
    _n("girl", "girls", "Mädchen", "Mädchen", "n", "person"),
    _n("boy", "boys", "Junge", "Jungen", "m", "person", weak=True),
    _n("teacher", "teachers", "Lehrer", "Lehrer", "m", "person"),
    _n("doctor", "doctors", "Arzt", "Ärzte", "m", "person"),
    _n("student", "students", "Student", "Studenten", "m", "person", weak=True),
    _n("friend", "friends", "Freund", "Freunde", "m", "person"),
    _n("baker", "bakers", "Bäcker", "Bäcker", "m", "person"),
    _n("mother", "mothers", "Mutter", "Mütter", "f", "person"),
    _n("father", "fathers", "Vater", "Väter", "m", "person"),
    _n("brother", "brothers", "Bruder", "Brüder", "m", "person"),
    _n("sister", "sisters", "Schwester", "Schwestern", "f", "person"),
    _n("grandmother", "grandmothers", "Großmutter", "Großmütter", "f", "person"),
    _n("neighbour", "neighbours", "Nachbar", "Nachbarn", "m", "person", weak=True),
    _n("cook", "cooks", "Koch", "Köche", "m", "person"),
    _n("dog", "dogs", "Hund", "Hunde", "m", "animal"),
    _n("cat", "cats", "Katze", "Katzen", "f", "animal"),
    _n("bear", "bears", "Bär", "Bären", "m", "animal", weak=True),
    _n("lion", "lions", "Löwe", "Löwen", "m", "animal", weak=True),
    _n("bird", "birds", "Vogel", "Vögel", "m", "animal"),
    _n("horse", "horses", "Pferd", "Pferde", "n", "animal"),
    _n("mouse", "mice", "Maus", "Mäuse", "f", "animal"),
    _n("goose", "geese", "Gans", "Gänse", "f", "animal"),
    _n("cow", "cows", "Kuh", "Kühe", "f", "animal"),
    _n("book", "books", "Buch", "Bücher", "n", "thing read open"),
    _n("letter", "letters", "Brief", "Briefe", "m", "thing read open"),
    _n("newspaper", "newspapers", "Zeitung", "Zeitungen", "f", "thing read"),
    _n("door", "doors", "Tür", "Türen", "f", "thing open"),
    _n("window", "windows", "Fenster", "Fenster", "n", "thing open"),
    _n("bag", "bags", "Tasche", "Taschen", "f", "thing open"),
    _n("bottle", "bottles", "Flasche", "Flaschen", "f", "thing open"),
    _n("car", "cars", "Auto", "Autos", "n", "thing"),
    _n("ball", "balls", "Ball", "Bälle", "m", "thing"),
    _n("key", "keys", "Schlüssel", "Schlüssel", "m", "thing"),
    _n("picture", "pictures", "Bild", "Bilder", "n", "thing"),
    _n("table", "tables", "Tisch", "Tische", "m", "thing"),
    _n("chair", "chairs", "Stuhl", "Stühle", "m", "thing"),
    _n("flower", "flowers", "Blume", "Blumen", "f", "thing"),
    _n("hat", "hats", "Hut", "Hüte", "m", "thing"),
    _n("glass", "glasses", "Glas", "Gläser", "n", "thing"),
    _n("bicycle", "bicycles", "Fahrrad", "Fahrräder", "n", "thing"),
    _n("umbrella", "umbrellas", "Regenschirm", "Regenschirme", "m", "thing open"),
    _n("apple", "apples", "Apfel", "Äpfel", "m", "food"),
    _n("cake", "cakes", "Kuchen", "Kuchen", "m", "food bake"),
    _n("egg", "eggs", "Ei", "Eier", "n", "food"),
    _n("bread roll", "bread rolls", "Brötchen", "Brötchen", "n", "food bake"),
    _n("banana", "bananas", "Banane", "Bananen", "f", "food"),
    _n("cheese", None, "Käse", None, "m", "food mass"),
    _n("bread", None, "Brot", None, "n", "food bake mass"),
    _n("soup", None, "Suppe", None, "f", "food cook mass"),
    _n("breakfast", None, "Frühstück", None, "n", "food cook mass"),
    _n("water", None, "Wasser", None, "n", "drink mass"),
    _n("milk", None, "Milch", None, "f", "drink mass"),
    _n("coffee", None, "Kaffee", None, "m", "drink cook mass"),
    _n("tea", None, "Tee", None, "m", "drink cook mass"),
    _n("juice", None, "Saft", None, "m", "drink mass"),
    _n("park", "parks", "Park", "Parks", "m", "place"),
    _n("garden", "gardens", "Garten", "Gärten", "m", "place"),
    _n("kitchen", "kitchens", "Küche", "Küchen", "f", "place"),
    _n("street", "streets", "Straße", "Straßen", "f", "place"),
    _n("bridge", "bridges", "Brücke", "Brücken", "f", "place"),
    _n("café", "cafés", "Café", "Cafés", "n", "place"),
    _n("city", "cities", "Stadt", "Städte", "f", "place"),
    _n("house", "houses", "Haus", "Häuser", "n", "place"),
    _n("school", "schools", "Schule", "Schulen", "f", "place"),
    _n("station", "stations", "Bahnhof", "Bahnhöfe", "m", "place"),
    _n("lake", "lakes", "See", "Seen", "m", "place"),
    _n("beach", "beaches", "Strand", "Strände", "m", "place"),
    _n("cinema", "cinemas", "Kino", "Kinos", "n", "place"),
    _n("bakery", "bakeries", "Bäckerei", "Bäckereien", "f", "place"),
    _n("variety theatre", "variety theatres", "Varieté", "Varietés", "n", "place"),
)

# German noun -> (English "at" preposition, German one + dative; English "to", German one + case).
# A direction of None means the place is not a destination of go/drive/run/come.
PLACES = {
    "Park": ("in", "in", "to", "in"),
    "Garten": ("in", "in", "into", "in"),
    "Küche": ("in", "in", "into", "in"),
    "Straße": ("on", "auf", None, None),
    "Brücke": ("on", "auf", "to", "zu"),
    "Café": ("in", "in", "to", "in"),
    "Stadt": ("in", "in", "to", "in"),
    "Haus": ("in", "in", "into", "in"),
    "Schule": ("at", "in", "to", "zu"),
    "Bahnhof": ("at", "an", "to", "zu"),
    "See": ("at", "an", "to", "an"),
    "Strand": ("on", "an", "to", "an"),
    "Kino": ("at", "in", "to", "in"),
    "Bäckerei": ("in", "in", "to", "zu"),
    "Varieté": ("at", "in", "to", "in"),
}
HOME = {"loc": ("at home", "zu Hause"), "dir": ("home", "nach Hause")}

_THINGS = ("thing", "food", "drink")
VERBS = (
    # English base, past, participle; German infinitive, preterite, participle; frame, subjects, objects.
    Verb("see", "saw", "seen", "sehen", "sah", "gesehen", "acc", _PA,
         (("person", "animal", "thing", "place"),), ("siehst", "sieht"), adjuncts=("loc",)),
    Verb("read", "read", "read", "lesen", "las", "gelesen", "acc", _P, (("read",),),
         ("liest", "liest"), adjuncts=("loc", "fuer")),
    Verb("buy", "bought", "bought", "kaufen", "kaufte", "gekauft", "acc", _P, (_THINGS,), adjuncts=("fuer",)),
    Verb("eat", "ate", "eaten", "essen", "aß", "gegessen", "acc", _PA, (("food",),), ("isst", "isst"),
         adjuncts=("loc", "mit")),
    Verb("drink", "drank", "drunk", "trinken", "trank", "getrunken", "acc", _PA, (("drink",),),
         adjuncts=("loc", "mit")),
    Verb("find", "found", "found", "finden", "fand", "gefunden", "acc", _PA, (("thing", "animal"),),
         adjuncts=("loc",)),
    Verb("look for", "looked for", "looked for", "suchen", "suchte", "gesucht", "acc", _PA,
         (("person", "animal", "thing"),), adjuncts=("loc", "mit")),
    Verb("need", "needed", "needed", "brauchen", "brauchte", "gebraucht", "acc", _P, (_THINGS,),
         adjuncts=("fuer",)),
    Verb("love", "loved", "loved", "lieben", "liebte", "geliebt", "acc", _PA, (_PA,)),
    Verb("know", "knew", "known", "kennen", "kannte", "gekannt", "acc", _P, (("person", "animal", "place"),)),
    Verb("visit", "visited", "visited", "besuchen", "besuchte", "besucht", "acc", _P, (("person", "place"),),
         adjuncts=("mit", "ohne")),
    Verb("carry", "carried", "carried", "tragen", "trug", "getragen", "acc", _P, (("thing", "animal"),),
         ("trägst", "trägt"), adjuncts=("loc", "fuer")),
    Verb("paint", "painted", "painted", "malen", "malte", "gemalt", "acc", _P,
         (("person", "animal", "thing", "place"),), adjuncts=("loc", "fuer")),
    Verb("wash", "washed", "washed", "waschen", "wusch", "gewaschen", "acc", _P, (("thing", "animal"),),
         ("wäschst", "wäscht"), adjuncts=("loc", "mit")),
    Verb("bake", "baked", "baked", "backen", "backte", "gebacken", "acc", _P, (("bake",),),
         adjuncts=("loc", "fuer")),
    Verb("make", "made", "made", "machen", "machte", "gemacht", "acc", _P, (("cook",),),
         adjuncts=("loc", "fuer")),
    Verb("open", "opened", "opened", "auf+machen", "machte", "aufgemacht", "acc", _P, (("open",),)),
    Verb("close", "closed", "closed", "zu+machen", "machte", "zugemacht", "acc", _P, (("open",),)),
    Verb("call", "called", "called", "an+rufen", "rief", "angerufen", "acc", _P, (_P,), adjuncts=("loc",)),
    Verb("pick up", "picked up", "picked up", "ab+holen", "holte", "abgeholt", "acc", _P, (_PA,),
         adjuncts=("loc",)),
    Verb("invite", "invited", "invited", "ein+laden", "lud", "eingeladen", "acc", _P, (_P,),
         ("lädst", "lädt")),
    Verb("get", "got", "got", "bekommen", "bekam", "bekommen", "acc", _P, (("thing", "food"),),
         adjuncts=("von",)),
    Verb("help", "helped", "helped", "helfen", "half", "geholfen", "dat", _PA, (_PA,), ("hilfst", "hilft"),
         adjuncts=("loc",)),
    Verb("thank", "thanked", "thanked", "danken", "dankte", "gedankt", "dat", _P, (_P,)),
    Verb("follow", "followed", "followed", "folgen", "folgte", "gefolgt", "dat", _PA, (_PA,), aux="sein"),
    Verb("give", "gave", "given", "geben", "gab", "gegeben", "dat_acc", _P, (_PA, ("thing", "food")),
         ("gibst", "gibt")),
    Verb("show", "showed", "shown", "zeigen", "zeigte", "gezeigt", "dat_acc", _P, (_P, ("thing", "animal"))),
    Verb("bring", "brought", "brought", "bringen", "brachte", "gebracht", "dat_acc", _P, (_P, _THINGS)),
    Verb("sleep", "slept", "slept", "schlafen", "schlief", "geschlafen", "intr", _PA,
         du_er=("schläfst", "schläft"), adjuncts=("loc",)),
    Verb("work", "worked", "worked", "arbeiten", "arbeitete", "gearbeitet", "intr", _P,
         adjuncts=("loc", "bei", "mit", "fuer")),
    Verb("play", "played", "played", "spielen", "spielte", "gespielt", "intr", _PA, adjuncts=("loc", "mit")),
    Verb("laugh", "laughed", "laughed", "lachen", "lachte", "gelacht", "intr", _P, adjuncts=("loc",)),
    Verb("wait", "waited", "waited", "warten", "wartete", "gewartet", "intr", _PA,
         adjuncts=("loc", "bei", "mit", "ohne")),
    Verb("swim", "swam", "swum", "schwimmen", "schwamm", "geschwommen", "intr", _PA, aux="sein",
         adjuncts=("loc", "mit")),
    Verb("sing", "sang", "sung", "singen", "sang", "gesungen", "intr", _P, adjuncts=("loc", "mit", "fuer")),
    Verb("dance", "danced", "danced", "tanzen", "tanzte", "getanzt", "intr", _P, adjuncts=("loc", "mit")),
    Verb("get up", "got up", "got up", "auf+stehen", "stand", "aufgestanden", "intr", _PA, aux="sein"),
    Verb("go shopping", "went shopping", "gone shopping", "ein+kaufen", "kaufte", "eingekauft", "intr", _P,
         adjuncts=("mit", "ohne", "fuer")),
    Verb("fall asleep", "fell asleep", "fallen asleep", "ein+schlafen", "schlief", "eingeschlafen", "intr",
         _PA, du_er=("schläfst", "schläft"), aux="sein", adjuncts=("loc",)),
    Verb("arrive", "arrived", "arrived", "an+kommen", "kam", "angekommen", "intr", _PA, aux="sein",
         adjuncts=("loc", "mit", "ohne")),
    Verb("go", "went", "gone", "gehen", "ging", "gegangen", "dir", _PA, aux="sein"),
    Verb("drive", "drove", "driven", "fahren", "fuhr", "gefahren", "dir", _P, du_er=("fährst", "fährt"),
         aux="sein"),
    Verb("run", "ran", "run", "laufen", "lief", "gelaufen", "dir", _PA, du_er=("läufst", "läuft"), aux="sein"),
    Verb("come", "came", "come", "kommen", "kam", "gekommen", "dir", _PA, aux="sein"),
    Verb("say", "said", "said", "sagen", "sagte", "gesagt", "that", _P),
    Verb("know", "knew", "known", "wissen", "wusste", "gewusst", "that", _P),
    Verb("think", "thought", "thought", "denken", "dachte", "gedacht", "that", _P),
    Verb("believe", "believed", "believed", "glauben", "glaubte", "geglaubt", "that", _P),
    Verb("be", "was", "been", "sein", "war", "gewesen", "be", _PA, aux="sein"),
)

# Present tense of the verbs whose every form is irregular: ich, du, er/sie, wir, ihr, sie.
IRREGULAR_PRESENT = {
    "sein": ("bin", "bist", "ist", "sind", "seid", "sind"),
    "haben": ("habe", "hast", "hat", "haben", "habt", "haben"),
    "wissen": ("weiß", "weißt", "weiß", "wissen", "wisst", "wissen"),
}

ADJECTIVES = (
    Adjective("big", "groß", ("person", "animal", "thing", "place", "food")),
    Adjective("small", "klein", ("person", "animal", "thing", "place", "food")),
    Adjective("old", "alt", ("person", "animal", "thing", "place")),
    Adjective("young", "jung", _PA),
    Adjective("new", "neu", ("thing", "place")),
    Adjective("beautiful", "schön", ("person", "animal", "thing", "place")),
    Adjective("tired", "müde", _PA),
    Adjective("happy", "glücklich", _PA),
    Adjective("hungry", "hungrig", _PA),
    Adjective("friendly", "freundlich", _PA),
    Adjective("clever", "klug", _PA),
    Adjective("quiet", "ruhig", ("person", "animal", "place")),
    Adjective("dirty", "schmutzig", ("animal", "thing", "place")),
    Adjective("green", "grün", ("thing", "food")),
    Adjective("white", "weiß", ("animal", "thing")),
    Adjective("red", "rot", ("thing", "food")),
    Adjective("black", "schwarz", ("animal", "thing")),
    Adjective("sweet", "süß", ("food", "drink", "animal")),
    Adjective("hot", "heiß", ("drink", "food")),
    Adjective("cold", "kalt", ("drink", "food")),
    Adjective("fresh", "frisch", ("food", "drink")),
    Adjective("cheap", "billig", ("thing",)),
)

# Personal pronouns by person index 0-5 (I, you, he, she... see PERSONS).
# English subject, English object, German nominative, accusative, dative, German person (0-5).
PRONOUNS = (
    ("I", "me", "ich", "mich", "mir", 0),
    ("you", "you", "du", "dich", "dir", 1),
    ("he", "him", "er", "ihn", "ihm", 2),
    ("she", "her", "sie", "sie", "ihr", 2),
    ("we", "us", "wir", "uns", "uns", 3),
    ("you all", "you all", "ihr", "euch", "euch", 4),
    ("they", "them", "sie", "sie", "ihnen", 5),
)

# Possessive determiners (they decline like "ein"); English possessor, German stem.
POSSESSIVES = (("my", "mein"), ("your", "dein"), ("his", "sein"), ("her", "ihr"), ("our", "unser"),
               ("their", "ihr"))
NUMBERS = (("two", "zwei"), ("three", "drei"), ("four", "vier"))

# Fronted time adverbials by tense (English "yesterday" does not go with the present perfect).
ADVERBS = {
    "present": (("today", "heute"), ("now", "jetzt"), ("every day", "jeden Tag"), ("often", "oft"),
                ("sometimes", "manchmal"), ("in the evening", "am Abend")),
    "past": (("yesterday", "gestern"), ("last week", "letzte Woche"), ("suddenly", "plötzlich"),
             ("then", "dann"), ("in the morning", "am Morgen")),
    "perfect": (("today", "heute"), ("this week", "diese Woche"), ("this morning", "heute Morgen")),
}
