"""Ids in, ids out: the cache changes nothing, the length rule holds, PAD and BOS never come out."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer, TransformerConfig
from keras_transformer.decoding import search
from keras_transformer.decoding import beam_search as bs
from keras_transformer.special_ids import BOS_ID

VOCAB = 40
# Rows: ids then EOS (3), PAD-padded; the third row is empty.
SOURCE = np.array([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0], [0, 0, 0, 0, 0], [11, 12, 13, 3, 0]], np.int32)


def make_model(**overrides):
    keras.utils.set_random_seed(7)
    model = Transformer(TransformerConfig.tiny(vocab_size=VOCAB, max_length=16, **overrides))
    model.build()
    # Sharper, less repetitive distributions than the initial weights give.
    for variable in model.variables:
        if "embedding" in variable.path:
            variable.assign(variable * 3.0)
    return model


@pytest.mark.parametrize("beam_size", [1, 4])
def test_cached_decoding_equals_full_prefix_decoding(beam_size):
    model = make_model()
    args = dict(beam_size=beam_size, alpha=0.6, max_extra_length=6, n_best=beam_size)
    cached = search.translate_ids(model, SOURCE, **args)
    uncached = search.translate_ids(model, SOURCE, use_cache=False, **args)
    np.testing.assert_array_equal(cached[0], uncached[0])
    np.testing.assert_allclose(cached[1], uncached[1], rtol=1e-5)
    assert len({tuple(row) for row in cached[0].numpy()[:, 0]}) > 1  # not one repeated output


def test_cached_step_equals_full_prefix_step_under_tf_function():
    model = make_model()
    encoder_outputs, source_mask = model.encode(SOURCE)
    results = []
    for use_cache in (True, False):
        fn, cache, memory = search.step_fn(model, encoder_outputs, source_mask, 5, use_cache=use_cache)
        step = tf.function(fn)
        logits = []
        for t, token in enumerate([2, 17, 21, 30]):
            out, cache = step(tf.fill([4], token), tf.constant(t), cache, memory)
            logits.append(out)
        results.append(np.stack(logits))
    allowed = [i for i in range(VOCAB) if i not in (0, 2)]
    # The rows with a source; an empty one's logits are undefined (a search gives it no output).
    sources = [0, 1, 3]
    np.testing.assert_allclose(results[0][:, sources][..., allowed], results[1][:, sources][..., allowed], atol=1e-5)
    for logits in results:  # PAD and BOS ruled out either way (by a bias in the cached path)
        assert np.all(logits[..., [0, 2]] <= bs.NEG_INF / 2)


def test_the_search_cache_is_the_per_step_part_and_each_beam_reads_its_sentence_memory():
    model = make_model()
    encoder_outputs, source_mask = model.encode(SOURCE)
    beam = 3
    fn, cache, memory = search.step_fn(model, encoder_outputs, source_mask, 5)
    # What beam search expands once and reorders only when sentences leave: the model's memory.
    tf.nest.assert_same_structure(memory, model.init_memory(encoder_outputs, source_mask))
    # What beam search expands and reorders: the self-attention keys/values only, one row per
    # sentence, empty at first and grown by each step.
    expected = model.init_cache(4, 0)
    tf.nest.assert_same_structure(cache, expected)
    assert [t.shape for t in tf.nest.flatten(cache)] == [t.shape for t in tf.nest.flatten(expected)]
    beams = tf.nest.map_structure(lambda t: tf.repeat(t, beam, axis=0), cache)  # as beam_search does
    beam_memory = tf.nest.map_structure(lambda t: tf.repeat(t, beam, axis=0), memory)
    logits, new_cache = fn(tf.fill([4 * beam], 2), tf.constant(0), beams, beam_memory)
    tf.nest.assert_same_structure(new_cache, beams)
    assert {t.shape[2] for t in tf.nest.flatten(new_cache)} == {1}
    memory = model.init_memory(encoder_outputs, source_mask)
    reference, _ = model.decode_step(tf.fill([4], 2), 0, model.init_cache(4, 5), memory)
    allowed = [i for i in range(VOCAB) if i not in (0, 2)]  # PAD and BOS are masked by fn
    for b in range(beam):
        np.testing.assert_allclose(tf.gather(logits[b::beam], allowed, axis=1),
                                   tf.gather(reference, allowed, axis=1), atol=1e-5)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_a_sentence_decodes_the_same_in_a_batch_and_alone(beam_size):
    # Sentences leave the batch when done (their cache and memory rows are dropped): what the
    # others get must not depend on when that happens.
    model = make_model()
    args = dict(beam_size=beam_size, alpha=0.6, max_extra_length=6, n_best=beam_size)
    batch = search.translate_ids(model, SOURCE, **args)
    lengths = np.count_nonzero(batch[0].numpy()[:, 0], axis=1)
    assert len(set(lengths[[0, 1, 3]])) > 1  # they do leave at different steps
    for row in range(len(SOURCE)):
        alone = search.translate_ids(model, SOURCE[row : row + 1], **args)
        width = alone[0].shape[2]
        np.testing.assert_array_equal(batch[0][row, :, :width], alone[0][0])
        assert not np.any(batch[0][row, :, width:])
        np.testing.assert_allclose(batch[1][row], alone[1][0], rtol=1e-5)


def test_length_rule_and_empty_rows():
    model = make_model()
    limits = search.max_decode_lengths(model, SOURCE, max_extra_length=50)
    np.testing.assert_array_equal(limits, [55, 53, 0, 54])  # source tokens (EOS included) + 50
    learned = make_model(positional_encoding="learned")
    np.testing.assert_array_equal(search.max_decode_lengths(learned, SOURCE, 50), [16, 16, 0, 16])

    sequences, scores = search.translate_ids(model, SOURCE, max_extra_length=2, n_best=2)
    lengths = np.count_nonzero(sequences.numpy(), axis=2)  # (B, n_best)
    assert (lengths <= np.array([7, 5, 0, 6])[:, None]).all()
    assert lengths[2].tolist() == [0, 0] and scores[2].numpy().tolist() == [0.0, 0.0]


def test_pad_and_bos_are_never_produced():
    model = make_model()
    # Make PAD and BOS the most likely tokens: the search must still avoid them.
    embedding = model.target_embedding.embeddings
    embedding.assign(tf.tensor_scatter_nd_update(embedding, [[0], [2]], 50.0 * tf.ones([2, 16])))
    sequences, _ = search.translate_ids(model, SOURCE, beam_size=2, max_extra_length=3)
    for row in sequences.numpy()[:, 0]:
        tokens = row[: np.count_nonzero(row)]
        assert 0 not in tokens and 2 not in tokens


def test_traced_equals_eager_and_empty_batch():
    model = make_model()
    traced = tf.function(lambda ids: search.translate_ids(model, ids, max_extra_length=4))
    eager = search.translate_ids(model, SOURCE, max_extra_length=4)
    np.testing.assert_array_equal(traced(tf.constant(SOURCE))[0], eager[0])
    sequences, scores = traced(tf.zeros([0, 5], tf.int32))
    assert sequences.shape == (0, 1, 0) and scores.shape == (0, 1)


def test_cross_attention_shape_and_rows_sum_to_one():
    model = make_model()
    sequences, _ = search.translate_ids(model, SOURCE, max_extra_length=3)
    attention = search.cross_attention(model, SOURCE, sequences[:, 0]).numpy()
    assert attention.shape == (4, 2, 2, sequences.shape[2], 5)
    np.testing.assert_allclose(attention[0].sum(-1), 1.0, rtol=1e-5)
    assert (attention[1][..., 3:] == 0).all()  # no weight on source padding


# Forced target prefixes --------------------------------------------------------------------

# One prefix per SOURCE row, -1-padded: two tokens, none, one (the empty source), three.
PREFIX = np.array([[17, 21, -1], [-1, -1, -1], [30, -1, -1], [25, 5, 9]], np.int32)


def prefix_of(row):
    return [t for t in PREFIX[row] if t >= 0]


def masked_log_probs(model, source_ids, decoder_input_ids):
    """The full causal decoder's last-position log-probs, PAD and BOS ruled out as in the search."""
    logits = model((tf.constant(source_ids), tf.constant(decoder_input_ids)), training=False)[:, -1].numpy()
    logits[:, [0, 2]] = -np.inf
    return logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_every_prefixed_output_starts_with_its_prefix(beam_size):
    model = make_model()
    sequences, _ = search.translate_ids(model, SOURCE, beam_size=beam_size, n_best=beam_size, max_extra_length=6,
                                        target_prefix=PREFIX)
    for row in (0, 1, 3):  # the empty source decodes nothing, prefix or not
        prefix = prefix_of(row)
        for hypothesis in sequences.numpy()[row]:
            assert list(hypothesis[: len(prefix)]) == prefix
    assert not sequences.numpy()[2].any()
    plain = search.translate_ids(model, SOURCE, beam_size=beam_size, n_best=beam_size, max_extra_length=6)
    np.testing.assert_array_equal(sequences.numpy()[1], plain[0].numpy()[1, :, : sequences.shape[2]])


