"""Sampling: the draws follow the tempered softmax, top-k and top-p hold, seeds reproduce,
temperature 0 is greedy search; checked against the model's own full causal forward pass."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.config import SamplingConfig
from keras_transformer.decoding import beam_search as bs
from keras_transformer.decoding import sampling, search
from keras_transformer.losses import decoder_inputs
from keras_transformer.special_ids import BOS_ID
from tests.keras_transformer.decoding.test_search import SOURCE, make_model

SOURCES = SOURCE[[0, 1, 3]]  # the rows with a source
DRAWS = 6000


def first_step_log_probs(model, source_row):
    """log P(y_1 | source) with the full (uncached) decoder on BOS, PAD and BOS ruled out: (V,)."""
    encoder_outputs, source_mask = model.encode(source_row[None, :])
    logits = model.decode(tf.constant([[BOS_ID]]), encoder_outputs, source_mask)[0, -1].numpy()
    logits[[model.config.pad_id, BOS_ID]] = -np.inf
    return logits - np.logaddexp.reduce(logits)


def chi_square(counts, probs):
    """Pearson's statistic, bins of expected count < 5 pooled, and its 0.1% critical value
    (Wilson-Hilferty approximation of the chi-square quantile)."""
    expected = probs * counts.sum()
    small = expected < 5
    observed = np.append(counts[~small], counts[small].sum())
    expected = np.append(expected[~small], expected[small].sum())
    keep = expected > 0
    statistic = float(np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep]))
    df = int(keep.sum()) - 1
    z = 3.09  # the standard normal's 99.9% quantile
    critical = df * (1 - 2 / (9 * df) + z * np.sqrt(2 / (9 * df))) ** 3
    return statistic, critical


def sampled_first_tokens(model, temperature, seed=3):
    sources = np.repeat(SOURCES[:1], DRAWS, axis=0)
    sequences, _ = search.translate_ids(model, sources, max_decode_length=1,
                                        sampling=SamplingConfig(temperature=temperature, seed=seed))
    return np.bincount(sequences.numpy()[:, 0, 0], minlength=model.config.output_vocab_size)


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_first_tokens_follow_the_tempered_softmax_and_a_wrong_temperature_fails(temperature):
    model = make_model()
    log_probs = first_step_log_probs(model, SOURCES[0])
    counts = sampled_first_tokens(model, temperature)

    def tempered(t):
        scaled = log_probs / t
        return np.exp(scaled - np.logaddexp.reduce(scaled))

    statistic, critical = chi_square(counts, tempered(temperature))
    assert statistic < critical, (statistic, critical)
    assert np.count_nonzero(counts) > 3  # a real spread, not one token
    for wrong in (temperature * 0.7, temperature * 1.3):  # 30% off is rejected
        statistic, critical = chi_square(counts, tempered(wrong))
        assert statistic > critical, (wrong, statistic, critical)


def teacher_forced(model, sources, sequences):
    """Per output token: log P(y_t | y_<t, X) of every vocabulary entry (B, T, V), PAD/BOS out,
    from the full causal forward pass (not the search's cache)."""
    logits = model((tf.constant(sources), decoder_inputs(sequences)), training=False).numpy()
    logits[..., [model.config.pad_id, BOS_ID]] = -np.inf
    return logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)


def sampled(model, config, copies=40):
    sources = np.repeat(SOURCES, copies, axis=0)
    sequences, scores = search.translate_ids(model, sources, max_extra_length=6, sampling=config)
    return sources, sequences.numpy()[:, 0], scores.numpy()[:, 0]


def output_steps(sequences):
    """(row, t) of every output token (EOS included, padding excluded)."""
    return [(b, t) for b in range(sequences.shape[0]) for t in range(sequences.shape[1]) if sequences[b, t] != 0]


def test_top_k_never_leaves_the_k_most_probable_tokens():
    model = make_model()
    sources, sequences, _ = sampled(model, SamplingConfig(topk=2, temperature=3.0, seed=5))
    log_probs = teacher_forced(model, sources, sequences)
    ranks = []
    for b, t in output_steps(sequences):
        ranks.append(int(np.sum(log_probs[b, t] > log_probs[b, t, sequences[b, t]])))
    assert max(ranks) <= 1
    assert ranks.count(1) > len(ranks) // 10  # the second token is drawn too (a hot temperature)


