"""A model scored on a data set's split: dev loss, perplexity, BLEU, chrF (and its task's own measure,
`keras_transformer.tasks.task.Task.dev_scores`: parsing's F1), during training (`build_evaluator`) and
after it (`evaluate`, `--evaluate_only`).

Section 6.1: beam 4, alpha 0.6, output up to input length + 50, through the same decoding entry
point as `translate` and the export (`keras_transformer.decoding.search`)."""

from __future__ import annotations

import functools
import json
import os
import time
from typing import Callable, Optional

from keras_transformer import cli
from keras_transformer.config import DecodingConfig, TransformerConfig
from keras_transformer.run_dir import layout
from keras_transformer.pipelines.data_config import DataConfig
from keras_transformer.tasks import registry as task_registry

_print = functools.partial(print, flush=True)


def build_evaluator(data: DataConfig, decoding: DecodingConfig, model: TransformerConfig, source_tokenizer,
                    target_tokenizer, bleu_sentences: Optional[int] = None):
    """Dev loss and perplexity on `data.dev_split` (label smoothing as `model`'s), and BLEU on its
    first `bleu_sentences` sentences (None: all; 0: no BLEU), decoded with `decoding` (its tree
    constraint too, over `target_tokenizer`'s pieces), with the scores of the data set's task."""
    from keras_transformer.training.evaluation import Evaluator  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import batching  # pylint: disable=g-import-not-at-top

    pairs = data.load_pair_list(data.dev_split)
    loss_batches = batching.make_dataset(pairs, source_tokenizer, data.batch_tokens, data.max_length,
                                         target_tokenizer=target_tokenizer, shuffle=False, cache="memory")
    if bleu_sentences == 0:
        return Evaluator(loss_batches, decoding=decoding, label_smoothing=model.label_smoothing)
    pairs = pairs[:bleu_sentences]
    with cli.silence_native_stderr():
        rows = source_tokenizer.tokenize([s for s, _ in pairs], add_eos=True).to_list()
    task = task_registry.of_dataset(data.dataset)
    task_scores = task.dev_scores(data, pairs)  # beside BLEU and chrF (parsing: EVALB F1 of the dev trees)
    grammar = task.grammar(data, target_tokenizer, model.output_vocab_size) if decoding.tree_constraint else None
    return Evaluator(loss_batches, [row[: data.max_length] for row in rows], [t for _, t in pairs],
                     target_tokenizer.detokenize, decoding, model.label_smoothing, task_scores=task_scores,
                     grammar=grammar)


def evaluate(model_dir: str, data: DataConfig, decoding: DecodingConfig, bleu_sentences: Optional[int] = None,
             log: Callable[[str], None] = _print) -> dict:
    """Scores a trained model on `data.dev_split` (e.g. the test split, once, at the end) with the
    averaged checkpoint (else the latest); writes the translations to MODEL_DIR/eval/.

    Returns:
        {"loss", "nll", "perplexity", "tokens"} and, with BLEU, {"bleu", "signature", "chrf", "chrf++"}
        and the chrF signatures.
    """
    from keras_transformer.training_directory import TrainingDirectory  # pylint: disable=g-import-not-at-top

    if os.path.isdir(model_dir) and not os.path.isfile(os.path.join(model_dir, layout.CONFIG_FILE)):
        raise FileNotFoundError(f"{model_dir}: no {layout.CONFIG_FILE}; train first")
    run = TrainingDirectory(model_dir).open()  # the layout (eval/ a folder), config, tokenizer and its fingerprint
    data = data.for_run(model_dir)
    source_tok, target_tok = run.source_tokenizer, run.target_tokenizer
    model, checkpoint = run.restore()
    evaluator = build_evaluator(data, decoding, model.config, source_tok, target_tok,
                                bleu_sentences)
    started = time.time()
    results = evaluator(model)
    name = f"{data.dev_split}-{os.path.basename(os.path.dirname(checkpoint))}-{os.path.basename(checkpoint)}"
    path = os.path.join(model_dir, layout.EVAL_DIR, f"{name}-beam{decoding.beam_size}-alpha{decoding.alpha:g}.txt")
    if "hypotheses" in results:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as file:
            file.writelines(h + "\n" for h in results.pop("hypotheses"))
        log(f"translations: {path}")
    log(f"{data.dataset} [{data.dev_split}] with {checkpoint}, beam {decoding.beam_size}, alpha "
        f"{decoding.alpha:g}, {time.time() - started:.0f} s: " + json.dumps(results))
    return results
