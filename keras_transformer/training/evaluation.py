"""Dev-set evaluation: loss, perplexity and sacreBLEU (BLEU, chrF, chrF++) of beam or greedy translations.

Section 6.1 of "Attention Is All You Need": "We used beam search with a beam size of 4
and length penalty alpha = 0.6 [...]. We set the maximum output length during inference
to input length + 50, but terminate early when possible." Section 5.4: label smoothing
"hurts perplexity", so the perplexity reported here is exp of the plain (unsmoothed)
cross-entropy per target token; the smoothed loss is reported beside it.

    translate = make_translate_fn(model, DecodingConfig(beam_size=4, alpha=0.6))
    ids, scores = translate(source_ids)                      # int32 [B, S] -> [B, T], [B]
    hypotheses = translate_corpus(translate, source_id_lists, detokenize, batch_size=64)
    scores = metrics.corpus_scores(hypotheses, references)  # sacreBLEU BLEU, chrF, chrF++: cased, detokenized

This module knows no tokenizer: `detokenize` is any function from right-padded int32
ids [N, T] to N strings, so the library stays independent of `pipelines/`.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

from keras_transformer import metrics
from keras_transformer.decoding import search, sorted_batches
from keras_transformer.config import DecodingConfig
from keras_transformer.losses import decoder_inputs, label_smoothed_cross_entropy

ID_BATCH = tf.TensorSpec([None, None], tf.int32)


def make_translate_fn(model, config: DecodingConfig = DecodingConfig(), grammar=None):
    """`keras_transformer.decoding.search.translate_ids` (the decoding entry point `translate` and
    the export use too) as one `tf.function` over int32 [None, None], so length-bucketed batches
    do not retrace.

    Args:
        model: a built `Transformer`.
        config: the decoding settings (n_best is not used: the best hypothesis is returned).
        grammar: the target vocabulary's `TreeGrammar` when `config.tree_constraint` is set.

    Returns:
        `translate(source_ids [B, S]) -> (ids int32 [B, T], scores float32 [B])`, the best
        hypothesis of each sentence (beam_size 1: greedy search).
    """

    @tf.function(input_signature=[ID_BATCH], autograph=False)
    def translate(source_ids):
        ids, scores = search.translate_ids(model, source_ids, config, n_best=1, grammar=grammar)
        return ids[:, 0, :], scores[:, 0]  # (B, T), (B,)

    return translate


def _pad(rows: Sequence[Sequence[int]]) -> np.ndarray:
    width = max((len(r) for r in rows), default=0)
    out = np.zeros([len(rows), max(width, 1)], np.int32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def translate_corpus(translate_fn: Callable, source_ids: Sequence[Sequence[int]],
                     detokenize: Callable, batch_size: int = 64) -> list[str]:
    """Translates many sentences, batched by length, and returns strings in the input order.

    Args:
        translate_fn: int32 [B, S] -> (ids [B, T], scores), e.g. `make_translate_fn(model)`.
        source_ids: one list of ids (EOS included) per sentence.
        detokenize: int32 [B, T] ids -> B strings (`str` or UTF-8 `bytes`).
        batch_size: sentences per decoding batch.
    """

    def translate_batch(rows):
        ids, _ = translate_fn(tf.constant(_pad(rows)))
        texts = detokenize(ids)
        texts = texts.numpy() if hasattr(texts, "numpy") else texts
        return [text.decode("utf-8") if isinstance(text, bytes) else str(text) for text in texts]

    return sorted_batches.map_in_input_order(translate_batch, source_ids, [len(row) for row in source_ids],
                                             batch_size)


def make_loss_fn(model, label_smoothing: float):
    """One `tf.function` (ids [None, None]) -> (smoothed loss sum, NLL sum, token count) of a batch."""

    @tf.function(input_signature=[ID_BATCH, ID_BATCH], autograph=False)
    def batch_loss(source_ids, target_ids):
        logits = model((source_ids, decoder_inputs(target_ids)), training=False)
        smoothed, tokens = label_smoothed_cross_entropy(target_ids, logits, label_smoothing, model.config.pad_id)
        nll, _ = label_smoothed_cross_entropy(target_ids, logits, 0.0, model.config.pad_id)
        return smoothed, nll, tokens

    return batch_loss


def evaluate_loss(loss_fn: Callable, batches) -> dict[str, float]:
    """Loss per target token over a dataset of (source_ids, target_ids) batches.

    Args:
        loss_fn: from `make_loss_fn(model, label_smoothing)`.
        batches: an iterable of int32 [B, L] pairs (e.g. the dev `tf.data.Dataset`).

    Returns:
        {"loss": label-smoothed loss per token (the training objective, section 5.4),
         "nll": cross-entropy per token, "perplexity": exp(nll), "tokens": count}.
    """
    smoothed = nll = tokens = 0.0
    for source_ids, target_ids in batches:
        s, n, t = loss_fn(tf.cast(source_ids, tf.int32), tf.cast(target_ids, tf.int32))
        smoothed, nll, tokens = smoothed + float(s), nll + float(n), tokens + float(t)
    if not tokens:
        raise ValueError("the dev set has no target tokens")
    mean_nll = nll / tokens
    return {"loss": smoothed / tokens, "nll": mean_nll,
            "perplexity": math.exp(min(mean_nll, 700.0)), "tokens": tokens}


class Evaluator:
    """Dev loss, perplexity and (optionally) BLEU, chrF and chrF++ of a model, as run every N training steps.

    BLEU is the paper's measure (section 6.1) and the one early stopping watches; chrF and
    chrF++ (Popović 2015, 2017; not in the paper) are reported beside it.

    Args:
        loss_batches: a re-iterable of (source_ids, target_ids) dev batches, or None.
        source_ids: one id list (EOS included) per dev sentence to translate, or None (no BLEU, chrF).
        references: the raw reference translations of those sentences.
        detokenize: ids [N, T] -> N strings.
        decoding: the `DecodingConfig` of the dev translations (n_best is not used).
        label_smoothing: epsilon_ls, for the smoothed dev loss.
        batch_size: sentences per decoding batch.
        task_scores: hypotheses (list of str) -> more results, a task's own measure of the same
            translations (parsing's EVALB F1, section 6.3), or None.
        grammar: the target vocabulary's `TreeGrammar`, needed when `decoding.tree_constraint`
            is set (the dev translations are then constrained as `translate`'s and the export's).
    """

    def __init__(self, loss_batches=None, source_ids=None, references=None, detokenize=None,
                 decoding: DecodingConfig = DecodingConfig(), label_smoothing: float = 0.1,
                 batch_size: int = 64, task_scores: Optional[Callable[[list], dict]] = None, grammar=None):
        if source_ids is not None and (references is None or detokenize is None):
            raise ValueError("BLEU needs references and a detokenize function")
        if source_ids is not None and len(source_ids) != len(references):
            raise ValueError(f"{len(source_ids)} dev sentences but {len(references)} references")
        self.loss_batches = loss_batches
        self.source_ids = None if source_ids is None else list(source_ids)
        self.references = None if references is None else list(references)
        self.detokenize = detokenize
        self.decoding = decoding
        self.label_smoothing = label_smoothing
        self.batch_size = batch_size
        self.task_scores = task_scores
        self.grammar = grammar
        self._fns: dict = {}

    def __call__(self, model) -> dict:
        """Returns {"loss", "nll", "perplexity", "tokens"} and, with sentences, {"bleu", "signature", "chrf",
        "chrf_signature", "chrf++", "chrf++_signature", "hypotheses"} (scores 0-100, `metrics.corpus_scores`)
        and what `task_scores` adds."""
        key = id(model)
        if key not in self._fns:
            self._fns = {key: (make_loss_fn(model, self.label_smoothing), make_translate_fn(model, self.decoding, self.grammar))}
        loss_fn, translate_fn = self._fns[key]
        results: dict = {}
        if self.loss_batches is not None:
            results.update(evaluate_loss(loss_fn, self.loss_batches))
        if self.source_ids:
            hypotheses = translate_corpus(translate_fn, self.source_ids, self.detokenize, self.batch_size)
            scores = metrics.corpus_scores(hypotheses, self.references)
            results["bleu"], results["signature"] = scores.bleu.score, scores.bleu.signature
            results["chrf"], results["chrf_signature"] = scores.chrf.score, scores.chrf.signature
            results["chrf++"], results["chrf++_signature"] = (scores.chrf_plus_plus.score,
                                                              scores.chrf_plus_plus.signature)
            if self.task_scores is not None:
                results.update(self.task_scores(hypotheses))
            results["hypotheses"] = hypotheses
        return results