def test_top_p_never_picks_a_token_outside_the_smallest_nucleus():
    model = make_model()
    topp = 0.6
    sources, sequences, _ = sampled(model, SamplingConfig(topp=topp, seed=11))
    probs = np.exp(teacher_forced(model, sources, sequences))
    outside_top_1 = 0
    for b, t in output_steps(sequences):
        row, token = probs[b, t], sequences[b, t]
        before = row[row > row[token]].sum()  # the mass of the more probable tokens
        assert before < topp + 1e-5
        outside_top_1 += before > 0
    assert outside_top_1 > 0  # the nucleus held more than the argmax somewhere


def test_the_choice_of_tokens_on_a_fixed_table():
    # Probabilities .5 .3 .15 .05 and id 4 ruled out (NEG_INF): p = 0.75 keeps the first two,
    # p = 0.85 the first three (0.5 + 0.3 < 0.85), k = 3 the first three.
    table = np.append(np.log(np.array([0.5, 0.3, 0.15, 0.05], np.float32)), bs.NEG_INF)[None, :].astype(np.float32)
    rows = np.repeat(table, 3000, axis=0)

    def drawn(topk, topp, temperature=1.0):
        n = rows.shape[0]
        tokens = sampling.choose_tokens(tf.constant(rows), tf.fill([n], topk), tf.fill([n], topp),
                                        tf.fill([n], temperature), tf.constant([1, 2], tf.int64))
        return set(tokens.numpy().tolist())

    assert drawn(0, 0.75) == {0, 1}
    assert drawn(0, 0.85) == {0, 1, 2}
    assert drawn(3, 1.0) == {0, 1, 2}
    assert drawn(0, 1.0) == {0, 1, 2, 3}
    assert drawn(0, 1.0, temperature=0.0) == {0}
    assert drawn(1, 1.0) == {0}


def test_same_seed_same_output_eagerly_and_traced_another_seed_another():
    model = make_model()
    config = SamplingConfig(topk=0, temperature=1.5, seed=42)
    sources = np.repeat(SOURCES, 4, axis=0)
    first = search.translate_ids(model, sources, max_extra_length=6, sampling=config)
    again = search.translate_ids(model, sources, max_extra_length=6, sampling=config)
    traced = tf.function(lambda s, seed: search.translate_ids(
        model, s, max_extra_length=6, sampling=SamplingConfig(topk=tf.constant(0), topp=tf.constant(1.0),
                                                              temperature=tf.constant(1.5), seed=seed)))(
        tf.constant(sources), tf.constant(42, tf.int64))
    other = search.translate_ids(model, sources, max_extra_length=6, sampling=SamplingConfig(temperature=1.5, seed=43))
    for result in (again, traced):
        np.testing.assert_array_equal(first[0], result[0])
        np.testing.assert_allclose(first[1], result[1], rtol=1e-6)
    assert not np.array_equal(first[0].numpy(), other[0].numpy()[:, :, : first[0].shape[2]]) or \
        first[0].shape != other[0].shape
    assert len({tuple(row) for row in first[0].numpy()[:, 0]}) > len(SOURCES)  # copies differ


@pytest.mark.parametrize("config", [SamplingConfig(temperature=0.0, seed=9), SamplingConfig(topk=1, seed=9)])
def test_temperature_zero_and_top_1_are_greedy_search(config):
    model = make_model()
    greedy = search.translate_ids(model, SOURCE, beam_size=1, max_extra_length=6)
    drawn = search.translate_ids(model, SOURCE, max_extra_length=6, sampling=config)
    np.testing.assert_array_equal(greedy[0], drawn[0])
    np.testing.assert_allclose(greedy[1], drawn[1], rtol=1e-6)


def sequence_log_probs(model, sources, sequences):
    """log P(Y) teacher-forced, as the search counts it (PAD and BOS ruled out): (B,)."""
    log_probs = teacher_forced(model, sources, sequences)
    picked = np.take_along_axis(log_probs, sequences[..., None], axis=-1)[..., 0]
    return np.where(sequences != 0, picked, 0.0).sum(axis=1)


def test_a_sample_scores_its_log_probability_under_the_model():
    model = make_model()
    sources, sequences, scores = sampled(model, SamplingConfig(topk=5, temperature=2.0, seed=1), copies=3)
    np.testing.assert_allclose(scores, sequence_log_probs(model, sources, sequences), rtol=1e-4, atol=1e-4)


def test_an_empty_source_samples_nothing_and_the_limit_holds():
    model = make_model()
    sequences, scores = search.translate_ids(model, SOURCE, max_extra_length=2,
                                             sampling=SamplingConfig(temperature=5.0, seed=2))
    lengths = np.count_nonzero(sequences.numpy()[:, 0], axis=1)
    limits = search.max_decode_lengths(model, SOURCE, 2).numpy()
    assert np.all(lengths <= limits)
    assert lengths[2] == 0 and scores.numpy()[2, 0] == 0.0
