"""Layer normalization (Ba et al., 2016) as the paper applies it after every sub-layer (section 3.1).

    LayerNorm(x) = gamma * (x - mean(x)) / sqrt(var(x) + epsilon) + beta

over the d_model features of each position. `keras.layers.LayerNormalization`
computes this, but leaves its gradient to autodiff, which on TensorFlow's CPU
kernels runs about a dozen full-size element-wise passes (and the `Tile` of the
broadcast mean). The 15 layer normalizations of the Multi30k model then took 18% of a
training step. `layer_norm` gives it the closed-form gradient

    dx = (g - mean(g) - x_hat * mean(g * x_hat)) / sqrt(var(x) + epsilon),    g = gamma * dy

and halves their cost (`docs/speed.md#training-step-design`).
"""

from __future__ import annotations

import keras
import tensorflow as tf


def layer_norm(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, epsilon: float) -> tf.Tensor:
    """Normalises `x` over its last axis, then scales by `gamma` and shifts by `beta`.

    Computes in float32 (as Keras does for half-precision inputs) and returns the
    dtype of `x`.

    Args:
        x: `(..., d)`.
        gamma, beta: `(d,)`.
        epsilon: float, added to the variance.

    Returns:
        `(..., d)`, the dtype of `x`.
    """
    dtype = x.dtype
    return tf.cast(_layer_norm(tf.cast(x, tf.float32), tf.cast(gamma, tf.float32), tf.cast(beta, tf.float32),
                               epsilon), dtype)


def _layer_norm(x, gamma, beta, epsilon):
    @tf.custom_gradient
    def forward(x, gamma, beta):
        mean = tf.reduce_mean(x, axis=-1, keepdims=True)
        centred = x - mean
        inverse_std = tf.math.rsqrt(tf.reduce_mean(tf.square(centred), axis=-1, keepdims=True) + epsilon)
        normalized = centred * inverse_std  # x_hat
        outputs = normalized * gamma + beta

        def grad(dy):
            batch_axes = list(range(len(dy.shape) - 1))
            g = dy * gamma
            dx = inverse_std * (g - tf.reduce_mean(g, axis=-1, keepdims=True)
                                - normalized * tf.reduce_mean(g * normalized, axis=-1, keepdims=True))
            return dx, tf.reduce_sum(dy * normalized, axis=batch_axes), tf.reduce_sum(dy, axis=batch_axes)

        return outputs, grad

    return forward(x, gamma, beta)


@keras.saving.register_keras_serializable(package="keras_transformer")
class LayerNormalization(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` with the closed-form gradient of `layer_norm`.

    Same arguments, weights (`gamma`, `beta`), checkpoints and results as the
    Keras layer; any configuration other than the Transformer's (normalising the
    last axis, with both `gamma` and `beta`) runs the Keras layer's own code.
    """

    def call(self, inputs):
        axis = self.axis if isinstance(self.axis, int) else (self.axis[0] if len(self.axis) == 1 else None)
        last_axis = axis is not None and axis in (-1, len(inputs.shape) - 1)
        if not (last_axis and self.center and self.scale and not self.rms_scaling):
            return super().call(inputs)
        return tf.cast(layer_norm(inputs, self.gamma, self.beta, self.epsilon), self.compute_dtype)
