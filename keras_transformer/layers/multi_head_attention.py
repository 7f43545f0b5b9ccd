"""Multi-head attention, written from section 3.2 of the paper.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V                      (1)
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O
        where head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

The projections W^Q, W^K, W^V of all h heads are one `HeadProjection` each, with
the kernel layout of `keras.layers.MultiHeadAttention` ([d_model, h, d_k]), and
W^O is [h, d_v, d_model], so weights can be exchanged with that layer. Where they
project the same tensor (W^Q, W^K, W^V in self-attention; W^K, W^V over the
encoder output) they are applied as one product (`project_jointly`).
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.shapes import leading_and

# A large negative logit for masked positions. The softmax is computed in
# float32 (section "masking" below), where this value is finite and exp() of it
# underflows to exactly 0; in bfloat16/float16 it would overflow to -inf.
_MASK_LOGIT = -1e9


def attention_bias(mask: tf.Tensor) -> tf.Tensor:
    """The additive form of a boolean attention mask: float32, 0.0 where True, a large negative
    logit where False. `masked_softmax` with it is one add instead of two selects, and gives
    the same weights bit for bit on every row that allows at least one key (the masked logits
    are as far below the row's maximum as with the mask, so exp() of them is exactly 0 too):
    decoding, where every query sees a key, converts its masks once per step."""
    return tf.where(tf.cast(mask, tf.bool), 0.0, _MASK_LOGIT)


def masked_softmax(scores: tf.Tensor, mask: tf.Tensor | None) -> tf.Tensor:
    """Softmax over the last axis in float32, with exactly zero weight where `mask` is False.

    Computing in float32 keeps bfloat16/float16 models from overflowing on the
    mask constant and from rounding small weights; a row that masks every key
    (e.g. the query of an all-padding sentence) gets all-zero weights, not NaN.

    Args:
        scores: attention logits, `(B, h, T_q, T_k)`, any float dtype.
        mask: boolean, broadcastable to `scores`; True where attention is allowed. Or the
            float32 `attention_bias` of such a mask, added to the logits: then every row
            must allow some key (a row that allows none gets uniform weights).

    Returns:
        float32 weights of the same shape as `scores`.
    """
    scores = tf.cast(scores, tf.float32)
    if mask is None:
        return tf.nn.softmax(scores, axis=-1)
    if mask.dtype.is_floating:
        return tf.nn.softmax(scores + tf.cast(mask, tf.float32), axis=-1)  # (Keras may autocast the bias)
    mask = tf.cast(mask, tf.bool)
    weights = tf.nn.softmax(tf.where(mask, scores, _MASK_LOGIT), axis=-1)
    return tf.where(mask, weights, 0.0)


def update_cache(cache: tf.Tensor, new: tf.Tensor, index) -> tf.Tensor:
    """Writes `new` (B, h, L, d) into `cache` (B, h, T, d) at positions [index, index + L).

    A cache that holds exactly the first `index` positions grows by L: decoding starts from an
    empty cache (`init_cache(B, 0)`) and each step appends its keys and values, so a step
    copies and attends over the positions decoded so far, not a buffer of the longest output.
    A longer, preallocated cache (T >= index + L) is written in place. Slices and a concat,
    which every TensorFlow runtime has, including stock TF Serving, unlike the XLA op behind
    `dynamic_update_slice`. The cache must hold at least `index` positions.
    """
    index = tf.cast(index, tf.int32)
    return tf.concat([cache[:, :, :index], new, cache[:, :, index + tf.shape(new)[2]:]], axis=2)


def cached_key_length(cache: tf.Tensor, index, query_length) -> tf.Tensor:
    """The keys a cached attention sees once `update_cache` wrote `query_length` positions at
    `index` into `cache` (B, h, T, d): T, or index + query_length if the cache grew."""
    return tf.maximum(tf.shape(cache)[2], tf.cast(index, tf.int32) + query_length)


def swap_axes_1_2(x: tf.Tensor) -> tf.Tensor:
    """(B, X, Y, d) -> (B, Y, X, d). When X or Y is statically 1 (a decoding step's single
    position) the bytes keep their order, so it is a reshape instead of a transposing copy."""
    if x.shape[1] == 1 or x.shape[2] == 1:
        dims = [x.shape[i] if x.shape[i] is not None else tf.shape(x)[i] for i in range(4)]
        if x.shape[1:].is_fully_defined():
            dims[0] = -1  # a constant target shape: no Shape/StridedSlice nodes for the batch
        return tf.reshape(x, [dims[0], dims[2], dims[1], dims[3]])
    return tf.transpose(x, [0, 2, 1, 3])


def split_heads(x: tf.Tensor) -> tf.Tensor:
    """(B, T, h, d) -> (B, h, T, d): head-major, so attention is two batched matmuls with no copies."""
    return swap_axes_1_2(x)


def joint_weights(projections) -> tuple[tf.Tensor, tf.Tensor | None]:
    """The kernels of `HeadProjection`s from the same input side by side, `(fan_in, sum of h*d)`,
    and their biases `(sum of h*d,)` (None without biases), in the compute dtype: the operand
    of `project_jointly`. A decoding loop computes it once (`Transformer.step_weights`)
    instead of concatenating the kernels again at every step."""
    dtype = projections[0].compute_dtype
    fan_in = math.prod(projections[0].input_shape_)
    kernel = tf.concat([tf.reshape(tf.cast(p.kernel, dtype), [fan_in, -1]) for p in projections], axis=1)
    if not projections[0].use_bias:
        return kernel, None
    return kernel, tf.concat([tf.reshape(tf.cast(p.bias, dtype), [-1]) for p in projections], axis=0)


def project_jointly(x: tf.Tensor, projections, weights=None) -> list[tf.Tensor]:
    """`[split_heads(p(x)) for p in projections]`, as one matmul over the concatenated kernels.

    Self-attention projects the same positions by W^Q, W^K and W^V, and
    encoder-decoder attention the encoder output by W^K and W^V: one
    (B*T, d_model) x (d_model, 3 h d_k) product instead of three (d_model, h d_k)
    ones: one wider matmul keeps the matrix units busier than three narrow ones
    (docs/speed.md#training-step-design). The variables stay those of the separate
    `HeadProjection`s, so checkpoints do not change.

    Args:
        x: `(B, T, d_model)`.
        projections: two or more `HeadProjection`s from `(d_model,)` to `(h, d)`, same d_model.
        weights: None, or `joint_weights(projections)` computed beforehand.

    Returns:
        One `(B, h, T, d)` tensor per projection.
    """
    kernel, bias = joint_weights(projections) if weights is None else weights
    y = tf.matmul(tf.reshape(x, [-1, kernel.shape[0]]), kernel)  # (B*T, sum of h*d)
    if bias is not None:
        y = y + bias
    shapes = {p.output_shape_ for p in projections}
    widths = [math.prod(p.output_shape_) for p in projections]
    if len(shapes) == 1 and x.shape[1] != 1:
        # (B, T, n, h, d) -> (n, B, h, T, d): one transpose for all n; unstacking the
        # leading axis then shares its buffer instead of copying.
        (shape,) = shapes
        y = tf.reshape(y, leading_and(x, 2, (len(projections),) + shape))  # (B, T, n, h, d)
        return tf.unstack(tf.transpose(y, [2, 0, 3, 1, 4]), axis=0)
    # Different widths, or one position (a decoding step), where (B, 1, h, d) is (B, h, 1, d)
    # byte for byte: the split's copies are all the moving there is, no transpose.
    return [split_heads(tf.reshape(part, leading_and(x, 2, p.output_shape_)))
            for part, p in zip(tf.split(y, widths, axis=-1), projections)]


def _clone(initializer):
    """A fresh initializer of the same kind, so sublayers do not share one seed."""
    return initializer.__class__.from_config(initializer.get_config())


@keras.saving.register_keras_serializable(package="keras_transformer")
class HeadProjection(keras.layers.Layer):
    """x W + b, contracting the trailing `input_shape` axes of x into `output_shape` axes.

    W has shape `input_shape + output_shape` and b has shape `output_shape`: `(d_model,)
    -> (h, d_k)` is W^Q (and W^K, W^V) for all heads at once, `(h, d_v) -> (d_model,)` is
    W^O applied to the concatenated heads; the layout of `keras.layers.EinsumDense` in
    `keras.layers.MultiHeadAttention`. The product is one 2-D matmul over all positions,
    whose backward pass is two matmuls of the same size; the equivalent rank-3 einsum's
    backward pass is much slower on TensorFlow's CPU kernels (docs/speed.md#training-step-design).

    Args:
        input_shape_: tuple of ints, the trailing axes of x that are contracted.
        output_shape_: tuple of ints, the axes that replace them.
        use_bias: bool.
        kernel_initializer, bias_initializer: initializers of W and b.
    """

    def __init__(self, input_shape_, output_shape_, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.input_shape_ = tuple(input_shape_)
        self.output_shape_ = tuple(output_shape_)
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, input_shape=None):
        self.kernel = self.add_weight(name="kernel", shape=self.input_shape_ + self.output_shape_,
                                      initializer=self.kernel_initializer)
        self.bias = (self.add_weight(name="bias", shape=self.output_shape_, initializer=self.bias_initializer)
                     if self.use_bias else None)
        self.built = True

    def call(self, x):
        fan_in, fan_out = math.prod(self.input_shape_), math.prod(self.output_shape_)
        flat = tf.reshape(x, [-1, fan_in])  # (B*T, fan_in)
        y = tf.matmul(flat, tf.reshape(tf.cast(self.kernel, self.compute_dtype), [fan_in, fan_out]))
        if self.bias is not None:
            y = y + tf.reshape(tf.cast(self.bias, self.compute_dtype), [fan_out])
        return tf.reshape(y, leading_and(x, len(x.shape) - len(self.input_shape_), self.output_shape_))  # (B, T, ...)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[: len(input_shape) - len(self.input_shape_)]) + self.output_shape_

    def get_config(self):
        config = super().get_config()
        config.update(
            input_shape_=self.input_shape_,
            output_shape_=self.output_shape_,
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
        )
        return config


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention (section 3.2.2).

    Used three ways in the model (section 3.2.3): encoder self-attention,
    masked decoder self-attention, and encoder-decoder attention, whose keys
    and values come from the encoder output.

    Args:
        num_heads: int, h.
        key_dim: int, d_k, the width of each head's queries and keys.
        value_dim: int or None, d_v; defaults to `key_dim`.
        output_dim: int or None, width of the output; defaults to the width of
            the query input (d_model).
        dropout: float, dropout on the attention weights (0.0 in the paper).
        use_bias: bool, whether the projections have biases.
        kernel_initializer, bias_initializer: initializers of the projections.

    Call arguments:
        query: `(B, T_q, d_model)`.
        value: `(B, T_k, d_model)`, the sequence attended to; passing the query
            tensor itself (self-attention) projects Q, K and V in one matmul.
        key: `(B, T_k, d_model)` or None (then `value`).
        attention_mask: boolean, broadcastable to `(B, T_q, T_k)`; True where a
            query may attend to a key. With a cache, `T_k` is the cache length.
            Or its float32 `attention_bias`, when every query may attend to some key.
        cache: None, or a dict `{"key": (B, h, T_max, d_k), "value": (B, h, T_max, d_v)}`
            of projected keys and values, head-major; for a static cache, the
            `project_key_value` of the attended sequence (keys transposed).
        cache_index: with a cache: None for a static cache (encoder-decoder
            attention: keys and values are read from the cache, `value` is
            ignored), or the int position at which the projections of this
            call's `value` are written (self-attention, one or more steps).
        return_attention_scores: also return the attention weights.
        training: enables dropout.
        self_attention_weights: None, or `self_attention_weights()` computed beforehand
            (decoding computes it once, not at every step); only for self-attention.

    Returns:
        `(B, T_q, output_dim)`; then the weights `(B, h, T_q, T_k)` if
        `return_attention_scores`; then the updated cache if a cache was given.

    Example:
        >>> attention = MultiHeadAttention(num_heads=8, key_dim=64)
        >>> x = keras.random.normal((2, 5, 512))
        >>> attention(x, x).shape
        TensorShape([2, 5, 512])
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        output_dim=None,
        dropout=0.0,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if num_heads < 1 or key_dim < 1:
            raise ValueError(f"num_heads ({num_heads}) and key_dim ({key_dim}) must be positive")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim if value_dim is not None else key_dim
        self.output_dim = output_dim
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = False

    def _projection(self, input_shape, output_shape, name):
        return HeadProjection(
            input_shape,
            output_shape,
            use_bias=self.use_bias,
            kernel_initializer=_clone(self.kernel_initializer),
            bias_initializer=_clone(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, query_shape, value_shape=None, key_shape=None):
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = value_shape if key_shape is None else key_shape
        output_dim = self.output_dim or query_shape[-1]
        h, d_k, d_v = self.num_heads, self.key_dim, self.value_dim
        # W^Q, W^K, W^V for all heads at once: (d_model, h, d_k).
        self.query_dense = self._projection((query_shape[-1],), (h, d_k), "query")
        self.query_dense.build(query_shape)
        self.key_dense = self._projection((key_shape[-1],), (h, d_k), "key")
        self.key_dense.build(key_shape)
        self.value_dense = self._projection((value_shape[-1],), (h, d_v), "value")
        self.value_dense.build(value_shape)
        # W^O: (h, d_v, d_model), the concatenation of heads folded into the product.
        self.output_dense = self._projection((h, d_v), (output_dim,), "attention_output")
        self.output_dense.build((query_shape[0], query_shape[1], h, d_v))
        self.dropout_layer = Dropout(self.dropout, name="attention_dropout")
        self.built = True

    def self_attention_weights(self) -> tuple[tf.Tensor, tf.Tensor | None]:
        """W^Q, W^K and W^V as the one kernel (and bias) self-attention multiplies by
        (`joint_weights`); for the `self_attention_weights` argument of `call`."""
        return joint_weights([self.query_dense, self.key_dense, self.value_dense])

    def _keys_values(self, value, key=None):
        """Head-major keys `(B, h, T, d_k)` and values `(B, h, T, d_v)` of an attended sequence."""
        if key is None or key is value:
            return tuple(project_jointly(value, [self.key_dense, self.value_dense]))
        return split_heads(self.key_dense(key)), split_heads(self.value_dense(value))

    def project_key_value(self, value, key=None):
        """Projects an attended sequence into the static cache `{"key": (B, h, d_k, T), "value": (B, h, T, d_v)}`.

        Encoder-decoder attention uses this as a static cache: the keys and values
        of the encoder output, computed once per sentence instead of once per step.
        The keys are stored transposed, as Q K^T reads them: a step's product of one
        query by the keys then needs no `transpose_b`, which costs oneDNN's batched
        matmul over a third of its time at that size (docs/speed.md#search-design).
        """
        keys, values = self._keys_values(value, key)
        return {"key": tf.transpose(keys, [0, 1, 3, 2]), "value": values}

    def call(
        self,
        query,
        value,
        key=None,
        attention_mask=None,
        cache=None,
        cache_index=None,
        return_attention_scores=False,
        training=None,
        self_attention_weights=None,
    ):
        # Eq. (1) divides Q K^T by sqrt(d_k); scaling the queries first is the same
        # and keeps the logits small in low precision.
        scale = tf.cast(self.key_dim**-0.5, self.compute_dtype)
        static_cache = cache is not None and cache_index is None
        if value is query and (key is None or key is query) and not static_cache:
            # Self-attention: W^Q, W^K and W^V in one product.
            query, keys, values = project_jointly(
                query, [self.query_dense, self.key_dense, self.value_dense], self_attention_weights)
        else:
            query = split_heads(self.query_dense(query))
            if not static_cache:
                keys, values = self._keys_values(value, key)
        query = query * scale  # (B, h, T_q, d_k)
        if static_cache:  # encoder-decoder attention: keys (B, h, d_k, S), values (B, h, S, d_v)
            keys, values = cache["key"], cache["value"]
        elif cache is not None:
            keys = update_cache(cache["key"], keys, cache_index)  # (B, h, T_max, d_k)
            values = update_cache(cache["value"], values, cache_index)
            cache = {"key": keys, "value": values}

        scores = tf.matmul(query, keys, transpose_b=not static_cache)  # (B, h, T_q, T_k), Q K^T
        if attention_mask is not None:
            attention_mask = tf.convert_to_tensor(attention_mask)
            if not attention_mask.dtype.is_floating:
                attention_mask = tf.cast(attention_mask, tf.bool)
            attention_mask = tf.expand_dims(attention_mask, axis=-3)  # (B, 1, T_q, T_k)
        weights = masked_softmax(scores, attention_mask)  # float32 (B, h, T_q, T_k)
        dropped = self.dropout_layer(weights, training=training)
        heads = tf.matmul(tf.cast(dropped, values.dtype), values)  # (B, h, T_q, d_v)
        outputs = self.output_dense(swap_axes_1_2(heads))  # (B, T_q, h, d_v) -> (B, T_q, d_model)

        results = (outputs,)
        if return_attention_scores:
            results += (weights,)
        if cache is not None and cache_index is not None:
            results += (cache,)
        return results[0] if len(results) == 1 else results

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            key_dim=self.key_dim,
            value_dim=self.value_dim,
            output_dim=self.output_dim,
            dropout=self.dropout,
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
        )
        return config
