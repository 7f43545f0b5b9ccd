"""Beam search and greedy decoding in pure TensorFlow (Vaswani et al., 2017, section 6.1).

"We used beam search with a beam size of 4 and length penalty alpha = 0.6 [...]. We set the
maximum output length during inference to input length + 50, but terminate early when possible."

The module imports no model: a model is reached only through

    symbols_to_logits_fn(ids, step, cache) -> (logits, new_cache)

    ids:    int32 (batch * beam,), the token at position `step` of every hypothesis
            (at step 0 the start id, e.g. BOS).
    step:   int32 scalar tensor.
    cache:  nested structure (dicts) of tensors with leading dimension batch * beam, e.g. the
            encoder output and pre-allocated key/value buffers. Its shapes may change from step to
            step except for the last dimension (see `_loose_shape`).
    logits: float (batch * beam, vocab_size) for the token at position step + 1 (any float dtype;
            the log-softmax is taken in float32).

Hypotheses of one example are adjacent in the flat batch * beam dimension (row b * beam + j).
Everything runs in one `tf.while_loop` built from core TF ops, so the same code runs eagerly,
under `tf.function` and inside a SavedModel served by stock TF Serving. The structure (alive and
finished hypotheses, 2 * beam candidates per step, early stopping bound) follows tensor2tensor /
Model Garden `official/nlp/modeling/ops/beam_search.py` and flax `examples/wmt/decode.py`.

Lengths: the length |Y| of a hypothesis is the number of generated tokens, the EOS included and
the start token excluded. `max_decode_length` bounds |Y|: a hypothesis that reaches it is ended
("truncated") whether or not its last token is EOS, and competes with the EOS-ended ones.
"""

from typing import Any, Callable, Optional, Tuple, Union

import tensorflow as tf

# Masking value for impossible hypotheses: finite, so no inf - inf = NaN can ever appear. Real
# log-probabilities are far above NEG_INF / 2; anything below counts as impossible.
NEG_INF = -1.0e7

SymbolsToLogitsFn = Callable[[tf.Tensor, tf.Tensor, Any], Tuple[tf.Tensor, Any]]
LengthLike = Union[int, tf.Tensor]


