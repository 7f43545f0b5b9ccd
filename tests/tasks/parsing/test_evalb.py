"""EVALB with COLLINS.prm (section 6.3, Table 4): bracket sets and P/R/F1 worked out by hand.

Brackets are written (label, start, end) over the words left once punctuation is deleted by
its gold tag; end is exclusive.
"""

import collections
import dataclasses
from fractions import Fraction

import pytest
from nltk import Tree

from keras_transformer.tasks.parsing import evalb
from tests.helpers.commands import run_command

# 0   1   2 3   4     5 6     7      (word indices before deletion; "," "," "." are deleted)
# The dog , it  seems , barks .
# 0   1     2   3       4            (after deletion)
PUNCT_WORDS_TAGS = ["DT", "NN", ",", "PRP", "VBZ", ",", "VBZ", "."]
PUNCT_GOLD = Tree.fromstring("(TOP (S (NP The dog) (PRN , (S (NP it) (VP seems)) ,) (VP barks) .))")
# TOP deleted; S (0,5); NP (0,2); PRN over ", it seems ," (2,4), not (2,6); S (2,4); NP (2,3);
# VP (3,4); VP (4,5): 7 brackets.
PUNCT_GOLD_BRACKETS = {("S", 0, 5): 1, ("NP", 0, 2): 1, ("PRN", 2, 4): 1, ("S", 2, 4): 1, ("NP", 2, 3): 1,
                       ("VP", 3, 4): 1, ("VP", 4, 5): 1}
PUNCT_TEST = Tree.fromstring("(TOP (S (NP The dog ,) (S (NP it) (VP seems)) (X ,) (VP barks .)))")
# S (0,5); "The dog ," is NP (0,2) and matches; S (2,4); NP (2,3); VP (3,4); X covers only the
# second "," (5,6 -> 4,4: empty, dropped); "barks ." is VP (4,5): 6 brackets, all matched.
# PRN (2,4) is missed: P = 6/6, R = 6/7, F1 = 2 * 6 / (7 + 6) = 12/13.
PUNCT_TEST_BRACKETS = {("S", 0, 5): 1, ("NP", 0, 2): 1, ("S", 2, 4): 1, ("NP", 2, 3): 1, ("VP", 3, 4): 1,
                       ("VP", 4, 5): 1}

UNARY_TAGS = ["NNS", "VBP"]
UNARY_GOLD = Tree.fromstring("(TOP (S (NP (NP dogs)) (VP bark)))")
# S (0,2); NP (0,1) twice (a unary chain NP -> NP); VP (1,2): 4 brackets.
UNARY_TEST = Tree.fromstring("(TOP (S (NP (NP (NP dogs))) (S (VP bark))))")
# S (0,2); NP (0,1) three times; S (1,2) over VP (1,2): 6 brackets. Each gold bracket matches
# at most once: S 1 + NP min(2, 3) + VP 1 = 4 matched. P = 4/6, R = 4/4, F1 = 8/10.

PARTICLE_TAGS = ["PRP", "VBD", "RP"]
PARTICLE_GOLD = Tree.fromstring("(TOP (S (NP He) (VP gave (PRT up))))")
# S (0,3); NP (0,1); VP (1,3); PRT (2,3), counted as ADVP: 4 brackets.


def _percent(fraction: Fraction) -> float:
    return float(100 * fraction)


def _check(scores: evalb.Scores, matched: int, gold: int, test: int) -> None:
    assert (scores.matched, scores.gold, scores.test) == (matched, gold, test)
    assert scores.precision == pytest.approx(_percent(Fraction(matched, test)))
    assert scores.recall == pytest.approx(_percent(Fraction(matched, gold)))
    assert scores.f1 == pytest.approx(_percent(Fraction(2 * matched, gold + test)))


def test_punctuation_is_deleted_by_the_gold_tag_and_spans_count_the_rest():
    assert evalb.brackets(PUNCT_GOLD, PUNCT_WORDS_TAGS) == collections.Counter(PUNCT_GOLD_BRACKETS)
    assert evalb.brackets(PUNCT_TEST, PUNCT_WORDS_TAGS) == collections.Counter(PUNCT_TEST_BRACKETS)
    scores = evalb.score([PUNCT_GOLD], [PUNCT_TEST], [PUNCT_WORDS_TAGS])
    _check(scores, matched=6, gold=7, test=6)
    assert scores.precision == 100.0 and scores.f1 == pytest.approx(_percent(Fraction(12, 13)))
    assert (scores.sentences, scores.exact, scores.exact_match) == (1, 0, 0.0)


def test_without_punctuation_deletion_the_spans_are_the_raw_ones():
    # Only TOP deleted: gold S (0,8) NP (0,2) PRN (2,6) S (3,5) NP (3,4) VP (4,5) VP (6,7);
    # test S (0,8) NP (0,3) S (3,5) NP (3,4) VP (4,5) X (5,6) VP (6,8): 4 of 7 match each way.
    params = evalb.EvalbParams(delete_labels=frozenset({"TOP"}))
    scores = evalb.score([PUNCT_GOLD], [PUNCT_TEST], [PUNCT_WORDS_TAGS], params=params)
    _check(scores, matched=4, gold=7, test=7)
    assert ("X", 5, 6) in evalb.brackets(PUNCT_TEST, PUNCT_WORDS_TAGS, params)


