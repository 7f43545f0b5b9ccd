"""Scores a Multi30k run in both BLEU conventions: a row of docs/results.md#translation-quality.

    python bench/multi30k_scores.py --model_dir=runs/multi30k_en_de --train_log=train.log \\
        --decodings=4:0.6,5:0.6,5:1.0
    python bench/multi30k_scores.py --model_dir=runs/multi30k_en_de --decodings=5:1.0 --test
    python bench/multi30k_scores.py --model_dir=runs/multi30k_en_de --average_last=3 --decodings=5:1.4

Every decoding setting of --decodings (`beam:alpha`) translates the validation split with the
run's model (the averaged checkpoint, else the best, else the latest: what `translate` and
`export` take; or --checkpoint; or with --average_last=K the average of the run's K most recent
checkpoints, written to a temporary folder, the run left as it is) and prints two BLEU scores:

- cased, detokenized sacreBLEU (13a), the toolkit's default (section 6.1);
- lowercased and Moses-tokenized (`metrics.moses_bleu`, Multi30k task 1's own scoring:
  lowercase, `normalize-punctuation`, `tokenizer.perl -l de`), the convention of the published
  Multi30k numbers (e.g. Wu et al. 2021).

With --test the test split (test_2016_flickr) is translated with the FIRST setting only: the
one chosen on validation. Test sets are translated once per recipe, never to choose.

From the run directory it also reads the updates made (the newest checkpoint), the evaluation
history (the best dev step by BLEU and by loss), and with --train_log the `done:` and
`interrupted:` lines of the training console: minutes of training (summed over them, one a
process, so a log appended over resumes counts them all) and why it stopped (the last `done:`).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "The training directory to score.")
flags.DEFINE_string("data_dir", "../shared/data/multi30k", "Holds {val,test_2016_flickr}.{en,de}.gz.")
flags.DEFINE_string("source_lang", "en", "Source language.")
flags.DEFINE_string("target_lang", "de", "Target language (also the Moses tokenizer's).")
flags.DEFINE_list("decodings", ["4:0.6"], "beam:alpha settings to score on validation; the first is used for --test.")
flags.DEFINE_boolean("test", False, "Also translate test_2016_flickr, with the first setting (once per recipe).")
flags.DEFINE_string("train_log", None, "The training console's output: its `done:` line gives minutes and stop reason.")
flags.DEFINE_string("checkpoint", None, "This checkpoint prefix instead of the run's averaged/best/latest.")
flags.DEFINE_integer("average_last", 0, "Score the average of the run's last K checkpoints (in MODEL_DIR/checkpoints), "
                     "made in a temporary folder (0: the run's own model).", lower_bound=0)
flags.DEFINE_integer("batch_size", 64, "Sentences per batch.")
flags.mark_flag_as_required("model_dir")


def _lines(path: str) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def _decodings(values: list[str]) -> list[tuple[int, float]]:
    settings = []
    for value in values:
        beam, _, alpha = value.partition(":")
        try:
            settings.append((int(beam), float(alpha or 0.6)))
        except ValueError:
            raise app.UsageError(f"--decodings: {value!r} is not beam:alpha (e.g. 5:1.0)") from None
    return settings


def _run_facts(model_dir: str, train_log: str | None) -> dict:
    from keras_transformer.run_dir import averaging, layout, readable_checkpoints  # pylint: disable=g-import-not-at-top

    facts = {}
    prefixes = readable_checkpoints.indexed_checkpoints(os.path.join(model_dir, layout.CHECKPOINT_DIR))
    facts["updates"] = averaging.checkpoint_step(prefixes[-1]) if prefixes else None
    history_path = os.path.join(model_dir, "eval", "history.json")
    if os.path.exists(history_path):
        with open(history_path, encoding="utf-8") as f:
            evaluations = [e for e in json.load(f)["evaluations"] if e.get("step")]
        with_bleu = [e for e in evaluations if e.get("bleu") is not None]
        if with_bleu:
            best = max(with_bleu, key=lambda e: e["bleu"])
            facts["best_dev_bleu"] = (best["step"], round(best["bleu"], 2))
        if evaluations:
            best = min(evaluations, key=lambda e: e["loss"])
            facts["best_dev_loss"] = (best["step"], round(best["loss"], 4))
    if train_log:
        from keras_transformer.tasks.training_process import SUMMARY_PREFIXES  # pylint: disable=g-import-not-at-top

        with open(train_log, encoding="utf-8", errors="replace") as f:
            summaries = [(prefix, json.loads(line[len(prefix):])) for line in f
                         for prefix in SUMMARY_PREFIXES if line.startswith(prefix)]
        if summaries:  # one a process: a log appended over resumes sums them
            facts["train_minutes"] = round(sum(s.get("train_minutes", 0.0) for _, s in summaries), 2)
            done = [s for prefix, s in summaries if prefix == "done: "]
            facts["stop_reason"] = done[-1].get("stop_reason") if done else "interrupted"
    return facts


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    settings = _decodings(FLAGS.decodings)
    if FLAGS.average_last and FLAGS.checkpoint:
        raise app.UsageError("--average_last and --checkpoint each choose the weights: give one")
    from keras_transformer import cli  # pylint: disable=g-import-not-at-top

    cli.start_tensorflow()
    from keras_transformer.export import client  # pylint: disable=g-import-not-at-top
    from keras_transformer import metrics  # pylint: disable=g-import-not-at-top
    from keras_transformer.config import DecodingConfig  # pylint: disable=g-import-not-at-top

    print(json.dumps(_run_facts(FLAGS.model_dir, FLAGS.train_log)))
    with tempfile.TemporaryDirectory() as scratch:
        checkpoint = FLAGS.checkpoint
        if FLAGS.average_last:
            from keras_transformer.run_dir import averaging  # pylint: disable=g-import-not-at-top
            paths = averaging.recent_checkpoints(FLAGS.model_dir, FLAGS.average_last)
            checkpoint = averaging.average_checkpoints(FLAGS.model_dir, paths, directory=scratch)
            print(json.dumps({"averaged": [os.path.basename(path) for path in paths]}))
        rows, signatures = _score(settings, checkpoint, client, metrics, DecodingConfig)
    print("| split | beam | alpha | BLEU (cased sacreBLEU) | BLEU (lowercased, Moses-tokenized) |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['split']} | {row['beam']} | {row['alpha']} | {row['bleu']:.2f} | {row['bleu_lc_moses']:.2f} |")
    for signature in sorted(signatures):
        print(f"signature: {signature}", file=sys.stderr)


def _score(settings, checkpoint, client, metrics, DecodingConfig):  # pylint: disable=invalid-name
    """Translates validation with every setting (and test with the first, under --test): rows, signatures."""
    src, tgt = FLAGS.source_lang, FLAGS.target_lang
    rows, signatures = [], set()
    for index, (beam, alpha) in enumerate(settings):
        translate_fn, source = client.load_translate_fn(
            FLAGS.model_dir, decoding=DecodingConfig(beam_size=beam, alpha=alpha), checkpoint=checkpoint)
        for prefix in ("val", "test_2016_flickr") if FLAGS.test and index == 0 else ("val",):
            sources = [line.encode("utf-8") for line in _lines(os.path.join(FLAGS.data_dir, f"{prefix}.{src}.gz"))]
            references = _lines(os.path.join(FLAGS.data_dir, f"{prefix}.{tgt}.gz"))
            start = time.perf_counter()
            hypotheses, _ = client.translate_lines(translate_fn, sources, FLAGS.batch_size, False)
            seconds = time.perf_counter() - start
            cased = metrics.corpus_bleu(hypotheses, references)
            moses = metrics.moses_bleu(hypotheses, references, tgt)
            signatures.update((cased.signature, moses.signature))
            row = dict(split="validation" if prefix == "val" else prefix, beam=beam, alpha=alpha, bleu=round(cased.score, 2),
                       bleu_lc_moses=round(moses.score, 2), seconds=round(seconds, 1), model=source)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows, signatures


if __name__ == "__main__":
    app.run(main)
