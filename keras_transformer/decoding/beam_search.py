"""Beam search and greedy decoding in pure TensorFlow (Vaswani et al., 2017, section 6.1).

"We used beam search with a beam size of 4 and length penalty alpha = 0.6 [...]. We set the
maximum output length during inference to input length + 50, but terminate early when possible."

The module imports no model: a model is reached only through

    symbols_to_logits_fn(ids, step, cache) -> (logits, new_cache)
    symbols_to_logits_fn(ids, step, cache, memory) -> (logits, new_cache)   (with `memory=`)

    ids:    int32 (rows,), the token at position `step` of every hypothesis still searched
            (at step 0 the start id, e.g. BOS).
    step:   int32 scalar tensor.
    cache:  nested structure (dicts) of tensors with leading dimension rows: what each step
            writes, e.g. self-attention keys and values. Its shapes may change from step to
            step except for the last dimension (see `_loose_shape`).
    memory: nested structure of tensors with leading dimension rows that no step changes (the
            encoder-decoder keys and values of the source): the search expands it to the beam
            once and reorders it only when examples leave the batch, never with the beams
            (the hypotheses of one example share their source).
    logits: float (rows, vocab_size) for the token at position step + 1 (any float dtype;
            the log-softmax is taken in float32). With `normalize=False` the function returns
            log-probabilities instead, which the search adds up as they are: a constraint that
            masks tokens after the model's softmax (`tree_constraint`) keeps the model's own
            log P(Y) as the score, where a log-softmax over the masked logits would spread the
            masked tokens' probability over the allowed ones.

Done examples leave the batch: `rows` is live * beam (live * 1 for greedy search), where live
are the examples still searched, in their batch order. An example whose result can no longer
change is written to the output and its rows are dropped from the alive hypotheses, the cache
and the memory, so a step computes only for the sentences still being translated (on a batch
of mixed lengths the short ones no longer ride along with the longest). Hypotheses of one
example are adjacent (row i * beam + j for the i-th live example).

Beam search rounds the examples it keeps up to a power of two (`round_rows`): of a batch of
32, the rows are those of 32, 16, 8, 4, 2 and 1 examples, done examples riding along (their
result written when they were done, their rows computed and ignored) until the others fit in
the next smaller power. Each distinct row count is a new set of matrix shapes, for which
oneDNN builds and caches its kernels: with every count from 32 down to 1, a server's memory
grows with them; with six, it stays lower, at the price of the riders' rows. Greedy search
keeps exactly the live examples (sampling draws one number per row, so the rows a sentence
shares its step with decide its sample).

Everything runs in one `tf.while_loop` built from core TF ops, so the same code runs eagerly,
under `tf.function` and inside a SavedModel served by stock TF Serving. The structure (alive and
finished hypotheses, 2 * beam candidates per step, early stopping bound) follows tensor2tensor /
Model Garden `official/nlp/modeling/ops/beam_search.py` and flax `examples/wmt/decode.py`, and so
do the names of its steps (`_BeamSearch`: `_grow_alive_seq`, `_get_new_alive_state`,
`_get_new_finished_state`). Greedy search shares the ends of the loop with it: the arguments
as tensors (`_prepare`), done examples leaving the batch (`_batch_start`, `_leave_batch`), the `tf.while_loop`
(`_while_live`) and the outputs without the start token (`_outputs`).

Lengths: the length |Y| of a hypothesis is the number of generated tokens, the EOS included and
the start token excluded. `max_decode_length` bounds |Y|: a hypothesis that reaches it is ended
("truncated") whether or not its last token is EOS, and competes with the EOS-ended ones.
"""

import dataclasses
from typing import Any, Callable, Optional, Tuple, Union

import tensorflow as tf

# Masking value for impossible hypotheses: finite, so no inf - inf = NaN can ever appear. Real
# log-probabilities are far above NEG_INF / 2; anything below counts as impossible.
NEG_INF = -1.0e7

SymbolsToLogitsFn = Callable[..., Tuple[tf.Tensor, Any]]
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


def _expand_to_beam(tensor: tf.Tensor, beam_size) -> tf.Tensor:
    """(B, ...) -> (B * beam, ...), copy j of example b at row b * beam + j."""
    return tf.repeat(tensor, beam_size, axis=0)


