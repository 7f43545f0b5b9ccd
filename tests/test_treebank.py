"""The parsing data and its baseline (section 6.3): treebank cleaning and splits, the
linearized trees and their repairs, the right-branching baseline and `python -m keras_transformer.parse`.

Covered:
* `pipelines.treebank`: `clean` on hand-written raw PTB trees (traces and the constituents they
  leave empty, function tags and indices, -LRB-/-RRB-, the tag level, the unlabelled wrapper);
  `ParsedSentence.tagged_tree`; `split_fileids` on the sample's and the full WSJ's file names;
  `check_inputs`; `read_split` and `pair_list` on a hand-written .mrg folder; on NLTK's sample
  (../shared/data, skipped without it): the split sizes, the files of each split, clean labels
  and an exact `linearize` -> `to_tree` round trip of every tree.
* `pipelines.linearized_trees.to_tree`: one hand-made output per repair kind, and random token
  soups (the result is a tree over exactly the input's words).
* `tasks.parsing`: `right_branching`, `format_tree`, `trees_from_outputs`, `Parses.summary`,
  `Gold` (from_file, check_words, take, dev_scores, scores), `read_sentences`.
* The command: the baseline on the sample's test split prints the F1 recomputed here; a
  hand-made --input/--reference gets the labelled F1 worked out by hand; every bad flag
  combination or gold file ends as one `error:` line (exit 2) and writes nothing.

EVALB itself is tested in tests/test_evalb.py; a trained parser in tests/test_parse.py. The
commands run in subprocesses with the baseline, which imports no TensorFlow, a few at a time
where a test has several.
"""

import concurrent.futures
import os
import pathlib
import random
import re
import subprocess
import sys
import zipfile

import pytest
from nltk import Tree

from test_faults_serving import assert_one_error_line
from pipelines import linearized_trees, treebank
from pipelines.errors import DataError
from tasks import parsing

REPO = pathlib.Path(__file__).resolve().parents[1]
SPLITS = ("train", "validation", "test")
SAMPLE_SIZES = {"train": 3396, "validation": 273, "test": 245}  # 3,914 trees, none lost by cleaning
# The sample's test split, by the right-branching baseline: the numbers the command prints.
BASELINE_TEST_LABELLED = "F1 12.58 (P 11.35, R 14.11) over 245 sentences, exact match 0.00%"
BASELINE_TEST_UNLABELLED = "F1 35.59 (P 32.10, R 39.92) over 245 sentences, exact match 0.00%"
GOLD_LINES = 20  # test sentences in the reference-file tests


def one_line(tree) -> str:
    return tree.pformat(margin=sys.maxsize)


