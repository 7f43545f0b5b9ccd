"""The decoder layer: causality and cached decoding equal to the full pass (outputs and cache)."""

import numpy as np
import tensorflow as tf

from keras_transformer.layers import DecoderLayer
from layer_checks import check_layer

ARGS = dict(num_heads=2, key_dim=8, value_dim=8, d_ff=32, dropout_rate=0.0)
B, T, S, D = 2, 5, 4, 16


def _inputs():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(B, T, D)).astype("float32")
    memory = rng.normal(size=(B, S, D)).astype("float32")
    source_mask = np.array([[True] * S, [True, True, False, False]])
    return x, memory, source_mask


def test_contract():
    x, memory, source_mask = _inputs()
    # two attentions 16 + feed-forward 4 + three LayerNorms 6
    check_layer(
        lambda: DecoderLayer(**ARGS),
        lambda layer: layer(x, memory, source_mask=source_mask),
        (B, T, D),
        26,
        zero_gradient=("key/bias",),  # softmax is shift-invariant: see test_multi_head_attention
    )


def test_changing_position_t_leaves_earlier_outputs_unchanged():
    x, memory, source_mask = _inputs()
    layer = DecoderLayer(**ARGS)
    before = layer(x, memory, source_mask=source_mask).numpy()
    changed = x.copy()
    changed[:, 3] += 5.0
    after = layer(changed, memory, source_mask=source_mask).numpy()
    np.testing.assert_allclose(after[:, :3], before[:, :3], atol=1e-6)
    assert not np.allclose(after[:, 3:], before[:, 3:])


def test_cached_steps_equal_the_full_pass_outputs_and_cache():
    x, memory, source_mask = _inputs()
    layer = DecoderLayer(**ARGS)
    full = layer(x, memory, source_mask=source_mask)
    # The same pass written into a cache at once (a "prefill" at index 0) ...
    prefill, prefill_cache = layer(x, source_mask=source_mask, cache=layer.init_cache(memory, T), cache_index=0)
    # ... and one token at a time.
    cache = layer.init_cache(memory, T)
    steps = []
    for t in range(T):
        y, cache = layer(x[:, t : t + 1], source_mask=source_mask, cache=cache, cache_index=t)
        steps.append(y)
    np.testing.assert_allclose(tf.concat(steps, 1), full, atol=1e-5)
    np.testing.assert_allclose(prefill, full, atol=1e-5)
    for name in ("key", "value"):
        np.testing.assert_allclose(cache["self"][name], prefill_cache["self"][name], atol=1e-5)


def test_attention_scores_are_returned_and_causal():
    x, memory, source_mask = _inputs()
    _, scores = DecoderLayer(**ARGS)(x, memory, source_mask=source_mask, return_attention_scores=True)
    assert scores["self"].shape == (B, 2, T, T) and scores["cross"].shape == (B, 2, T, S)
    assert np.all(np.triu(scores["self"].numpy()[0, 0], k=1) == 0.0)
    assert np.all(scores["cross"].numpy()[1, :, :, 2:] == 0.0)
