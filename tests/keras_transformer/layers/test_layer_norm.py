"""LayerNormalization with its closed-form gradient against Keras' own layer (section 3.1)."""

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.layers import LayerNormalization, layer_norm
from tests.helpers.layer_checks import check_layer

SHAPE = (3, 7, 16)


def _pair(epsilon=1e-6):
    """Ours and Keras' layer with the same non-trivial gamma and beta."""
    rng = np.random.default_rng(0)
    gamma = rng.normal(1.0, 0.3, SHAPE[-1]).astype("float32")
    beta = rng.normal(0.0, 0.3, SHAPE[-1]).astype("float32")
    layers = [LayerNormalization(epsilon=epsilon), keras.layers.LayerNormalization(epsilon=epsilon)]
    for layer in layers:
        layer.build(SHAPE)
        layer.set_weights([gamma, beta])
    return layers


def _forward_backward(layer, x, upstream):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
    return [y] + tape.gradient(loss, [x] + layer.trainable_weights)


def test_layer_contract():
    x = tf.random.normal(SHAPE)
    check_layer(lambda: LayerNormalization(epsilon=1e-6), lambda layer: layer(x), SHAPE, expected_num_weights=2)


def test_outputs_and_gradients_equal_keras_layer_normalization():
    ours, theirs = _pair()
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(2.0, 3.0, SHAPE).astype("float32"))  # off-centre, not unit scale
    upstream = tf.constant(rng.normal(size=SHAPE).astype("float32"))
    for got, want, name in zip(_forward_backward(ours, x, upstream), _forward_backward(theirs, x, upstream),
                               ("outputs", "dx", "dgamma", "dbeta")):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5, err_msg=name)
    assert [w.path.split("/")[-1] for w in ours.weights] == ["gamma", "beta"]  # checkpoints unchanged


def test_golden_values_from_the_formula():
    """(x - mean) / sqrt(var + eps) * gamma + beta, and the gradient of sum(y * upstream) in NumPy."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 8))
    gamma, beta, upstream, eps = rng.normal(size=8), rng.normal(size=8), rng.normal(size=(4, 8)), 1e-3
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    x_hat = (x - mean) / np.sqrt(var + eps)
    g = upstream * gamma
    dx = (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True)) / np.sqrt(var + eps)
    tensors = [tf.constant(a, tf.float32) for a in (x, gamma, beta)]
    with tf.GradientTape() as tape:
        tape.watch(tensors)
        y = layer_norm(*tensors, epsilon=eps)
        loss = tf.reduce_sum(y * tf.constant(upstream, tf.float32))
    grads = tape.gradient(loss, tensors)
    np.testing.assert_allclose(y, x_hat * gamma + beta, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads[0], dx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads[1], (upstream * x_hat).sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads[2], upstream.sum(0), rtol=1e-5, atol=1e-5)


def test_mixed_bfloat16_computes_in_float32_and_returns_bfloat16():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    ours, theirs = _pair()
    x = tf.cast(tf.random.normal(SHAPE, 5.0, 2.0), tf.bfloat16)
    y, want = ours(x), theirs(x)
    assert y.dtype == tf.bfloat16 and ours.gamma.dtype == "float32"
    np.testing.assert_allclose(tf.cast(y, tf.float32), tf.cast(want, tf.float32), atol=0.05)


def test_other_axes_fall_back_to_keras():
    x = tf.random.normal((2, 3, 4))
    ours, theirs = LayerNormalization(axis=1), keras.layers.LayerNormalization(axis=1)
    np.testing.assert_allclose(ours(x), theirs(x), atol=1e-6)