def _beam_rows(examples: tf.Tensor, beams: tf.Tensor, beam_size) -> tf.Tensor:
    """Flat rows of chosen hypotheses: example i's j-th at row examples[i] * beam + beams[i, j].

    Args:
        examples: int32 (n,), positions in the current (live) batch.
        beams: int32 (n, k), beams of the same examples.

    Returns:
        int32 (n * k,).
    """
    return tf.reshape(examples[:, None] * beam_size + beams, [-1])


def _gather_beams(tensor: tf.Tensor, rows: tf.Tensor) -> tf.Tensor:
    """Selects cache rows, (rows_before, ...) -> (len(rows), ...), keeping the static rank."""
    out = tf.gather(tensor, rows, axis=0)
    out.set_shape(tf.TensorShape([None]).concatenate(tensor.shape[1:]))
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


def _with_memory(symbols_to_logits_fn: SymbolsToLogitsFn, memory: Any) -> Tuple[Callable, Any]:
    """The model as fn(ids, step, cache, memory), and the memory as tensors ({} if None)."""
    if memory is None:
        return (lambda ids, step, cache, _: symbols_to_logits_fn(ids, step, cache)), {}
    return symbols_to_logits_fn, tf.nest.map_structure(tf.convert_to_tensor, memory)


def _log_probs(logits: tf.Tensor, normalize: bool = True) -> tf.Tensor:
    """float32 log-softmax of logits (rows, V) of any float dtype, or (normalize=False) the
    log-probabilities given, in float32; -inf (masked) becomes NEG_INF."""
    values = tf.cast(logits, tf.float32)
    return tf.maximum(tf.nn.log_softmax(values, axis=-1) if normalize else values, NEG_INF)


def prefix_tokens(prefix: tf.Tensor, step) -> tf.Tensor:
    """int32 (n,): each example's forced token at position `step` of its output, -1 where its
    prefix is shorter. `prefix` is int32 (n, P), the forced target prefix padded with -1."""
    prefix = tf.pad(tf.cast(prefix, tf.int32), [[0, 0], [0, 1]], constant_values=-1)  # (n, P + 1)
    return prefix[:, tf.minimum(step, tf.shape(prefix)[1] - 1)]


def force_prefix(log_probs: tf.Tensor, prefix: tf.Tensor, step) -> tf.Tensor:
    """A forced target prefix in one step's log-probs (n, ..., V) (fairseq's `prefix_tokens`):
    where example i has a forced token, every other token gets NEG_INF and the forced one keeps
    its log-probability, so all its hypotheses follow the prefix and their scores are log P of
    the whole output, prefix included."""
    token = prefix_tokens(prefix, step)  # (n,)
    token = tf.reshape(token, [-1] + [1] * (log_probs.shape.rank - 1))  # (n, 1, ..., 1)
    others = tf.logical_and(token >= 0, tf.not_equal(tf.range(tf.shape(log_probs)[-1]), token))
    return tf.where(others, NEG_INF, log_probs)


def _positions(mask: tf.Tensor) -> tf.Tensor:
    """bool (n,) -> int32 positions of its True entries, in order."""
    return tf.cast(tf.where(mask)[:, 0], tf.int32)


def _power_of_two_at_least(count: tf.Tensor) -> tf.Tensor:
    """int32 scalar: the smallest power of two >= `count` (0 for 0), exactly, with bit operations."""
    value = count - 1
    for shift in (1, 2, 4, 8, 16):
        value = tf.bitwise.bitwise_or(value, tf.bitwise.right_shift(value, shift))
    return value + 1


def _rounded_rows(done: tf.Tensor) -> tf.Tensor:
    """bool (n,): the examples kept for the next step when the row count is rounded: every one
    not done, and the first done ones (riders) up to the smallest power of two that holds them,
    or n if that is smaller (then nothing leaves); none once all are done."""
    staying = tf.reduce_sum(tf.cast(tf.logical_not(done), tf.int32))
    target = tf.minimum(_power_of_two_at_least(staying), tf.size(done))
    riders = tf.logical_and(done, tf.cumsum(tf.cast(done, tf.int32)) <= target - staying)
    return tf.logical_or(tf.logical_not(done), riders)


def _store(results: dict, finished: dict, batch_positions: tf.Tensor, gone: tf.Tensor) -> dict:
    """Writes the rows `gone` of `finished` into `results` at `batch_positions[gone]`.

    `results` and `finished` have the same keys; "seq" has a time axis (the last) that grows
    with the steps: `results["seq"]` is padded with 0s to the length of `finished["seq"]`.
    """
    where = tf.gather(batch_positions, gone)[:, None]  # (g, 1)
    grow = tf.shape(finished["seq"])[-1] - tf.shape(results["seq"])[-1]
    padding = [[0, 0]] * (results["seq"].shape.rank - 1) + [[0, grow]]
    out = {}
    for key, value in results.items():
        if key == "seq":
            value = tf.pad(value, padding)
        out[key] = tf.tensor_scatter_nd_update(value, where, tf.gather(finished[key], gone))
    return out


