"""One layer of the decoder stack (section 3.1, Figure 1 right).

"In addition to the two sub-layers in each encoder layer, the decoder inserts a
third sub-layer, which performs multi-head attention over the output of the
encoder stack. [...] We also modify the self-attention sub-layer in the decoder
stack to prevent positions from attending to subsequent positions."

For decoding one token at a time the layer keeps apart what is fixed per sentence
and what each step updates (as keras-hub's `TransformerDecoder` takes an explicit
cache and index):

* `init_memory(encoder_outputs)`: the encoder output projected once into the
  encoder-decoder keys and values `{"key": (B, h, d_k, S), "value": (B, h, S, d_v)}`;
  static for the whole sentence, read by every step (`memory=`).
* `init_cache(batch_size, max_length)`: the empty self-attention keys and values
  `{"key": (B, h, T_max, d_k), "value": (B, h, T_max, d_v)}`, which each call with
  `cache=` and `cache_index=` fills at `cache_index` and returns.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_transformer.layers.feed_forward import PositionwiseFeedForward
from keras_transformer.layers.masks import causal_mask
from keras_transformer.layers.multi_head_attention import MultiHeadAttention, cached_key_length
from keras_transformer.layers.sublayer import SublayerConnection


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderLayer(keras.layers.Layer):
    """Masked self-attention, encoder-decoder attention and feed-forward sub-layers.

    Args:
        num_heads, key_dim, value_dim, d_ff: as in `EncoderLayer`.
        dropout_rate, attention_dropout_rate, relu_dropout_rate: as in `EncoderLayer`.
        layer_norm, layer_norm_epsilon: as in `EncoderLayer`.

    Call arguments:
        x: `(B, T, d_model)`, the (shifted) target embeddings or the previous layer.
        encoder_outputs: `(B, S, d_model)`; unused when `memory` is given.
        source_mask: bool `(B, S)`, True at real source tokens, or None; or its float32
            `attention_bias` when every sentence has a token (decoding).
        cache: None for the full causal pass, or the self-attention keys and
            values of `init_cache` (or of a previous call), `(B, h, T_max, d)`.
        memory: None (project `encoder_outputs`), or the encoder-decoder keys and
            values of `init_memory` (keys `(B, h, d_k, S)`, values `(B, h, S, d_v)`),
            projected once per sentence.
        cache_index: with a cache, the position of `x[:, 0]`; `x` may hold one
            token (incremental decoding) or several (e.g. a prefix at index 0).
        self_attention_mask: optional bool `(T, T_k)`, the causal mask, or its float32
            `attention_bias`; computed here when not given (a model passes one mask to
            all its layers).
        return_attention_scores: also return `{"self": (B, h, T, T_k), "cross": (B, h, T, S)}`.
        training: enables dropout.
        self_attention_weights: None, or `self_attention.self_attention_weights()`
            computed beforehand (a decoding loop computes it once, not at every step).

    Returns:
        `(B, T, d_model)`; then the attention weights if asked for; then the
        updated self-attention cache `{"key", "value"}` if one was given (the
        memory is never changed, so it is not returned).

    Example:
        >>> layer = DecoderLayer(num_heads=8, key_dim=64, value_dim=64, d_ff=2048)
        >>> memory = layer.init_memory(encoder_outputs)          # once per sentence
        >>> cache = layer.init_cache(batch_size=2, max_length=20)
        >>> y, cache = layer(x_t, source_mask=mask, cache=cache, memory=memory, cache_index=t)
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
        attention = dict(num_heads=num_heads, key_dim=key_dim, value_dim=value_dim, dropout=attention_dropout_rate)
        self.self_attention = MultiHeadAttention(**attention, dtype=self.dtype_policy, name="self_attention")
        self.self_attention_residual = SublayerConnection(
            **residual, dtype=self.dtype_policy, name="self_attention_residual"
        )
        self.cross_attention = MultiHeadAttention(**attention, dtype=self.dtype_policy, name="cross_attention")
        self.cross_attention_residual = SublayerConnection(
            **residual, dtype=self.dtype_policy, name="cross_attention_residual"
        )
        self.feed_forward = PositionwiseFeedForward(
            d_ff, relu_dropout=relu_dropout_rate, dtype=self.dtype_policy, name="feed_forward"
        )
        self.feed_forward_residual = SublayerConnection(
            **residual, dtype=self.dtype_policy, name="feed_forward_residual"
        )

    def build(self, x_shape, encoder_outputs_shape=None):
        encoder_outputs_shape = encoder_outputs_shape or x_shape
        self.self_attention.build(x_shape, x_shape)
        self.self_attention_residual.build(x_shape)
        self.cross_attention.build(x_shape, encoder_outputs_shape)
        self.cross_attention_residual.build(x_shape)
        self.feed_forward.build(x_shape)
        self.feed_forward_residual.build(x_shape)
        self.built = True

    def init_cache(self, batch_size, max_length):
        """The empty self-attention cache: `{"key": (B, h, T_max, d_k), "value": (B, h, T_max, d_v)}`.

        Zeros in the layer's compute dtype; each step writes its keys and values at
        its position, and the causal mask hides the positions not written yet. With
        max_length 0 the cache is empty and grows by each step's positions
        (`multi_head_attention.update_cache`).
        """
        dtype = self.compute_dtype
        return {
            "key": tf.zeros([batch_size, self.num_heads, max_length, self.key_dim], dtype),
            "value": tf.zeros([batch_size, self.num_heads, max_length, self.value_dim], dtype),
        }

    def init_memory(self, encoder_outputs):
        """The encoder output `(B, S, d_model)` projected once into encoder-decoder keys and values.

        Returns `{"key": (B, h, d_k, S), "value": (B, h, S, d_v)}`, head-major, keys
        transposed (`MultiHeadAttention.project_key_value`): static for the sentence,
        so a step reads it instead of projecting the encoder output again (section 3.2.3:
        "the memory keys and values come from the output of the encoder").
        """
        return self.cross_attention.project_key_value(encoder_outputs)

    def call(
        self,
        x,
        encoder_outputs=None,
        source_mask=None,
        cache=None,
        memory=None,
        cache_index=None,
        self_attention_mask=None,
        return_attention_scores=False,
        training=None,
        self_attention_weights=None,
    ):
        if cache is not None and cache_index is None:
            raise ValueError("DecoderLayer: a cache needs a cache_index (the position of x[:, 0])")
        if memory is None and encoder_outputs is None:
            raise ValueError("DecoderLayer: give encoder_outputs or their projected memory (init_memory)")
        self_mask = self_attention_mask
        if self_mask is None:
            key_length = None if cache is None else cached_key_length(cache["key"], cache_index, tf.shape(x)[1])
            self_mask = causal_mask(tf.shape(x)[1], key_length, 0 if cache_index is None else cache_index)  # (T, T_k)
        cross_mask = None if source_mask is None else source_mask[:, tf.newaxis, :]  # (B, 1, S)
        scores, new_cache = {}, None

        def self_attention(y):
            nonlocal new_cache
            outputs = self.self_attention(
                y, y, attention_mask=self_mask[tf.newaxis], cache=cache, cache_index=cache_index,
                return_attention_scores=True, training=training, self_attention_weights=self_attention_weights,
            )
            if cache is not None:
                new_cache = outputs[2]  # {"key", "value"}: (B, h, T_max, d)
            scores["self"] = outputs[1]
            return outputs[0]

        def cross_attention(y):
            # With a memory: a static cache (no cache_index), read instead of projected.
            y, scores["cross"] = self.cross_attention(
                y, encoder_outputs, attention_mask=cross_mask, cache=memory,
                return_attention_scores=True, training=training,
            )
            return y

        x = self.self_attention_residual(x, sublayer=self_attention, training=training)
        x = self.cross_attention_residual(x, sublayer=cross_attention, training=training)
        x = self.feed_forward_residual(
            x, sublayer=lambda y: self.feed_forward(y, training=training), training=training
        )

        results = (x,)
        if return_attention_scores:
            results += (scores,)
        if cache is not None:
            results += (new_cache,)
        return results[0] if len(results) == 1 else results

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