def test_greedy_with_a_prefix_is_the_teacher_forced_argmax_after_it():
    model = make_model()
    sequences, scores = search.translate_ids(model, SOURCE, beam_size=1, max_extra_length=6, target_prefix=PREFIX)
    limits = search.max_decode_lengths(model, SOURCE, 6).numpy()
    for row in (0, 1, 3):
        tokens, log_prob = prefix_of(row), 0.0
        for t in range(len(tokens)):  # the prefix's own log-probability
            log_prob += masked_log_probs(model, SOURCE[row: row + 1], [[BOS_ID] + tokens[:t]])[0, tokens[t]]
        while tokens[-1:] != [3] and len(tokens) < limits[row]:
            step = masked_log_probs(model, SOURCE[row: row + 1], [[BOS_ID] + tokens])[0]
            tokens.append(int(np.argmax(step)))
            log_prob += step[tokens[-1]]
        got = sequences.numpy()[row, 0]
        assert list(got[: len(tokens)]) == tokens and not got[len(tokens):].any()
        np.testing.assert_allclose(scores.numpy()[row, 0], log_prob, rtol=1e-4)


def test_a_beam_score_counts_the_prefix_in_log_p_and_in_the_length():
    model = make_model()
    sequences, scores = search.translate_ids(model, SOURCE, beam_size=4, alpha=0.6, n_best=4, max_extra_length=6,
                                             target_prefix=PREFIX)
    for row in (0, 3):
        for hypothesis, score in zip(sequences.numpy()[row], scores.numpy()[row]):
            tokens = [t for t in hypothesis if t]
            log_prob = sum(masked_log_probs(model, SOURCE[row: row + 1], [[BOS_ID] + tokens[:t]])[0, tokens[t]]
                           for t in range(len(tokens)))
            np.testing.assert_allclose(score, log_prob / bs.length_penalty(len(tokens), 0.6).numpy(), rtol=1e-4)


