"""Dropout that keeps 1 - P_drop of its inputs in every precision (section 5.4, "Residual Dropout").

"We apply dropout to the output of each sub-layer, before it is added to the sub-layer input and
normalized. In addition, we apply dropout to the sums of the embeddings and the positional
encodings." Dropout scales the kept elements by 1 / (1 - P_drop) so that the expected output is the
input, and the model at inference (no dropout) sees activations of the size it was trained on.

`keras.layers.Dropout` draws its uniform numbers in the input's dtype and keeps those >= P_drop.
Under mixed precision its inputs are 16-bit: a bfloat16 uniform in [0, 1) has 7 random bits, so
P_drop 0.3 keeps 89/128 = 0.6953 of the elements (float16: 0.6997), while the kept ones are still
scaled by 1 / 0.7: training sees activations 0.7% smaller than inference does, at every dropout.

`Dropout` here draws the same uniform numbers in float32, from the same seed, whatever the input's
dtype: on float32 inputs it is `keras.layers.Dropout` (the same masks and values); on 16-bit inputs it
keeps exactly the elements a float32 run would keep, scaled by 1 / (1 - P_drop) rounded to the
input's dtype.
"""

from __future__ import annotations

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="keras_transformer")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` whose keep decision is drawn in float32 (module docstring).

    Args and call arguments: those of `keras.layers.Dropout` (`rate`, `noise_shape`, `seed`;
    `inputs`, `training`). A `noise_shape` (None for "as the input's") drops whole slices: `(None,
    None, 1)` on `(B, T, d_model)` drops whole positions, the same ones in every precision.
    """

    def call(self, inputs, training=False):
        if not training or self.rate <= 0 or inputs.dtype == tf.float32 or not inputs.dtype.is_floating:
            return super().call(inputs, training=training)
        # Keras' own float32 dropout of ones of the noise shape, with this layer's seed: 0 or
        # 1 / (1 - rate), broadcast over the input.
        shape = tf.shape(inputs)
        if self.noise_shape is not None:
            shape = tf.stack([shape[i] if size is None else size for i, size in enumerate(self.noise_shape)])
        mask = keras.random.dropout(tf.ones(shape, tf.float32), self.rate, seed=self.seed_generator)
        return inputs * tf.cast(mask, inputs.dtype)