def length_penalty(length: LengthLike, alpha: Union[float, tf.Tensor]) -> tf.Tensor:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al., 2016, eq. 14).

    Beam search ranks finished hypotheses by log P(Y) / lp(Y) (paper section 6.1: alpha = 0.6).
    alpha = 0 gives lp = 1, i.e. raw log-probabilities.

    Args:
        length: int or int tensor of any shape, |Y| (generated tokens, EOS included).
        alpha: float or float tensor, the strength of the penalty (>= 0).

    Returns:
        float32 tensor of the shape of `length`.
    """
    length = tf.cast(length, tf.float32)
    return tf.pow((5.0 + length) / 6.0, tf.cast(alpha, tf.float32))


def _expand_to_beam(tensor: tf.Tensor, beam_size: int) -> tf.Tensor:
    """(B, ...) -> (B * beam, ...), copy j of example b at row b * beam + j."""
    return tf.repeat(tensor, beam_size, axis=0)


def _gather_beams(tensor: tf.Tensor, beam_indices: tf.Tensor, batch_size, beam_size: int):
    """Selects cache rows: out[b * beam + j] = tensor[b * beam + beam_indices[b, j]].

    Args:
        tensor: (B * beam, ...).
        beam_indices: int32 (B, beam), indices into the beams of the same example.

    Returns:
        (B * beam, ...), the static shape of `tensor`.
    """
    shape = tf.shape(tensor)
    split = tf.reshape(tensor, tf.concat([[batch_size, beam_size], shape[1:]], 0))  # (B, beam, ...)
    gathered = tf.gather(split, beam_indices, axis=1, batch_dims=1)  # (B, beam, ...)
    out = tf.reshape(gathered, shape)  # (B * beam, ...)
    out.set_shape(tensor.shape)
    return out


def _loose_shape(tensor: tf.Tensor) -> tf.TensorShape:
    """Loop shape invariant of a cache tensor: only the last dimension stays (Dense needs it)."""
    shape = tensor.shape
    if shape.rank is None or shape.rank == 0:
        return shape
    return tf.TensorShape([None] * (shape.rank - 1) + [shape[-1]])


def _per_example_limit(max_decode_length: LengthLike, batch_size) -> tf.Tensor:
    """A Python int, scalar tensor or (B,) tensor -> int32 (B,)."""
    return tf.broadcast_to(tf.cast(max_decode_length, tf.int32), [batch_size])


def _max_or_zero(values: tf.Tensor) -> tf.Tensor:
    """Largest entry of an int32 tensor, 0 if it is empty (reduce_max would give INT32_MIN)."""
    return tf.reduce_max(tf.concat([[0], tf.reshape(values, [-1])], 0))


def beam_width(beam_size: LengthLike) -> LengthLike:
    """How many hypotheses a search keeps per example: `beam_size` itself, or the largest of
    per-example beams (an int32 scalar or (B,) tensor; at least 1, also for an empty batch)."""
    if isinstance(beam_size, int):
        return beam_size
    return tf.maximum(_max_or_zero(tf.cast(beam_size, tf.int32)), 1)


def beam_search(
    symbols_to_logits_fn: SymbolsToLogitsFn,
    initial_ids: tf.Tensor,
    initial_cache: Any,
    vocab_size: int,
    *,
    beam_size: LengthLike = 4,
    alpha: Union[float, tf.Tensor] = 0.6,
    max_decode_length: LengthLike,
    eos_id: int,
    n_best: Optional[LengthLike] = None,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """Beam search with the GNMT length penalty (paper section 6.1: beam 4, alpha 0.6).

    Every step expands each alive hypothesis by every token, keeps the 2 * beam_size most
    probable candidates, moves those that end (EOS, or length == max_decode_length) to the
    `beam_size` best finished hypotheses (ranked by log P / lp) and keeps the `beam_size` best
    others alive (ranked by log P). An example is done when it reached its length limit, or when
    it holds `n_best` finished hypotheses and even the best alive one, given the largest length
    penalty it could still get, cannot beat the n_best-th of them; the loop stops when every
    example is done. A done example is frozen, so its result does not depend on the rest of the
    batch.

    Args:
        symbols_to_logits_fn: the model, see the module docstring.
        initial_ids: int32 (B,), the start token of every example (BOS).
        initial_cache: nested structure of tensors with leading dimension B; each is expanded once
            to (B * beam_size, ...).
        vocab_size: int, the last dimension of the logits.
        beam_size: int, hypotheses kept alive per example; or, per request, an int32 scalar
            or (B,) tensor (values >= 1; the caller bounds them): example b then searches with
            its own beam, exactly as alone, inside a beam as wide as the largest.
        alpha: float >= 0, length penalty exponent (0: rank by raw log-probability); or a
            float32 scalar or (B,) tensor.
        max_decode_length: int, int32 scalar tensor or int32 (B,): the largest |Y| per example,
            EOS included (the paper: source length + 50).
        eos_id: int, the end-of-sentence id (the caller's vocabulary; no default).
        n_best: int in [1, beam_size] or None (= beam_size): hypotheses returned per example;
            or an int32 scalar or (B,) tensor (each in [1, that example's beam]).

    Returns:
        sequences: int32 (B, n_best, T), best first, without the start token; each holds its
            tokens up to and including EOS (none if truncated), then 0s. T is the longest
            returned length (0 for an empty batch). With per-example n_best the width is the
            largest, and the slots past an example's own n_best are empty.
        scores: float32 (B, n_best), log P(Y) / lp(|Y|), descending. A slot that no hypothesis
            reached (possible only with a tiny vocabulary, or past a per-example n_best) has
            score NEG_INF and only 0s.

    Per-example beams: the search keeps K = the largest beam alive for every example and masks
    what example b's own beam k_b would not have: candidates ranked 2 * k_b or later and alive
    hypotheses ranked k_b or later. Its first k_b alive hypotheses, its candidates and its best
    k_b finished ones are then those of a search with beam k_b (`top_k` breaks ties by index in
    both), so its results are too.
    """
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2, got {vocab_size}.")
    per_example = any(isinstance(v, (tf.Tensor, tf.Variable)) for v in (beam_size, n_best, alpha))
    initial_ids = tf.cast(initial_ids, tf.int32)
    initial_cache = tf.nest.map_structure(tf.convert_to_tensor, initial_cache)
    batch_size = tf.shape(initial_ids)[0]
    max_len = _per_example_limit(max_decode_length, batch_size)  # (B,)
    if per_example:
        row_beam = _per_example_limit(beam_size, batch_size)  # (B,)
        row_n_best = row_beam if n_best is None else _per_example_limit(n_best, batch_size)  # (B,)
        alpha = tf.broadcast_to(tf.cast(alpha, tf.float32), [batch_size])  # (B,)
        beam_size = beam_width(row_beam)  # K: the widest beam of the batch
        n_best_width = tf.maximum(_max_or_zero(row_n_best), 1)
    else:
        if beam_size < 1:
            raise ValueError(f"beam_size must be >= 1, got {beam_size}.")
        n_best = beam_size if n_best is None else n_best
        if not 1 <= n_best <= beam_size:
            raise ValueError(f"n_best must be in [1, beam_size={beam_size}], got {n_best}.")
        row_n_best = n_best_width = n_best
    num_candidates = 2 * beam_size  # <= beam_size * vocab_size since vocab_size >= 2

    def nth_finished(state, key):  # (B,): the row_n_best-th best finished flag or score
        if not per_example:
            return state[key][:, n_best_width - 1]
        return tf.gather(state[key], row_n_best[:, None] - 1, batch_dims=1)[:, 0]

    def per_row(value):  # a (B,) tensor of per-example settings lines up with (B, k) ones
        return value[:, None] if per_example else value

    def done_examples(state):
        """bool (B,): examples whose finished hypotheses can no longer change."""
        step = state["step"]  # tokens generated so far
        best_alive = tf.reduce_max(state["alive_log_probs"], axis=1)  # (B,)
        # lp is monotone in the length, so its maximum over the reachable lengths
        # [step + 1, max_len] is at one of the two ends.
        largest_lp = tf.maximum(length_penalty(step + 1, alpha), length_penalty(max_len, alpha))
        best_possible = best_alive / largest_lp  # (B,), log-probs only decrease
        cannot_improve = tf.logical_and(
            nth_finished(state, "finished_flags"),  # scores are sorted: n_best are finished
            nth_finished(state, "finished_scores") >= best_possible,
        )
        nothing_alive = best_alive <= NEG_INF / 2
        return tf.logical_or(tf.logical_or(step >= max_len, nothing_alive), cannot_improve)

    def cond(state):
        return tf.logical_not(tf.reduce_all(done_examples(state)))

    def body(state):
        step = state["step"]
        active = tf.logical_not(done_examples(state))  # (B,)

        flat_ids = tf.reshape(state["alive_seq"][:, :, -1], [-1])  # (B * beam,)
        logits, new_cache = symbols_to_logits_fn(flat_ids, step, state["cache"])
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)  # (B * beam, V)
        log_probs = tf.maximum(log_probs, NEG_INF)  # -inf logits (masking) stay finite
        log_probs = tf.reshape(log_probs, [batch_size, beam_size, vocab_size])  # (B, beam, V)

        # Every (hypothesis, next token) pair, flat over beam * V; keep the 2 * beam best.
        candidates = state["alive_log_probs"][:, :, None] + log_probs  # (B, beam, V)
        candidates = tf.reshape(candidates, [batch_size, beam_size * vocab_size])  # (B, beam * V)
        top_log_probs, top_indices = tf.math.top_k(candidates, k=num_candidates)  # (B, 2 * beam)
        top_beams = top_indices // vocab_size  # (B, 2 * beam), the parent hypothesis
        top_tokens = top_indices % vocab_size  # (B, 2 * beam)
        top_seq = tf.gather(state["alive_seq"], top_beams, batch_dims=1)  # (B, 2 * beam, step + 1)
        top_seq = tf.concat([top_seq, top_tokens[:, :, None]], axis=2)  # (B, 2 * beam, step + 2)

        new_length = step + 1  # |Y| of every candidate
        valid = tf.logical_and(top_log_probs > NEG_INF / 2, active[:, None])  # (B, 2 * beam)
        if per_example:  # example b's own beam sees only its 2 * k_b best candidates
            valid = tf.logical_and(valid, tf.range(num_candidates)[None, :] < 2 * row_beam[:, None])
        ended = tf.logical_or(tf.equal(top_tokens, eos_id), (new_length >= max_len)[:, None])

        # Alive: the beam best candidates that did not end, ranked by log-probability.
        keep_alive = tf.logical_and(valid, tf.logical_not(ended))  # (B, 2 * beam)
        alive_scores = tf.where(keep_alive, top_log_probs, NEG_INF)
        alive_log_probs, alive_indices = tf.math.top_k(alive_scores, k=beam_size)  # (B, beam)
        if per_example:  # and keeps its k_b best alive
            alive_log_probs = tf.where(tf.range(beam_size)[None, :] < row_beam[:, None], alive_log_probs, NEG_INF)
        alive_seq = tf.gather(top_seq, alive_indices, batch_dims=1)  # (B, beam, step + 2)
        parents = tf.gather(top_beams, alive_indices, batch_dims=1)  # (B, beam)
        cache = tf.nest.map_structure(
            lambda t: _gather_beams(t, parents, batch_size, beam_size), new_cache
        )

        # Finished: merge the ended candidates into the beam best, ranked by log P / lp.
        # The old ones come first, so they win ties (top_k prefers lower indices).
        new_flags = tf.logical_and(valid, ended)  # (B, 2 * beam)
        new_scores = tf.where(new_flags, top_log_probs / length_penalty(new_length, per_row(alpha)), NEG_INF)
        old_seq = tf.pad(state["finished_seq"], [[0, 0], [0, 0], [0, 1]])  # (B, beam, step + 2)
        all_seq = tf.concat([old_seq, top_seq], axis=1)  # (B, 3 * beam, step + 2)
        all_scores = tf.concat([state["finished_scores"], new_scores], axis=1)  # (B, 3 * beam)
        all_flags = tf.concat([state["finished_flags"], new_flags], axis=1)
        all_lengths = tf.concat(
            [state["finished_lengths"], tf.fill(tf.shape(new_flags), new_length)], axis=1
        )
        finished_scores, keep = tf.math.top_k(all_scores, k=beam_size)  # (B, beam)

        return (
            {
                "step": new_length,
                "alive_seq": alive_seq,
                "alive_log_probs": alive_log_probs,
                "finished_seq": tf.gather(all_seq, keep, batch_dims=1),
                "finished_scores": finished_scores,
                "finished_flags": tf.gather(all_flags, keep, batch_dims=1),
                "finished_lengths": tf.gather(all_lengths, keep, batch_dims=1),
                "cache": cache,
            },
        )

    # Only the first copy of each example is alive at first, or the beam would hold duplicates.
    first_beam = tf.where(tf.range(beam_size) == 0, 0.0, NEG_INF)[None, :]  # (1, beam)
    start_seq = tf.tile(initial_ids[:, None, None], [1, beam_size, 1])  # (B, beam, 1)
    state = {
        "step": tf.constant(0, tf.int32),
        "alive_seq": start_seq,
        "alive_log_probs": tf.tile(first_beam, [batch_size, 1]),  # (B, beam)
        "finished_seq": tf.zeros_like(start_seq),  # (B, beam, 1)
        "finished_scores": tf.fill([batch_size, beam_size], NEG_INF),
        "finished_flags": tf.zeros([batch_size, beam_size], tf.bool),
        "finished_lengths": tf.zeros([batch_size, beam_size], tf.int32),
        "cache": tf.nest.map_structure(lambda t: _expand_to_beam(t, beam_size), initial_cache),
    }
    static_beam = None if per_example else beam_size
    seq_shape = tf.TensorShape([None, static_beam, None])
    beam_shape = tf.TensorShape([None, static_beam])
    invariants = {
        "step": tf.TensorShape([]),
        "alive_seq": seq_shape,
        "alive_log_probs": beam_shape,
        "finished_seq": seq_shape,
        "finished_scores": beam_shape,
        "finished_flags": beam_shape,
        "finished_lengths": beam_shape,
        "cache": tf.nest.map_structure(_loose_shape, state["cache"]),
    }
    (state,) = tf.while_loop(
        cond, body, loop_vars=(state,), shape_invariants=(invariants,), parallel_iterations=1
    )

    flags = state["finished_flags"][:, :n_best_width]  # (B, n_best)
    if per_example:  # slots past an example's own n_best stay empty
        flags = tf.logical_and(flags, tf.range(n_best_width)[None, :] < row_n_best[:, None])
    scores = tf.where(flags, state["finished_scores"][:, :n_best_width], NEG_INF)
    lengths = tf.where(flags, state["finished_lengths"][:, :n_best_width], 0)
    sequences = state["finished_seq"][:, :n_best_width, 1:]  # (B, n_best, steps), drop the start token
    sequences *= tf.cast(flags, tf.int32)[:, :, None]
    sequences = sequences[:, :, : _max_or_zero(lengths)]  # (B, n_best, T)
    return tf.stop_gradient(sequences), tf.stop_gradient(scores)


def greedy_search(
    symbols_to_logits_fn: SymbolsToLogitsFn,
    initial_ids: tf.Tensor,
    initial_cache: Any,
    max_decode_length: LengthLike,
    *,
    eos_id: int,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """Greedy decoding: the most probable next token at every step.

    Same model contract, lengths and stopping rule as `beam_search` (a hypothesis ends at EOS
    or when |Y| == max_decode_length), without the length penalty and without a beam: the cache
    keeps leading dimension B and is never reordered.

    Args:
        symbols_to_logits_fn: the model, called with ids int32 (B,).
        initial_ids: int32 (B,), the start token of every example.
        initial_cache: nested structure of tensors with leading dimension B.
        max_decode_length: int, int32 scalar tensor or int32 (B,), the largest |Y|, EOS included.
        eos_id: int, the end-of-sentence id (the caller's vocabulary; no default).

    Returns:
        sequences: int32 (B, T), without the start token, up to and including EOS, then 0s.
        scores: float32 (B,), log P(Y), the sum of the log-probabilities of the tokens of Y.
    """
    initial_ids = tf.cast(initial_ids, tf.int32)
    initial_cache = tf.nest.map_structure(tf.convert_to_tensor, initial_cache)
    batch_size = tf.shape(initial_ids)[0]
    max_len = _per_example_limit(max_decode_length, batch_size)  # (B,)

    def done_examples(state):
        return tf.logical_or(state["finished"], state["step"] >= max_len)  # (B,)

    def cond(state):
        return tf.logical_not(tf.reduce_all(done_examples(state)))

    def body(state):
        active = tf.logical_not(done_examples(state))  # (B,)
        logits, cache = symbols_to_logits_fn(state["seq"][:, -1], state["step"], state["cache"])
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)  # (B, V)
        log_probs = tf.maximum(log_probs, NEG_INF)
        token = tf.argmax(log_probs, axis=-1, output_type=tf.int32)  # (B,)
        token = tf.where(active, token, 0)
        token_log_prob = tf.gather(log_probs, token, batch_dims=1)  # (B,)
        return (
            {
                "step": state["step"] + 1,
                "seq": tf.concat([state["seq"], token[:, None]], axis=1),  # (B, step + 2)
                "log_probs": state["log_probs"] + tf.where(active, token_log_prob, 0.0),
                "lengths": state["lengths"] + tf.cast(active, tf.int32),
                "finished": tf.logical_or(
                    state["finished"], tf.logical_and(active, tf.equal(token, eos_id))
                ),
                "cache": cache,
            },
        )

    state = {
        "step": tf.constant(0, tf.int32),
        "seq": initial_ids[:, None],  # (B, 1)
        "log_probs": tf.zeros([batch_size], tf.float32),
        "lengths": tf.zeros([batch_size], tf.int32),
        "finished": tf.zeros([batch_size], tf.bool),
        "cache": initial_cache,
    }
    invariants = {
        "step": tf.TensorShape([]),
        "seq": tf.TensorShape([None, None]),
        "log_probs": tf.TensorShape([None]),
        "lengths": tf.TensorShape([None]),
        "finished": tf.TensorShape([None]),
        "cache": tf.nest.map_structure(_loose_shape, initial_cache),
    }
    (state,) = tf.while_loop(
        cond, body, loop_vars=(state,), shape_invariants=(invariants,), parallel_iterations=1
    )
    sequences = state["seq"][:, 1 : 1 + _max_or_zero(state["lengths"])]  # (B, T)
    return tf.stop_gradient(sequences), tf.stop_gradient(state["log_probs"])