def _keep_rows(tensors: Any, rows: tf.Tensor, shrinks: tf.Tensor) -> Any:
    """`rows` of every tensor of a nested structure, copied only on the steps where `shrinks`
    (some example left the batch); else the tensors themselves."""
    if not tf.nest.flatten(tensors):
        return tensors
    return tf.cond(
        shrinks,
        lambda: tf.nest.map_structure(lambda t: _gather_beams(t, rows), tensors),
        lambda: tf.nest.map_structure(tf.identity, tensors),
    )


# The loop ends both searches share ----------------------------------------------------------


def _prepare(symbols_to_logits_fn: SymbolsToLogitsFn, initial_ids, initial_cache, memory,
             max_decode_length: LengthLike) -> Tuple[tf.Tensor, Any, Callable, Any, tf.Tensor, tf.Tensor]:
    """The arguments of a search as tensors: (initial_ids int32 (B,), initial_cache, the model as
    fn(ids, step, cache, memory), memory, B, the length limits int32 (B,))."""
    initial_ids = tf.cast(initial_ids, tf.int32)
    initial_cache = tf.nest.map_structure(tf.convert_to_tensor, initial_cache)
    model, memory = _with_memory(symbols_to_logits_fn, memory)
    batch_size = tf.shape(initial_ids)[0]
    return initial_ids, initial_cache, model, memory, batch_size, _per_example_limit(max_decode_length, batch_size)


def _batch_start(batch_size: tf.Tensor, results: dict, memory: Any) -> dict:
    """The entries of a loop state that `_leave_batch` keeps, before the first step: every
    example live, none riding, `results` empty."""
    return {"live": tf.range(batch_size), "rider": tf.zeros([batch_size], tf.bool), "results": results,
            "memory": memory}


def _leave_batch(state: dict, step: tf.Tensor, done: tf.Tensor, finished: dict, carried: dict,
                 beam: Optional[LengthLike] = None, round_rows: bool = False) -> Tuple[dict, tf.Tensor, tf.Tensor]:
    """The next loop state of either search, but its cache: the `done` examples out of the batch.

    Args:
        state: the loop state before the step ("live", "rider", "results", "memory").
        step: int32, the step the new state is at.
        done: bool (n,), the live examples whose result is final.
        finished: each live example's result so far, keyed as the results (`_store`); the rows
            of the examples done at this step are written to the results (a rider's were
            written when it was done, and are never again).
        carried: the new state's other tensors with one row per live example (hypotheses),
            which keep the rows of the examples that stay.
        beam: the memory's rows per example (beam search), or None for one (greedy search).
        round_rows: keep done examples as riders so that the row count stays a power of two
            (`_rounded_rows`), else exactly the examples not done.

    Returns:
        (the new state without "cache", int32 positions of the examples kept, bool scalar:
        whether some example left). The memory is copied only on the steps where one left.
    """
    live, rider = state["live"], state["rider"]
    newly_done = tf.logical_and(done, tf.logical_not(rider))
    done = tf.logical_or(done, rider)
    keep = _positions(_rounded_rows(done) if round_rows else tf.logical_not(done))
    shrinks = tf.size(keep) < tf.size(live)
    memory_rows = keep if beam is None else _beam_rows(keep, tf.range(beam)[None, :], beam)
    new_state = {
        "step": step,
        "live": tf.gather(live, keep),
        "rider": tf.gather(done, keep),
        "results": _store(state["results"], finished, live, _positions(newly_done)),
        "memory": _keep_rows(state["memory"], memory_rows, shrinks),
    }
    new_state.update(tf.nest.map_structure(lambda t: tf.gather(t, keep), carried))
    return new_state, keep, shrinks


