"""Attention masks: padding (keys that are not tokens) and causal (section 3.2.3).

"We need to prevent leftward information flow in the decoder to preserve the
auto-regressive property. We implement this inside of scaled dot-product
attention by masking out (setting to -inf) all values in the input of the
softmax which correspond to illegal connections."

Masks are boolean and True where attention is allowed; `MultiHeadAttention`
broadcasts them over heads.
"""

from __future__ import annotations

import tensorflow as tf


def padding_mask(ids, pad_id: int = 0) -> tf.Tensor:
    """True at real tokens: bool `(B, T)` from int ids `(B, T)`."""
    return tf.not_equal(ids, pad_id)


def causal_mask(query_length, key_length=None, start_index=0) -> tf.Tensor:
    """Bool `(T_q, T_k)`: query i (at position start_index + i) may see keys 0 ... start_index + i.

    With `start_index=0` and `key_length=query_length` this is the lower
    triangle of the full decoder pass; in one-step decoding with a cache of
    length T_max, `causal_mask(1, T_max, step)` shows the keys written so far.
    """
    key_length = query_length if key_length is None else key_length
    query_positions = tf.range(query_length)[:, tf.newaxis] + tf.cast(start_index, tf.int32)
    key_positions = tf.range(key_length)[tf.newaxis, :]
    return key_positions <= query_positions
