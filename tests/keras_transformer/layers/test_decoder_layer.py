"""The decoder layer: causality, cached decoding equal to the full pass (outputs and cache), the static memory."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.layers import DecoderLayer
from tests.helpers.layer_checks import check_layer

ARGS = dict(num_heads=2, key_dim=8, value_dim=8, d_ff=32, dropout_rate=0.0)
B, T, S, D = 2, 5, 4, 16


def _inputs():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(B, T, D)).astype("float32")
    encoder_outputs = rng.normal(size=(B, S, D)).astype("float32")
    source_mask = np.array([[True] * S, [True, True, False, False]])
    return x, encoder_outputs, source_mask


def test_contract():
    x, encoder_outputs, source_mask = _inputs()
    # two attentions 16 + feed-forward 4 + three LayerNorms 6
    check_layer(
        lambda: DecoderLayer(**ARGS),
        lambda layer: layer(x, encoder_outputs, source_mask=source_mask),
        (B, T, D),
        26,
        zero_gradient=("key/bias",),  # softmax is shift-invariant: see test_multi_head_attention
    )


def test_changing_position_t_leaves_earlier_outputs_unchanged():
    x, encoder_outputs, source_mask = _inputs()
    layer = DecoderLayer(**ARGS)
    before = layer(x, encoder_outputs, source_mask=source_mask).numpy()
    changed = x.copy()
    changed[:, 3] += 5.0
    after = layer(changed, encoder_outputs, source_mask=source_mask).numpy()
    np.testing.assert_allclose(after[:, :3], before[:, :3], atol=1e-6)
    assert not np.allclose(after[:, 3:], before[:, 3:])


def test_cached_steps_equal_the_full_pass_outputs_and_cache():
    x, encoder_outputs, source_mask = _inputs()
    layer = DecoderLayer(**ARGS)
    full = layer(x, encoder_outputs, source_mask=source_mask)
    memory = layer.init_memory(encoder_outputs)
    # The same pass written into a cache at once (a "prefill" at index 0) ...
    prefill, prefill_cache = layer(
        x, source_mask=source_mask, cache=layer.init_cache(B, T), memory=memory, cache_index=0
    )
    # ... and one token at a time.
    cache = layer.init_cache(B, T)
    steps = []
    for t in range(T):
        y, cache = layer(x[:, t : t + 1], source_mask=source_mask, cache=cache, memory=memory, cache_index=t)
        steps.append(y)
    np.testing.assert_allclose(tf.concat(steps, 1), full, atol=1e-5)
    np.testing.assert_allclose(prefill, full, atol=1e-5)
    assert set(cache) == {"key", "value"}
    for name in ("key", "value"):
        np.testing.assert_allclose(cache[name], prefill_cache[name], atol=1e-5)
    # The cache holds the self-attention keys and values of the layer's input (its W^K, W^V).
    keys = tf.transpose(layer.self_attention.key_dense(x), [0, 2, 1, 3])  # (B, h, T, d_k)
    np.testing.assert_allclose(cache["key"], keys, atol=1e-5)


def test_a_cache_without_memory_projects_the_encoder_output_each_step():
    x, encoder_outputs, source_mask = _inputs()
    layer = DecoderLayer(**ARGS)
    full = layer(x, encoder_outputs, source_mask=source_mask)
    y, _ = layer(x, encoder_outputs, source_mask=source_mask, cache=layer.init_cache(B, T), cache_index=0)
    np.testing.assert_allclose(y, full, atol=1e-5)
    # A memory in the full causal pass (no cache) is the projected encoder output: the same outputs.
    with_memory = layer(x, source_mask=source_mask, memory=layer.init_memory(encoder_outputs))
    np.testing.assert_allclose(with_memory, full, atol=1e-6)


def test_init_cache_and_init_memory_shapes_dtypes_and_values():
    _, encoder_outputs, _ = _inputs()
    layer = DecoderLayer(num_heads=2, key_dim=8, value_dim=4, d_ff=32, dropout_rate=0.0)
    layer(np.zeros((B, 1, D), "float32"), encoder_outputs)  # build
    cache = layer.init_cache(B, 7)
    assert cache["key"].shape == (B, 2, 7, 8) and cache["value"].shape == (B, 2, 7, 4)
    assert cache["key"].dtype == tf.float32 and not np.any(cache["key"].numpy())
    memory = layer.init_memory(encoder_outputs)
    # Keys transposed, (B, h, d_k, S), as Q K^T reads them; values head-major (B, h, S, d_v).
    assert memory["key"].shape == (B, 2, 8, S) and memory["value"].shape == (B, 2, S, 4)
    keys = tf.reshape(layer.cross_attention.key_dense(encoder_outputs), (B, S, 2, 8))
    np.testing.assert_allclose(memory["key"], tf.transpose(keys, [0, 2, 3, 1]), atol=1e-6)
    expected = layer.cross_attention.project_key_value(tf.constant(encoder_outputs))
    for name in ("key", "value"):
        np.testing.assert_array_equal(memory[name], expected[name])
    values = tf.transpose(layer.cross_attention.value_dense(encoder_outputs), [0, 2, 1, 3])  # (B, h, S, d_v)
    np.testing.assert_allclose(memory["value"], values, atol=1e-5)


def test_the_memory_is_not_changed_by_a_step_nor_returned():
    x, encoder_outputs, source_mask = _inputs()
    layer = DecoderLayer(**ARGS)
    layer(x, encoder_outputs)  # build
    memory = layer.init_memory(encoder_outputs)
    before = {name: tensor.numpy().copy() for name, tensor in memory.items()}
    outputs = layer(x[:, :1], source_mask=source_mask, cache=layer.init_cache(B, T), memory=memory, cache_index=0)
    assert len(outputs) == 2 and set(outputs[1]) == {"key", "value"}  # (y, self cache): no memory
    for name in ("key", "value"):
        np.testing.assert_array_equal(memory[name], before[name])


def test_a_cache_needs_an_index_and_the_cross_attention_an_input():
    x, encoder_outputs, source_mask = _inputs()
    layer = DecoderLayer(**ARGS)
    layer(x, encoder_outputs)  # build
    with pytest.raises(ValueError, match="cache_index"):
        layer(x, encoder_outputs, cache=layer.init_cache(B, T))
    with pytest.raises(ValueError, match="init_memory"):
        layer(x, source_mask=source_mask)


def test_attention_scores_are_returned_and_causal():
    x, encoder_outputs, source_mask = _inputs()
    _, scores = DecoderLayer(**ARGS)(x, encoder_outputs, source_mask=source_mask, return_attention_scores=True)
    assert scores["self"].shape == (B, 2, T, T) and scores["cross"].shape == (B, 2, T, S)
    assert np.all(np.triu(scores["self"].numpy()[0, 0], k=1) == 0.0)
    assert np.all(scores["cross"].numpy()[1, :, :, 2:] == 0.0)