def test_perfect_match():
    scores = evalb.score([PUNCT_GOLD], [PUNCT_GOLD], [PUNCT_WORDS_TAGS])
    _check(scores, matched=7, gold=7, test=7)
    assert scores.f1 == 100.0 and scores.exact == 1 and scores.exact_match == 100.0


def test_unary_chains_and_duplicate_brackets_match_at_most_once():
    assert evalb.brackets(UNARY_GOLD, UNARY_TAGS) == collections.Counter(
        {("S", 0, 2): 1, ("NP", 0, 1): 2, ("VP", 1, 2): 1})
    assert evalb.brackets(UNARY_TEST, UNARY_TAGS) == collections.Counter(
        {("S", 0, 2): 1, ("NP", 0, 1): 3, ("S", 1, 2): 1, ("VP", 1, 2): 1})
    scores = evalb.score([UNARY_GOLD], [UNARY_TEST], [UNARY_TAGS])
    _check(scores, matched=4, gold=4, test=6)
    assert scores.recall == 100.0 and scores.f1 == pytest.approx(80.0) and scores.exact == 0
    # The other way round: 4 matched of 6 gold and 4 test brackets.
    _check(evalb.score([UNARY_TEST], [UNARY_GOLD], [UNARY_TAGS]), matched=4, gold=6, test=4)


def test_advp_and_prt_are_one_label():
    assert evalb.brackets(PARTICLE_GOLD, PARTICLE_TAGS) == collections.Counter(
        {("S", 0, 3): 1, ("NP", 0, 1): 1, ("VP", 1, 3): 1, ("ADVP", 2, 3): 1})
    advp = Tree.fromstring("(TOP (S (NP He) (VP gave (ADVP up))))")
    scores = evalb.score([PARTICLE_GOLD], [advp], [PARTICLE_TAGS])
    _check(scores, matched=4, gold=4, test=4)
    assert scores.exact == 1
    # PP (2,3) is another label: 3 of 4 match (F1 3/4), but every span is right (unlabelled 4/4).
    pp = Tree.fromstring("(TOP (S (NP He) (VP gave (PP up))))")
    _check(evalb.score([PARTICLE_GOLD], [pp], [PARTICLE_TAGS]), matched=3, gold=4, test=4)
    _check(evalb.score([PARTICLE_GOLD], [pp], [PARTICLE_TAGS], labelled=False), matched=4, gold=4, test=4)


def test_a_completely_wrong_tree_and_unlabelled_mode():
    tags = ["DT", "NN", "VBZ"]
    gold = Tree.fromstring("(TOP (S (NP The dog) (VP barks)))")  # S (0,3) NP (0,2) VP (2,3)
    test = Tree.fromstring("(TOP (NP (ADJP The) (X dog barks)))")  # NP (0,3) ADJP (0,1) X (1,3)
    scores = evalb.score([gold], [test], [tags])
    _check(scores, matched=0, gold=3, test=3)
    assert (scores.precision, scores.recall, scores.f1) == (0.0, 0.0, 0.0)
    # Unlabelled: spans {(0,3), (0,2), (2,3)} vs {(0,3), (0,1), (1,3)}: only (0,3) matches.
    assert evalb.brackets(test, tags, labelled=False) == collections.Counter({(None, 0, 3): 1, (None, 0, 1): 1,
                                                                            (None, 1, 3): 1})
    unlabelled = evalb.score([gold], [test], [tags], labelled=False)
    _check(unlabelled, matched=1, gold=3, test=3)
    assert unlabelled.f1 == pytest.approx(100 / 3)


def test_root_labels_are_not_brackets_but_the_sentence_is():
    tags = ["DT", "NN", "VBZ"]
    expected = collections.Counter({("S", 0, 3): 1, ("NP", 0, 2): 1, ("VP", 2, 3): 1})
    for text in ("(TOP (S (NP The dog) (VP barks)))", "(ROOT (S (NP The dog) (VP barks)))",
                 "((S (NP The dog) (VP barks)))", "(S (NP The dog) (VP barks))"):
        assert evalb.brackets(Tree.fromstring(text), tags) == expected, text
    assert evalb.COLLINS.delete_labels == {"TOP", "ROOT", "", "-NONE-", ",", ":", "``", "''", "."}
    assert evalb.COLLINS.equivalent_labels == (("ADVP", "PRT"),) and evalb.COLLINS.cutoff_length == 40


