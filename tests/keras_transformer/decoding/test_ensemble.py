"""Ensembles: a model with itself is the model; two models average their probabilities per step."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer, TransformerConfig
from keras_transformer.decoding import search, sequence_scores
from keras_transformer.decoding.ensemble import Ensemble
from keras_transformer.special_ids import BOS_ID, EOS_ID

VOCAB = 30


def tiny_model(seed, **overrides):
    keras.utils.set_random_seed(seed)
    model = Transformer(TransformerConfig.tiny(**{"vocab_size": VOCAB, "max_length": 16, **overrides}))
    model.build()
    return model


SOURCE = np.array([[5, 6, 7, 8, EOS_ID], [9, 10, EOS_ID, 0, 0], [0, 0, 0, 0, 0]], np.int32)  # the last: empty


def test_an_ensemble_of_a_model_with_itself_is_the_model():
    model = tiny_model(0)
    ensemble = Ensemble([model, model])
    for beam_size in (1, 3):
        expected = search.translate_ids(model, SOURCE, beam_size=beam_size, alpha=0.6, max_extra_length=4)
        got = search.translate_ids(ensemble, SOURCE, beam_size=beam_size, alpha=0.6, max_extra_length=4)
        np.testing.assert_array_equal(got[0].numpy(), expected[0].numpy())
        np.testing.assert_allclose(got[1].numpy(), expected[1].numpy(), rtol=1e-5, atol=1e-5)
    targets = np.array([[11, 12, EOS_ID], [13, EOS_ID, 0], [EOS_ID, 0, 0]], np.int32)
    source = np.where(SOURCE[:, :1] == 0, EOS_ID, SOURCE)  # every row scorable
    expected = sequence_scores.sequence_log_probs(model, source, targets)
    got = sequence_scores.sequence_log_probs(ensemble, source, targets)
    np.testing.assert_allclose(got[0].numpy(), expected[0].numpy(), rtol=1e-5)
    np.testing.assert_array_equal(got[1].numpy(), expected[1].numpy())


def hand_mean(models, source, prefix, every_position=False):
    """log((p_a + p_b) / 2) at the last position of `prefix` `(B, V)` (with `every_position`, at each
    `(B, T, V)`), each p the softmax of a full teacher-forced pass with PAD and BOS excluded (as
    the search excludes them), float64."""
    probabilities = []
    for model in models:
        logits = model((source, prefix), training=False).numpy().astype(np.float64)  # (B, T, V)
        logits[..., [0, BOS_ID]] = -np.inf
        logits -= logits.max(axis=-1, keepdims=True)
        probabilities.append(np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True))
    with np.errstate(divide="ignore"):
        mean = np.log(np.mean(probabilities, axis=0))
    return mean if every_position else mean[:, -1]


def test_two_different_models_decode_greedily_by_the_mean_of_their_probabilities():
    """Members of different shapes; each greedy token is the argmax of the hand-computed mean of
    the two models' probabilities given the tokens before it, and the score sums their logs."""
    models = [tiny_model(1), tiny_model(2, num_layers=1, d_model=32, d_ff=64, num_heads=4)]
    ensemble = Ensemble(models)
    source = SOURCE[:2]
    sequences, scores = search.translate_ids(ensemble, source, beam_size=1, max_extra_length=3)
    sequences = sequences[:, 0].numpy()
    first = hand_mean(models, source, np.full([2, 1], BOS_ID, np.int32))
    fn, cache, memory = search.step_fn(ensemble, *ensemble.encode(source), 8)
    step_log_probs, _ = fn(tf.fill([2], BOS_ID), 0, cache, memory)
    step_log_probs = tf.nn.log_softmax(step_log_probs).numpy()
    finite = np.isfinite(first)
    np.testing.assert_allclose(step_log_probs[finite], first[finite], rtol=1e-5, atol=1e-5)
    for row in range(2):
        total, prefix = 0.0, [BOS_ID]
        for token in sequences[row]:
            if token == 0:
                break
            mean = hand_mean(models, source[row:row + 1], np.array([prefix], np.int32))[0]
            assert token == int(np.argmax(mean))
            total += mean[token]
            prefix.append(int(token))
        np.testing.assert_allclose(float(scores[row, 0]), total, rtol=1e-5)


def test_members_of_different_vocabularies_are_refused():
    with pytest.raises(ValueError, match="vocab_size=31"):
        Ensemble([tiny_model(0), Transformer(TransformerConfig.tiny(vocab_size=VOCAB + 1))])
    with pytest.raises(ValueError, match="at least one"):
        Ensemble([])


def test_the_length_rule_respects_every_members_position_table():
    models = [tiny_model(0), tiny_model(1, positional_encoding="learned", max_length=8)]
    ensemble = Ensemble(models)
    assert ensemble.config.max_length == 8 and ensemble.config.positional_encoding == "learned"
    sequences, _ = search.translate_ids(ensemble, SOURCE[:1], beam_size=2, max_extra_length=50)
    assert sequences.shape[-1] == 8  # 5 + 50 without the learned member's table (random weights: no EOS)
