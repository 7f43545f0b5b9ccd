"""Ids in, ids out: the Transformer driven by beam search (section 6.1).

"We used beam search with a beam size of 4 and length penalty alpha = 0.6 [...]. We set the
maximum output length during inference to input length + 50, but terminate early when possible."

This module wires `Transformer.encode` / `init_cache` / `decode_step` to
`keras_transformer.decoding.beam_search`. It is the one place that knows the decoding rules, shared by
evaluation, `python -m keras_transformer.translate` and the SavedModel of `export/`:

* Source ids are `(B, S)`, each row the subword ids then EOS, right-padded with PAD (what the
  training pipeline feeds the encoder). A row without any token (all PAD) is "empty".
* Length rule: a hypothesis may hold at most `source length + max_extra_length` tokens, EOS
  included, where the source length counts EOS (the paper: input length + 50). With learned
  positions it is also capped at `config.max_length` (the position table has no more rows).
  An empty row gets limit 0: nothing is decoded, the output is empty and its score 0.0.
* beam_size 1 means greedy search (`beam_search.greedy_search`); scores are then log P(Y).
* `sampling` (a `SamplingConfig`) draws one output per sentence instead of searching
  (`sampling.sample`: temperature, top-k, top-p, a seed); beam_size, alpha and n_best are then
  unused, scores are log P(Y).
* `target_prefix` forces each output to start with given target tokens (interactive
  translation, terminology; fairseq's `prefix_tokens`, CTranslate2's `target_prefix`): the
  search continues it, the output includes it and its score counts it (log P of the whole
  output, over |Y| with the prefix for the length penalty). It is cut at the length limit.
* PAD and BOS are never produced (their logits are masked), so an output is its tokens up to
  and including EOS, then only PAD.
* Outputs follow `beam_search`: int32 `(B, n_best, T)` without BOS, EOS kept, 0-padded, and
  float32 scores log P(Y) / lp(|Y|).

Everything is plain TF code: it runs eagerly, and the callers wrap it in a `tf.function`
(evaluation, translation) or trace it into a SavedModel (export).

    >>> sequences, scores = translate_ids(model, source_ids, beam_size=4, alpha=0.6)
    >>> best = sequences[:, 0]                                # (B, T)
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import tensorflow as tf

from keras_transformer.decoding import beam_search as beam_search_lib
from keras_transformer.decoding import sampling as sampling_lib
from keras_transformer.decoding import shortlist as shortlist_lib
from keras_transformer.decoding import tree_constraint
from keras_transformer.config import DecodingConfig, SamplingConfig
from keras_transformer.model import Transformer
from keras_transformer.special_ids import BOS_ID, EOS_ID


def source_lengths(model: Transformer, source_ids) -> tf.Tensor:
    """int32 `(B,)`: the tokens of each source row (EOS included, PAD excluded)."""
    source_ids = tf.convert_to_tensor(source_ids)
    return tf.reduce_sum(tf.cast(tf.not_equal(source_ids, model.config.pad_id), tf.int32), axis=1)


def max_decode_lengths(model: Transformer, source_ids, max_extra_length: int) -> tf.Tensor:
    """int32 `(B,)`: the largest |Y| (EOS included) of each row, by the length rule above."""
    lengths = source_lengths(model, source_ids)
    limits = lengths + max_extra_length
    if model.config.positions.bounded:  # learned positions end at max_length
        limits = tf.minimum(limits, model.config.max_length)
    return tf.where(lengths > 0, limits, 0)


def step_fn(model: Transformer, encoder_outputs, source_mask, max_length, *, use_cache: bool = True,
            candidates=None):
    """`(fn, initial_cache, memory)` for `beam_search` / `greedy_search`: next-token logits.

    `fn(ids, step, cache, memory)` follows the search's contract with `memory=` (see
    `keras_transformer.decoding.beam_search`): the memory is what does not change from step to step,
    one row per sentence; the search expands it to the beam once and drops the rows of the
    sentences that are done, so the beams of one sentence share their source and a finished
    sentence costs nothing more.

    With `use_cache` (the default) `fn` is `model.decode_step` over the self-attention cache
    of `model.init_cache`, empty at first and extended by each step (so a step's cost grows
    with the positions decoded, not with `max_length`), reading `model.init_memory` (source
    mask and encoder-decoder keys and values). Without it, `fn` re-runs the full causal
    decoder over the whole prefix at every step (the slow reference: it must give the same
    tokens; see `bench/decode_cache.py`); its cache holds the prefix `(B, max_length)` and its
    memory the encoder outputs and source mask.

    Either way PAD and BOS get NEG_INF logits: they are never outputs, so an output sequence
    is its tokens up to EOS followed only by PAD: NEG_INF is added to theirs, by the output
    projection itself in the cached path (`logits_bias`, no pass of its own over the logits).

    Args:
        encoder_outputs, source_mask: from `model.encode`, `(B, S, d_model)` and `(B, S)`.
        max_length: int or int32 scalar, the largest number of steps (>= every limit); only
            the uncached path needs it.

    With `candidates`, int32 `(C,)` sorted target ids (`shortlist.candidates`), `fn` speaks in
    positions of that list: its ids are positions, mapped to target ids before the decoder
    reads them, and its logits `(rows, C)` those of the candidates alone (the cached path
    multiplies by their columns of E^T only; the uncached one projects all and keeps theirs).

    `model` may also be a `keras_transformer.decoding.ensemble.Ensemble`, whose `step_fn` nests
    its members' (then `encoder_outputs` is its `encode`'s, one per member).
    """
    if not isinstance(model, Transformer):  # an ensemble.Ensemble: its members' step fns, nested
        return model.step_fn(encoder_outputs, source_mask, max_length, use_cache=use_cache, candidates=candidates)
    vocab_size = model.config.output_vocab_size
    special = tf.constant([model.config.pad_id, BOS_ID])
    never = tf.reduce_any(tf.equal(tf.range(vocab_size)[:, None], special[None, :]), axis=1)  # (V,)
    never_bias = tf.where(never, beam_search_lib.NEG_INF, 0.0)  # (V,), added to the logits
    if candidates is None:
        def to_ids(positions):
            return positions
    else:
        never_bias = tf.gather(never_bias, candidates)  # (C,)

        def to_ids(positions):
            return tf.gather(candidates, positions)

    if use_cache:
        memory = model.init_memory(encoder_outputs, source_mask)
        # Empty, grown by one position per step: a step writes, reorders (beam search) and
        # attends over the positions decoded so far, not over a buffer of max_length.
        cache = model.init_cache(tf.shape(encoder_outputs)[0], 0)
        weights = model.step_weights()  # once, outside the search's loop
        if candidates is not None:  # (d_model, C): the candidates' columns of E^T
            weights["logits"] = tf.gather(weights["logits"], candidates, axis=1)

        def fn(ids, step, cache, memory):
            return model.decode_step(to_ids(ids), step, cache, memory, logits_bias=never_bias, weights=weights)
    else:
        memory = {"encoder_outputs": encoder_outputs, "source_mask": source_mask}
        cache = {"prefix": tf.zeros([tf.shape(encoder_outputs)[0], max_length], tf.int32)}

        def fn(ids, step, cache, memory):
            at_step = tf.one_hot(step, tf.shape(cache["prefix"])[1], dtype=tf.int32)[None, :]  # (1, max_length)
            prefix = cache["prefix"] * (1 - at_step) + to_ids(ids)[:, None] * at_step  # (rows, max_length)
            logits = model.decode(prefix[:, : step + 1], memory["encoder_outputs"], memory["source_mask"])[:, -1, :]
            if candidates is not None:
                logits = tf.gather(logits, candidates, axis=1)
            return logits + never_bias, {"prefix": prefix}  # (rows, V or C)

    return fn, cache, memory


def translate_ids(
    model: Transformer,
    source_ids,
    config: Optional[DecodingConfig] = None,
    *,
    beam_size=None,
    alpha=None,
    max_extra_length: Optional[int] = None,
    n_best=None,
    max_decode_length=None,
    use_cache: bool = True,
    grammar=None,
    sampling: Optional[SamplingConfig] = None,
    target_prefix=None,
    shortlist=None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Beam search (or greedy search for beam_size 1) over the Transformer.

    The one decoding entry point: dev evaluation (`keras_transformer.training.evaluation`),
    `translate` and every signature of the SavedModel (`keras_transformer.export.serving_module`) call it with
    their `DecodingConfig`, so a decoding setting works in all of them.

    Args:
        model: a built `Transformer`, or a `keras_transformer.decoding.ensemble.Ensemble` of them.
        source_ids: int `(B, S)`, ids then EOS, right-padded with `config.pad_id`.
        config: the `keras_transformer.config.DecodingConfig` (None: its defaults, section 6.1's).
        beam_size, alpha, max_extra_length, n_best: override the config's value when given;
            Python values are checked as the config's are (`DecodingConfig`). beam_size, alpha
            and n_best may also be tensors, int32 / float32 scalars or `(B,)`, one setting per
            sentence (a served request's options, bounded by `keras_transformer.export.serving_module` in its
            graph): each sentence is then searched as alone with its own settings
            (`beam_search`), beam search also for a beam of 1.
        max_decode_length: optional int or int32 `(B,)` overriding the length rule.
        use_cache: False decodes with the slow full-prefix reference (see `step_fn`).
        grammar: None, or a `tree_constraint.TreeGrammar` of the output vocabulary: decode only
            linearized trees over the source's pieces (a parsing model, section 6.3). Required
            when `config.tree_constraint` is set (the caller builds it from its target
            vocabulary, `keras_transformer.pipelines.linearized_trees.tree_grammar`).
        sampling: None to search, or a `keras_transformer.config.SamplingConfig` (its fields
            Python values or tensors, scalars or `(B,)`; the seed a scalar) to sample one
            output per sentence (n_best is then 1).
        target_prefix: None, or int `(B, P)`: the target tokens each output starts with (no
            EOS), padded with -1; a row of only -1 has no prefix. Not with `grammar`.
        shortlist: None, or a `keras_transformer.decoding.shortlist.Shortlist`: the batch
            searches (or samples) over its candidates only (`shortlist.candidates`: the
            frequent ids, the sources' translations, the prefixes' ids); the outputs and scores
            are those of that smaller vocabulary, in target ids as always. Not with `grammar`.

    Returns:
        sequences int32 `(B, n_best, T)` (no BOS; EOS kept; 0-padded) and scores float32
        `(B, n_best)`, best first: log P(Y) / lp(|Y|), or log P(Y) for greedy search.
        A row with limit 0 (an empty source) gets no tokens and score 0.0.
    """
    config = config or DecodingConfig()
    if config.tree_constraint and grammar is None:
        raise ValueError("the decoding's tree_constraint needs the grammar of the model's target vocabulary")
    if target_prefix is not None and grammar is not None:
        raise ValueError("a target prefix cannot be forced on a tree-constrained search")
    if shortlist is not None and grammar is not None:
        raise ValueError("a shortlist cannot restrict a tree-constrained search (its grammar covers the whole vocabulary)")
    overrides = {"beam_size": beam_size, "alpha": alpha, "n_best": n_best, "max_extra_length": max_extra_length}
    overrides = {name: value for name, value in overrides.items() if value is not None}
    if not any(tf.is_tensor(value) for value in overrides.values()):  # checked by DecodingConfig
        config, overrides = dataclasses.replace(config, **overrides), {}
    beam_size, alpha, n_best, max_extra_length = (
        overrides.get(name, getattr(config, name)) for name in ("beam_size", "alpha", "n_best", "max_extra_length"))
    source_ids = tf.cast(tf.convert_to_tensor(source_ids), tf.int32)
    if max_decode_length is None:
        max_decode_length = max_decode_lengths(model, source_ids, max_extra_length)
    limits = tf.broadcast_to(tf.cast(max_decode_length, tf.int32), tf.shape(source_ids)[:1])
    longest = tf.reduce_max(tf.concat([[0], limits], axis=0))  # 0 for an empty batch
    encoder_outputs, source_mask = model.encode(source_ids)
    greedy = isinstance(beam_size, int) and beam_size == 1 and n_best == 1
    vocab_size, candidates = model.config.output_vocab_size, None
    if target_prefix is not None:
        target_prefix = tf.cast(target_prefix, tf.int32)
    if shortlist is not None:
        candidates = shortlist_lib.candidates(shortlist, source_ids, target_prefix)  # (C,), sorted
        vocab_size = tf.size(candidates)
        if target_prefix is not None:  # the forced ids as positions in the candidates; -1 stays
            positions = tf.searchsorted(candidates, tf.reshape(target_prefix, [-1]), out_type=tf.int32)
            target_prefix = tf.where(target_prefix >= 0, tf.reshape(positions, tf.shape(target_prefix)), -1)
    fn, cache, memory = step_fn(model, encoder_outputs, source_mask, longest, use_cache=use_cache,
                                candidates=candidates)
    if grammar is not None:
        if grammar.vocab_size != model.config.output_vocab_size:
            raise ValueError(f"the grammar covers {grammar.vocab_size} ids, the model's output vocabulary "
                             f"{model.config.output_vocab_size}")
        fn, cache, memory = tree_constraint.constrain(grammar, fn, cache, memory, source_ids, EOS_ID,
                                                      model.config.pad_id, limits=limits)
    # The constrained step returns the model's log-probabilities with the forbidden tokens masked
    # (`tree_constraint.constrain`): the search adds them up as they are.
    normalize = grammar is None
    initial_ids = tf.fill(tf.shape(source_ids)[:1], BOS_ID)
    if sampling is not None:
        sequences, scores = sampling_lib.sample(
            fn, initial_ids, cache, limits, eos_id=EOS_ID, memory=memory, seed=sampling.seed, topk=sampling.topk,
            topp=sampling.topp, temperature=sampling.temperature, prefix=target_prefix, normalize=normalize)
        sequences, scores = sequences[:, None, :], scores[:, None]  # (B, 1, T), (B, 1)
    elif greedy:
        sequences, scores = beam_search_lib.greedy_search(
            fn, initial_ids, cache, limits, eos_id=EOS_ID, memory=memory, prefix=target_prefix, normalize=normalize)
        sequences, scores = sequences[:, None, :], scores[:, None]  # (B, 1, T), (B, 1)
    else:
        sequences, scores = beam_search_lib.beam_search(
            fn, initial_ids, cache, vocab_size, beam_size=beam_size, alpha=alpha,
            max_decode_length=limits, eos_id=EOS_ID, n_best=n_best, memory=memory, prefix=target_prefix,
            normalize=normalize,
        )
    if candidates is not None:  # positions -> target ids; PAD's position is PAD (special ids lead)
        sequences = tf.gather(candidates, sequences)
    return sequences, tf.where((limits > 0)[:, None], scores, 0.0)


def cross_attention(model: Transformer, source_ids, output_ids) -> tf.Tensor:
    """Encoder-decoder attention weights of given outputs, for visualisation.

    Re-runs the decoder (teacher forcing) on BOS + `output_ids`, which reproduces the
    attention the search computed for those tokens.

    Args:
        source_ids: int `(B, S)` as for `translate_ids`.
        output_ids: int `(B, T)`, e.g. `sequences[:, 0]` of `translate_ids`.

    Returns:
        float32 `(B, decoder layers, num_heads, T, S)`: row t is the attention of the step that
        produced output token t. Rows past a sequence's end are padding.
    """
    source_ids = tf.cast(tf.convert_to_tensor(source_ids), tf.int32)
    output_ids = tf.cast(tf.convert_to_tensor(output_ids), tf.int32)
    encoder_outputs, source_mask = model.encode(source_ids)
    bos = tf.fill([tf.shape(output_ids)[0], 1], BOS_ID)
    decoder_inputs = tf.concat([bos, output_ids], axis=1)[:, : tf.shape(output_ids)[1]]  # (B, T)
    return model.cross_attention(decoder_inputs, encoder_outputs, source_mask)  # (B, L, h, T, S)
