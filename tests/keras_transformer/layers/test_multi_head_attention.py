"""MultiHeadAttention against equation (1), against Keras' own layer, and with a cache."""

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.layers import MultiHeadAttention, causal_mask
from keras_transformer.layers.multi_head_attention import masked_softmax
from tests.helpers.layer_checks import check_layer

B, T, S, D, H, DK = 2, 5, 6, 16, 2, 8


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(B, T, D)).astype("float32")
    value = rng.normal(size=(B, S, D)).astype("float32")
    return query, value


def _numpy_attention(layer, query, value, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V per head, then W^O, from the layer's own weights in NumPy."""
    wq, bq = layer.query_dense.get_weights()  # (D, H, DK), (H, DK)
    wk, bk = layer.key_dense.get_weights()
    wv, bv = layer.value_dense.get_weights()
    wo, bo = layer.output_dense.get_weights()  # (H, DV, D), (D,)
    q = np.einsum("btd,dhk->bhtk", query, wq) + bq[None, :, None, :]
    k = np.einsum("btd,dhk->bhtk", value, wk) + bk[None, :, None, :]
    v = np.einsum("btd,dhk->bhtk", value, wv) + bv[None, :, None, :]
    logits = q @ k.transpose(0, 1, 3, 2) / np.sqrt(layer.key_dim)  # (B, H, T, S)
    if mask is not None:
        logits = np.where(mask[:, None], logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    heads = weights @ v  # (B, H, T, DV)
    return np.einsum("bhtk,hkd->btd", heads, wo) + bo, weights


def test_layer_contract():
    query, value = _inputs()
    check_layer(
        lambda: MultiHeadAttention(num_heads=H, key_dim=DK),
        lambda layer: layer(query, value),
        expected_shape=(B, T, D),
        expected_num_weights=8,
        # The key bias adds q . b_K to every logit of a query's row, and softmax is
        # invariant to that shift: its gradient is zero (and it is kept only for
        # weight compatibility with keras.layers.MultiHeadAttention).
        zero_gradient=("key/bias",),
    )


def test_equals_numpy_scaled_dot_product_attention():
    query, value = _inputs()
    mask = np.ones((B, T, S), bool)
    mask[0, :, 4:] = False  # the first sentence has 4 real keys
    layer = MultiHeadAttention(num_heads=H, key_dim=DK, value_dim=4)
    outputs, weights = layer(query, value, attention_mask=mask, return_attention_scores=True)
    expected_outputs, expected_weights = _numpy_attention(layer, query, value, mask)
    np.testing.assert_allclose(weights, expected_weights, atol=1e-6)
    np.testing.assert_allclose(outputs, expected_outputs, atol=1e-5)


def test_masked_positions_get_exactly_zero_weight():
    query, value = _inputs()
    mask = np.ones((B, T, S), bool)
    mask[0, :, 3:] = False
    mask[1, 2, :] = False  # a query that may see nothing at all
    layer = MultiHeadAttention(num_heads=H, key_dim=DK)
    _, weights = layer(query, value, attention_mask=mask, return_attention_scores=True)
    weights = weights.numpy()
    assert np.all(weights[0, :, :, 3:] == 0.0)
    assert np.all(weights[1, :, 2, :] == 0.0)  # all-masked row: zeros, not NaN
    np.testing.assert_allclose(weights[0, :, :, :3].sum(-1), 1.0, atol=1e-6)


def test_causal_mask_is_the_lower_triangle():
    np.testing.assert_array_equal(
        causal_mask(3).numpy(),
        [[True, False, False], [True, True, False], [True, True, True]],
    )
    # One step at position 2 with a cache of 4 positions sees positions 0, 1, 2.
    np.testing.assert_array_equal(causal_mask(1, 4, 2).numpy(), [[True, True, True, False]])


def test_same_outputs_as_keras_multi_head_attention():
    query, value = _inputs()
    mask = np.ones((B, T, S), bool)
    mask[1, :, 2:] = False
    ours = MultiHeadAttention(num_heads=H, key_dim=DK, value_dim=4)
    ours(query, value)
    theirs = keras.layers.MultiHeadAttention(num_heads=H, key_dim=DK, value_dim=4)
    theirs(query, value)
    for source, target in [
        (ours.query_dense, theirs._query_dense),
        (ours.key_dense, theirs._key_dense),
        (ours.value_dense, theirs._value_dense),
        (ours.output_dense, theirs._output_dense),
    ]:
        target.set_weights(source.get_weights())
    np.testing.assert_allclose(
        ours(query, value, attention_mask=mask), theirs(query, value, attention_mask=mask), atol=1e-5
    )


def test_cached_steps_equal_the_full_causal_pass():
    query, _ = _inputs()
    layer = MultiHeadAttention(num_heads=H, key_dim=DK)
    full = layer(query, query, attention_mask=causal_mask(T)[None])
    cache = {"key": tf.zeros((B, H, T, DK)), "value": tf.zeros((B, H, T, DK))}
    steps = []
    for t in range(T):
        x = query[:, t : t + 1]
        out, cache = layer(x, x, attention_mask=causal_mask(1, T, t)[None], cache=cache, cache_index=t)
        steps.append(out)
    np.testing.assert_allclose(tf.concat(steps, axis=1), full, atol=1e-5)
    # The filled cache holds exactly the projected keys and values of the whole sequence.
    np.testing.assert_allclose(cache["key"], tf.transpose(layer.key_dense(query), [0, 2, 1, 3]), atol=1e-6)
    np.testing.assert_allclose(cache["value"], tf.transpose(layer.value_dense(query), [0, 2, 1, 3]), atol=1e-6)


def test_bfloat16_masking_has_no_nan_or_overflow():
    query, value = _inputs()
    mask = np.zeros((B, T, S), bool)
    mask[:, :, 0] = True
    layer = MultiHeadAttention(num_heads=H, key_dim=DK, dtype="mixed_bfloat16")
    outputs, weights = layer(query * 100.0, value * 100.0, attention_mask=mask, return_attention_scores=True)
    assert outputs.dtype == tf.bfloat16 and weights.dtype == tf.float32
    assert np.isfinite(outputs.numpy().astype("float32")).all()
    np.testing.assert_allclose(weights[..., 0], 1.0)


def test_masked_softmax_matches_softmax_without_mask():
    scores = tf.random.normal((2, 3, 4, 5))
    np.testing.assert_allclose(masked_softmax(scores, None), tf.nn.softmax(scores), atol=1e-7)


def test_joint_projection_of_self_attention_equals_separate_projections():
    """Self-attention (query is value) takes W^Q, W^K, W^V in one product; a copy of the query
    takes the three separate products. Same outputs, weights and gradients."""
    query, _ = _inputs()
    layer = MultiHeadAttention(num_heads=H, key_dim=DK)
    query = tf.constant(query)
    mask = causal_mask(T)[tf.newaxis]
    results = []
    for value_of in (lambda q: q, tf.identity):  # the same tensor, then a different one
        with tf.GradientTape() as tape:
            tape.watch(query)
            outputs, weights = layer(query, value_of(query), attention_mask=mask, return_attention_scores=True)
            loss = tf.reduce_sum(outputs * tf.range(outputs.shape[-1], dtype=tf.float32))
        results.append([outputs, weights] + tape.gradient(loss, [query] + layer.trainable_weights))
    for fused, separate in zip(*results):
        np.testing.assert_allclose(fused, separate, rtol=1e-5, atol=1e-6)
    expected, _ = _numpy_attention(layer, query.numpy(), query.numpy(), mask.numpy())
    np.testing.assert_allclose(results[0][0], expected, rtol=1e-5, atol=1e-5)

    def matmuls(call):  # 2-D products in the traced layer: projections and W^O
        graph = tf.function(call, autograph=False).get_concrete_function(tf.TensorSpec((B, T, D))).graph
        return sum(op.type == "MatMul" for op in graph.get_operations())

    assert matmuls(lambda q: layer(q, q)) == 2  # [W^Q W^K W^V], W^O
    assert matmuls(lambda q: layer(q, tf.identity(q))) == 3  # W^Q, [W^K W^V], W^O


def test_joint_key_value_projection_equals_separate_projections():
    """Encoder-decoder attention projects the attended sequence by W^K and W^V in one product."""
    query, value = _inputs()
    layer = MultiHeadAttention(num_heads=H, key_dim=DK, value_dim=DK + 4)  # d_v != d_k: split, not unstack
    layer(query, value)
    joint = layer.project_key_value(tf.constant(value))
    separate = layer.project_key_value(tf.constant(value), key=tf.identity(value))
    assert joint["value"].shape == (B, H, S, DK + 4)
    for name in ("key", "value"):
        np.testing.assert_allclose(joint[name], separate[name], rtol=1e-6, atol=1e-6)
    outputs = layer(query, value)
    np.testing.assert_allclose(outputs, _numpy_attention(layer, query, value)[0], rtol=1e-5, atol=1e-5)