def run_parse(*args):
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-m", "keras_transformer.parse", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def run_parse_many(cases: dict) -> dict:
    """{name: args} -> {name: CompletedProcess}, a few commands at a time."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(run_parse, *args) for name, args in cases.items()}
        return {name: future.result() for name, future in futures.items()}


# pipelines.treebank.clean ------------------------------------------------------------------------

RAW = """( (S
    (NP-SBJ-1 (-NONE- *-1) )
    (NP-SBJ (DT The) (NN dog) )
    (VP (VBD ran)
      (PP-LOC=2 (IN in)
        (NP (-LRB- -LRB-) (NN park) (-RRB- -RRB-) ))
      (S (NP-SBJ (-NONE- *-1) ) (VP (TO to) (VP (VB eat) )))
      (SBAR (-NONE- 0) (S (-NONE- *T*-2) )))
    (. .) ))"""
# NP-SBJ-1 holds only a trace: gone with it. The inner S keeps its VP, loses its subject. SBAR
# holds only traces: gone. Labels lose "-SBJ", "-LOC=2"; -LRB- and -RRB- stay, as words and tags.
CLEAN_WORDS = ("The", "dog", "ran", "in", "-LRB-", "park", "-RRB-", "to", "eat", ".")
CLEAN_TAGS = ("DT", "NN", "VBD", "IN", "-LRB-", "NN", "-RRB-", "TO", "VB", ".")
CLEAN_TREE = "(S (NP The dog) (VP ran (PP in (NP -LRB- park -RRB-)) (S (VP to (VP eat)))) .)"
CLEAN_TAGGED = ("(S (NP (DT The) (NN dog)) (VP (VBD ran) (PP (IN in) (NP (-LRB- -LRB-) (NN park) (-RRB- -RRB-))) "
                "(S (VP (TO to) (VP (VB eat))))) (. .))")


def test_clean_drops_traces_function_tags_and_the_tag_level():
    sentence = treebank.clean(Tree.fromstring(RAW))
    assert sentence.words == CLEAN_WORDS
    assert sentence.tags == CLEAN_TAGS
    assert one_line(sentence.tree) == CLEAN_TREE
    assert sentence.sentence == "The dog ran in -LRB- park -RRB- to eat ."


def test_tagged_tree_puts_the_tags_back():
    sentence = treebank.clean(Tree.fromstring(RAW))
    assert one_line(sentence.tagged_tree()) == CLEAN_TAGGED
    assert treebank.clean(sentence.tagged_tree()) == sentence  # a cleaned tree is clean


@pytest.mark.parametrize("raw, label", [("(NP-SBJ-1 (NN a))", "NP"), ("(PP-LOC=2 (IN a))", "PP"),
                                        ("(S-TPC-3 (NN a))", "S"), ("(NP=4 (NN a))", "NP"),
                                        ("(PRT|ADVP (RP a))", "PRT"), ("(-NONE- (NN a))", "-NONE-")])
def test_labels_lose_function_tags_and_indices(raw, label):
    assert treebank.clean(Tree.fromstring(raw)).tree == Tree(label, ["a"])


def test_the_unlabelled_wrapper_goes_and_several_roots_get_top():
    assert one_line(treebank.clean(Tree.fromstring("( (S (NP (NN a)) (VP (VBZ b))) )")).tree) == "(S (NP a) (VP b))"
    two_roots = treebank.clean(Tree.fromstring("( (S (NN a)) (FRAG (NN b)) )"))
    assert one_line(two_roots.tree) == "(TOP (S a) (FRAG b))"
    assert two_roots.tags == ("NN", "NN")


def test_a_tree_of_traces_only_is_none():
    assert treebank.clean(Tree.fromstring("( (S (NP-SBJ (-NONE- *)) (VP (-NONE- *T*-1))) )")) is None


def test_a_preterminal_root_is_a_one_word_sentence(tmp_path):
    reference = tmp_path / "gold.trees"
    reference.write_text("(NN dog)\n", encoding="utf-8")
    gold = parsing.Gold.from_file(str(reference))
    assert gold.sentences[0].words == ("dog",) and gold.sentences[0].tags == ("NN",)
    assert one_line(gold.sentences[0].tree) == "(TOP dog)"


# pipelines.treebank: splits and folders -------------------------------------------------------

def test_sample_split_by_file_number():
    fileids = [f"wsj_{n:04d}.mrg" for n in (1, 159, 160, 179, 180, 199)] + ["README"]
    assert treebank.split_fileids(fileids, "train", full_wsj=False) == ["wsj_0001.mrg", "wsj_0159.mrg"]
    assert treebank.split_fileids(fileids, "validation", full_wsj=False) == ["wsj_0160.mrg", "wsj_0179.mrg"]
    assert treebank.split_fileids(fileids, "test", full_wsj=False) == ["wsj_0180.mrg", "wsj_0199.mrg"]


def test_full_wsj_split_by_section():
    # Two files per section 00-24: its first and its 99th.
    fileids = [f"{section:02d}/wsj_{section:02d}{n:02d}.mrg" for section in range(25) for n in (0, 99)]
    train = treebank.split_fileids(fileids, "train", full_wsj=True)
    assert train[0] == "02/wsj_0200.mrg" and train[-1] == "21/wsj_2199.mrg" and len(train) == 40
    assert treebank.split_fileids(fileids, "validation", full_wsj=True) == ["22/wsj_2200.mrg", "22/wsj_2299.mrg"]
    assert treebank.split_fileids(fileids, "test", full_wsj=True) == ["23/wsj_2300.mrg", "23/wsj_2399.mrg"]
    used = {f for split in SPLITS for f in treebank.split_fileids(fileids, split, full_wsj=True)}
    assert sorted(set(fileids) - used) == ["00/wsj_0000.mrg", "00/wsj_0099.mrg", "01/wsj_0100.mrg",
                                           "01/wsj_0199.mrg", "24/wsj_2400.mrg", "24/wsj_2499.mrg"]


def test_an_unknown_split_is_a_data_error():
    for full_wsj in (False, True):
        with pytest.raises(DataError, match=r"^the treebank has splits train, validation, test, not 'dev'$"):
            treebank.split_fileids(["wsj_0001.mrg"], "dev", full_wsj=full_wsj)


def test_check_inputs_errors_are_one_line(tmp_path):
    for data_dir, message in [(None, "dataset ptb needs data_dir: "),
                              (str(tmp_path / "missing"), f"data_dir {tmp_path / 'missing'}: no such folder"),
                              (str(tmp_path), f"data_dir {tmp_path}: no treebank.zip and no wsj_NNNN.mrg files")]:
        with pytest.raises(DataError) as raised:
            treebank.check_inputs(data_dir)
        assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    (tmp_path / "wsj_1.mrg").write_text("( (S (NN a)) )\n", encoding="utf-8")  # not wsj_NNNN
    with pytest.raises(DataError, match="no treebank.zip and no wsj_NNNN.mrg files"):
        treebank.check_inputs(str(tmp_path))


MRG = """( (S
    (NP-SBJ (DT The) (NN dog) )
    (VP (VBZ barks) )
    (. .) ))