def _while_live(step_fn: Callable[[dict], dict], state: dict, shapes: dict) -> dict:
    """Runs `state = step_fn(state)` in one `tf.while_loop` until no example is live.

    `shapes` are the shape invariants of the search's own entries of the state; those of
    "step", "live", "rider", "cache" and "memory" are added here (`_loose_shape` for the last
    two).
    """
    invariants = {
        "step": tf.TensorShape([]),
        "live": tf.TensorShape([None]),
        "rider": tf.TensorShape([None]),
        "cache": tf.nest.map_structure(_loose_shape, state["cache"]),
        "memory": tf.nest.map_structure(_loose_shape, state["memory"]),
        **shapes,
    }
    (state,) = tf.while_loop(
        lambda state: tf.size(state["live"]) > 0, lambda state: (step_fn(state),), loop_vars=(state,),
        shape_invariants=(invariants,), parallel_iterations=1,
    )
    return state


def _outputs(seq: tf.Tensor, lengths: tf.Tensor, scores: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """(sequences, scores) of a search: `seq` (..., 1 + steps) without its start token and cut
    after the longest of `lengths` (0 columns for an empty batch), no gradient through either."""
    sequences = seq[..., 1 : 1 + _max_or_zero(lengths)]
    return tf.stop_gradient(sequences), tf.stop_gradient(scores)


# Beam search, step by step -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class _BeamSearch:
    """The fixed settings of one beam search and its named steps (Model Garden's
    `SequenceBeamSearch`). One step of the loop (`_step`):

    1. `_grow_alive_seq`: every alive hypothesis extended by every token; the 2 * beam most
       probable candidates are kept.
    2. `_get_new_alive_state`: the beam best candidates that did not end stay alive.
    3. `_get_new_finished_state`: those that ended merge into the beam best finished ones,
       ranked by log P / lp (the length penalty, Wu et al., 2016).
    4. `_leave`: the examples that `_done_examples` finds done leave the batch.

    Per-example settings (`per_example`): K = the widest beam of the batch is kept for every
    example, and what example b's own beam k_b would not have is masked (`beam_search`).
    """

    model: Callable  # fn(ids, step, cache, memory) -> (logits, cache)
    vocab_size: int
    beam: LengthLike  # K, hypotheses kept per example: beam_size, or the widest per-example beam
    n_best_width: LengthLike  # columns of the output: n_best, or the largest per-example n_best
    alpha: Union[float, tf.Tensor]  # the length penalty's exponent when shared (per_example: unused)
    settings: dict  # int32 / float32 (B,) each: "max_len"; per_example also "beam", "n_best", "alpha"
    per_example: bool
    eos_id: int
    prefix: Optional[tf.Tensor]
    normalize: bool
    round_rows: bool

    @classmethod
    def create(cls, model: Callable, vocab_size: int, batch_size: tf.Tensor, max_len: tf.Tensor,
               beam_size: LengthLike, alpha, n_best: Optional[LengthLike], **fixed) -> "_BeamSearch":
        """The search for `beam_search`'s settings: Python values shared by the batch, or (one of
        them a tensor) a setting per example."""
        per_example = any(isinstance(v, (tf.Tensor, tf.Variable)) for v in (beam_size, n_best, alpha))
        settings = {"max_len": max_len}  # (B,) each
        if not per_example:
            return cls(model=model, vocab_size=vocab_size, beam=beam_size, alpha=alpha, settings=settings,
                       n_best_width=beam_size if n_best is None else n_best, per_example=False, **fixed)
        settings["beam"] = _per_example_limit(beam_size, batch_size)
        settings["n_best"] = settings["beam"] if n_best is None else _per_example_limit(n_best, batch_size)
        settings["alpha"] = tf.broadcast_to(tf.cast(alpha, tf.float32), [batch_size])
        return cls(model=model, vocab_size=vocab_size, beam=beam_width(settings["beam"]), alpha=alpha,
                   settings=settings, n_best_width=tf.maximum(_max_or_zero(settings["n_best"]), 1),
                   per_example=True, **fixed)

    def search(self, initial_ids: tf.Tensor, initial_cache: Any, memory: Any) -> Tuple[tf.Tensor, tf.Tensor]:
        """`beam_search`'s outputs: the loop from its first state to its last."""
        state = _while_live(self._step, self._initial_state(initial_ids, initial_cache, memory),
                            self._shape_invariants())
        return self._outputs(state["results"])

    def _initial_state(self, initial_ids: tf.Tensor, initial_cache: Any, memory: Any) -> dict:
        """The loop state before the first step: one alive hypothesis per example (only the first
        copy of each is alive, or the beam would hold duplicates), none finished; the examples with
        limit 0 are done at once."""
        batch_size, beam = tf.shape(initial_ids)[0], self.beam
        first_beam = tf.where(tf.range(beam) == 0, 0.0, NEG_INF)[None, :]  # (1, K)
        start_seq = tf.tile(initial_ids[:, None, None], [1, beam, 1])  # (B, K, 1)
        empty = {
            "seq": tf.zeros_like(start_seq),  # (B, K, 1)
            "scores": tf.fill([batch_size, beam], NEG_INF),
            "flags": tf.zeros([batch_size, beam], tf.bool),
            "lengths": tf.zeros([batch_size, beam], tf.int32),
        }
        start = _batch_start(batch_size, empty, tf.nest.map_structure(lambda t: _expand_to_beam(t, beam), memory))
        alive = {"seq": start_seq, "log_probs": tf.tile(first_beam, [batch_size, 1]),
                 "parents": tf.zeros([batch_size, beam], tf.int32) + tf.range(beam)[None, :]}
        cache = tf.nest.map_structure(lambda t: _expand_to_beam(t, beam), initial_cache)
        return self._leave(start, tf.constant(0, tf.int32), alive, empty, cache, self._live_settings(start["live"]))

    def _shape_invariants(self) -> dict:
        """The shapes of the loop state's hypotheses: the beam axis is static for a shared beam."""
        static_beam = None if self.per_example else self.beam
        seq_shape = tf.TensorShape([None, static_beam, None])
        beam_shape = tf.TensorShape([None, static_beam])
        finished_shapes = {"seq": seq_shape, "scores": beam_shape, "flags": beam_shape, "lengths": beam_shape}
        return {"alive_seq": seq_shape, "alive_log_probs": beam_shape, "finished": finished_shapes,
                "results": finished_shapes}

    def _step(self, state: dict) -> dict:
        """One step of the loop: grow, keep the alive, keep the finished, let the done leave."""
        own = self._live_settings(state["live"])
        candidates, cache = self._grow_alive_seq(state, own)
        alive = self._get_new_alive_state(candidates, own)
        length = state["step"] + 1  # |Y| of every candidate
        finished = self._get_new_finished_state(state["finished"], candidates, own, length)
        return self._leave(state, length, alive, finished, cache, own)

    def _live_settings(self, live: tf.Tensor) -> dict:
        """The settings of the live examples, (n,) each; alpha a float for a shared one."""
        own = {key: tf.gather(value, live) for key, value in self.settings.items()}
        own.setdefault("alpha", self.alpha)
        return own

    def _grow_alive_seq(self, state: dict, own: dict) -> Tuple[dict, Any]:
        """Every (alive hypothesis, next token) pair, flat over K * V; the 2K most probable.

        Returns:
            The candidates, (n, 2K) each: "seq" int32 (n, 2K, step + 2) (the parent's tokens and
            the new one), "log_probs" float32 (log P of the whole candidate), "parents" int32 (the
            alive hypothesis each extends), "valid" bool (a possible candidate that example's own
            beam sees), "ended" bool (EOS, or its length limit reached); and the model's new cache.
        """
        step, live, vocab_size = state["step"], state["live"], self.vocab_size
        n = tf.shape(live)[0]
        flat_ids = tf.reshape(state["alive_seq"][:, :, -1], [-1])  # (n * K,)
        logits, cache = self.model(flat_ids, step, state["cache"], state["memory"])
        log_probs = tf.reshape(_log_probs(logits, self.normalize), [n, self.beam, vocab_size])  # (n, K, V)
        if self.prefix is not None:
            log_probs = force_prefix(log_probs, tf.gather(self.prefix, live), step)
        candidates = state["alive_log_probs"][:, :, None] + log_probs  # (n, K, V)
        candidates = tf.reshape(candidates, [n, self.beam * vocab_size])  # (n, K * V)
        num_candidates = 2 * self.beam  # <= K * V since vocab_size >= 2
        top_log_probs, top_indices = tf.math.top_k(candidates, k=num_candidates)  # (n, 2K)
        top_beams = top_indices // vocab_size  # (n, 2K), the parent hypothesis
        top_tokens = top_indices % vocab_size  # (n, 2K)
        top_seq = tf.gather(state["alive_seq"], top_beams, batch_dims=1)  # (n, 2K, step + 1)
        top_seq = tf.concat([top_seq, top_tokens[:, :, None]], axis=2)  # (n, 2K, step + 2)
        valid = top_log_probs > NEG_INF / 2  # (n, 2K)
        if self.per_example:  # example b's own beam sees only its 2 * k_b best candidates
            valid = tf.logical_and(valid, tf.range(num_candidates)[None, :] < 2 * own["beam"][:, None])
        ended = tf.logical_or(tf.equal(top_tokens, self.eos_id), (step + 1 >= own["max_len"])[:, None])
        return {"seq": top_seq, "log_probs": top_log_probs, "parents": top_beams, "valid": valid,
                "ended": ended}, cache

    def _get_new_alive_state(self, candidates: dict, own: dict) -> dict:
        """The K best candidates that did not end, ranked by log-probability: "seq" int32
        (n, K, step + 2), "log_probs" float32 (n, K), "parents" int32 (n, K)."""
        keep_alive = tf.logical_and(candidates["valid"], tf.logical_not(candidates["ended"]))  # (n, 2K)
        alive_scores = tf.where(keep_alive, candidates["log_probs"], NEG_INF)
        alive_log_probs, alive_indices = tf.math.top_k(alive_scores, k=self.beam)  # (n, K)
        if self.per_example:  # and example b keeps its k_b best alive
            alive_log_probs = tf.where(tf.range(self.beam)[None, :] < own["beam"][:, None], alive_log_probs, NEG_INF)
        return {
            "seq": tf.gather(candidates["seq"], alive_indices, batch_dims=1),  # (n, K, step + 2)
            "log_probs": alive_log_probs,
            "parents": tf.gather(candidates["parents"], alive_indices, batch_dims=1),  # (n, K)
        }

    def _get_new_finished_state(self, finished: dict, candidates: dict, own: dict, length: tf.Tensor) -> dict:
        """The ended candidates merged into the K best finished hypotheses, ranked by
        log P / lp(|Y|) (paper section 6.1; `length_penalty`). The old ones come first, so they
        win ties (top_k prefers lower indices)."""
        new_flags = tf.logical_and(candidates["valid"], candidates["ended"])  # (n, 2K)
        own_alpha = own["alpha"][:, None] if self.per_example else own["alpha"]
        new_scores = tf.where(new_flags, candidates["log_probs"] / length_penalty(length, own_alpha), NEG_INF)
        merged = {
            "seq": tf.concat([tf.pad(finished["seq"], [[0, 0], [0, 0], [0, 1]]), candidates["seq"]], axis=1),
            "scores": tf.concat([finished["scores"], new_scores], axis=1),  # (n, 3K)
            "flags": tf.concat([finished["flags"], new_flags], axis=1),
            "lengths": tf.concat([finished["lengths"], tf.fill(tf.shape(new_flags), length)], axis=1),
        }
        _, keep = tf.math.top_k(merged["scores"], k=self.beam)  # (n, K)
        return {key: tf.gather(value, keep, batch_dims=1) for key, value in merged.items()}

    def _nth_finished(self, finished: dict, own: dict, key: str) -> tf.Tensor:
        """(n,): the flag or score of each example's n_best-th best finished hypothesis."""
        if not self.per_example:
            return finished[key][:, self.n_best_width - 1]
        return tf.gather(finished[key], own["n_best"][:, None] - 1, batch_dims=1)[:, 0]

    def _done_examples(self, step: tf.Tensor, alive_log_probs: tf.Tensor, finished: dict, own: dict) -> tf.Tensor:
        """bool (n,): live examples whose finished hypotheses can no longer change (the early
        stop of section 6.1, "terminate early when possible")."""
        best_alive = tf.reduce_max(alive_log_probs, axis=1)  # (n,)
        # lp is monotone in the length, so its maximum over the reachable lengths
        # [step + 1, max_len] is at one of the two ends.
        largest_lp = tf.maximum(length_penalty(step + 1, own["alpha"]), length_penalty(own["max_len"], own["alpha"]))
        best_possible = best_alive / largest_lp  # (n,), log-probs only decrease
        cannot_improve = tf.logical_and(
            self._nth_finished(finished, own, "flags"),  # scores are sorted: n_best are finished
            self._nth_finished(finished, own, "scores") >= best_possible,
        )
        nothing_alive = best_alive <= NEG_INF / 2
        return tf.logical_or(tf.logical_or(step >= own["max_len"], nothing_alive), cannot_improve)

    def _leave(self, state: dict, step: tf.Tensor, alive: dict, finished: dict, cache: Any, own: dict) -> dict:
        """The next loop state: done examples written to the results and out of the batch.

        `cache` holds the rows of the current live batch and `alive["parents"]` (n, K) the beam
        each new alive hypothesis extends: one gather reorders the beams and drops the done
        examples.
        """
        done = self._done_examples(step, alive["log_probs"], finished, own)
        carried = {"alive_seq": alive["seq"], "alive_log_probs": alive["log_probs"], "finished": finished}
        new_state, keep, _ = _leave_batch(state, step, done, finished, carried, beam=self.beam,
                                          round_rows=self.round_rows)
        rows = _beam_rows(keep, tf.gather(alive["parents"], keep), self.beam)
        new_state["cache"] = tf.nest.map_structure(lambda t: _gather_beams(t, rows), cache)
        return new_state

    def _outputs(self, results: dict) -> Tuple[tf.Tensor, tf.Tensor]:
        """`beam_search`'s (sequences, scores): the n_best best finished hypotheses of each example;
        the slots no hypothesis reached (or past an example's own n_best) empty, score NEG_INF."""
        width = self.n_best_width
        flags = results["flags"][:, :width]  # (B, n_best)
        if self.per_example:  # slots past an example's own n_best stay empty
            flags = tf.logical_and(flags, tf.range(width)[None, :] < self.settings["n_best"][:, None])
        scores = tf.where(flags, results["scores"][:, :width], NEG_INF)
        lengths = tf.where(flags, results["lengths"][:, :width], 0)
        sequences = results["seq"][:, :width] * tf.cast(flags, tf.int32)[:, :, None]  # (B, n_best, 1 + steps)
        return _outputs(sequences, lengths, scores)


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
    memory: Any = None,
    prefix: Optional[tf.Tensor] = None,
    normalize: bool = True,
    round_rows: bool = True,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """Beam search with the GNMT length penalty (paper section 6.1: beam 4, alpha 0.6).

    Every step expands each alive hypothesis by every token, keeps the 2 * beam_size most
    probable candidates, moves those that end (EOS, or length == max_decode_length) to the
    `beam_size` best finished hypotheses (ranked by log P / lp) and keeps the `beam_size` best
    others alive (ranked by log P). An example is done when it reached its length limit, or when
    it holds `n_best` finished hypotheses and even the best alive one, given the largest length
    penalty it could still get, cannot beat the n_best-th of them. A done example leaves the
    batch (module docstring): its result is final and does not depend on the rest of the
    batch. The loop stops when no example is left. The steps are the methods of `_BeamSearch`.

    The decoding settings are not checked here: Python values come checked from a
    `keras_transformer.config.DecodingConfig`, tensors from a request that the SavedModel
    bounds in its graph (`keras_transformer.export.serving_module`).

    Args:
        symbols_to_logits_fn: the model, see the module docstring.
        initial_ids: int32 (B,), the start token of every example (BOS).
        initial_cache: nested structure of tensors with leading dimension B; each is expanded once
            to (B * beam_size, ...).
        vocab_size: int (or an int32 scalar tensor: a shortlist's candidates), the last dimension of the logits.
        beam_size: int >= 1, hypotheses kept alive per example; or, per request, an int32 scalar
            or (B,) tensor (values >= 1): example b then searches with its own beam, exactly as
            alone, inside a beam as wide as the largest.
        alpha: float >= 0, length penalty exponent (0: rank by raw log-probability); or a
            float32 scalar or (B,) tensor.
        max_decode_length: int, int32 scalar tensor or int32 (B,): the largest |Y| per example,
            EOS included (the paper: source length + 50).
        eos_id: int, the end-of-sentence id (the caller's vocabulary; no default).
        n_best: int in [1, beam_size] or None (= beam_size): hypotheses returned per example;
            or an int32 scalar or (B,) tensor (each in [1, that example's beam]).
        memory: None, or a nested structure of tensors with leading dimension B that
            `symbols_to_logits_fn` receives as its 4th argument (module docstring).
        prefix: None, or int32 (B, P): a target prefix per example, padded with -1, that every
            hypothesis starts with (`force_prefix`); it counts in |Y| and in log P(Y), and a
            prefix longer than the example's max_decode_length is cut there.
        normalize: True: `symbols_to_logits_fn` returns logits, and each step takes their
            log-softmax; False: it returns log-probabilities (module docstring).
        round_rows: True: the examples searched are rounded up to a power of two with done
            ones (module docstring); False: exactly the live ones. The sequences are the same,
            the scores to float32 rounding.

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
    if not tf.is_tensor(vocab_size) and vocab_size < 2:  # a tensor: a shortlist's candidates, 4 or more
        raise ValueError(f"vocab_size must be >= 2, got {vocab_size}.")
    initial_ids, initial_cache, model, memory, batch_size, max_len = _prepare(
        symbols_to_logits_fn, initial_ids, initial_cache, memory, max_decode_length)
    search = _BeamSearch.create(model, vocab_size, batch_size, max_len, beam_size, alpha, n_best, eos_id=eos_id,
                                prefix=prefix, normalize=normalize, round_rows=round_rows)
    return search.search(initial_ids, initial_cache, memory)


def greedy_search(
    symbols_to_logits_fn: SymbolsToLogitsFn,
    initial_ids: tf.Tensor,
    initial_cache: Any,
    max_decode_length: LengthLike,
    *,
    eos_id: int,
    memory: Any = None,
    prefix: Optional[tf.Tensor] = None,
    choose: Optional[Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.Tensor]] = None,
    normalize: bool = True,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """Greedy decoding: the most probable next token at every step.

    Same model contract, lengths and stopping rule as `beam_search` (a hypothesis ends at EOS
    or when |Y| == max_decode_length), without the length penalty and without a beam: the cache
    has one row per live example and is reordered only when examples leave the batch (at their
    EOS or limit).

    Args:
        symbols_to_logits_fn: the model, called with ids int32 (live,).
        initial_ids: int32 (B,), the start token of every example.
        initial_cache: nested structure of tensors with leading dimension B.
        max_decode_length: int, int32 scalar tensor or int32 (B,), the largest |Y|, EOS included.
        eos_id: int, the end-of-sentence id (the caller's vocabulary; no default).
        memory: None, or a nested structure of tensors with leading dimension B that
            `symbols_to_logits_fn` receives as its 4th argument (module docstring).
        prefix: None, or int32 (B, P), a forced target prefix per example (as in `beam_search`).
        choose: None (the argmax), or how the next token is picked: `choose(log_probs, live,
            step)` -> int32 (n,), given the (n, V) log-probabilities (the prefix already forced),
            the int32 (n,) example of each row and the int32 step; `sampling.sample` draws there.
        normalize: as in `beam_search`.

    Returns:
        sequences: int32 (B, T), without the start token, up to and including EOS, then 0s.
        scores: float32 (B,), log P(Y), the sum of the log-probabilities of the tokens of Y.
    """
    initial_ids, initial_cache, model, memory, batch_size, max_len = _prepare(
        symbols_to_logits_fn, initial_ids, initial_cache, memory, max_decode_length)

    def leave(state, step, hypotheses, done, cache):
        """The next loop state: the `done` examples written to the results and out of the batch."""
        new_state, keep, shrinks = _leave_batch(state, step, done, hypotheses, {"hypotheses": hypotheses})
        new_state["cache"] = _keep_rows(cache, keep, shrinks)  # never reordered otherwise
        return new_state

    def step_fn(state):
        hypotheses = state["hypotheses"]
        logits, cache = model(hypotheses["seq"][:, -1], state["step"], state["cache"], state["memory"])
        log_probs = _log_probs(logits, normalize)  # (n, V)
        if prefix is not None:
            log_probs = force_prefix(log_probs, tf.gather(prefix, state["live"]), state["step"])
        if choose is None:
            token = tf.argmax(log_probs, axis=-1, output_type=tf.int32)  # (n,)
        else:
            token = choose(log_probs, state["live"], state["step"])  # (n,)
        step = state["step"] + 1
        hypotheses = {
            "seq": tf.concat([hypotheses["seq"], token[:, None]], axis=1),  # (n, step + 1)
            "log_probs": hypotheses["log_probs"] + tf.gather(log_probs, token, batch_dims=1),
            "lengths": hypotheses["lengths"] + 1,
        }
        done = tf.logical_or(tf.equal(token, eos_id), step >= tf.gather(max_len, state["live"]))
        return leave(state, step, hypotheses, done, cache)

    start = {
        "seq": initial_ids[:, None],  # (B, 1)
        "log_probs": tf.zeros([batch_size], tf.float32),
        "lengths": tf.zeros([batch_size], tf.int32),
    }
    state = _batch_start(batch_size, start, memory)
    # Examples with limit 0 are done before the first step.
    state = leave(state, tf.constant(0, tf.int32), start, max_len <= 0, initial_cache)
    shapes = {"seq": tf.TensorShape([None, None]), "log_probs": tf.TensorShape([None]),
              "lengths": tf.TensorShape([None])}
    results = _while_live(step_fn, state, {"hypotheses": shapes, "results": shapes})["results"]
    return _outputs(results["seq"], results["lengths"], results["log_probs"])