def test_corpus_scores_are_micro_averaged():
    # Punctuation sentence: 6 matched, 7 gold, 6 test; unary sentence: 4, 4, 6; a perfect one: 4, 4, 4.
    # Sum: 14 matched, 15 gold, 16 test: P 14/16, R 14/15, F1 28/31 -- not the mean of the F1s.
    gold = [PUNCT_GOLD, UNARY_GOLD, PARTICLE_GOLD]
    test = [PUNCT_TEST, UNARY_TEST, PARTICLE_GOLD]
    tags = [PUNCT_WORDS_TAGS, UNARY_TAGS, PARTICLE_TAGS]
    scores = evalb.score(gold, test, tags)
    _check(scores, matched=14, gold=15, test=16)
    assert scores.f1 == pytest.approx(_percent(Fraction(28, 31)))
    assert scores.f1 != pytest.approx(_percent((Fraction(12, 13) + Fraction(8, 10) + 1) / 3))
    assert (scores.sentences, scores.exact) == (3, 1) and scores.exact_match == pytest.approx(100 / 3)
    # Per-sentence scores add up to the corpus's.
    parts = [evalb.sentence_scores(g, t, s) for g, t, s in zip(gold, test, tags)]
    assert sum(parts) == scores == parts[0] + parts[1] + parts[2]
    assert sum(parts, evalb.Scores()) == scores


def test_sentence_of_only_punctuation_is_skipped():
    # No word is left: EVALB's "Skip" sentence, counted but not in brackets or complete match.
    only_punctuation = Tree.fromstring("(TOP (S (X ,) .))")
    scores = evalb.score([only_punctuation, PARTICLE_GOLD], [only_punctuation, PARTICLE_GOLD],
                         [[",", "."], PARTICLE_TAGS])
    assert (scores.sentences, scores.skipped, scores.valid, scores.exact) == (2, 1, 1, 1)
    assert scores.exact_match == 100.0 and (scores.matched, scores.gold, scores.test) == (4, 4, 4)


def test_cutoff_counts_punctuation_but_not_traces():
    assert evalb.sentence_length(["NN"] * 39 + ["."]) == 40
    assert evalb.sentence_length(["NN"] * 39 + ["-NONE-", "."]) == 40
    # 40 words and "." is 41 words long: out of the len <= 40 summary.
    long_tags = ["NN"] * 40 + ["."]
    words = " ".join(f"w{i}" for i in range(40))
    long_gold = Tree.fromstring(f"(TOP (S (NP {words}) .))")  # S (0,40), NP (0,40)
    long_test = Tree.fromstring(f"(TOP (S {words} .))")  # S (0,40): 1 matched of 2 gold
    gold, test, tags = [long_gold, PARTICLE_GOLD], [long_test, PARTICLE_GOLD], [long_tags, PARTICLE_TAGS]
    everything = evalb.score(gold, test, tags)
    assert (everything.sentences, everything.matched, everything.gold, everything.test) == (2, 5, 6, 5)
    short = evalb.score(gold, test, tags, max_words=evalb.COLLINS.cutoff_length)
    assert (short.sentences, short.matched, short.gold, short.test, short.exact) == (1, 4, 4, 4, 1)
    assert evalb.score(gold, test, tags, max_words=41) == everything


def test_mismatched_words_or_lengths_are_errors_naming_the_sentence():
    other = Tree.fromstring("(TOP (S (NP She) (VP gave (PRT up))))")
    with pytest.raises(ValueError, match=r"^sentence 1: word 0 is 'He' in the gold tree but 'She' in the test tree"):
        evalb.score([UNARY_GOLD, PARTICLE_GOLD], [UNARY_GOLD, other], [UNARY_TAGS, PARTICLE_TAGS])
    shorter = Tree.fromstring("(TOP (S (NP He) (VP gave)))")
    with pytest.raises(ValueError, match=r"^sentence 0: the gold tree has 3 words, the test tree 2"):
        evalb.score([PARTICLE_GOLD], [shorter], [PARTICLE_TAGS])
    with pytest.raises(ValueError, match=r"^sentence 0: 2 tags for 3 words"):
        evalb.score([PARTICLE_GOLD], [PARTICLE_GOLD], [UNARY_TAGS])
    with pytest.raises(ValueError, match="2 gold trees, 1 test trees and 2 tag sequences"):
        evalb.score([PARTICLE_GOLD, UNARY_GOLD], [PARTICLE_GOLD], [PARTICLE_TAGS, UNARY_TAGS])
    with pytest.raises(ValueError, match="2 tags for 3 words"):
        evalb.brackets(PARTICLE_GOLD, UNARY_TAGS)


def test_scores_arithmetic_and_report():
    empty = evalb.Scores()
    assert (empty.precision, empty.recall, empty.f1, empty.exact_match) == (0.0, 0.0, 0.0, 0.0)
    scores = evalb.Scores(sentences=2416, matched=9130, gold=10000, test=10000, exact=968)
    assert str(scores) == "F1 91.30 (P 91.30, R 91.30) over 2,416 sentences, exact match 40.07%"
    assert scores + empty == scores and sum([empty, scores]) == scores
    with pytest.raises(dataclasses.FrozenInstanceError):
        scores.matched = 1


def test_imports_no_tensorflow():
    code = "import sys, keras_transformer.tasks.parsing.evalb; assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules"
    result = run_command("-c", code, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
