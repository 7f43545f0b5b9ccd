"""Ensembles: several Transformers of one vocabulary decoded as one model.

Not in "Attention Is All You Need". As fairseq's `EnsembleModel` and Marian's `--models`, each
decoding step averages the members' next-token distributions in probability space and
returns its log:

    log p(y | y_<t, X) = log( (1/n) sum_i p_i(y | y_<t, X) )
                       = logsumexp_i(log_softmax(logits_i)) - log(n)

(fairseq `EnsembleModel.forward_decoder`: `torch.logsumexp(stack, dim=0) - math.log(n)`).
The result is a normalised log-distribution, so beam search's own log-softmax leaves it as it is.
Members may differ in shape (layers, d_model, heads, positions): each keeps its own encoder
outputs, cache and memory, nested under its index.

    ensemble = Ensemble([model_a, model_b])
    sequences, scores = search.translate_ids(ensemble, source_ids, config)   # one beam search

An `Ensemble` offers what `keras_transformer.decoding.search` and the export read of a model:
`config` (the first member's, with the smallest `max_length` and, when some member's positions
end at its `max_length` (learned ones), that member's kind: the length rule then respects every
member's position table), `encode`, `step_fn`
(the search's contract `fn(ids, step, cache, memory)` over the members' own step fns), a
teacher-forced call (its "logits" the ensemble's log-probabilities, for `sequence_scores`),
`cross_attention` (the first member's: attention maps of members of different shapes do not
average) and `variables`.
"""

from __future__ import annotations

import math
from typing import Sequence

import tensorflow as tf

from keras_transformer.config import VOCABULARY_FIELDS
from keras_transformer.decoding import search



def vocabulary_mismatch(configs: Sequence) -> str:
    """"" if every `TransformerConfig` of `configs` has the first's vocabulary fields, else one
    phrase naming the first that differs."""
    first = configs[0]
    for i, config in enumerate(configs[1:], start=1):
        for name in VOCABULARY_FIELDS:
            if getattr(config, name) != getattr(first, name):
                return f"member {i} has {name}={getattr(config, name)!r}, member 0 {getattr(first, name)!r}"
    return ""


class Ensemble:
    """Transformers of one vocabulary decoded as one model (module docstring).

    Args:
        members: built `Transformer`s (2 or more; 1 is allowed and decodes as that model).

    Raises:
        ValueError: no member, or members of different vocabularies (`vocabulary_mismatch`).
    """

    def __init__(self, members: Sequence):
        if not members:
            raise ValueError("an ensemble needs at least one model")
        problem = vocabulary_mismatch([m.config for m in members])
        if problem:
            raise ValueError(f"the ensemble's models have different vocabularies: {problem}")
        self.members = list(members)
        configs = [m.config for m in members]
        bounded = [c for c in configs if c.positions.bounded]  # positions that end at max_length
        self.config = configs[0].replace(max_length=min(c.max_length for c in configs),
                                         positional_encoding=(bounded or configs)[0].positional_encoding)

    @property
    def variables(self) -> list:
        return [v for m in self.members for v in m.variables]

    @property
    def compute_dtype(self):
        return self.members[0].compute_dtype

    def _key(self, i: int) -> str:
        return f"member_{i}"

    def encode(self, source_ids, training=False):
        """`({member_i: (B, S, d_model_i)}, source mask (B, S))`; the mask is the same for all."""
        outputs, source_mask = {}, None
        for i, member in enumerate(self.members):
            outputs[self._key(i)], source_mask = member.encode(source_ids, training=training)
        return outputs, source_mask

    def step_fn(self, encoder_outputs, source_mask, max_length, *, use_cache: bool = True, candidates=None):
        """`(fn, initial_cache, memory)` as `search.step_fn`: each member's own, nested under its
        key, and `fn` the log of the mean of the members' next-token probabilities (over the
        `candidates` alone when given: each member's, then normalised over them)."""
        fns, cache, memory = {}, {}, {}
        for i, member in enumerate(self.members):
            key = self._key(i)
            fns[key], cache[key], memory[key] = search.step_fn(member, encoder_outputs[key], source_mask, max_length,
                                                               use_cache=use_cache, candidates=candidates)
        log_n = math.log(len(self.members))

        def fn(ids, step, cache, memory):
            log_probs, new_cache = [], {}
            for key, member_fn in fns.items():
                logits, new_cache[key] = member_fn(ids, step, cache[key], memory[key])
                log_probs.append(tf.nn.log_softmax(tf.cast(logits, tf.float32)))  # (rows, V)
            return mean_probabilities(log_probs, log_n), new_cache

        return fn, cache, memory

    def __call__(self, inputs, training=False):
        """Teacher forcing: `(source_ids (B, S), decoder inputs (B, T))` -> float32 `(B, T, V)`,
        the log of the members' mean probabilities (normalised, so usable as logits)."""
        log_probs = [tf.nn.log_softmax(tf.cast(m(inputs, training=training), tf.float32)) for m in self.members]
        return mean_probabilities(log_probs, math.log(len(self.members)))

    def cross_attention(self, target_ids, encoder_outputs, source_mask):
        """The first member's encoder-decoder attention (`Transformer.cross_attention`)."""
        return self.members[0].cross_attention(target_ids, encoder_outputs[self._key(0)], source_mask)


def mean_probabilities(log_probs: Sequence[tf.Tensor], log_n: float) -> tf.Tensor:
    """log((1/n) sum_i exp(log_probs_i)) = logsumexp_i(log_probs_i) - log(n), elementwise."""
    if len(log_probs) == 1:
        return log_probs[0]
    return tf.reduce_logsumexp(tf.stack(log_probs), axis=0) - log_n
