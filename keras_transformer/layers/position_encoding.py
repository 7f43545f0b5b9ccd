"""Positional encodings: the sinusoids of section 3.5 and learned positions (Table 3, row E).

    PE(pos, 2i)     = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model))

Sines and cosines interleave along the model dimension, exactly as the paper's
formula says (tensor2tensor concatenates them instead; the two differ by a
fixed permutation of the dimensions). For any fixed offset k, PE(pos + k) is a
linear function (a rotation) of PE(pos), the property the paper chose them for.

Both layers take a `start_index` so that one-token-at-a-time decoding adds the
encoding of the position being decoded.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf


def sinusoids(positions, d_model: int, max_wavelength: float = 10000.0) -> tf.Tensor:
    """The sinusoidal encodings of section 3.5 for int `positions` (T,): float32 (T, d_model)."""
    positions = tf.cast(positions, tf.float32)[:, tf.newaxis]  # (T, 1)
    two_i = np.arange(0, d_model, 2, dtype=np.float32)  # 2i for each pair of dimensions
    inverse_wavelengths = tf.constant(np.exp(-math.log(max_wavelength) * two_i / d_model))
    angles = positions * inverse_wavelengths[tf.newaxis, :]  # (T, ceil(d_model / 2))
    encoding = tf.stack([tf.sin(angles), tf.cos(angles)], axis=-1)  # (T, d/2, 2): sin, cos interleaved
    encoding = tf.reshape(encoding, [tf.shape(angles)[0], -1])  # (T, 2 * ceil(d_model / 2))
    return encoding[:, :d_model]


@keras.saving.register_keras_serializable(package="keras_transformer")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """Fixed sinusoidal position encodings (section 3.5); has no weights.

    Args:
        max_wavelength: float, the 10000 of the formula.

    Call arguments:
        inputs: `(B, T, d_model)`; only its length and width are used.
        start_index: int or scalar tensor, the position of `inputs[:, 0]`.

    Returns:
        `(T, d_model)` encodings of positions start_index ... start_index + T - 1,
        in the layer's compute dtype, to be added to the embeddings.

    Example:
        >>> SinusoidalPositionEncoding()(keras.ops.zeros((1, 3, 4)))[1]  # position 1
        [sin(1), cos(1), sin(0.01), cos(0.01)]
    """

    def __init__(self, max_wavelength=10000.0, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = max_wavelength
        self.built = True

    def call(self, inputs, start_index=0):
        length, d_model = tf.shape(inputs)[1], inputs.shape[-1]
        positions = tf.range(length) + tf.cast(start_index, tf.int32)
        return tf.cast(sinusoids(positions, d_model, self.max_wavelength), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(max_wavelength=self.max_wavelength)
        return config


@keras.saving.register_keras_serializable(package="keras_transformer")
class LearnedPositionEmbedding(keras.layers.Layer):
    """Learned position embeddings, the alternative of section 3.5 / Table 3 row (E).

    Args:
        max_length: int, the number of positions with an embedding.
        initializer: initializer of the `(max_length, d_model)` table.

    Call arguments:
        inputs: `(B, T, d_model)`; only its length and width are used.
        start_index: int or scalar tensor, the position of `inputs[:, 0]`.

    Returns:
        `(T, d_model)`, rows start_index ... start_index + T - 1 of the table.
        Positions beyond `max_length` are clipped to the last row (the paper
        notes that sinusoids, unlike this table, extrapolate to longer inputs).
    """

    def __init__(self, max_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if max_length < 1:
            raise ValueError(f"max_length must be positive, got {max_length}")
        self.max_length = max_length
        self.initializer = initializer

    def build(self, input_shape):
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_length, input_shape[-1]),
            initializer=self.initializer,
        )
        self.built = True

    def call(self, inputs, start_index=0):
        positions = tf.range(tf.shape(inputs)[1]) + tf.cast(start_index, tf.int32)
        positions = tf.minimum(positions, self.max_length - 1)
        return tf.cast(tf.gather(self.position_embeddings, positions), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(max_length=self.max_length, initializer=self.initializer)
        return config
