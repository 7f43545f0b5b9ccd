"""Token embeddings shared with the pre-softmax projection (section 3.4).

"We use learned embeddings to convert the input tokens and output tokens to
vectors of dimension d_model. [...] In our model, we share the same weight
matrix between the two embedding layers and the pre-softmax linear
transformation [...]. In the embedding layers, we multiply those weights by
sqrt(d_model)."
"""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_transformer.layers.shapes import leading_and


@keras.saving.register_keras_serializable(package="keras_transformer")
class SharedEmbedding(keras.layers.Layer):
    """An embedding matrix E (vocab, d_model) used as `E[ids] * sqrt(d_model)` and as `x E^T`.

    Args:
        vocab_size: int, the number of tokens.
        d_model: int, the embedding width.
        scale: bool, multiply looked-up embeddings by sqrt(d_model) (section 3.4).
        embeddings_initializer: initializer of E; the default, a normal with
            standard deviation d_model^-0.5, makes the scaled embeddings unit-variance.

    Call arguments:
        ids: int `(B, T)`.

    Returns:
        `(B, T, d_model)` in the compute dtype. `logits(x)` maps `(B, T, d_model)`
        to `(B, T, vocab_size)` with the same matrix (the pre-softmax
        linear transformation), computed in the compute dtype and returned as
        float32 so the softmax and the loss are exact under mixed precision.

    Example:
        >>> embedding = SharedEmbedding(vocab_size=37000, d_model=512)
        >>> x = embedding(ids)            # (B, T, 512)
        >>> logits = embedding.logits(x)  # (B, T, 37000)
    """

    def __init__(self, vocab_size, d_model, scale=True, embeddings_initializer=None, **kwargs):
        super().__init__(**kwargs)
        if vocab_size < 1 or d_model < 1:
            raise ValueError(f"vocab_size ({vocab_size}) and d_model ({d_model}) must be positive")
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.scale = scale
        self.embeddings_initializer = embeddings_initializer or keras.initializers.RandomNormal(
            stddev=d_model**-0.5
        )

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocab_size, self.d_model),
            initializer=self.embeddings_initializer,
        )
        self.built = True

    def call(self, ids):
        vectors = tf.gather(tf.cast(self.embeddings, self.compute_dtype), ids)  # (B, T, d_model)
        if self.scale:
            vectors = vectors * tf.cast(self.d_model**0.5, self.compute_dtype)
        return vectors

    def output_kernel(self):
        """E^T, `(d_model, vocab_size)` in the compute dtype: the operand of `logits(kernel=)`.

        A decoding loop transposes E once, before its first step (`Transformer.step_weights`):
        oneDNN multiplies a few rows by a (d_model, V) matrix faster than by a (V, d_model) one
        read transposed, with the same result bit for bit (docs/speed.md#search-design).
        """
        return tf.transpose(tf.cast(self.embeddings, self.compute_dtype))

    def logits(self, x, bias=None, kernel=None):
        """The pre-softmax linear transformation: float32 `x E^T`, `(B, T, vocab_size)`.

        `bias`, optional `(vocab_size,)`, is added in the same op (MatMul + BiasAdd, which
        TensorFlow's CPU kernels fuse): decoding uses it to rule tokens out without another
        pass over the logits. `kernel`, optional, is `output_kernel()` computed beforehand, or
        some of its columns (a shortlist's: the logits are then theirs, `(B, T, columns)`).
        """
        # One 2-D matmul over all positions. A rank-3 x rank-2 `tf.matmul` broadcasts
        # the kernel over the batch, and its gradient then builds a (B, V, d_model)
        # tensor before summing it: 1 GB per step at 128 sentences and 8k tokens.
        flat = tf.reshape(tf.cast(x, self.compute_dtype), [-1, self.d_model])  # (B*T, d_model)
        if kernel is None:
            logits = tf.matmul(flat, tf.cast(self.embeddings, self.compute_dtype), transpose_b=True)  # (B*T, V)
        else:
            logits = tf.matmul(flat, kernel)
        if bias is not None:
            logits = tf.nn.bias_add(logits, tf.cast(bias, logits.dtype))
        if kernel is None or kernel.shape[-1] == self.vocab_size:
            logits = tf.reshape(logits, leading_and(x, len(x.shape) - 1, [self.vocab_size]))  # (B, T, V)
        else:  # some columns of E^T: (B, T, columns)
            logits = tf.reshape(logits, tf.concat([tf.shape(x)[:-1], tf.shape(kernel)[-1:]], axis=0))
        return tf.cast(logits, tf.float32)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.d_model,)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            scale=self.scale,
            embeddings_initializer=keras.initializers.serialize(
                keras.initializers.get(self.embeddings_initializer)
            ),
        )
        return config
