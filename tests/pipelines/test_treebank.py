"""`keras_transformer.pipelines.treebank`: cleaning raw PTB trees, splitting the treebank by file, reading a split.

Covered:
* `clean` on hand-written raw PTB trees (traces and the constituents they leave empty, function
  tags and indices, -LRB-/-RRB-, the tag level, the unlabelled wrapper);
  `ParsedSentence.tagged_tree`.
* `split_fileids` on the sample's and the full WSJ's file names; `check_inputs`; `read_split`
  and `pair_list` on a hand-written .mrg folder.
* On NLTK's sample (../shared/data, skipped without it): the split sizes, the files of each
  split, clean labels.

The helpers the parsing tests share (`one_line`, `write_mrg`, the sample's splits) are in
tests/helpers/treebank.py, the `ptb` and `sample` fixtures in tests/conftest.py. The linearized
trees are tested in tests/pipelines/test_linearized_trees.py, the parsing task and its command in
tests/tasks/parsing/test_parse_files.py.
"""

import re
import zipfile

import pytest
from nltk import Tree

from keras_transformer.pipelines import treebank
from keras_transformer.pipelines.errors import DataError
from tests.helpers.treebank import SAMPLE_SIZES, SPLITS, one_line, write_mrg

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
    for data_dir, message in [(None, "dataset ptb needs data_dir, "),
                              (str(tmp_path / "missing"), f"data_dir {tmp_path / 'missing'}: no such folder"),
                              (str(tmp_path), f"data_dir {tmp_path}: no treebank.zip and no wsj_NNNN.mrg files")]:
        with pytest.raises(DataError) as raised:
            treebank.check_inputs(data_dir)
        assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    (tmp_path / "wsj_1.mrg").write_text("( (S (NN a)) )\n", encoding="utf-8")  # not wsj_NNNN
    with pytest.raises(DataError, match="no treebank.zip and no wsj_NNNN.mrg files"):
        treebank.check_inputs(str(tmp_path))


def test_a_folder_of_mrg_files_is_read_and_split(tmp_path):
    data_dir = str(write_mrg(tmp_path / "wsj"))  # a fresh path: read_split is cached by folder
    treebank.check_inputs(data_dir)
    sentences = treebank.read_split(data_dir, "train")
    assert [s.words for s in sentences] == [("The", "dog", "barks", "."), ("Run", "!")]
    assert [s.tags for s in sentences] == [("DT", "NN", "VBZ", "."), ("VB", ".")]
    assert [one_line(s.tree) for s in sentences] == ["(S (NP The dog) (VP barks) .)", "(S (VP Run) !)"]
    assert treebank.pair_list(data_dir, "train") == [("The dog barks .", "(S (NP The dog )NP (VP barks )VP . )S"),
                                                     ("Run !", "(S (VP Run )VP ! )S")]
    with pytest.raises(DataError, match=r"no files of the test split$"):
        treebank.read_split(data_dir, "test")
    # Gold part-of-speech tags in the source (pipelines.pos_tags): each word followed by its tag's
    # token; the targets are the same trees over the words.
    assert treebank.pair_list(data_dir, "train", "gold") == [
        ("The <DT> dog <NN> barks <VBZ> . <.>", "(S (NP The dog )NP (VP barks )VP . )S"),
        ("Run <VB> ! <.>", "(S (VP Run )VP ! )S")]


# pipelines.treebank on NLTK's sample ----------------------------------------------------------

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


def test_pairs_with_placeholder_targets(ptb):
    """The same sources and brackets as the words' pairs, each target word "XX"; with tags too."""
    words = treebank.pair_list(str(ptb), "validation")
    placeholders = treebank.pair_list(str(ptb), "validation", tree_targets="placeholders")
    assert [s for s, _ in placeholders] == [s for s, _ in words]
    for (source, word_target), (_, target) in zip(words, placeholders):
        assert target == " ".join("XX" if t[0] not in "()" else t for t in word_target.split())
        assert target.split().count("XX") == len(source.split())
    tagged = treebank.pair_list(str(ptb), "validation", "gold", tree_targets="placeholders")
    assert [t for _, t in tagged] == [t for _, t in placeholders]
    assert tagged[0][0].split()[1] == "<NNP>"
