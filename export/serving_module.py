"""Strings in, translations out: the `tf.Module` written as the SavedModel TF Serving loads.

    module = Translator(model, source_tokenizer, target_tokenizer, DecodingConfig(beam_size=4))
    module.serving_default(tf.constant(["A man sees the dog."]))
    # {"translations": [b"Der Mann sieht den Hund."], "scores": [-0.41]}
    export_saved_model(module, "OUT")            # OUT/<version>/, the TF Serving layout

Signatures (`sentences`, `sources`, `targets`: tf.string `[N]`, raw UTF-8 sentences, N >= 0):

* `serving_default` -> `translations` tf.string `[N]`, `scores` float32 `[N]`
  (log P(Y) / lp(|Y|) of the returned hypothesis, section 6.1).
* `translate_n_best` (`sentences`; optional `n_best` int32, `beam_size` int32, `alpha` float32,
  each `[N]` (one per sentence), `[1]` (the whole request) or absent / `[0]` (the export's
  setting); "absent" through TF Serving, the TF1 loader or the loaded object's
  `translate_n_best` function: `tf.saved_model.load(...).signatures[...]` wants every input) -> `translations` tf.string `[N, K]` and `scores` float32 `[N, K]`, best first,
  K the largest n_best of the request. Each sentence is searched as if alone with its own
  settings (`keras_transformer.decoding.beam_search`), so requests that TF Serving's batching merges
  keep theirs. Bounds: beam_size is clamped to [1, MAX_BEAM_SIZE], n_best to [1, beam_size],
  alpha to [0, MAX_ALPHA]; a NaN or infinite alpha, or an option of another length, is an
  InvalidArgument error. A beam of 1 here is beam search (finished hypotheses ranked by
  log P / lp), not `serving_default`'s greedy search. Slots past a sentence's n_best hold ""
  and score NO_HYPOTHESIS_SCORE (-1e7, finite so that REST's JSON can carry it); an empty or
  whitespace-only sentence has "" with score 0.0 in its first slot and no other hypothesis.
* `score` (`sources`, `targets`) -> `log_probs` float32 `[N]`, log P(target | source) with
  teacher forcing (`keras_transformer.decoding.sequence_scores`, no length penalty), and `tokens` int32 `[N]`,
  the target tokens scored (EOS included), so -log_probs / tokens is the pair's cross-entropy
  per token. Both sides are tokenized and truncated as translation inputs are, and an empty or
  whitespace-only side is EOS alone, as in the `score` command: every pair gets a finite score.
  Sources and targets of different lengths are an InvalidArgument error.
* `translate_sampled` (`sentences`; optional `topk` int32, `topp` float32, `temperature`
  float32, each `[N]`, `[1]` or absent / `[0]` (then 0, 1.0 and 1.0: the model's own
  distribution), and `seed` int64 `[N]`, `[1]` or absent (0)) -> `translations` tf.string `[N]`,
  `scores` float32 `[N]`: one random sample per sentence instead of a search
  (`keras_transformer.decoding.sampling`; back-translation), score log P(Y). topk 0 is the whole
  vocabulary (a topk above it counts as it), 1 greedy; topp in (0, 1]; temperature >= 0, 0
  greedy. A request is drawn with the seed of its first sentence (a `[1]` seed: the request's), so
  the same request with the same seed gives the same translations; a sentence's sample also
  depends on the others of its request. The seed has a batch dimension as every input, so TF
  Serving's batching can merge requests (a merged batch takes its first request's seed). A topk below 0, a topp outside (0, 1] or a
  negative, NaN or infinite temperature is an InvalidArgument error.
* `translate_with_prefix` (`sentences`, `target_prefixes`: tf.string `[N]` each) ->
  `translations`, `scores` as `serving_default`, each translation continuing its prefix
  (interactive translation, terminology): the prefix, tokenized by the target tokenizer (no
  EOS), is forced and the search (the export's beam and alpha) goes on from it. The output
  includes the prefix and the score counts it (log P of the whole output / lp(|Y|)). An empty
  or whitespace-only prefix changes nothing; a prefix longer than the sentence's length limit
  (source tokens + max_extra_length) is cut there (the output is then the cut prefix). An empty
  source still gives "" (score 0.0). Not in an export whose search is tree-constrained.
  Sentences and prefixes of different lengths are an InvalidArgument error.
* `translate_with_attention` -> the same plus, for visualisation, `source_tokens` tf.string
  `[N, S]`, `target_tokens` tf.string `[N, T]` (one subword per cell, "</s>" for EOS, "" for
  padding), `source_lengths` / `target_lengths` int32 `[N]` (tokens, EOS included) and
  `attention` float32 `[N, decoder layers, num_heads, T, S]`, the encoder-decoder attention of each
  output token (rows and columns past the lengths are padding).

What happens to each sentence, all in the graph with core TF and tensorflow-text ops:

1. Invalid UTF-8 byte sequences become U+FFFD (`unicode_transcode`, errors="replace").
2. Leading and trailing ASCII whitespace is stripped (as the training data was).
3. The source tokenizer splits it into subwords; only the first `config.max_length - 1` are
   kept (a longer sentence is truncated, not rejected), then EOS is appended.
4. Beam search (`keras_transformer.decoding.search.translate_ids`) with the export's beam size and
   alpha; at most `source tokens (EOS included) + max_extra_length` output tokens.
5. The target tokenizer joins the best hypothesis; invalid UTF-8 in the result (possible with
   byte-fallback pieces) becomes U+FFFD, so every output is valid UTF-8 (and valid JSON).

An empty or whitespace-only sentence decodes nothing: translation "" and score 0.0. An empty
batch returns empty outputs.

A bfloat16 export (`from_model_dir(..., precision="bfloat16")`, `python -m keras_transformer.export
--precision=bfloat16`) holds the model of `keras_transformer.decoding.precision.decoding_model`:
its matrix weights are bfloat16 variables, rounded once at export, and its matrix products run
in bfloat16 while softmax, layer normalization, log-softmax, beam scores and length penalty
stay float32. The signatures, their dtypes and the ops' kinds are the float32 export's; on a
CPU without native bfloat16 it runs correctly, but slower than float32. export.json records
the precision.

An ensemble export (`from_model_dir(..., ensemble_model_dirs=[...])`, `python -m keras_transformer.export
--ensemble_model_dirs`) holds a `keras_transformer.decoding.ensemble.Ensemble` as its model: the
same signatures and ops, each search step the log of the mean of the members' probabilities,
`score` the log-probability under that mean, `translate_with_attention` the first member's
attention; export.json lists the members' configs under "ensemble".

TF Serving's model loader is the TF1 Session loader, which cannot load a Keras 3 model tracked
by a tf.Module (keras#20095): the model is hidden from tracking and
its raw `tf.Variable`s are tracked instead. The tokenizer model file is written as an asset
(`assets/tokenizer.model` or `vocab.txt`); the tokenizer ops also carry the model in the
graph, so the folder is self-contained.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

from keras_transformer.export import ensemble_members, ops, versions, warmup
from keras_transformer.export.versions import (ATTENTION_SIGNATURE, N_BEST_SIGNATURE, PREFIX_SIGNATURE, SAMPLED_SIGNATURE,
                             SCORE_SIGNATURE)
from keras_transformer.decoding import beam_search, ensemble, search, sequence_scores
from keras_transformer.decoding import precision as precision_lib
from keras_transformer.decoding import shortlist as shortlist_lib
from keras_transformer.config import DecodingConfig, SamplingConfig
from keras_transformer.model import Transformer
from keras_transformer.special_ids import EOS_ID
from keras_transformer.pipelines import linearized_trees, pos_tags, sources
from keras_transformer.pipelines import tokenizers as tokenizers_lib
from keras_transformer.training_directory import TrainingDirectory

SIGNATURE_INPUT = "sentences"
EOS_LABEL = "</s>"
MAX_BEAM_SIZE = 16  # the widest beam a request may ask for (translate_n_best)
MAX_ALPHA = 10.0  # the strongest length penalty a request may ask for
NO_HYPOTHESIS_SCORE = beam_search.NEG_INF  # the score of an n-best slot no hypothesis fills

_SENTENCES = tf.TensorSpec([None], tf.string, name=SIGNATURE_INPUT)
_N_BEST_SPECS = [
    _SENTENCES,
    tf.TensorSpec([None], tf.int32, name="n_best"),
    tf.TensorSpec([None], tf.int32, name="beam_size"),
    tf.TensorSpec([None], tf.float32, name="alpha"),
]
_SAMPLED_SPECS = [
    _SENTENCES,
    tf.TensorSpec([None], tf.int32, name="topk"),
    tf.TensorSpec([None], tf.float32, name="topp"),
    tf.TensorSpec([None], tf.float32, name="temperature"),
    tf.TensorSpec([None], tf.int64, name="seed"),
]
_PREFIX_SPECS = [_SENTENCES, tf.TensorSpec([None], tf.string, name="target_prefixes")]
_SCORE_SPECS = [tf.TensorSpec([None], tf.string, name="sources"), tf.TensorSpec([None], tf.string, name="targets")]


def _valid_utf8(strings: tf.Tensor) -> tf.Tensor:
    return tf.strings.unicode_transcode(
        strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )


class Translator(tf.Module):
    """A trained Transformer with its tokenizers and decoding settings, ready to save.

    Args:
        model: a built `Transformer` (weights restored), float32 or its bfloat16 copy
            (`keras_transformer.decoding.precision.decoding_model`).
        source_tokenizer: a `keras_transformer.pipelines.tokenizers.Tokenizer`.
        target_tokenizer: the target side's, or None for a shared vocabulary.
        decoding_config: a `keras_transformer.config.DecodingConfig` (n_best is ignored:
            the signatures return the best hypothesis).
        source_tags: a parsing model's source tags (`keras_transformer.pipelines.pos_tags`: "none", "predicted",
            "gold"): its inputs are then tagged sentences, "The <DT> dog <NN> ...", which the
            client tags (the tagger is Python; `python -m keras_transformer.parse` tags with
            the tagger this export holds in assets.extra), and the tree constraint skips the tags.
        tree_targets: a parsing model's targets (`keras_transformer.pipelines.linearized_trees.TREE_TARGETS`):
            "words", or "placeholders", whose outputs write each word as "XX" (the tree
            constraint writes one per input word; `python -m keras_transformer.parse` puts the
            input's words back, as `linearized_trees.to_tree` does for any client).
        shortlist: a `keras_transformer.decoding.shortlist.Shortlist` the searches are
            restricted by (held as constants in the graph).
        signatures: the signatures the module holds (`keras_transformer.export.versions.chosen_signatures`:
            default every one; `serving_default` always). The others are None here, so the
            saver does not trace them: a SavedModel of `serving_default` alone holds a sixth
            of the functions and loads in less memory.

    Attributes:
        serving_default, translate_with_attention, translate_n_best, score,
            translate_sampled, translate_with_prefix: each a `tf.function` (see the module
            docstring), or None when not among `signatures`.
    """

    def __init__(
        self,
        model: Transformer,
        source_tokenizer: tokenizers_lib.Tokenizer,
        target_tokenizer: Optional[tokenizers_lib.Tokenizer] = None,
        decoding_config: DecodingConfig = DecodingConfig(),
        name: Optional[str] = None,
        source_tags: str = "none",
        tree_targets: str = "words",
        shortlist: Optional[shortlist_lib.Shortlist] = None,
        signatures: Optional[Sequence[str]] = None,
    ):
        super().__init__(name=name)
        self.__dict__["source_tags"] = source_tags
        self.__dict__["tree_targets"] = tree_targets
        target_tokenizer = target_tokenizer or source_tokenizer
        config = model.config
        if source_tokenizer.vocab_size > config.vocab_size:
            raise ValueError(
                f"the source tokenizer has {source_tokenizer.vocab_size} ids but the model's "
                f"vocabulary only {config.vocab_size}"
            )
        if target_tokenizer.vocab_size > config.output_vocab_size:
            raise ValueError(
                f"the target tokenizer has {target_tokenizer.vocab_size} ids but the model's "
                f"output vocabulary only {config.output_vocab_size}"
            )
        # Hidden from tf tracking (keras#20095); its variables are tracked as plain tf.Variables.
        self.__dict__["model"] = model
        self.model_variables = [v.value for v in model.variables]
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.decoding_config = decoding_config
        if shortlist is not None:
            if decoding_config.tree_constraint:
                raise ValueError("a shortlist cannot restrict a tree-constrained search (its grammar covers the "
                                 "whole vocabulary)")
            shortlist.check_vocabularies(config.vocab_size, config.output_vocab_size)
        # Hidden from tf tracking too: numpy tables, made constants where the search is traced.
        self.__dict__["shortlist"] = shortlist
        self.__dict__["grammar"] = (linearized_trees.tree_grammar(target_tokenizer.pieces(), config.output_vocab_size,
                                                                  source_tags=source_tags != "none",
                                                                  placeholders=tree_targets == "placeholders")
                                    if decoding_config.tree_constraint else None)
        # The saver traces every tf.function the module holds, signature or not: one left out is
        # None (a tree-constrained search takes no prefix: never `translate_with_prefix`).
        chosen = versions.chosen_signatures(signatures, tree_constraint=self.grammar is not None)
        for left_out in set(versions.SIGNATURES) - set(chosen):
            self.__dict__[left_out] = None
        paths = {t.asset_path for t in (source_tokenizer, target_tokenizer) if t.asset_path}
        self.tokenizer_assets = [tf.saved_model.Asset(path) for path in sorted(paths)]

        # The options' defaults (empty: the export's settings) become the SignatureDef's
        # `defaults`, so TF Serving and the TF1 loader accept requests without them.
        def translate_n_best(sentences, n_best=tf.zeros([0], tf.int32), beam_size=tf.zeros([0], tf.int32),
                             alpha=tf.zeros([0], tf.float32)):
            return self._n_best(sentences, n_best, beam_size, alpha)

        if N_BEST_SIGNATURE in chosen:
            self.translate_n_best = tf.function(translate_n_best, input_signature=_N_BEST_SPECS, autograph=False)

        def translate_sampled(sentences, topk=tf.zeros([0], tf.int32), topp=tf.zeros([0], tf.float32),
                              temperature=tf.zeros([0], tf.float32), seed=tf.zeros([0], tf.int64)):
            return self._sampled(sentences, topk, topp, temperature, seed)

        if SAMPLED_SIGNATURE in chosen:
            self.translate_sampled = tf.function(translate_sampled, input_signature=_SAMPLED_SPECS, autograph=False)

    # Graph pieces ---------------------------------------------------------------

    def source_ids(self, sentences: tf.Tensor) -> tf.Tensor:
        """tf.string `[N]` -> int32 `[N, S]`: subwords then EOS, PAD-padded; an empty row for
        an empty or whitespace-only sentence."""
        return self._token_ids(self.source_tokenizer, sentences, eos_when_empty=False)

    def _token_ids(self, tokenizer, sentences, eos_when_empty: bool) -> tf.Tensor:
        """`source_ids` with any tokenizer; `eos_when_empty` gives an empty sentence EOS alone."""
        text = tf.strings.strip(_valid_utf8(sentences))
        pieces = tokenizer.tokenize(text)[:, : self.model.config.max_length - 1]  # ragged
        lengths = tf.cast(pieces.row_lengths(), tf.int32)  # (N,)
        ids = tf.pad(pieces.to_tensor(default_value=self.model.config.pad_id), [[0, 0], [0, 1]])  # (N, S)
        eos = tf.one_hot(lengths, tf.shape(ids)[1], dtype=tf.int32) * EOS_ID  # (N, S)
        ends = lengths >= 0 if eos_when_empty else lengths > 0  # (N,)
        return ids + eos * tf.cast(ends, tf.int32)[:, None]

    def target_prefix_ids(self, prefixes: tf.Tensor) -> tf.Tensor:
        """tf.string `[N]` -> int32 `[N, P]`: each prefix's target subwords (no EOS), -1-padded; no
        more than any output may hold (`config.max_length + max_extra_length`)."""
        text = tf.strings.strip(_valid_utf8(prefixes))
        longest = self.model.config.max_length + self.decoding_config.max_extra_length
        return self.target_tokenizer.tokenize(text)[:, :longest].to_tensor(default_value=-1)

    def _search(self, sentences, **options):
        source_ids = self.source_ids(sentences)  # (N, S)
        c = self.decoding_config
        sequences, scores = search.translate_ids(self.model, source_ids, c, n_best=1, grammar=self.grammar,
                                                 shortlist=self.shortlist, **options)
        best = sequences[:, 0]  # (N, T)
        outputs = {
            "translations": _valid_utf8(self.target_tokenizer.detokenize(best)),
            "scores": scores[:, 0],
        }
        return outputs, source_ids, best

    def _sampled(self, sentences, topk, topp, temperature, seed):
        count = tf.size(sentences)
        defaults = SamplingConfig()
        topk = self._request_option(topk, count, defaults.topk, "topk")
        topp = self._request_option(topp, count, defaults.topp, "topp")
        temperature = self._request_option(temperature, count, defaults.temperature, "temperature")
        seed = tf.reduce_sum(self._request_option(seed, count, defaults.seed, "seed")[:1])  # the first, or 0
        checks = [
            tf.debugging.Assert(tf.reduce_all(topk >= 0), ["topk must be >= 0 (0 = the whole vocabulary)"]),
            tf.debugging.Assert(tf.reduce_all(tf.logical_and(topp > 0.0, topp <= 1.0)), ["topp must be in (0, 1]"]),
            tf.debugging.Assert(tf.reduce_all(tf.logical_and(temperature >= 0.0, tf.math.is_finite(temperature))),
                                ["temperature must be a finite number >= 0 (0 = greedy)"]),
        ]
        with tf.control_dependencies(checks):
            topk, topp, temperature = tf.identity(topk), tf.identity(topp), tf.identity(temperature)
        sampling = SamplingConfig(topk=topk, topp=topp, temperature=temperature, seed=seed)
        outputs, _, _ = self._search(sentences, sampling=sampling)
        return outputs

    def _request_option(self, value, count, default, name):
        """A per-request option, `[count]`, `[1]` or `[0]` (the export's `default`) -> `[count]`."""
        size = tf.size(value)
        check = tf.debugging.Assert(
            tf.logical_or(tf.logical_or(size <= 1, tf.equal(size, count)), tf.equal(count, 0)),
            [f"{name} must hold one value per sentence, one for the request, or none; got", size,
             "values for", count, "sentences"])
        with tf.control_dependencies([check]):
            return tf.cond(size == 0, lambda: tf.fill([count], tf.cast(default, value.dtype)),
                           lambda: tf.broadcast_to(value, [count]))

    def _n_best(self, sentences, n_best, beam_size, alpha):
        count = tf.size(sentences)
        c = self.decoding_config
        beam_size = tf.clip_by_value(self._request_option(beam_size, count, c.beam_size, "beam_size"), 1,
                                     MAX_BEAM_SIZE)  # (N,)
        n_best = tf.clip_by_value(self._request_option(n_best, count, c.n_best, "n_best"), 1, beam_size)
        alpha = tf.debugging.check_numerics(self._request_option(alpha, count, c.alpha, "alpha"),
                                            "alpha must be a finite number")
        alpha = tf.clip_by_value(alpha, 0.0, MAX_ALPHA)
        source_ids = self.source_ids(sentences)
        sequences, scores = search.translate_ids(self.model, source_ids, c, beam_size=beam_size, alpha=alpha,
                                                 n_best=n_best, grammar=self.grammar,
                                                 shortlist=self.shortlist)  # (N, K, T), (N, K)
        shape = tf.shape(sequences)
        # An empty sentence has one hypothesis, "" (score 0.0); no slot past n_best has any.
        slots = tf.range(shape[1])[None, :]  # (1, K)
        empty = tf.equal(search.source_lengths(self.model, source_ids), 0)[:, None]  # (N, 1)
        filled = tf.logical_and(slots < n_best[:, None], tf.logical_or(slots == 0, tf.logical_not(empty)))
        scores = tf.where(filled, scores, NO_HYPOTHESIS_SCORE)
        flat = tf.reshape(sequences, [shape[0] * shape[1], shape[2]])  # not -1: T may be 0
        texts = _valid_utf8(self.target_tokenizer.detokenize(flat))
        return {"translations": tf.reshape(texts, shape[:2]), "scores": scores}

    def _token_labels(self, tokenizer, ids):
        """int32 `[N, T]` -> tf.string `[N, T]`: each id detokenized alone, "</s>" for EOS."""
        shape = tf.shape(ids)
        labels = _valid_utf8(tokenizer.detokenize(tf.reshape(ids, [-1, 1])))  # (N * T,)
        labels = tf.where(tf.equal(tf.reshape(ids, [-1]), EOS_ID), EOS_LABEL, labels)
        return tf.reshape(labels, shape)

    # Signatures ----------------------------------------------------------------

    @tf.function(input_signature=[_SENTENCES], autograph=False)
    def serving_default(self, sentences):
        outputs, _, _ = self._search(sentences)
        return outputs

    @tf.function(input_signature=[_SENTENCES], autograph=False)
    def translate_with_attention(self, sentences):
        outputs, source_ids, best = self._search(sentences)
        outputs.update(
            source_tokens=self._token_labels(self.source_tokenizer, source_ids),
            target_tokens=self._token_labels(self.target_tokenizer, best),
            source_lengths=search.source_lengths(self.model, source_ids),
            target_lengths=tf.reduce_sum(tf.cast(tf.not_equal(best, self.model.config.pad_id), tf.int32), axis=1),
            attention=search.cross_attention(self.model, source_ids, best),
        )
        return outputs

    @tf.function(input_signature=_PREFIX_SPECS, autograph=False)
    def translate_with_prefix(self, sentences, target_prefixes):
        check = tf.debugging.assert_equal(tf.size(sentences), tf.size(target_prefixes),
                                          message="sentences and target_prefixes must hold as many sentences")
        with tf.control_dependencies([check]):
            prefix = self.target_prefix_ids(target_prefixes)  # (N, P)
        outputs, _, _ = self._search(sentences, target_prefix=prefix)
        return outputs

    @tf.function(input_signature=_SCORE_SPECS, autograph=False)
    def score(self, sources, targets):
        check = tf.debugging.assert_equal(
            tf.size(sources), tf.size(targets), message="sources and targets must hold as many sentences")
        with tf.control_dependencies([check]):
            # As the `score` command (tasks.scoring): an empty source is EOS alone, so its pair
            # gets a finite log-probability like any other, never a best-possible 0.0.
            source_ids = self._token_ids(self.source_tokenizer, sources, eos_when_empty=True)  # (N, S)
        target_ids = self._token_ids(self.target_tokenizer, targets, eos_when_empty=True)  # (N, T)
        log_probs, tokens = sequence_scores.sequence_log_probs(self.model, source_ids, target_ids)
        return {"log_probs": log_probs, "tokens": tokens}

    def signatures(self) -> dict:
        """{name: tf.function} of the signatures the module holds (`__init__`'s `signatures`)."""
        return {name: getattr(self, name) for name in versions.SIGNATURES if getattr(self, name) is not None}

    def warmup_batches(self) -> list:
        """What the export's warm-up file asks (`keras_transformer.export.warmup`, replayed by TF Serving when it
        loads the version): `serving_default` with 1, 8 and 32 sentences of mixed lengths, and
        `translate_n_best`, `translate_sampled` (every option given: a warm-up record must feed
        every input), `score` and `translate_with_prefix` with 8, each when the module holds it
        (a record of a signature the SavedModel lacks would fail TF Serving's load)."""
        batches = warmup.translation_batches(SIGNATURE_INPUT)
        sentences = warmup.translation_batches(SIGNATURE_INPUT, sizes=(8,))[0][1][SIGNATURE_INPUT]
        c = self.decoding_config
        options = {"n_best": np.array([c.n_best], np.int32), "beam_size": np.array([c.beam_size], np.int32),
                   "alpha": np.array([c.alpha], np.float32)}
        sampled = {"topk": np.array([0], np.int32), "topp": np.array([1.0], np.float32),
                   "temperature": np.array([1.0], np.float32), "seed": np.array([0], np.int64)}
        prefixes = [sentence.split(" ")[0] if i % 2 else "" for i, sentence in enumerate(sentences)]
        held = self.signatures()
        return batches + [(name, inputs) for name, inputs in (
            (N_BEST_SIGNATURE, {SIGNATURE_INPUT: sentences, **options}),
            (SCORE_SIGNATURE, {"sources": sentences, "targets": sentences}),
            (SAMPLED_SIGNATURE, {SIGNATURE_INPUT: sentences, **sampled}),
            (PREFIX_SIGNATURE, {SIGNATURE_INPUT: sentences, "target_prefixes": prefixes})) if name in held]

    def settings(self) -> dict:
        """What the export was made with (written to assets.extra/export.json); an ensemble's
        "model" is the config its search reads (`ensemble.Ensemble.config`), "ensemble" each
        member's."""
        members = getattr(self.model, "members", None)
        return {
            **({"ensemble": [m.config.to_dict() for m in members]} if members else {}),
            "decoding": self.decoding_config.to_dict(),
            "model": self.model.config.to_dict(),
            "precision": precision_lib.of(self.model),
            "source_tokenizer": self.source_tokenizer.settings(),
            "target_tokenizer": self.target_tokenizer.settings(),
            "signatures": sorted(self.signatures()),
            "source_tags": self.source_tags,
            "tree_targets": self.tree_targets,
            "tensorflow": tf.__version__,
        }


def from_model_dir(
    model_dir: str,
    decoding_config: DecodingConfig = DecodingConfig(),
    checkpoint: Optional[str] = None,
    precision: str = "float32",
    ensemble_model_dirs: Sequence[str] = (),
    shortlist_file: Optional[str] = None,
    signatures: Optional[Sequence[str]] = None,
) -> tuple[Translator, str]:
    """The `Translator` of a training directory: its model (averaged or latest checkpoint, or
    `checkpoint`) in `precision` ("float32" or "bfloat16", `decoding.precision.decoding_model`)
    and its tokenizer(s). Returns `(translator, checkpoint_path)`.

    `shortlist_file`: a vocabulary map (`keras_transformer.decoding.shortlist`, written by
    `python -m keras_transformer.shortlist`) read with the run's vocabularies: the searches
    cover its candidates only. `signatures`: those the `Translator` holds (default all).

    With `ensemble_model_dirs`, the model is an `ensemble.Ensemble` of `model_dir`'s and theirs
    (each its averaged, else best, else latest checkpoint), which read and write alike
    (`keras_transformer.export.ensemble_members.check_members`: vocabulary, a parsing run's source tags, tagger
    and tree targets; checked before any model is built); the source tags, tree targets and
    tagger are `model_dir`'s. The checkpoint path returned names them all, joined by ",".
    """
    if ensemble_model_dirs:
        ensemble_members.check_members(model_dir, list(ensemble_model_dirs))
    run = TrainingDirectory(model_dir).open()  # the tokenizer checked against the run's fingerprint
    shortlist = None
    if shortlist_file:  # before the model loads: a bad file is one error line at once
        if decoding_config.tree_constraint:
            raise ValueError("a shortlist cannot restrict a tree-constrained search (its grammar covers the "
                             "whole vocabulary)")
        shortlist = shortlist_lib.read(shortlist_file, run.source_tokenizer.pieces(), run.target_tokenizer.pieces())
        shortlist.check_vocabularies(run.config.vocab_size, run.config.output_vocab_size)
    model, checkpoint = run.restore(checkpoint)
    model = precision_lib.decoding_model(model, precision)
    if ensemble_model_dirs:
        members, checkpoints = [model], [checkpoint]
        for member_dir in ensemble_model_dirs:
            member_run = TrainingDirectory(member_dir).open()
            if member_run.fingerprint != run.fingerprint:
                raise ValueError(f"--ensemble_model_dirs: {member_dir} was trained with another tokenizer than "
                                 f"--model_dir={model_dir}: an ensemble's models must share one vocabulary")
            member, member_checkpoint = member_run.restore()
            members.append(precision_lib.decoding_model(member, precision))
            checkpoints.append(member_checkpoint)
        model, checkpoint = ensemble.Ensemble(members), ",".join(checkpoints)
    data = run.settings.get("data", {})
    return Translator(model, run.source_tokenizer, run.target_tokenizer, decoding_config,
                      source_tags=data.get("source_tags", "none"),
                      tree_targets=data.get("tree_targets", "words"), shortlist=shortlist,
                      signatures=signatures), checkpoint


# Writing the TF Serving layout --------------------------------------------------

def export_saved_model(
    module: Translator,
    export_dir: str,
    version: Optional[int] = None,
    extra: Optional[dict] = None,
    check: Optional[Callable[[str], None]] = None,
    log: Callable[[str], None] = print,
    extra_files: Sequence[str] = (),
) -> str:
    """Saves `module` as `export_dir/<version>/` (TF Serving's layout), atomically.

    The version folder holds TF Serving's warm-up file, `assets.extra/tf_serving_warmup_requests`
    (`Translator.warmup_batches`, written by `keras_transformer.export.warmup`): the server replays it when it
    loads the version, so the first client request after a version swap is not the slow one.
    Its largest request has 32 sentences: with `--enable_batching`, `max_batch_size` must be at
    least that, or TF Serving refuses the version.

    The SavedModel is written into a hidden temporary folder beside the version folder
    (TF Serving only loads integer-named folders) and renamed into place at the end, so a
    failed export leaves no half-written version behind, and a killed one a temporary folder
    that the next export into `export_dir` removes (`versions.remove_stale_temporaries`). The
    version folder and everything in it get the modes the umask allows (e.g. 0o755 and 0o644
    with umask 022), so TF Serving can read it when it runs as another user.

    Args:
        module: the `Translator`.
        export_dir: the model's base path for TF Serving; created if needed.
        version: the version number; default the next free one when the export is renamed
            into place (`versions.publish_version`: concurrent exports get distinct numbers).
            An existing version is never overwritten.
        extra: more JSON-able settings for assets.extra/export.json (e.g. the checkpoint).
        extra_files: files copied into assets.extra (a parsing model's tagger).
        check: called with the temporary SavedModel folder before it is renamed into place;
            raise to abandon the export (e.g. `check_servable`).
        log: where the line about each removed stale temporary folder goes.

    Returns:
        The path of the new version folder.

    Raises:
        ValueError: `export_dir` is (or is below) a file, is not writable, or the version exists
            (`versions.check_export_dir`); nothing is written.
    """
    if version is not None and (not isinstance(version, int) or version < 0):
        raise ValueError(f"version must be an integer >= 0, got {version!r}")
    versions.check_export_dir(export_dir, version)
    os.makedirs(export_dir, exist_ok=True)
    versions.remove_stale_temporaries(export_dir, log)
    guess = versions.next_version(export_dir) if version is None else version  # the number is claimed when published
    temporary = versions.temporary_folder(export_dir, guess)
    try:
        tf.saved_model.save(module, temporary, signatures=module.signatures())
        os.makedirs(os.path.join(temporary, versions.ASSETS_EXTRA), exist_ok=True)
        with open(versions.settings_path(temporary), "w", encoding="utf-8") as file:
            json.dump({**module.settings(), **(extra or {})}, file, indent=2, sort_keys=True)
            file.write("\n")
        for path in extra_files:
            shutil.copyfile(path, os.path.join(temporary, versions.ASSETS_EXTRA, os.path.basename(path)))
        warmup.write(temporary, warmup.warmup_requests(module.warmup_batches()))
        if check is not None:
            check(temporary)
        final = versions.publish_version(temporary, export_dir, version)  # the number claimed now
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return final


def export_model_dir(
    model_dir: str,
    export_dir: str,
    decoding_config: DecodingConfig = DecodingConfig(),
    checkpoint: Optional[str] = None,
    version: Optional[int] = None,
    check_ops: bool = True,
    log: Callable[[str], None] = print,
    precision: str = "float32",
    ensemble_model_dirs: Sequence[str] = (),
    shortlist_file: Optional[str] = None,
    signatures: Optional[Sequence[str]] = None,
) -> tuple[str, str, Translator]:
    """A training directory's model as `export_dir/<version>/` (what `python -m keras_transformer.export` does).

    Args:
        model_dir: the training directory (model_config.json, tokenizer/, checkpoints/).
        export_dir: TF Serving's model base path.
        decoding_config: the search built into the signatures.
        checkpoint: a checkpoint prefix (default: averaged/, else the latest).
        version: the version folder (default: the next integer).
        check_ops: refuse an export with ops stock TF Serving lacks (`check_servable`).
        log: where the line about each removed stale temporary folder goes.
        precision: "float32" or "bfloat16", what the model computes in (`from_model_dir`).
        ensemble_model_dirs: more training directories of the same vocabulary: the export
            decodes their ensemble with `model_dir`'s (`from_model_dir`).
        shortlist_file: a vocabulary map the export's searches are restricted by
            (`from_model_dir`): the SavedModel holds it as constants and keeps the file in
            assets.extra; export.json names it.
        signatures: the signatures the SavedModel holds (default all; `Translator`); the
            warm-up file and export.json list those.

    Returns:
        `(version folder, checkpoint exported, translator)`.

    Raises:
        FileNotFoundError, ValueError: bad input (a missing training
            directory or checkpoint, an unusable `export_dir`, an existing version), raised
            before the model is built.
    """
    versions.check_export_dir(export_dir, version)
    translator, checkpoint = from_model_dir(model_dir, decoding_config, checkpoint, precision, ensemble_model_dirs,
                                            shortlist_file=shortlist_file, signatures=signatures)
    dataset = TrainingDirectory(model_dir).settings().get("data", {}).get("dataset", "")
    extra = {"checkpoint": checkpoint, "task": sources.task_of(dataset)}  # parse refuses a translation export
    tagger = os.path.join(model_dir, pos_tags.TAGGER_FILE)
    extra_files = [tagger] if translator.source_tags == "predicted" else []  # parse tags raw text with it
    if shortlist_file:
        extra["shortlist"] = {"file": os.path.basename(shortlist_file), "frequent": int(translator.shortlist.frequent.size),
                              "per_source_piece": int(translator.shortlist.table.shape[1])}
        extra_files.append(shortlist_file)
    path = export_saved_model(translator, export_dir, version, extra=extra, extra_files=extra_files,
                              check=check_servable if check_ops else None, log=log)
    return path, checkpoint, translator


def check_servable(saved_model_dir: str) -> None:
    """Raises ValueError naming every op of the SavedModel that stock TF Serving cannot run."""
    offenders = ops.unservable_ops(saved_model_dir)
    if offenders:
        listed = "; ".join(f"{op} ({reason})" for op, reason in offenders.items())
        raise ValueError(f"the SavedModel uses ops stock TF Serving cannot run: {listed}")
