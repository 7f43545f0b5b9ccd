"""The encoder-decoder Transformer of section 3 (Figure 1).

`Transformer(config)((source_ids, target_ids))` returns next-token logits for
teacher forcing; `encode`, `init_memory`, `init_cache` and `decode_step` are the
pieces beam search needs:

    encoder_outputs, source_mask = model.encode(source_ids)
    memory = model.init_memory(encoder_outputs, source_mask)   # static per sentence
    cache = model.init_cache(batch_size, max_length)           # updated by every step
    logits, cache = model.decode_step(ids, step, cache, memory)

The memory (source mask, encoder-decoder keys and values) is computed once per
sentence and never changes; the cache (self-attention keys and values) is what
each step writes. `model.decode_step` has the contract of
`keras_transformer.decoding.beam_search` with `memory=` (`fn(ids, step, cache, memory) ->
(logits, cache)`): the search expands the memory once per beam and drops the rows of
finished sentences, and reorders only the cache as beams survive. The same search runs
eagerly, under `tf.function` and inside a SavedModel.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_transformer.config import TransformerConfig
from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.embedding import SharedEmbedding
from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.layer_norm import LayerNormalization
from keras_transformer.layers.masks import causal_mask, padding_mask
from keras_transformer.layers.multi_head_attention import attention_bias, cached_key_length


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(keras.Model):
    """The Transformer: N encoder layers, N decoder layers, shared embeddings (section 3).

    The two stacks may differ in depth (`config.encoder_depth`, `config.decoder_depth`); the
    decoding cache and memory hold one entry per decoder layer.

    Args:
        config: a `TransformerConfig` (or its dict): sizes, dropout, positions,
            layer-norm placement, embedding sharing.

    Call arguments:
        inputs: a tuple `(source_ids, target_ids)`, int `(B, S)` and `(B, T)`,
            padded with `config.pad_id`. `target_ids` is the decoder input: the
            target shifted right behind a start token.
        training: enables dropout.

    Returns:
        float32 logits `(B, T, target vocabulary)`: position t predicts the
        token after `target_ids[:, t]`.

    Example:
        >>> model = Transformer(TransformerConfig.base(vocab_size=37000))
        >>> logits = model((source_ids, decoder_input_ids), training=True)
        >>> encoder_outputs, source_mask = model.encode(source_ids)
        >>> memory = model.init_memory(encoder_outputs, source_mask)  # once per sentence
        >>> cache = model.init_cache(batch_size=2, max_length=60)
        >>> logits, cache = model.decode_step(ids, step, cache, memory)  # ids (B,), logits (B, V)
    """

    def __init__(self, config: TransformerConfig | dict, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = TransformerConfig.from_dict(config)
        self.config = config
        c = config
        policy = self.dtype_policy
        # Section 3.4: one matrix for both embeddings and the pre-softmax projection.
        self.target_embedding = SharedEmbedding(
            c.output_vocab_size, c.d_model, dtype=policy, name="target_embedding"
            if not c.share_embeddings else "shared_embedding",
        )
        self.source_embedding = (
            self.target_embedding
            if c.share_embeddings
            else SharedEmbedding(c.vocab_size, c.d_model, dtype=policy, name="source_embedding")
        )
        # Section 3.5 / Table 3 (E): the layers of the config's kind (`keras_transformer.position_encodings`).
        self.source_positions, self.target_positions = c.positions.make_layers(c, policy)
        # Section 5.4: dropout on the sums of embeddings and positional encodings.
        self.source_dropout = Dropout(c.dropout_rate, name="source_dropout")
        self.target_dropout = Dropout(c.dropout_rate, name="target_dropout")
        layer_args = dict(
            num_heads=c.num_heads,
            key_dim=c.key_dim,
            value_dim=c.value_dim,
            d_ff=c.d_ff,
            dropout_rate=c.dropout_rate,
            attention_dropout_rate=c.attention_dropout_rate,
            relu_dropout_rate=c.relu_dropout_rate,
            layer_norm=c.layer_norm,
            layer_norm_epsilon=c.layer_norm_epsilon,
            dtype=policy,
        )
        # Plain attributes, not lists: tf.train.Checkpoint does not follow Keras' tracked
        # lists (keras-team/keras#18398), and checkpoints must hold every layer. Made in pairs,
        # encoder layer i then decoder layer i: a model of one depth creates its layers (and their
        # random states) in the order its checkpoints record.
        for i in range(max(c.encoder_depth, c.decoder_depth)):
            if i < c.encoder_depth:
                setattr(self, f"encoder_layer_{i}", EncoderLayer(**layer_args, name=f"encoder_layer_{i}"))
            if i < c.decoder_depth:
                setattr(self, f"decoder_layer_{i}", DecoderLayer(**layer_args, name=f"decoder_layer_{i}"))
        # Pre-LN stacks end with a LayerNorm; post-LN stacks already end with one.
        self.encoder_norm = self.decoder_norm = None
        if c.layer_norm == "pre":
            self.encoder_norm = LayerNormalization(
                epsilon=c.layer_norm_epsilon, dtype=policy, name="encoder_norm"
            )
            self.decoder_norm = LayerNormalization(
                epsilon=c.layer_norm_epsilon, dtype=policy, name="decoder_norm"
            )
        # Word dropout on the source (not in the paper; `TransformerConfig.source_word_dropout_rate`).
        # Made last and only when used, so the random state of every other layer keeps its place
        # in the checkpoints of runs without it.
        self.source_word_dropout = None
        if c.source_word_dropout_rate > 0:
            self.source_word_dropout = Dropout(
                c.source_word_dropout_rate, noise_shape=(None, None, 1), name="source_word_dropout"
            )

    @property
    def encoder_layers(self) -> list[EncoderLayer]:
        """The encoder's `config.encoder_depth` layers, bottom first."""
        return [getattr(self, f"encoder_layer_{i}") for i in range(self.config.encoder_depth)]

    @property
    def decoder_layers(self) -> list[DecoderLayer]:
        """The decoder's `config.decoder_depth` layers, bottom first."""
        return [getattr(self, f"decoder_layer_{i}") for i in range(self.config.decoder_depth)]

    def build(self, input_shape=None):
        """Creates every weight by running the model once on a one-token batch."""
        ids = tf.fill([1, 1], tf.constant(self.config.pad_id + 1, tf.int32))
        self.call((ids, ids))
        self.built = True

    # The encoder ----------------------------------------------------------------

    def encode(self, source_ids, training=False, return_attention_scores=False):
        """The encoder stack: `(B, S)` ids -> `(B, S, d_model)` outputs and the bool `(B, S)` source mask.

        With `return_attention_scores`, also a list of `encoder_depth` self-attention weights `(B, h, S, S)`.
        """
        source_mask = padding_mask(source_ids, self.config.pad_id)  # (B, S)
        x = self.source_embedding(source_ids)  # (B, S, d_model), scaled by sqrt(d_model)
        if self.source_word_dropout is not None:
            x = self.source_word_dropout(x, training=training)  # whole tokens, their positions kept
        x = x + self.source_positions(x)
        x = self.source_dropout(x, training=training)
        scores = []
        for layer in self.encoder_layers:
            if return_attention_scores:
                x, weights = layer(x, padding_mask=source_mask, return_attention_scores=True, training=training)
                scores.append(weights)
            else:
                x = layer(x, padding_mask=source_mask, training=training)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return (x, source_mask, scores) if return_attention_scores else (x, source_mask)

    # The decoder ----------------------------------------------------------------

    def _embed_target(self, target_ids, start_index, training):
        x = self.target_embedding(target_ids)  # (B, T, d_model)
        x = x + self.target_positions(x, start_index=start_index)
        return self.target_dropout(x, training=training)

    def decode(self, target_ids, encoder_outputs, source_mask, training=False, return_attention_scores=False):
        """The full causal decoder pass: `(B, T)` decoder inputs -> float32 logits `(B, T, V)`.

        With `return_attention_scores`, also a list of `decoder_depth` dicts
        `{"self": (B, h, T, T), "cross": (B, h, T, S)}`.
        """
        x = self._embed_target(target_ids, 0, training)
        self_mask = causal_mask(tf.shape(target_ids)[1])  # (T, T), shared by all layers
        scores = []
        for layer in self.decoder_layers:
            outputs = layer(
                x, encoder_outputs, source_mask=source_mask, self_attention_mask=self_mask,
                return_attention_scores=return_attention_scores, training=training,
            )
            if return_attention_scores:
                x, weights = outputs
                scores.append(weights)
            else:
                x = outputs
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        logits = self.target_embedding.logits(x)  # (B, T, V), float32
        return (logits, scores) if return_attention_scores else logits

    def cross_attention(self, target_ids, encoder_outputs, source_mask):
        """Every decoder layer's encoder-decoder attention (section 3.2.3) under teacher forcing:
        `(B, T)` decoder inputs -> float32 `(B, N_dec, h, T, S)`, row t the attention of position t."""
        _, scores = self.decode(target_ids, encoder_outputs, source_mask, return_attention_scores=True)
        return tf.stack([tf.cast(layer["cross"], tf.float32) for layer in scores], axis=1)  # (B, N, h, T, S)

    def init_memory(self, encoder_outputs, source_mask):
        """What stays fixed while one sentence is decoded (section 3.2.3, encoder-decoder attention).

        Args:
            encoder_outputs, source_mask: from `encode`, `(B, S, d_model)` and bool `(B, S)`.

        Returns:
            A nested dict, computed once per sentence and never changed by `decode_step`:
            `"source_mask"`: bool `(B, S)`; and for each decoder layer i, `"layer_i"`:
            the encoder output projected once by that layer's W^K and W^V,
            `{"key": (B, h, d_k, S), "value": (B, h, S, d_v)}`, head-major, keys transposed. Every leaf
            has the batch as its leading dimension, so a search can expand it per beam
            with `tf.nest.map_structure` without knowing its layout.
        """
        memory = {"source_mask": source_mask}
        for i, layer in enumerate(self.decoder_layers):
            memory[f"layer_{i}"] = layer.init_memory(encoder_outputs)
        return memory

    def init_cache(self, batch_size, max_length):
        """What each decoding step updates: the self-attention keys and values of the decoder.

        Args:
            batch_size: int or int32 scalar, B (the rows of `encode`'s output).
            max_length: int or int32 scalar, T_max, the most positions decoded; 0 for an
                empty cache that each step extends by its positions (what decoding uses:
                a step then costs in the positions decoded so far, not in T_max).

        Returns:
            A nested dict: for each decoder layer i, `"layer_i"`: zeros
            `{"key": (B, h, T_max, d_k), "value": (B, h, T_max, d_v)}` in the compute
            dtype, head-major; step t writes position t. Every leaf has the batch as
            its leading dimension, so beam search can expand and reorder it.
        """
        return {f"layer_{i}": layer.init_cache(batch_size, max_length) for i, layer in enumerate(self.decoder_layers)}

    def step_weights(self):
        """What `decode_step` multiplies by that is not a variable as stored: each decoder
        layer's W^Q, W^K and W^V side by side (`MultiHeadAttention.self_attention_weights`),
        `{"layer_i": (kernel, bias)}`, and the output projection's E^T, `"logits"`
        (`SharedEmbedding.output_kernel`). A decoding loop computes them once, before its
        first step, and passes them to every step (`weights=`): inside the loop they would be
        concatenated (and E read transposed) again at every step."""
        weights = {f"layer_{i}": layer.self_attention.self_attention_weights()
                   for i, layer in enumerate(self.decoder_layers)}
        weights["logits"] = self.target_embedding.output_kernel()
        return weights

    def decode_step(self, ids, step, cache, memory, training=False, logits_bias=None, weights=None):
        """One decoding step: the tokens at position `step` -> logits for position step + 1.

        Args:
            ids: int `(B,)`, the current token of each hypothesis.
            step: int scalar, its position (0 for the start token).
            cache: from `init_cache` or a previous step.
            memory: from `init_memory` (with the same B rows as the cache); not changed.
            logits_bias: optional `(V,)`, added to the logits by the output projection itself
                (e.g. NEG_INF for ids that must never be produced).
            weights: optional, `step_weights()` computed once for all steps.

        Returns:
            float32 logits `(B, V)` and the updated cache (same structure as `cache`). The
            logits of a row whose source is empty (all PAD) are undefined: a search gives
            such a row no output.
        """
        x = self._embed_target(tf.expand_dims(ids, 1), step, training)  # (B, 1, d_model)
        x, cache = self._decode_cached(x, step, cache, memory, training=training, weights=weights, biases=True)
        kernel = None if weights is None else weights["logits"]
        return self.target_embedding.logits(x, bias=logits_bias, kernel=kernel)[:, 0, :], cache  # (B, V)

    def _decode_cached(self, x, index, cache, memory, training=False, weights=None, biases=False):
        """The decoder stack on embedded inputs `(B, L, d_model)` at positions index ... index + L - 1.

        Returns the normalized decoder outputs `(B, L, d_model)` and the updated cache.
        `decode_step` runs it with L = 1; tests run it with L = T to fill a cache at once.
        With `biases`, the masks are applied as additive biases (`attention_bias`): one add
        per attention instead of two selects, the same weights when every source has a token.
        """
        new_cache = {}
        key_length = cached_key_length(cache["layer_0"]["key"], index, tf.shape(x)[1])  # T_max, or index + L
        self_mask = causal_mask(tf.shape(x)[1], key_length, index)  # (L, T_k), shared by all layers
        source_mask = memory["source_mask"]
        if biases:
            self_mask, source_mask = attention_bias(self_mask), attention_bias(source_mask)
        for i, layer in enumerate(self.decoder_layers):
            x, new_cache[f"layer_{i}"] = layer(
                x, source_mask=source_mask, cache=cache[f"layer_{i}"], memory=memory[f"layer_{i}"],
                cache_index=index, self_attention_mask=self_mask, training=training,
                self_attention_weights=None if weights is None else weights[f"layer_{i}"],
            )
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        return x, new_cache

    # Keras ----------------------------------------------------------------------

    def call(self, inputs, training=None):
        source_ids, target_ids = inputs
        encoder_outputs, source_mask = self.encode(source_ids, training=training)
        return self.decode(target_ids, encoder_outputs, source_mask, training=training)

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
