"""Random sampling: temperature, top-k and nucleus (top-p), reproducible with a seed.

Not in the paper, which decodes with beam search (section 6.1). Sampling gives the diverse,
not only most probable, outputs that back-translation (Edunov et al., 2018, "Understanding
Back-Translation at Scale": sampled synthetic sources beat beam ones) and data augmentation use.
At every step the next token is drawn from the model's distribution reshaped by

    temperature T:  p_T(y) proportional to p(y) ** (1 / T)        (T = 0: the argmax, greedy)
    top-k:          only the k most probable tokens               (k = 0: the whole vocabulary)
    top-p:          only the smallest set of most probable tokens whose probability reaches p
                    (Holtzman et al., 2020, "The Curious Case of Neural Text Degeneration"),

in that order (p is taken over the tempered top-k distribution, as Hugging Face's and
CTranslate2's samplers do). The score of a sample is its log P(Y) under the model itself
(no temperature, no truncation), the score greedy search gives.

The loop is `beam_search.greedy_search`'s, with this module's draw in place of the argmax: the
model is `fn(ids, step, cache, memory)`, a finished example leaves the batch, everything is one
`tf.while_loop` of core TF ops, and a forced prefix's tokens are taken, not drawn. The draws are
stateless (`tf.random.stateless_categorical` with the seed `[seed, step]`), so the
same sentences in the same batch with the same seed give the same samples eagerly, under
`tf.function` and in a SavedModel; a sentence's sample also depends on the others of its batch
(they share one draw per step).

    sequences, scores = sample(fn, bos, cache, limits, eos_id=EOS_ID, memory=memory,
                               topk=10, topp=1.0, temperature=1.0, seed=7)
"""

from typing import Any, Optional, Tuple, Union

import tensorflow as tf

from keras_transformer.decoding import beam_search as beam_search_lib

Number = Union[int, float, tf.Tensor]


def _per_example(value: Number, dtype, batch_size) -> tf.Tensor:
    return tf.broadcast_to(tf.cast(value, dtype), [batch_size])


def choose_tokens(log_probs: tf.Tensor, topk: tf.Tensor, topp: tf.Tensor, temperature: tf.Tensor,
                  seed: tf.Tensor) -> tf.Tensor:
    """One sampled token per row.

    Args:
        log_probs: float32 (n, V), the model's log-probabilities (NEG_INF: never).
        topk: int32 (n,), 0 for the whole vocabulary; topp: float32 (n,) in (0, 1];
            temperature: float32 (n,) >= 0, 0 for the most probable token.
        seed: int64 (2,), the stateless seed of this draw.

    Returns:
        int32 (n,).
    """
    vocab_size = tf.shape(log_probs)[1]
    never = log_probs <= beam_search_lib.NEG_INF / 2
    tempered = tf.where(never, beam_search_lib.NEG_INF,
                        log_probs / tf.maximum(temperature, 1e-6)[:, None])  # (n, V)
    ranked, order = tf.math.top_k(tempered, k=vocab_size)  # (n, V), most probable first
    rank = tf.range(vocab_size)[None, :]  # (1, V)
    k = tf.where(topk > 0, tf.minimum(topk, vocab_size), vocab_size)  # (n,)
    in_top_k = rank < k[:, None]  # (n, V)
    probs = tf.nn.softmax(tf.where(in_top_k, ranked, beam_search_lib.NEG_INF), axis=-1)
    before = tf.math.cumsum(probs, axis=-1, exclusive=True)  # (n, V), mass of the better tokens
    in_nucleus = before < topp[:, None]  # the first token always (0 < p)
    kept = tf.where(tf.logical_and(in_top_k, in_nucleus), ranked, beam_search_lib.NEG_INF)
    drawn = tf.random.stateless_categorical(kept, 1, seed=seed, dtype=tf.int32)[:, 0]  # (n,), a rank
    drawn = tf.where(temperature > 0.0, drawn, 0)
    return tf.gather(order, drawn, batch_dims=1)


def sample(
    symbols_to_logits_fn,
    initial_ids: tf.Tensor,
    initial_cache: Any,
    max_decode_length: Number,
    *,
    eos_id: int,
    seed: Number = 0,
    topk: Number = 0,
    topp: Number = 1.0,
    temperature: Number = 1.0,
    memory: Any = None,
    prefix: Optional[tf.Tensor] = None,
    normalize: bool = True,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """Samples one output per example, token by token, until EOS or the length limit.

    Same model contract, lengths and stopping rule as `beam_search.greedy_search`.

    Args:
        symbols_to_logits_fn: the model, called with ids int32 (live,).
        initial_ids: int32 (B,), the start token of every example.
        initial_cache: nested structure of tensors with leading dimension B.
        max_decode_length: int, int32 scalar tensor or int32 (B,), the largest |Y|, EOS included.
        eos_id: int, the end-of-sentence id.
        seed: int or int scalar tensor: the same seed gives the same samples.
        topk, topp, temperature: Python numbers, scalar tensors or (B,) tensors (module
            docstring; the caller checks their ranges: k >= 0, 0 < p <= 1, T >= 0).
        memory: None, or the nested structure `symbols_to_logits_fn` receives as 4th argument.
        prefix: None, or int32 (B, P), a forced target prefix per example padded with -1
            (`beam_search.force_prefix`): its tokens are taken, not drawn.
        normalize: as in `beam_search.beam_search`: False when `symbols_to_logits_fn` returns
            masked log-probabilities (the tree constraint); the draw is from them renormalized
            either way, and the score is then log P(Y) under the model itself.

    Returns:
        sequences: int32 (B, T), without the start token, up to and including EOS, then 0s.
        scores: float32 (B,), log P(Y) under the model.
    """
    batch_size = tf.shape(initial_ids)[0]
    settings = [_per_example(topk, tf.int32, batch_size), _per_example(topp, tf.float32, batch_size),
                _per_example(temperature, tf.float32, batch_size)]
    seed = tf.cast(seed, tf.int64)

    def choose(log_probs, live, step):
        own_topk, own_topp, own_temperature = (tf.gather(setting, live) for setting in settings)
        draw_seed = tf.stack([seed, tf.cast(step, tf.int64)])  # (2,): one draw per step
        return choose_tokens(log_probs, own_topk, own_topp, own_temperature, draw_seed)

    return beam_search_lib.greedy_search(symbols_to_logits_fn, initial_ids, initial_cache, max_decode_length,
                                         eos_id=eos_id, memory=memory, prefix=prefix, choose=choose,
                                         normalize=normalize)
