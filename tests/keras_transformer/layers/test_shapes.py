"""Reshape targets: constants where the static shape allows, the same reshape either way."""

import numpy as np
import tensorflow as tf

from keras_transformer.layers.shapes import leading_and


def test_a_constant_when_at_most_the_batch_is_unknown():
    seen = {}

    @tf.function(input_signature=[tf.TensorSpec([None, 1, 6])])
    def step(x):  # a decoding step's shape: only the batch is unknown
        seen["target"] = leading_and(x, 2, (2, 3))
        return tf.reshape(x, seen["target"])

    x = tf.reshape(tf.range(24, dtype=tf.float32), (4, 1, 6))
    np.testing.assert_array_equal(step(x), tf.reshape(x, (4, 1, 2, 3)))
    assert seen["target"] == [-1, 1, 2, 3]  # one Const node, no Shape/StridedSlice/ConcatV2


def test_a_tensor_when_two_leading_axes_are_unknown():
    seen = {}

    @tf.function(input_signature=[tf.TensorSpec([None, None, 6])])
    def full(x):
        seen["target"] = leading_and(x, 2, (2, 3))
        return tf.reshape(x, seen["target"])

    x = tf.reshape(tf.range(36, dtype=tf.float32), (2, 3, 6))
    np.testing.assert_array_equal(full(x), tf.reshape(x, (2, 3, 2, 3)))
    assert isinstance(seen["target"], tf.Tensor)


def test_an_empty_batch_and_a_known_zero():
    empty = tf.zeros((0, 1, 6))
    assert tf.reshape(empty, leading_and(empty, 2, (2, 3))).shape == (0, 1, 2, 3)
    zero_length = tf.zeros((4, 0, 6))  # -1 cannot be inferred beside a 0: the sizes are spelled out
    assert leading_and(zero_length, 2, (2, 3)) == [4, 0, 2, 3]
