"""`keras_transformer.pipelines.word_alignment`: IBM Model 1 (Brown et al. 1993) and the shortlist's two queries.

Covered: two EM iterations computed by hand on a two-pair corpus; a synthetic corpus whose
words translate one to one is learnt; t sums to 1 per source id; special ids in the input
change nothing; the vectorised EM equals a per-sentence loop written here; `best_translations`
and `most_frequent` on a literal table (order, ties, padding, special rows); bad arguments.
"""

import collections

import numpy as np
import pytest

from keras_transformer.special_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_transformer.pipelines import word_alignment
from keras_transformer.pipelines.word_alignment import TranslationTable, translation_table


def _as_dict(table: TranslationTable) -> dict:
    return {(int(e), int(f)): float(p)
            for e, f, p in zip(table.source_ids, table.target_ids, table.probabilities)}


def _loop_model_1(pairs, iterations):
    """IBM Model 1 written sentence by sentence (Brown et al. 1993, section 4.1): an
    independent path for the vectorised one."""
    corpus = [([e for e in s if e > EOS_ID] + [PAD_ID], [f for f in t if f > EOS_ID]) for s, t in pairs]
    corpus = [(s, t) for s, t in corpus if t]
    t = {(e, f): 1.0 for s, ts in corpus for e in s for f in ts}
    for _ in range(iterations):
        counts = collections.defaultdict(float)
        for source, target in corpus:
            for f in target:
                total = sum(t[e, f] for e in source)
                for e in source:
                    counts[e, f] += t[e, f] / total
        per_source = collections.defaultdict(float)
        for (e, _), c in counts.items():
            per_source[e] += c
        t = {(e, f): c / per_source[e] for (e, f), c in counts.items()}
    return t


def test_two_em_iterations_match_a_hand_computation():
    # Sources with NULL (0) appended: [4, 5, 0] and [4, 0]; targets [6, 7] and [6].
    pairs = [([4, 5], [6, 7]), ([4], [6])]
    # Iteration 1, every pair equal. E-step: in pair 1 each target token gives 1/3 to each of
    # 4, 5, 0; in pair 2 target 6 gives 1/2 to each of 4, 0. Counts:
    #   c(6|4) = 1/3 + 1/2 = 5/6, c(7|4) = 1/3  -> t(6|4) = 5/7, t(7|4) = 2/7
    #   c(6|5) = 1/3,       c(7|5) = 1/3        -> t(6|5) = 1/2, t(7|5) = 1/2
    #   c(6|0) = 5/6,       c(7|0) = 1/3        -> t(6|0) = 5/7, t(7|0) = 2/7
    one = _as_dict(translation_table(pairs, 6, 8, iterations=1))
    expected = {(0, 6): 5 / 7, (0, 7): 2 / 7, (4, 6): 5 / 7, (4, 7): 2 / 7, (5, 6): 1 / 2, (5, 7): 1 / 2}
    assert one.keys() == expected.keys()
    np.testing.assert_allclose([one[k] for k in expected], list(expected.values()), rtol=1e-6)
    # Iteration 2. Pair 1, target 6: t = 5/7, 1/2, 5/7 (sum 27/14) -> posteriors 10/27, 7/27, 10/27;
    # target 7: t = 2/7, 1/2, 2/7 (sum 15/14) -> 4/15, 7/15, 4/15. Pair 2, target 6: 1/2, 1/2.
    #   c(6|4) = 10/27 + 1/2 = 47/54, c(7|4) = 4/15  (sum 307/270) -> t(6|4) = 235/307, t(7|4) = 72/307
    #   c(6|5) = 7/27, c(7|5) = 7/15  (sum 294/405)                -> t(6|5) = 5/14,    t(7|5) = 9/14
    #   source 0 has the counts of source 4                         -> t(6|0) = 235/307, t(7|0) = 72/307
    two = _as_dict(translation_table(pairs, 6, 8, iterations=2))
    expected = {(0, 6): 235 / 307, (0, 7): 72 / 307, (4, 6): 235 / 307, (4, 7): 72 / 307,
                (5, 6): 5 / 14, (5, 7): 9 / 14}
    np.testing.assert_allclose([two[k] for k in expected], list(expected.values()), rtol=1e-6)
    table = translation_table(pairs, 6, 8, iterations=2)
    assert table.source_ids.dtype == table.target_ids.dtype == np.int32 and table.probabilities.dtype == np.float32
    np.testing.assert_array_equal(table.target_counts, [0, 0, 0, 0, 0, 0, 2, 1])
    assert table.target_counts.dtype == np.int64
    np.testing.assert_array_equal(table.best_translations(2)[4:], [[6, 7], [7, 6]])  # 5 -> 7 already


