"""`keras_transformer.tasks.parsing.parse_files` and `python -m keras_transformer.parse`: the right-branching
baseline, gold trees and their scores, parser outputs and their repairs, the command's reports
and errors.

Covered:
* `keras_transformer.tasks.parsing.parse_files`: `right_branching`, `format_tree`, `trees_from_outputs`,
  `Parses.summary`, `Gold` (from_file, check_words, take, dev_scores, scores), `read_sentences`;
  reference files read back as the treebank's trees (NLTK's sample, ../shared/data, skipped
  without it).
* The command: the baseline on the sample's test split prints the F1 recomputed here; a
  hand-made --input/--reference gets the labelled F1 worked out by hand; every bad flag
  combination or gold file ends as one `error:` line (exit 2) and writes nothing, and so does an
  --ensemble_model_dirs run whose source tags, tree targets, tagger or vocabulary are not
  --model_dir's (runs of settings only: refused before TensorFlow starts).

EVALB itself is tested in tests/tasks/parsing/test_evalb.py; a trained parser in
tests/keras_transformer/test_parse.py. The commands run in subprocesses with the baseline, which
imports no TensorFlow, a few at a time where a test has several.
"""

import concurrent.futures
import re

import pytest
from nltk import Tree

from keras_transformer.pipelines import linearized_trees
from keras_transformer.pipelines.errors import DataError
from keras_transformer.tasks.parsing import parse_files
from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.files import write_run_settings
from tests.helpers.treebank import SAMPLE_SIZES, one_line, write_mrg

# The sample's test split, by the right-branching baseline: the numbers the command prints.
BASELINE_TEST_LABELLED = "F1 12.58 (P 11.35, R 14.11) over 245 sentences, exact match 0.00%"
BASELINE_TEST_UNLABELLED = "F1 35.59 (P 32.10, R 39.92) over 245 sentences, exact match 0.00%"
GOLD_LINES = 20  # test sentences in the reference-file tests


def run_parse(*args):
    return run_command("-m", "keras_transformer.parse", *args)


