"""A tiny model's batch and one check for a whole model: cached decoding equals the full pass.

Used for every variant of the model (tests/keras_transformer/test_model.py) and for a position
encoding registered by a test (tests/keras_transformer/test_position_encodings.py).
"""

import numpy as np
import tensorflow as tf

from keras_transformer import Transformer, TransformerConfig

SOURCE = np.array([[5, 6, 7, 8, 3, 0], [9, 10, 3, 0, 0, 0]], "int32")
TARGET = np.array([[2, 11, 12, 13, 14], [2, 15, 16, 0, 0]], "int32")  # decoder inputs, BOS = 2


def tiny_model(**overrides) -> Transformer:
    """A built `TransformerConfig.tiny(**overrides)` model, called once on SOURCE and TARGET."""
    model = Transformer(TransformerConfig.tiny(**overrides))
    model((SOURCE, TARGET))
    return model


def check_cached_decoding(model, source, target) -> None:
    """`model.decode_step` over `target`'s decoder inputs `(B, T)`, one token a step, gives the
    logits of `model.decode` over all of them, and the same cache as one pass over the whole
    prefix, whether the cache is preallocated, grown by each step or read with hoisted weights.
    """
    batch, length = target.shape
    # The cache and the memory hold one entry per decoder layer, whatever the encoder's depth.
    layers = [f"layer_{i}" for i in range(model.config.decoder_depth)]
    encoder_outputs, source_mask = model.encode(source)
    full = model.decode(target, encoder_outputs, source_mask)
    memory = model.init_memory(encoder_outputs, source_mask)
    steps, cache = [], model.init_cache(batch, max_length=length)
    grown_steps, grown = [], model.init_cache(batch, max_length=0)  # what decoding uses: grown by each step
    weights, hoisted = model.step_weights(), model.init_cache(batch, max_length=0)  # and its hoisted weights
    for t in range(length):
        logits, cache = model.decode_step(target[:, t], t, cache, memory)
        steps.append(logits)
        logits, grown = model.decode_step(target[:, t], t, grown, memory)
        grown_steps.append(logits)
        assert grown["layer_0"]["key"].shape[2] == t + 1
        with_weights, hoisted = model.decode_step(target[:, t], t, hoisted, memory, weights=weights)
        # The same products; E^T as stored may change oneDNN's summation order by an ulp or two.
        np.testing.assert_allclose(with_weights, logits, rtol=0, atol=1e-6)
    np.testing.assert_allclose(tf.stack(steps, axis=1), full, atol=1e-5)
    np.testing.assert_allclose(tf.stack(grown_steps, axis=1), full, atol=1e-5)
    for a, b in zip(tf.nest.flatten(cache), tf.nest.flatten(grown)):  # the same keys and values
        np.testing.assert_allclose(a, b, atol=1e-5)
    # The cache after T steps equals the cache of one pass over the whole prefix.
    x = model._embed_target(target, 0, training=False)
    _, prefill = model._decode_cached(x, 0, model.init_cache(batch, length), memory)
    tf.nest.assert_same_structure(cache, prefill)
    for a, b in zip(tf.nest.flatten(cache), tf.nest.flatten(prefill)):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert sorted(cache) == layers and sorted(memory) == layers + ["source_mask"]