def _one_to_one_corpus(sentences=150, words=20, seed=0):
    """Source word i (4 <= i < 4 + words) always translates to i + 100, in shuffled order."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(sentences):
        source = rng.choice(np.arange(4, 4 + words), size=rng.integers(3, 7), replace=False)
        pairs.append((source.tolist(), rng.permutation(source + 100).tolist()))
    return pairs


def test_a_one_to_one_corpus_is_learnt():
    table = translation_table(_one_to_one_corpus(), source_vocab_size=24, target_vocab_size=124, iterations=10)
    best = table.best_translations(1)
    np.testing.assert_array_equal(best[4:, 0], np.arange(4, 24) + 100)
    np.testing.assert_array_equal(best[:4], 0)
    t = _as_dict(table)
    assert min(t[i, i + 100] for i in range(4, 24)) > 0.9


def test_probabilities_sum_to_one_per_source_id():
    table = translation_table(_one_to_one_corpus(sentences=40), 24, 124, iterations=3)
    sums = np.bincount(table.source_ids, table.probabilities, minlength=24)
    seen = np.unique(table.source_ids)
    assert seen[0] == PAD_ID  # NULL has its own distribution
    np.testing.assert_allclose(sums[seen], 1.0, rtol=1e-6)


def test_special_ids_in_the_input_are_ignored():
    plain = _one_to_one_corpus(sentences=30)
    marked = [([BOS_ID] + s + [UNK_ID, EOS_ID], t + [EOS_ID, PAD_ID]) for s, t in plain]
    marked.append(([5, EOS_ID], [EOS_ID]))  # no target word left: skipped
    a, b = translation_table(plain, 24, 124, 4), translation_table(marked, 24, 124, 4)
    for field in ("source_ids", "target_ids", "probabilities", "target_counts"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert b.target_counts[:4].sum() == 0


def test_the_vectorised_em_equals_a_per_sentence_loop():
    rng = np.random.default_rng(1)
    pairs = [(rng.integers(0, 15, size=rng.integers(0, 7)).tolist(),  # repeats, specials, empty sources
              rng.integers(0, 12, size=rng.integers(0, 7)).tolist()) for _ in range(60)]
    expected = _loop_model_1(pairs, iterations=4)
    got = _as_dict(translation_table(pairs, 15, 12, iterations=4))
    assert got.keys() == expected.keys()
    np.testing.assert_allclose([got[k] for k in expected], list(expected.values()), atol=1e-6)


def _literal_table() -> TranslationTable:
    pairs = [(4, 9, 0.2), (4, 6, 0.4), (4, 5, 0.4),  # a tie between 5 and 6
             (5, 8, 1.0),                            # one candidate
             (0, 7, 1.0)]                            # NULL: never reported
    source, target, p = zip(*pairs)
    return TranslationTable(
        source_ids=np.array(source, np.int32), target_ids=np.array(target, np.int32),
        probabilities=np.array(p, np.float32),
        target_counts=np.array([9, 9, 9, 9, 0, 3, 7, 3, 0, 1], np.int64),  # specials counted: still excluded
        source_vocab_size=8, target_vocab_size=10)


def test_best_translations_order_ties_padding_and_special_rows():
    table = _literal_table()
    np.testing.assert_array_equal(table.best_translations(3), [
        [0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0],  # special ids, NULL included
        [5, 6, 9],                                  # 0.4, 0.4 (smaller id first), 0.2
        [8, 0, 0],                                  # padded with PAD
        [0, 0, 0], [0, 0, 0]])                      # never seen
    np.testing.assert_array_equal(table.best_translations(1)[:, 0], [0, 0, 0, 0, 5, 8, 0, 0])
    assert table.best_translations(3).dtype == np.int32 and table.best_translations(0).shape == (8, 0)


def test_most_frequent_order_ties_and_no_special_ids():
    table = _literal_table()
    np.testing.assert_array_equal(table.most_frequent(10), [6, 5, 7, 9])  # 7, 3, 3 (5 before 7), 1
    np.testing.assert_array_equal(table.most_frequent(2), [6, 5])
    assert table.most_frequent(2).dtype == np.int32 and table.most_frequent(0).shape == (0,)


def test_an_empty_corpus_gives_an_empty_table():
    table = translation_table([([4], [EOS_ID]), ([], [])], 6, 8)
    assert len(table.probabilities) == 0 and table.target_counts.sum() == 0
    np.testing.assert_array_equal(table.best_translations(2), np.zeros((6, 2)))
    assert table.most_frequent(5).shape == (0,)


def test_bad_arguments_name_the_problem():
    with pytest.raises(ValueError, match="iterations must be at least 1, got 0"):
        translation_table([([4], [5])], 6, 8, iterations=0)
    with pytest.raises(ValueError, match="target id 9 is outside the target vocabulary of 8 ids"):
        translation_table([([4], [9])], 6, 8)
    with pytest.raises(ValueError, match="source id 6 is outside the source vocabulary of 6 ids"):
        translation_table([([6], [5])], 6, 8)
    with pytest.raises(ValueError, match="k must be non-negative"):
        _literal_table().best_translations(-1)
    with pytest.raises(ValueError, match="n must be non-negative"):
        _literal_table().most_frequent(-1)
    assert word_alignment.NULL_ID == PAD_ID
