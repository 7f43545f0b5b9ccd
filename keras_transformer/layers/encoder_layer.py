"""One layer of the encoder stack (section 3.1, Figure 1 left).

"Each layer has two sub-layers. The first is a multi-head self-attention
mechanism, and the second is a simple, position-wise fully connected
feed-forward network."
"""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_transformer.layers.feed_forward import PositionwiseFeedForward
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.sublayer import SublayerConnection


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderLayer(keras.layers.Layer):
    """Self-attention and feed-forward sub-layers, each in a residual connection.

    Args:
        num_heads: int, h (8 in the base model).
        key_dim: int, d_k (64).
        value_dim: int, d_v (64).
        d_ff: int, the feed-forward inner width (2048).
        dropout_rate: float, P_drop on each sub-layer output (0.1).
        attention_dropout_rate: float, dropout on attention weights (0.0).
        relu_dropout_rate: float, dropout after the feed-forward ReLU (0.0).
        layer_norm: "post" (the paper) or "pre".
        layer_norm_epsilon: float.

    Call arguments:
        x: `(B, S, d_model)`.
        padding_mask: bool `(B, S)`, True at real source tokens, or None.
        return_attention_scores: also return the self-attention weights.
        training: enables dropout.

    Returns:
        `(B, S, d_model)`, and the weights `(B, h, S, S)` if asked for.

    Example:
        >>> layer = EncoderLayer(num_heads=8, key_dim=64, value_dim=64, d_ff=2048)
        >>> layer(keras.random.normal((2, 7, 512))).shape
        TensorShape([2, 7, 512])
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim,
        d_ff,
        dropout_rate=0.1,
        attention_dropout_rate=0.0,
        relu_dropout_rate=0.0,
        layer_norm="post",
        layer_norm_epsilon=1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.d_ff = d_ff
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.relu_dropout_rate = relu_dropout_rate
        self.layer_norm = layer_norm
        self.layer_norm_epsilon = layer_norm_epsilon
        residual = dict(dropout_rate=dropout_rate, layer_norm=layer_norm, epsilon=layer_norm_epsilon)
        self.self_attention = MultiHeadAttention(
            num_heads, key_dim, value_dim, dropout=attention_dropout_rate, dtype=self.dtype_policy,
            name="self_attention",
        )
        self.self_attention_residual = SublayerConnection(
            **residual, dtype=self.dtype_policy, name="self_attention_residual"
        )
        self.feed_forward = PositionwiseFeedForward(
            d_ff, relu_dropout=relu_dropout_rate, dtype=self.dtype_policy, name="feed_forward"
        )
        self.feed_forward_residual = SublayerConnection(
            **residual, dtype=self.dtype_policy, name="feed_forward_residual"
        )

    def build(self, x_shape):
        self.self_attention.build(x_shape, x_shape)
        self.self_attention_residual.build(x_shape)
        self.feed_forward.build(x_shape)
        self.feed_forward_residual.build(x_shape)
        self.built = True

    def call(self, x, padding_mask=None, return_attention_scores=False, training=None):
        mask = None if padding_mask is None else padding_mask[:, tf.newaxis, :]  # (B, 1, S): keys
        scores = []

        def self_attention(y):
            y, weights = self.self_attention(
                y, y, attention_mask=mask, return_attention_scores=True, training=training
            )
            scores.append(weights)
            return y

        x = self.self_attention_residual(x, sublayer=self_attention, training=training)
        x = self.feed_forward_residual(
            x, sublayer=lambda y: self.feed_forward(y, training=training), training=training
        )
        return (x, scores[0]) if return_attention_scores else x

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            key_dim=self.key_dim,
            value_dim=self.value_dim,
            d_ff=self.d_ff,
            dropout_rate=self.dropout_rate,
            attention_dropout_rate=self.attention_dropout_rate,
            relu_dropout_rate=self.relu_dropout_rate,
            layer_norm=self.layer_norm,
            layer_norm_epsilon=self.layer_norm_epsilon,
        )
        return config
