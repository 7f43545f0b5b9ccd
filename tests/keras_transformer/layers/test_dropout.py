"""Dropout keeps 1 - P_drop of its inputs in 16-bit precisions, with float32's masks (section 5.4)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.layers.dropout import Dropout

SHAPE = (256, 64, 64)  # 2^20 elements: the keep share's standard error is 0.00045


def dropped(layer_class, dtype, seed=7, rate=0.3, inputs=None, noise_shape=None):
    layer = layer_class(rate, seed=seed, dtype=dtype, noise_shape=noise_shape)
    x = tf.ones(SHAPE, dtype) if inputs is None else tf.cast(inputs, dtype)
    return layer(x, training=True).numpy().astype(np.float64)


@pytest.mark.parametrize("dtype, expected_keras", [("bfloat16", 89 / 128), ("float16", None)])
def test_a_16_bit_dropout_keeps_the_share_it_scales_for(dtype, expected_keras):
    """Keras' own draw in bfloat16 keeps 89/128 of the elements at rate 0.3 (the evidence for this
    layer); this one keeps 0.7, and the output's mean is the input's."""
    ours = dropped(Dropout, dtype)
    assert abs(np.mean(ours != 0) - 0.7) < 0.002
    assert abs(np.mean(ours) - 1.0) < 0.005  # 1/0.7 rounded to 16 bits, times 0.7: within 0.1%
    if expected_keras is not None:
        theirs = dropped(keras.layers.Dropout, dtype)
        assert abs(np.mean(theirs != 0) - expected_keras) < 0.002 and abs(np.mean(theirs != 0) - 0.7) > 0.004


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16_bit_inputs_get_the_masks_of_float32_inputs(dtype):
    """The same seed keeps the same elements whatever the precision; the kept values are x / 0.7."""
    x = np.random.default_rng(0).uniform(0.5, 2.0, SHAPE).astype(np.float32)
    low, full = dropped(Dropout, dtype, inputs=x), dropped(Dropout, "float32", inputs=x)
    np.testing.assert_array_equal(low != 0, full != 0)
    np.testing.assert_allclose(low[full != 0], full[full != 0], rtol=2 ** -7)


def test_float32_is_keras_dropout_bit_for_bit_and_inference_is_the_identity():
    x = np.random.default_rng(1).normal(size=SHAPE).astype(np.float32)
    np.testing.assert_array_equal(dropped(Dropout, "float32", inputs=x),
                                  dropped(keras.layers.Dropout, "float32", inputs=x))
    layer = Dropout(0.3, dtype="bfloat16")
    np.testing.assert_array_equal(layer(tf.constant(x, tf.bfloat16), training=False).numpy(),
                                  tf.constant(x, tf.bfloat16).numpy())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_a_noise_shape_drops_whole_positions_with_float32_masks_in_every_precision(dtype):
    """(None, None, 1) on (B, T, d): each position is kept whole (every element x / 0.7) or
    dropped whole, 0.7 of them kept; the positions are the ones a float32 input with the same seed
    loses, and in float32 the layer is Keras' own."""
    x = np.random.default_rng(2).uniform(0.5, 2.0, SHAPE).astype(np.float32)
    out = dropped(Dropout, dtype, inputs=x, noise_shape=(None, None, 1))
    kept = out != 0
    np.testing.assert_array_equal(kept, np.broadcast_to(kept[..., :1], kept.shape))
    assert abs(np.mean(kept[..., 0]) - 0.7) < 0.01  # 16,384 positions: standard error 0.0036
    np.testing.assert_allclose(out[kept], x[kept] / 0.7, rtol=2 ** -7)
    full = dropped(Dropout, "float32", inputs=x, noise_shape=(None, None, 1))
    np.testing.assert_array_equal(kept, full != 0)
    if dtype == "float32":
        np.testing.assert_array_equal(
            out, dropped(keras.layers.Dropout, "float32", inputs=x, noise_shape=(None, None, 1)))


def test_successive_calls_draw_new_masks_and_the_seed_repeats_them():
    layer = Dropout(0.3, seed=3, dtype="bfloat16")
    x = tf.ones((64, 64), tf.bfloat16)
    first, second = (layer(x, training=True).numpy() != 0 for _ in range(2))
    assert np.mean(first != second) > 0.3
    again = Dropout(0.3, seed=3, dtype="bfloat16")
    np.testing.assert_array_equal(again(x, training=True).numpy() != 0, first)


def test_it_serializes_as_a_keras_transformer_layer():
    layer = Dropout(0.25, seed=5, name="d")
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(restored) is Dropout and restored.rate == 0.25 and restored.name == "d"
