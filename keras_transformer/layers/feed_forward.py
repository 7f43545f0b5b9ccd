"""The position-wise feed-forward network of section 3.3.

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2                                  (2)

applied to each position separately and identically: two convolutions with
kernel size 1, i.e. two dense layers over the last axis, d_model -> d_ff -> d_model.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.shapes import leading_and


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionwiseFeedForward(keras.layers.Layer):
    """Two linear maps with a ReLU between them (section 3.3, equation 2).

    Args:
        d_ff: int, the inner width (2048 in the base model, 4096 in big).
        output_dim: int or None, the output width; defaults to the input's (d_model).
        relu_dropout: float, dropout after the ReLU (0.0 in the paper).
        activation: the inner non-linearity ("relu" in the paper).
        kernel_initializer, bias_initializer: initializers of both maps.

    Call arguments:
        inputs: `(B, T, d_model)`.
        training: enables dropout.

    Returns:
        `(B, T, output_dim)`.

    Example:
        >>> ffn = PositionwiseFeedForward(d_ff=2048)
        >>> ffn(keras.random.normal((2, 5, 512))).shape
        TensorShape([2, 5, 512])
    """

    def __init__(
        self,
        d_ff,
        output_dim=None,
        relu_dropout=0.0,
        activation="relu",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if d_ff < 1:
            raise ValueError(f"d_ff must be positive, got {d_ff}")
        self.d_ff = d_ff
        self.output_dim = output_dim
        self.relu_dropout = relu_dropout
        self.activation = activation
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer

    def build(self, input_shape):
        output_dim = self.output_dim or input_shape[-1]
        self.inner_dense = keras.layers.Dense(
            self.d_ff,
            activation=self.activation,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="inner",  # W_1, b_1: (d_model, d_ff)
        )
        self.inner_dense.build(input_shape)
        self.relu_dropout_layer = Dropout(self.relu_dropout, name="relu_dropout")
        self.output_dense = keras.layers.Dense(
            output_dim,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="output",  # W_2, b_2: (d_ff, d_model)
        )
        self.output_dense.build(tuple(input_shape[:-1]) + (self.d_ff,))
        self.built = True

    def call(self, inputs, training=None):
        # Over the positions as rows of one matrix, (B*T, d_model): a rank-3 input would go
        # through tensordot, whose reshape between the matmul and the bias keeps TensorFlow's
        # CPU kernels from fusing MatMul, bias and ReLU into one op (as they do here).
        rows = tf.reshape(inputs, [-1, inputs.shape[-1]])
        hidden = self.inner_dense(rows)  # (B*T, d_ff)
        hidden = self.relu_dropout_layer(hidden, training=training)
        outputs = self.output_dense(hidden)  # (B*T, d_model)
        return tf.reshape(outputs, leading_and(inputs, len(inputs.shape) - 1, outputs.shape[-1:]))  # (B, T, d_model)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.output_dim or input_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            d_ff=self.d_ff,
            output_dim=self.output_dim,
            relu_dropout=self.relu_dropout,
            activation=self.activation,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
        )
        return config