def test_a_prefix_longer_than_the_limit_is_cut_there():
    model = make_model()
    long = np.tile(np.arange(5, 25, dtype=np.int32), (len(SOURCE), 1))  # 20 tokens, limits 5 + 2 at most
    limits = search.max_decode_lengths(model, SOURCE, 2).numpy()
    for beam_size in (1, 3):
        sequences, scores = search.translate_ids(model, SOURCE, beam_size=beam_size, max_extra_length=2,
                                                 target_prefix=long)
        for row, limit in enumerate(limits):
            np.testing.assert_array_equal(sequences.numpy()[row, 0, :limit], long[row, :limit])
            assert not sequences.numpy()[row, 0, limit:].any()
        assert np.all(scores.numpy()[[0, 1, 3], 0] < 0)


def test_a_prefix_under_tf_function_equals_eager_and_a_tree_constraint_refuses_it():
    model = make_model()
    eager = search.translate_ids(model, SOURCE, beam_size=4, max_extra_length=6, target_prefix=PREFIX)
    traced = tf.function(lambda s, p: search.translate_ids(model, s, beam_size=4, max_extra_length=6,
                                                           target_prefix=p))(tf.constant(SOURCE), tf.constant(PREFIX))
    np.testing.assert_array_equal(eager[0], traced[0])
    np.testing.assert_allclose(eager[1], traced[1], rtol=1e-5)
    with pytest.raises(ValueError, match="prefix"):
        search.translate_ids(model, SOURCE, target_prefix=PREFIX, grammar=object())