( (S
    (NP-SBJ (-NONE- *) )
    (VP (VB Run)
      (NP (-NONE- *T*-1) ))
    (. !) ))
"""


def write_mrg(folder: pathlib.Path) -> pathlib.Path:
    """`folder` with one hand-written file of section 00 (file number 1: the sample's split)."""
    (folder / "00").mkdir(parents=True)
    (folder / "00" / "wsj_0001.mrg").write_text(MRG, encoding="utf-8")
    return folder


def test_a_folder_of_mrg_files_is_read_and_split(tmp_path):
    data_dir = str(write_mrg(tmp_path / "wsj"))  # a fresh path: read_split is cached by folder
    treebank.check_inputs(data_dir)
    sentences = treebank.read_split(data_dir, "train")
    assert [s.words for s in sentences] == [("The", "dog", "barks", "."), ("Run", "!")]
    assert [s.tags for s in sentences] == [("DT", "NN", "VBZ", "."), ("VB", ".")]
    assert [one_line(s.tree) for s in sentences] == ["(S (NP The dog) (VP barks) .)", "(S (VP Run) !)"]
    assert treebank.pair_list(data_dir, "train") == [("The dog barks .", "(S (NP XX XX )NP (VP XX )VP XX )S"),
                                                     ("Run !", "(S (VP XX )VP XX )S")]
    with pytest.raises(DataError, match=r"no files of the test split$"):
        treebank.read_split(data_dir, "test")


# pipelines.treebank on NLTK's sample ----------------------------------------------------------

@pytest.fixture(scope="module")
def ptb():
    from conftest import SHARED_DATA  # pylint: disable=import-outside-toplevel

    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found: {SHARED_DATA}")
    return SHARED_DATA / "ptb_sample"


@pytest.fixture(scope="module")
def sample(ptb):
    """{split: its cleaned sentences}: each split read once here, then from `read_split`'s cache."""
    return {split: treebank.read_split(str(ptb), split) for split in SPLITS}


def test_sample_splits_are_disjoint_sets_of_files(ptb):
    names = zipfile.ZipFile(ptb / treebank.SAMPLE_ZIP).namelist()
    fileids = [n.split("/")[-1] for n in names if re.fullmatch(r"treebank/combined/wsj_\d{4}\.mrg", n)]
    numbers = {split: [int(f[4:8]) for f in treebank.split_fileids(fileids, split, full_wsj=False)]
               for split in SPLITS}
    assert numbers == {"train": list(range(1, 160)), "validation": list(range(160, 180)),
                       "test": list(range(180, 200))}


def test_sample_split_sizes(sample):
    assert {split: len(sentences) for split, sentences in sample.items()} == SAMPLE_SIZES


def test_sample_trees_are_clean(sample):
    for sentences in sample.values():
        for s in sentences:
            labels = [t.label() for t in s.tree.subtrees()]
            assert all(labels) and not any("-" in label or "=" in label for label in labels), one_line(s.tree)
            assert "-NONE-" not in s.tags and "" not in s.tags
            assert s.tree.leaves() == list(s.words) and len(s.tags) == len(s.words)
            assert s.tagged_tree().pos() == list(zip(s.words, s.tags))


def test_every_sample_tree_survives_linearization(sample):
    for split, sentences in sample.items():
        for s in sentences:
            assert linearized_trees.to_tree(linearized_trees.linearize(s.tree), s.words) == (s.tree, ()), (
                split, s.sentence)


# pipelines.linearized_trees.to_tree: repairs -----------------------------------------------------

WORDS = ("a", "b", "c")
# kind: (decoded, number of words, the tree expected)
REPAIR_CASES = {
    "unclosed": ("(S (NP XX XX )NP (VP XX )VP", 3, "(S (NP a b) (VP c))"),
    "extra_close": ("(S XX )S )S", 1, "(S a)"),
    "label_mismatch": ("(S (NP XX )VP )S", 1, "(S (NP a))"),  # the open NP is kept
    "extra_word": ("(S XX XX )S", 1, "(S a)"),
    "missing_word": ("(S (NP XX )NP )S", 3, "(S (NP a) b c)"),
    "not_a_word": ("(S foo )S", 1, "(S a)"),
    "empty": ("(S (NP )NP XX )S", 1, "(S a)"),
    "root": ("(NP XX )NP (VP XX )VP", 2, "(S (NP a) (VP b))"),
}


def test_every_repair_kind_has_a_case():
    assert set(REPAIR_CASES) == set(linearized_trees.REPAIRS)


@pytest.mark.parametrize("kind", sorted(REPAIR_CASES))
def test_to_tree_repairs(kind):
    decoded, count, expected = REPAIR_CASES[kind]
    tree, repairs = linearized_trees.to_tree(decoded, WORDS[:count])
    assert (one_line(tree), repairs) == (expected, (kind,))


def test_to_tree_of_a_tree_needs_no_repair():
    tree, repairs = linearized_trees.to_tree("(S (NP XX XX )NP (VP XX )VP )S", WORDS)
    assert (one_line(tree), repairs) == ("(S (NP a b) (VP c))", ())


def test_to_tree_names_each_repair_it_makes():
    assert linearized_trees.to_tree("XX XX", WORDS[:2]) == (Tree("S", ["a", "b"]), ("root", "root"))
    assert linearized_trees.to_tree("", WORDS[:2]) == (Tree("S", ["a", "b"]), ("missing_word", "root"))
    assert linearized_trees.to_tree(")S (S (NP foo XX )S", WORDS[:2]) == (
        Tree("S", [Tree("NP", ["a", "b"])]), ("extra_close", "not_a_word", "label_mismatch", "unclosed"))


SOUP = ["(NP", ")NP", "(S", ")S", "XX", ")", "foo"]


def soups(count=300, seed=63):
    rng = random.Random(seed)
    for _ in range(count):
        words = [f"w{i}" for i in range(rng.randint(1, 6))]
        yield " ".join(rng.choice(SOUP) for _ in range(rng.randint(0, 14))), words


def test_to_tree_of_token_soups_is_a_tree():
    seen = set()
    for decoded, words in soups():
        tree, repairs = linearized_trees.to_tree(decoded, words)
        assert set(repairs) <= set(linearized_trees.REPAIRS), decoded
        assert linearized_trees.to_tree(linearized_trees.linearize(tree), tree.leaves()) == (tree, ()), decoded
        seen.update(repairs)
    assert seen == set(linearized_trees.REPAIRS)


def test_to_tree_of_token_soups_is_over_exactly_the_words():
    for decoded, words in soups():
        assert linearized_trees.to_tree(decoded, words)[0].leaves() == words, decoded


def test_missing_words_after_several_roots_stay_in_order():
    tree, repairs = linearized_trees.to_tree("(NP XX )NP XX", WORDS)
    assert one_line(tree) == "(S (NP a) b c)" and repairs == ("root", "missing_word")


# tasks.parsing ---------------------------------------------------------------------------------

@pytest.mark.parametrize("count, expected", [(1, "(S a)"), (2, "(S a b)"), (3, "(S a (NP b c))"),
                                             (4, "(S a (NP b (NP c d)))")])
def test_right_branching(count, expected):
    assert parsing.format_tree(parsing.right_branching("abcd"[:count])) == expected


def test_no_word_has_no_tree():
    assert parsing.right_branching([]) is None and parsing.format_tree(None) == ""


def test_trees_from_outputs_and_their_repairs():
    parses = parsing.trees_from_outputs(["(S XX )S", "(S XX", "(S XX )S", "(NP XX )S"],
                                        [["a"], ["b"], [], ["c"]])
    assert [parsing.format_tree(t) for t in parses.trees] == ["(S a)", "(S b)", "", "(NP c)"]
    assert parses.repairs == ((), ("unclosed",), (), ("label_mismatch",))
    assert parses.repaired == 2
    assert parses.summary() == "repaired: 2 of 4 outputs (50.0%): label_mismatch 1, unclosed 1"


# Three hand-made gold trees (function tags and a trace, cleaned as the treebank's), their
# right-branching parses and EVALB's brackets (COLLINS.prm: "." is deleted, TOP dropped):
#   1 The dog barks .  gold S(0,3) NP(0,2) VP(2,3); test (S The (NP dog (NP barks .)))
#                      S(0,3) NP(1,3) NP(2,3): labelled 1 match (S), unlabelled 2 ((0,3), (2,3))
#   2 It rained        gold S(0,2) NP(0,1) VP(1,2); test (S It rained) S(0,2): 1 match, 1
#   3 the cat on the mat  gold NP(0,5) NP(0,2) PP(2,5) NP(3,5); test S(0,5) NP(1,5) NP(2,5)
#                      NP(3,5): labelled 1 (NP(3,5)), unlabelled 3 ((0,5), (2,5), (3,5))
# gold 3 + 3 + 4 = 10, test 3 + 1 + 4 = 8 brackets.
# Labelled: 3 matched, P = 3/8 = 37.50, R = 3/10 = 30.00, F1 = 2 * 3 / 18 = 33.33.
# Unlabelled: 6 matched, P = 6/8 = 75.00, R = 6/10 = 60.00, F1 = 2 * 6 / 18 = 66.67.
HAND_GOLD = ["(S (NP-SBJ (DT The) (NN dog)) (VP (VBZ barks)) (. .))",
             "( (S (NP-SBJ-1 (PRP It)) (VP (VBD rained) (NP (-NONE- *T*-1)))) )",
             "(NP (NP (DT the) (NN cat)) (PP-LOC (IN on) (NP (DT the) (NN mat))))"]
HAND_SENTENCES = ["The dog barks .", "It rained", "the cat on the mat"]
HAND_TREES = ["(S The (NP dog (NP barks .)))", "(S It rained)", "(S the (NP cat (NP on (NP the mat))))"]
HAND_LABELLED = "F1 33.33 (P 37.50, R 30.00) over 3 sentences, exact match 0.00%"
HAND_UNLABELLED = "F1 66.67 (P 75.00, R 60.00) over 3 sentences, exact match 0.00%"


@pytest.fixture
def hand(tmp_path):
    (tmp_path / "gold.trees").write_text("".join(line + "\n" for line in HAND_GOLD), encoding="utf-8")
    (tmp_path / "sentences.txt").write_text("".join(line + "\n" for line in HAND_SENTENCES), encoding="utf-8")
    return tmp_path


def test_gold_scores_of_the_hand_made_trees(hand):
    gold = parsing.Gold.from_file(str(hand / "gold.trees"))
    sentences = parsing.read_sentences(str(hand / "sentences.txt"))
    assert [list(s.words) for s in gold.sentences] == sentences == [s.split() for s in HAND_SENTENCES]
    gold.check_words(sentences, "gold.trees")
    trees = [parsing.right_branching(words) for words in sentences]
    assert [parsing.format_tree(t) for t in trees] == HAND_TREES
    scores = gold.scores(trees)
    assert (scores.matched, scores.gold, scores.test) == (3, 10, 8)
    assert str(scores) == HAND_LABELLED and str(gold.scores(trees, labelled=False)) == HAND_UNLABELLED
    assert str(gold.take(2).scores(trees[:2])) == "F1 40.00 (P 50.00, R 33.33) over 2 sentences, exact match 0.00%"
    # The dev evaluation, on linearized outputs: the second one unclosed but the same tree.
    outputs = [linearized_trees.linearize(trees[0]), "(S XX XX", linearized_trees.linearize(trees[2])]
    assert gold.dev_scores(outputs) == {"f1": pytest.approx(100 / 3), "repaired": pytest.approx(100 / 3)}


def test_gold_check_words_errors(hand):
    gold = parsing.Gold.from_file(str(hand / "gold.trees"))
    with pytest.raises(DataError, match=r"^ref: 3 gold trees but 2 sentences$"):
        gold.check_words([s.split() for s in HAND_SENTENCES[:2]], "ref")
    with pytest.raises(DataError, match=r"^ref line 2: the gold tree's words are not the sentence's$"):
        gold.check_words([["The", "dog", "barks", "."], ["It", "snowed"], HAND_SENTENCES[2].split()], "ref")


def test_gold_file_errors_name_the_line(tmp_path):
    path = tmp_path / "gold.trees"
    for line, message in [("The dog barks .", "not a bracketed tree"), ("(S (NN a)", "not a bracketed tree"),
                          ("", "no tree with a word"), ("( (S (-NONE- *)) )", "no tree with a word")]:
        path.write_text(HAND_GOLD[0] + "\n" + line + "\n" + HAND_GOLD[1] + "\n", encoding="utf-8")
        with pytest.raises(DataError) as raised:
            parsing.Gold.from_file(str(path))
        assert str(raised.value) == f"{path} line 2: {message}"


def test_read_sentences_rejects_invalid_utf8(tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_bytes(b"The dog .\n\nDie \xffKatze .\n")
    with pytest.raises(DataError, match=r"sentences.txt line 3: not UTF-8$"):
        parsing.read_sentences(str(path))
    path.write_bytes(b"The  dog .\r\n\n")
    assert parsing.read_sentences(str(path)) == [["The", "dog", "."], []]


@pytest.fixture(scope="module")
def gold_files(ptb, sample, tmp_path_factory):
    """The first test sentences, one per line, and their gold trees (tags included)."""
    root = tmp_path_factory.mktemp("gold")
    gold = parsing.Gold.from_treebank(str(ptb), "test").take(GOLD_LINES)
    (root / "sentences.txt").write_text("".join(s.sentence + "\n" for s in gold.sentences), encoding="utf-8")
    (root / "gold.trees").write_text("".join(one_line(s.tagged_tree()) + "\n" for s in gold.sentences),
                                     encoding="utf-8")
    return root, gold


def test_a_gold_file_reads_back_the_treebank_trees(gold_files, sample):
    root, gold = gold_files
    assert gold.sentences == sample["test"][:GOLD_LINES]
    assert parsing.Gold.from_file(str(root / "gold.trees")) == gold  # words, tags and trees


# python -m keras_transformer.parse ---------------------------------------------------------------

def test_baseline_on_the_test_split_prints_its_evalb_scores(ptb, sample, tmp_path):
    output = tmp_path / "trees.txt"
    result = run_parse("--baseline=right_branching", "--treebank_split=test", f"--data_dir={ptb}",
                       f"--output={output}")
    assert result.returncode == 0, result.stderr[-3000:]
    unlabelled = re.search(r"^unlabelled: F1 ([\d.]+) ", result.stdout, re.M)
    lines = output.read_text(encoding="utf-8").splitlines()
    assert len(lines) == SAMPLE_SIZES["test"]
    gold = parsing.Gold.from_treebank(str(ptb), "test")
    trees = [Tree.fromstring(line) for line in lines]
    assert [t.leaves() for t in trees] == [list(s.words) for s in gold.sentences]
    assert lines == [parsing.format_tree(parsing.right_branching(s.words)) for s in gold.sentences]
    assert float(unlabelled.group(1)) == round(gold.scores(trees, labelled=False).f1, 2)
    assert str(gold.scores(trees, labelled=False)) == BASELINE_TEST_UNLABELLED
    assert str(gold.scores(trees)) == BASELINE_TEST_LABELLED
    assert result.stdout == f"right_branching\n{gold.report(trees)}\nrepaired: 0 of 245 outputs (0.0%)\n"


def test_baseline_with_a_hand_made_reference(hand):
    results = run_parse_many({
        "file": ("--baseline=right_branching", f"--input={hand / 'sentences.txt'}",
                 f"--reference={hand / 'gold.trees'}", f"--output={hand / 'trees.txt'}"),
        "stdout": ("--baseline=right_branching", f"--input={hand / 'sentences.txt'}",
                   f"--reference={hand / 'gold.trees'}")})
    report = (f"right_branching\nlabelled (EVALB, COLLINS.prm): {HAND_LABELLED}\nlabelled, len <= 40: "
              f"{HAND_LABELLED}\nunlabelled: {HAND_UNLABELLED}\nrepaired: 0 of 3 outputs (0.0%)\n")
    trees = "".join(tree + "\n" for tree in HAND_TREES)
    assert results["file"].returncode == 0, results["file"].stderr[-3000:]
    assert results["file"].stdout == report
    assert (hand / "trees.txt").read_text(encoding="utf-8") == trees
    assert results["stdout"].returncode == 0, results["stdout"].stderr[-3000:]
    assert results["stdout"].stdout == trees  # trees on stdout, the report on stderr
    assert report in results["stdout"].stderr


def test_a_reference_that_does_not_match_the_input_is_one_error_line(gold_files, tmp_path):
    root, gold = gold_files
    changed = [s.sentence for s in gold.sentences]
    changed[4] = "Changed " + changed[4]
    (tmp_path / "changed.txt").write_text("".join(s + "\n" for s in changed), encoding="utf-8")
    lines = (root / "gold.trees").read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "short.trees").write_text("".join(lines[:-1]), encoding="utf-8")
    cases = {  # name: (input, reference, the error)
        "words": (tmp_path / "changed.txt", root / "gold.trees",
                  f"{root / 'gold.trees'} line 5: the gold tree's words are not the sentence's"),
        "lines": (root / "sentences.txt", tmp_path / "short.trees",
                  f"{tmp_path / 'short.trees'}: {GOLD_LINES - 1} gold trees but {GOLD_LINES} sentences")}
    results = run_parse_many({name: ("--baseline=right_branching", f"--input={source}", f"--reference={reference}",
                                     f"--output={tmp_path / name}.trees")
                              for name, (source, reference, _) in cases.items()})
    for name, (_, _, error) in cases.items():
        assert_one_error_line(results[name], error)
        assert not (tmp_path / f"{name}.trees").exists()


def test_bad_flags_are_one_error_line_and_write_nothing(tmp_path):
    data_dir = write_mrg(tmp_path / "wsj")
    (tmp_path / "empty").mkdir()
    (tmp_path / "folder").mkdir()
    source = tmp_path / "sentences.txt"
    source.write_text("The dog barks .\n", encoding="utf-8")
    baseline, given = "--baseline=right_branching", f"--input={source}"
    cases = {  # name: (flags, a fragment of the error)
        "no_parser": ((given,), "give exactly one of --model_dir, --export_dir and --baseline"),
        "two_parsers": ((baseline, f"--model_dir={tmp_path}", given),
                        "give exactly one of --model_dir, --export_dir and --baseline"),
        "three_parsers": ((baseline, f"--model_dir={tmp_path}", f"--export_dir={tmp_path}", given),
                          "give exactly one of --model_dir, --export_dir and --baseline"),
        "unknown_baseline": (("--baseline=left_branching", given), "--baseline=left_branching"),
        "no_input": ((baseline,), "give exactly one of --input and --treebank_split"),
        "input_and_split": ((baseline, given, "--treebank_split=test", f"--data_dir={data_dir}"),
                            "give exactly one of --input and --treebank_split"),
        "split_no_data_dir": ((baseline, "--treebank_split=test"), "--treebank_split needs --data_dir"),
        "data_dir_no_split": ((baseline, given, f"--data_dir={data_dir}"), "--data_dir: only with --treebank_split"),
        "data_dir_no_treebank": ((baseline, "--treebank_split=test", f"--data_dir={tmp_path / 'empty'}"),
                                 "no treebank.zip and no wsj_NNNN.mrg files under it"),
        "split_and_reference": ((baseline, "--treebank_split=test", f"--data_dir={data_dir}",
                                 f"--reference={source}"), "--reference: only with --input"),
        "unknown_split": ((baseline, "--treebank_split=dev", f"--data_dir={data_dir}"),
                          "the treebank has splits train, validation, test, not 'dev'"),
        "beam_size": ((baseline, given, "--beam_size=4"), "--beam_size: only with --model_dir"),
        "checkpoint": ((baseline, given, "--checkpoint=ckpt-1"), "--checkpoint: only with --model_dir"),
        "missing_input": ((baseline, f"--input={tmp_path / 'missing.txt'}"),
                          f"--input={tmp_path / 'missing.txt'}: no such file or folder"),
        "missing_reference": ((baseline, given, f"--reference={tmp_path / 'missing.trees'}"),
                              f"--reference={tmp_path / 'missing.trees'}: no such file or folder"),
        "output_folder": ((baseline, given, f"--output={tmp_path / 'folder'}"),
                          f"--output={tmp_path / 'folder'}: is a folder, not a file"),
    }
    outputs = {name: tmp_path / f"{name}.trees" for name in cases}
    results = run_parse_many({name: (*args, f"--output={outputs[name]}") if name != "output_folder" else args
                              for name, (args, _) in cases.items()})
    for name, (_, fragment) in cases.items():
        try:
            assert_one_error_line(results[name], fragment)
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}") from None
        assert not outputs[name].exists(), name
    assert not any((tmp_path / "folder").iterdir())
