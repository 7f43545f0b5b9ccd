"""bench/parse_significance.py: a paired bootstrap of two parsers' EVALB F1 over the same sentences."""

import sys

import numpy as np
import pytest

from keras_transformer.pipelines import treebank
from keras_transformer.tasks.parsing import evalb, parse_files
from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.paths import REPO

sys.path.insert(0, str(REPO / "bench"))

import parse_significance  # noqa: E402  pylint: disable=wrong-import-position

SCRIPT = "bench/parse_significance.py"
# A sample-layout test split (file 190): two sentences of 4 and 5 words.
TEST_MRG = """( (S (NP-SBJ (DT The) (JJ old) (NN dog) ) (VP (VBZ barks) ) (. .) ))
( (S (NP-SBJ (NNP Mary) ) (VP (VBD saw) (NP (DT the) (NN cat) ) ) (. .) ))
"""


def test_corpus_f1_sums_the_counts_as_evalb_does():
    # 3 of 4 gold and 5 test brackets: 200 * 3 / 9; with a perfect sentence of 1 bracket: 200 * 4 / 11,
    # not the mean of the two sentences' F1 (66.67 and 100).
    assert parse_significance.corpus_f1(np.array([3]), np.array([4]), np.array([5])) == pytest.approx(200 * 3 / 9)
    assert parse_significance.corpus_f1(np.array([3, 1]), np.array([4, 1]), np.array([5, 1])) == \
        pytest.approx(200 * 4 / 11)
    assert parse_significance.corpus_f1(np.array([0]), np.array([0]), np.array([0])) == 0.0


def test_the_same_parser_twice_is_no_difference_and_a_parser_better_on_every_sentence_always_wins():
    rng = np.random.default_rng(0)
    gold = rng.integers(5, 30, size=200)
    matched = np.minimum(gold, rng.integers(0, 30, size=200))
    baseline = np.stack([matched, gold, gold + 2], axis=1)
    same = parse_significance.paired_bootstrap(baseline, baseline, samples=500)
    assert (same.difference, same.low, same.high, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    better = baseline.copy()
    better[:, 0] = np.minimum(better[:, 0] + 1, gold)  # one more bracket right wherever one was missing
    better[:, 0][better[:, 0] == baseline[:, 0]] = gold[better[:, 0] == baseline[:, 0]]
    wins = parse_significance.paired_bootstrap(baseline, better, samples=500)
    assert wins.difference > 0 and wins.low > 0 and wins.p_value == 0.0
    assert wins.system_f1 == pytest.approx(parse_significance.corpus_f1(*better.T))
    flipped = parse_significance.paired_bootstrap(better, baseline, samples=500)
    assert flipped.p_value == 1.0 and flipped.high < 0


def test_the_draws_are_paired_and_reproducible():
    # Two parsers that each win one half of the sentences by the same margin: the difference is 0 on
    # the full set and symmetric around it over the draws.
    gold = np.full(100, 10)
    a = np.stack([np.r_[np.full(50, 10), np.full(50, 5)], gold, gold], axis=1)
    b = np.stack([np.r_[np.full(50, 5), np.full(50, 10)], gold, gold], axis=1)
    first = parse_significance.paired_bootstrap(a, b, samples=2000, seed=3)
    assert first == parse_significance.paired_bootstrap(a, b, samples=2000, seed=3)
    assert first.difference == 0.0 and first.low == pytest.approx(-first.high, abs=1.0) and 0.3 < first.p_value < 0.7
    with pytest.raises(ValueError, match="not the same sentences"):
        parse_significance.paired_bootstrap(a, np.stack([b[:, 0], gold + 1, gold], axis=1))
    with pytest.raises(ValueError, match="give \\[sentences, 3\\]"):
        parse_significance.paired_bootstrap(a, b[:10])


@pytest.fixture
def test_split(tmp_path):
    folder = tmp_path / "treebank"
    (folder / "01").mkdir(parents=True)
    (folder / "01" / "wsj_0190.mrg").write_text(TEST_MRG, encoding="utf-8")
    return folder


def test_the_command_scores_both_files_as_parse_does_and_refuses_bad_files(test_split, tmp_path):
    gold = treebank.read_split(str(test_split), "test")
    right = [parse_files.right_branching(list(s.words)) for s in gold]
    (tmp_path / "right.trees").write_text("".join(parse_files.format_tree(t) + "\n" for t in right),
                                          encoding="utf-8")
    (tmp_path / "gold.trees").write_text("".join(parse_files.format_tree(s.tree) + "\n" for s in gold),
                                         encoding="utf-8")
    flags = (f"--data_dir={test_split}", "--treebank_split=test", "--samples=200")
    result = run_command(SCRIPT, *flags, f"--baseline={tmp_path / 'right.trees'}",
                         f"--system={tmp_path / 'gold.trees'}")
    assert result.returncode == 0, result.stderr[-2000:]
    expected = parse_files.Gold(gold).scores(right).f1  # the parse command's scorer, corpus-level
    assert expected < 100
    assert f"baseline F1 {expected:.2f}, system F1 100.00: difference {100 - expected:+.2f}" in result.stdout
    assert "p = 0.0000" in result.stdout and "2 sentences" in result.stdout
    assert evalb.score([s.tree for s in gold], right, [s.tags for s in gold]).f1 == expected

    (tmp_path / "one.trees").write_text(parse_files.format_tree(right[0]) + "\n", encoding="utf-8")
    (tmp_path / "words.trees").write_text("(S The young dog barks .)\n(S Mary saw the cat .)\n", encoding="utf-8")
    for name, message in [("one.trees", "one.trees holds 1 trees but the split has 2 sentences"),
                          ("words.trees", "words.trees line 1: its words are not the gold sentence's"),
                          ("missing.trees", "missing.trees: no such file")]:
        refused = run_command(SCRIPT, *flags, f"--baseline={tmp_path / 'right.trees'}", f"--system={tmp_path / name}")
        assert_one_error_line(refused, message)