def run_parse_many(cases: dict) -> dict:
    """{name: args} -> {name: CompletedProcess}, a few commands at a time."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(run_parse, *args) for name, args in cases.items()}
        return {name: future.result() for name, future in futures.items()}


# tasks.parsing.parse_files ---------------------------------------------------------------------

@pytest.mark.parametrize("count, expected", [(1, "(S a)"), (2, "(S a b)"), (3, "(S a (NP b c))"),
                                             (4, "(S a (NP b (NP c d)))")])
def test_right_branching(count, expected):
    assert parse_files.format_tree(parse_files.right_branching("abcd"[:count])) == expected


def test_no_word_has_no_tree():
    assert parse_files.right_branching([]) is None and parse_files.format_tree(None) == ""


def test_trees_from_outputs_and_their_repairs():
    parses = parse_files.trees_from_outputs(["(S XX )S", "(S XX", "(S XX )S", "(NP XX )S"],
                                        [["a"], ["b"], [], ["c"]])
    assert [parse_files.format_tree(t) for t in parses.trees] == ["(S a)", "(S b)", "", "(NP c)"]
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
    gold = parse_files.Gold.from_file(str(hand / "gold.trees"))
    sentences = parse_files.read_sentences(str(hand / "sentences.txt"))
    assert [list(s.words) for s in gold.sentences] == sentences == [s.split() for s in HAND_SENTENCES]
    gold.check_words(sentences, "gold.trees")
    trees = [parse_files.right_branching(words) for words in sentences]
    assert [parse_files.format_tree(t) for t in trees] == HAND_TREES
    scores = gold.scores(trees)
    assert (scores.matched, scores.gold, scores.test) == (3, 10, 8)
    assert str(scores) == HAND_LABELLED and str(gold.scores(trees, labelled=False)) == HAND_UNLABELLED
    assert str(gold.take(2).scores(trees[:2])) == "F1 40.00 (P 50.00, R 33.33) over 2 sentences, exact match 0.00%"
    # The dev evaluation, on linearized outputs: the second one unclosed but the same tree.
    outputs = [linearized_trees.linearize(trees[0]), "(S XX XX", linearized_trees.linearize(trees[2])]
    assert gold.dev_scores(outputs) == {"f1": pytest.approx(100 / 3), "repaired": pytest.approx(100 / 3)}


def test_what_a_tagged_model_reads(hand, sample):
    """`source_sentences`: the words, the words with a tagger's tags, or with the gold trees' tags
    (only where gold trees are given: raw text has none)."""
    from keras_transformer.pipelines import pos_tags

    gold = parse_files.Gold.from_file(str(hand / "gold.trees"))
    sentences = parse_files.read_sentences(str(hand / "sentences.txt"))
    assert parse_files.source_sentences(sentences, "none") == HAND_SENTENCES
    assert parse_files.source_sentences(sentences, "gold", gold=gold) == [
        pos_tags.tagged_source(s.words, s.tags) for s in gold.sentences]
    tagger = pos_tags.train_tagger(sample["train"][:100])
    predicted = parse_files.source_sentences(sentences, "predicted", tagger)
    assert [line.split()[0::2] for line in predicted] == sentences
    assert [line.split()[1::2] for line in predicted] == [
        [pos_tags.tag_token(t) for t in pos_tags.tag_words(tagger, words)] for words in sentences]
    with pytest.raises(DataError, match="trained with --source_tags=gold: it parses only sentences whose gold"):
        parse_files.source_sentences(sentences, "gold")


def test_gold_check_words_errors(hand):
    gold = parse_files.Gold.from_file(str(hand / "gold.trees"))
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
            parse_files.Gold.from_file(str(path))
        assert str(raised.value) == f"{path} line 2: {message}"


def test_a_preterminal_root_is_a_one_word_sentence(tmp_path):
    reference = tmp_path / "gold.trees"
    reference.write_text("(NN dog)\n", encoding="utf-8")
    gold = parse_files.Gold.from_file(str(reference))
    assert gold.sentences[0].words == ("dog",) and gold.sentences[0].tags == ("NN",)
    assert one_line(gold.sentences[0].tree) == "(TOP dog)"


def test_a_reference_without_tags_is_refused(tmp_path):
    reference = tmp_path / "untagged.trees"
    reference.write_text("(S (NP The dog) (VP barks) .)\n", encoding="utf-8")  # parse's own output format
    with pytest.raises(DataError, match=r"untagged.trees line 1: a word without its part-of-speech tag"):
        parse_files.Gold.from_file(str(reference))


def test_bare_parentheses_are_read_as_the_treebank_brackets(tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_text("a ( b ) c\n", encoding="utf-8")
    assert parse_files.read_sentences(str(path)) == [["a", "-LRB-", "b", "-RRB-", "c"]]


def test_read_sentences_rejects_invalid_utf8(tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_bytes(b"The dog .\n\nDie \xffKatze .\n")
    with pytest.raises(DataError, match=r"sentences.txt line 3: not UTF-8$"):
        parse_files.read_sentences(str(path))
    path.write_bytes(b"The  dog .\r\n\n")
    assert parse_files.read_sentences(str(path)) == [["The", "dog", "."], []]


@pytest.fixture(scope="module")
def gold_files(ptb, sample, tmp_path_factory):
    """The first test sentences, one per line, and their gold trees (tags included)."""
    root = tmp_path_factory.mktemp("gold")
    gold = parse_files.Gold.from_treebank(str(ptb), "test").take(GOLD_LINES)
    (root / "sentences.txt").write_text("".join(s.sentence + "\n" for s in gold.sentences), encoding="utf-8")
    (root / "gold.trees").write_text("".join(one_line(s.tagged_tree()) + "\n" for s in gold.sentences),
                                     encoding="utf-8")
    return root, gold


def test_a_gold_file_reads_back_the_treebank_trees(gold_files, sample):
    root, gold = gold_files
    assert gold.sentences == sample["test"][:GOLD_LINES]
    assert parse_files.Gold.from_file(str(root / "gold.trees")) == gold  # words, tags and trees


# python -m keras_transformer.parse ---------------------------------------------------------------

def test_baseline_on_the_test_split_prints_its_evalb_scores(ptb, sample, tmp_path):
    output = tmp_path / "trees.txt"
    result = run_parse("--baseline=right_branching", "--treebank_split=test", f"--data_dir={ptb}",
                       f"--output={output}")
    assert result.returncode == 0, result.stderr[-3000:]
    unlabelled = re.search(r"^unlabelled: F1 ([\d.]+) ", result.stdout, re.M)
    lines = output.read_text(encoding="utf-8").splitlines()
    assert len(lines) == SAMPLE_SIZES["test"]
    gold = parse_files.Gold.from_treebank(str(ptb), "test")
    trees = [Tree.fromstring(line) for line in lines]
    assert [t.leaves() for t in trees] == [list(s.words) for s in gold.sentences]
    assert lines == [parse_files.format_tree(parse_files.right_branching(s.words)) for s in gold.sentences]
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
    (tmp_path / "ckpt-1.index").write_bytes(b"")  # a --checkpoint that names no checkpoint is refused first
    baseline, given = "--baseline=right_branching", f"--input={source}"
    translation_run = write_run_settings(tmp_path / "translation", data={"dataset": "embedded"})
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
        "data_dir_no_split": ((baseline, given, f"--data_dir={data_dir}"),
                              "--data_dir: only with --treebank_split, --baseline=pcfg or --rerank_kbest"),
        "pcfg_no_data_dir": (("--baseline=pcfg", given), "--baseline=pcfg needs --data_dir"),
        "pcfg_no_treebank": (("--baseline=pcfg", given, f"--data_dir={tmp_path / 'empty'}"),
                             "no treebank.zip and no wsj_NNNN.mrg files under it"),
        "pcfg_flag_elsewhere": ((baseline, given, "--pcfg_vertical=0"),
                                "--pcfg_vertical: only with --baseline=pcfg or --rerank_kbest"),
        "rerank_baseline": (("--baseline=pcfg", given, f"--data_dir={data_dir}", "--rerank_kbest=5"),
                            "--rerank_kbest: with --model_dir or --export_dir"),
        "rerank_no_data_dir": ((f"--model_dir={tmp_path}", given, "--rerank_kbest=5"),
                               "--rerank_kbest needs --data_dir"),
        "rerank_no_treebank": ((f"--model_dir={tmp_path}", given, "--rerank_kbest=5",
                                f"--data_dir={tmp_path / 'empty'}"),
                               "no treebank.zip and no wsj_NNNN.mrg files under it"),
        "rerank_and_beam": ((f"--model_dir={tmp_path}", given, "--rerank_kbest=5", f"--data_dir={data_dir}",
                             "--beam_size=4", "--alpha=0.1"),
                            "--beam_size, --alpha: not with --rerank_kbest"),
        "rerank_translation_run": ((f"--model_dir={translation_run}", given, "--rerank_kbest=5",
                                    f"--data_dir={data_dir}"),
                                   "a model trained on embedded; reranking trees needs one trained on a treebank"),
        "weight_no_rerank": ((f"--model_dir={tmp_path}", given, "--pcfg_weight=0.5"),
                             "--pcfg_weight: only with --rerank_kbest"),
        "negative_weight": ((f"--model_dir={tmp_path}", given, "--rerank_kbest=5", "--pcfg_weight=-1"),
                            "--pcfg_weight"),
        "negative_k": ((f"--model_dir={tmp_path}", given, "--rerank_kbest=-1"), "--rerank_kbest"),
        "pcfg_vertical_range": (("--baseline=pcfg", given, f"--data_dir={data_dir}", "--pcfg_vertical=3"),
                                "--pcfg_vertical"),
        "data_dir_no_treebank": ((baseline, "--treebank_split=test", f"--data_dir={tmp_path / 'empty'}"),
                                 "no treebank.zip and no wsj_NNNN.mrg files under it"),
        "split_and_reference": ((baseline, "--treebank_split=test", f"--data_dir={data_dir}",
                                 f"--reference={source}"), "--reference: only with --input"),
        "unknown_split": ((baseline, "--treebank_split=dev", f"--data_dir={data_dir}"),
                          "value should be one of <train|validation|test>"),
        "beam_size": ((baseline, given, "--beam_size=4"), "--beam_size: only with --model_dir"),
        "checkpoint": ((baseline, given, f"--checkpoint={tmp_path / 'ckpt-1'}"), "--checkpoint: only with --model_dir"),
        "no_checkpoint": ((f"--model_dir={tmp_path}", given, f"--checkpoint={tmp_path / 'ckpt-2'}"),
                          f"--checkpoint={tmp_path / 'ckpt-2'}: no such checkpoint"),
        "missing_input": ((baseline, f"--input={tmp_path / 'missing.txt'}"),
                          f"--input={tmp_path / 'missing.txt'}: no such file"),
        "missing_reference": ((baseline, given, f"--reference={tmp_path / 'missing.trees'}"),
                              f"--reference={tmp_path / 'missing.trees'}: no such file"),
        "reference_folder": ((baseline, given, f"--reference={tmp_path / 'folder'}"),
                             f"--reference={tmp_path / 'folder'}: is a folder, not a file"),
        "reference_stdin": ((baseline, given, "--reference=-"), "--reference=-: must be a file (stdin is for --input)"),
        "missing_model_dir": ((f"--model_dir={tmp_path / 'no_run'}", given),
                              f"--model_dir={tmp_path / 'no_run'}: no such training directory"),
        "output_folder": ((baseline, given, f"--output={tmp_path / 'folder'}"),
                          f"--output={tmp_path / 'folder'}: is a folder, not a file"),
        "ensemble_baseline": ((baseline, given, f"--ensemble_model_dirs={tmp_path}"),
                              "--ensemble_model_dirs: only with --model_dir"),
        "ensemble_export": ((f"--export_dir={tmp_path}", given, f"--ensemble_model_dirs={tmp_path}"),
                            "--ensemble_model_dirs: only with --model_dir"),
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


def test_an_ensemble_that_reads_or_writes_otherwise_is_one_error_line_before_decoding(tmp_path):
    """`--ensemble_model_dirs` runs with other source tags, tree targets or tagger than --model_dir's
    (runs without a model: the check reads their settings only, before TensorFlow starts)."""
    data = {"dataset": "ptb", "source_tags": "predicted", "tree_targets": "placeholders"}
    tagger = {"weights": {"bias": {"NN": 1.0}}, "tagdict": {"the": "DT"}, "classes": ["DT", "NN"]}
    model_dir = write_run_settings(tmp_path / "a", data=data, tagger=tagger)
    cases = {  # name: (the member's data and tagger, a fragment of the error)
        "source_tags": ((dict(data, source_tags="gold"), None), "was trained with --source_tags=gold, --model_dir="),
        "tree_targets": ((dict(data, tree_targets="words"), tagger), "was trained with --tree_targets=words"),
        "tagger": ((data, dict(tagger, tagdict={"the": "NN"})), "has another part-of-speech tagger than --model_dir"),
        "vocabulary": ((data, tagger), "vocab_size=501"),
    }
    source = tmp_path / "sentences.txt"
    source.write_text("The dog barks .\n", encoding="utf-8")
    members = {name: write_run_settings(tmp_path / name, data=member_data, tagger=member_tagger,
                                        vocab_size=501 if name == "vocabulary" else 500)
               for name, ((member_data, member_tagger), _) in cases.items()}
    results = run_parse_many({name: (f"--model_dir={model_dir}", f"--ensemble_model_dirs={model_dir},{member}",
                                     f"--input={source}", f"--output={tmp_path / name}.trees")
                              for name, member in members.items()})
    for name, (_, fragment) in cases.items():
        assert_one_error_line(results[name], "--ensemble_model_dirs", members[name], fragment)  # nothing parsed
        assert not (tmp_path / f"{name}.trees").exists(), name
