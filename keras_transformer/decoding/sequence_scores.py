"""Scoring sentence pairs: log P(target | source) of each pair under a trained model.

The quantity is the one the model is trained on (section 5.4) without label smoothing:
with teacher forcing (the targets shifted right behind BOS, `losses.decoder_inputs`) and
dropout off, each target token y_t, EOS included, gets log softmax(logits_t)[y_t], and a
pair's score is their sum,

    log P(Y | X) = sum_t log p(y_t | y_<t, X),    tokens = |Y| (EOS included),

so -score / tokens is the pair's cross-entropy per token (the dev "nll" of
`keras_transformer.training.evaluation`, which sums the same terms over a whole corpus).

    score = make_score_fn(model)                          # one tf.function, [None, None] ids
    log_probs, tokens = score(source_ids, target_ids)     # int32 (B, S), (B, T) -> (B,), (B,)
    results = score_corpus(score, source_ids, target_ids, batch_tokens=4096)  # [(log_prob, tokens)]

`score_corpus` takes one id list per sentence (EOS included, as the training pipeline feeds
them), scores them in length-sorted batches under a token budget (section 5.1's batching:
each side of a batch holds at most `batch_tokens` tokens, padding included; a longer pair is
a batch of its own) and returns the results in the input order (`sorted_batches`).

Lengths: sinusoidal positions (section 3.5) are defined at every position, so a pair longer
than the `max_length` the model was configured for can be scored (the score is then of a
length the model never trained on), up to the longest output any search of the model makes:
`max_length` + `keras_transformer.config.MAX_EXTRA_LENGTH` tokens a side. Past that the score is
of a length no decoding of the model reaches, and its attention needs memory for the length
squared (a 600,001-token line: [1, h, 600001, 600001]). Learned positions (Table 3, row E) have
`max_length` rows, and `LearnedPositionEmbedding` clips later positions to the last row: a
score there would silently be of another input. `max_scorable_length` gives the limit and
`too_long` the pairs past it, which the caller must refuse (see `keras_transformer.tasks.scoring`).

This module knows no tokenizer and builds no model: the task layer restores the model
(`keras_transformer.run_dir.layout.restore_model`) and tokenizes.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

from keras_transformer.config import MAX_EXTRA_LENGTH
from keras_transformer.decoding import sorted_batches
from keras_transformer.losses import decoder_inputs, token_losses
from keras_transformer.special_ids import PAD_ID

ID_BATCH = tf.TensorSpec([None, None], tf.int32)


def sequence_log_probs(model, source_ids, target_ids):
    """log P(target | source) of each row, with teacher forcing and dropout off.

    Args:
        model: a `Transformer`.
        source_ids: int32 `(B, S)`, each row its ids then EOS, right-padded with PAD.
        target_ids: int32 `(B, T)`, likewise; every non-PAD token is scored.

    Returns:
        float32 `(B,)`: the sum of log softmax(logits)[y_t] over the non-PAD target tokens;
        int32 `(B,)`: how many tokens that is (EOS included).
    """
    target_ids = tf.convert_to_tensor(target_ids, tf.int32)
    logits = model((source_ids, decoder_inputs(target_ids)), training=False)  # (B, T, V)
    token_log_probs = -token_losses(target_ids, logits, epsilon=0.0)  # (B, T): log softmax(logits)[y_t]
    scored = tf.not_equal(target_ids, model.config.pad_id)  # (B, T)
    log_probs = tf.reduce_sum(tf.where(scored, token_log_probs, 0.0), axis=1)  # (B,)
    return log_probs, tf.reduce_sum(tf.cast(scored, tf.int32), axis=1)


def make_score_fn(model):
    """`sequence_log_probs` of `model` as one `tf.function` over int32 [None, None] batches
    (length-sorted batches of every shape share one trace).

    Returns:
        `score(source_ids (B, S), target_ids (B, T)) -> (log_probs float32 (B,), tokens int32 (B,))`.
    """

    @tf.function(input_signature=[ID_BATCH, ID_BATCH], autograph=False)
    def score(source_ids, target_ids):
        return sequence_log_probs(model, source_ids, target_ids)

    return score


def max_scorable_length(config) -> int:
    """The most tokens (EOS included) either side of a pair may hold to be scored: where the
    positions end when they are bounded (`PositionEncoding.bounded`: the rows of learned position
    tables, `config.max_length`); otherwise (sinusoids) the longest output any search of the
    model makes (`config.max_length` + `MAX_EXTRA_LENGTH`: a source as translation cuts it, plus
    the most a decoding may add)."""
    if config.positions.bounded:
        return config.max_length
    return config.max_length + MAX_EXTRA_LENGTH


def too_long(config, source_lengths: Sequence[int], target_lengths: Sequence[int]) -> list[int]:
    """The indices of the pairs the model cannot score (`max_scorable_length`), in input order."""
    limit = max_scorable_length(config)
    return [i for i, (s, t) in enumerate(zip(source_lengths, target_lengths)) if max(s, t) > limit]


def token_budget_batches(widths: Sequence[int], batch_tokens: int) -> list[slice]:
    """Consecutive batches of items sorted longest first: each batch is as many items as fit
    `batch_tokens` at the width of its first (longest) item, and at least one.

    Args:
        widths: one padded width per item (non-increasing), e.g. max(source, target) tokens.
        batch_tokens: the budget of one batch, per side, padding included.
    """
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens must be positive, got {batch_tokens}")
    batches, start = [], 0
    while start < len(widths):
        size = max(1, batch_tokens // max(int(widths[start]), 1))
        batches.append(slice(start, start + size))
        start += size
    return batches


def score_corpus(score_fn: Callable, source_ids, target_ids, batch_tokens: int = 4096, *,
                 pad_id: int = PAD_ID, on_batch: Optional[Callable[[int], None]] = None
                 ) -> list[tuple[float, int]]:
    """Scores many pairs in length-sorted token-budget batches; results in the input order.

    Args:
        score_fn: int32 (B, S), (B, T) -> (log_probs (B,), tokens (B,)), e.g. `make_score_fn(model)`.
        source_ids, target_ids: one id list per sentence (EOS included): int32 ragged
            tensors [N, None] or lists of lists.
        batch_tokens: the most tokens, padding included, on each side of a batch; pairs are
            sorted longest first (by the longer side, then the sum of both), so a batch's
            first pair sets its width. A pair longer than the budget is a batch of its own.
        pad_id: what pads the rows of a batch (the model's `config.pad_id`).
        on_batch: called after each batch with the number of pairs scored so far.

    Returns:
        `(log_prob, tokens)` per pair, in the order of the input.
    """
    source_ids = _ragged(source_ids)
    target_ids = _ragged(target_ids)
    source_lengths = source_ids.row_lengths().numpy()
    target_lengths = target_ids.row_lengths().numpy()
    if len(source_lengths) != len(target_lengths):
        raise ValueError(f"{len(source_lengths)} source sentences but {len(target_lengths)} targets")
    widths = np.maximum(source_lengths, target_lengths)
    keys = [(int(w), int(s + t)) for w, s, t in zip(widths, source_lengths, target_lengths)]

    def score_sorted(indices):  # every pair, longest first
        indices = np.asarray(indices, np.int64)
        results: list[tuple[float, int]] = []
        for batch in token_budget_batches(widths[indices], batch_tokens):
            rows = indices[batch]
            log_probs, tokens = score_fn(tf.gather(source_ids, rows).to_tensor(default_value=pad_id),  # (B, S)
                                         tf.gather(target_ids, rows).to_tensor(default_value=pad_id))  # (B, T)
            results += zip(log_probs.numpy().tolist(), tokens.numpy().tolist())
            if on_batch is not None:
                on_batch(len(results))
        return results

    # One "batch" of all pairs: map_in_input_order sorts them and puts the results back in the
    # input order; score_sorted cuts the sorted pairs into token-budget batches.
    return sorted_batches.map_in_input_order(score_sorted, range(len(keys)), keys, max(len(keys), 1),
                                             descending=True)


def _ragged(ids) -> tf.RaggedTensor:
    """int32 ragged [N, None] from a ragged tensor or a list of id lists."""
    if isinstance(ids, tf.RaggedTensor):
        return tf.cast(ids, tf.int32)
    rows = [np.asarray(row, np.int32).reshape([-1]) for row in ids]
    values = np.concatenate(rows) if rows else np.zeros([0], np.int32)
    return tf.RaggedTensor.from_row_lengths(values, np.array([len(r) for r in rows], np.int64))
