"""Translates a file (or stdin) with a training directory or an export; optionally scores it.

    python -m keras_transformer.translate --model_dir=/tmp/run --input=test.en --output=test.hyp.de \\
        --reference=test.de
    python -m keras_transformer.translate --export_dir=/tmp/serving/transformer --input=- --output=-

One sentence per line. Lines are translated in batches of --batch_size sorted by length (less
padding, fewer wasted beam steps) and written back in the input order, with a progress bar on
stderr. Both sources run the same graph: from --model_dir the export's `tf.Module`
(`export.serving_module.Translator`, beam search with the cache, section 6.1: beam 4,
alpha 0.6, at most source length + 50 tokens) is built in process from the averaged or latest
checkpoint; --export_dir loads the SavedModel (a version folder, or a base folder whose
highest version is used) whose decoding settings were fixed at export time.

With --reference, sacreBLEU's corpus BLEU and its signature are printed (to stdout when
--output is a file, else to stderr). Bad input (missing file or folder, line counts that
differ, decoding flags with --export_dir) prints `error: <one line>` and exits with status 2.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time

from absl import flags

from keras_transformer import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Training directory to translate with (checkpoint + tokenizer).")
flags.DEFINE_string("export_dir", None, "SavedModel from `python -m export`: a version folder or its base folder.")
flags.DEFINE_string("checkpoint", None, "With --model_dir: this checkpoint prefix instead of averaged/latest.")
flags.DEFINE_string("input", "-", "Source sentences, one per line; '-' for stdin.")
flags.DEFINE_string("output", "-", "Where to write translations, one per line; '-' for stdout.")
flags.DEFINE_string("reference", None, "Reference translations, one per line: print sacreBLEU.")
flags.DEFINE_integer("beam_size", 4, "Beam size (paper: 4); --model_dir only.", lower_bound=1)
flags.DEFINE_float("alpha", 0.6, "Length penalty exponent (paper: 0.6); --model_dir only.", lower_bound=0.0)
flags.DEFINE_integer("max_extra_length", 50, "Output tokens beyond the source length; --model_dir only.", lower_bound=0)
flags.DEFINE_integer("batch_size", 32, "Sentences per batch.", lower_bound=1)
flags.register_multi_flags_validator(
    ["model_dir", "export_dir"],
    lambda values: (values["model_dir"] is None) != (values["export_dir"] is None),
    message="give exactly one of --model_dir and --export_dir",
)

DECODING_FLAGS = ("beam_size", "alpha", "max_extra_length", "checkpoint")


def read_lines(path: str) -> list[bytes]:
    """The lines of a file or stdin as bytes, without line endings (invalid UTF-8 is kept)."""
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such file")
        with open(path, "rb") as file:
            data = file.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line.rstrip(b"\r") for line in lines]


def saved_model_path(export_dir: str) -> str:
    """A version folder, or the highest integer-named version inside a base folder."""
    if os.path.isfile(os.path.join(export_dir, "saved_model.pb")):
        return export_dir
    if os.path.isdir(export_dir):
        versions = [int(n) for n in os.listdir(export_dir) if re.fullmatch(r"[0-9]+", n)]
        for version in sorted(versions, reverse=True):
            path = os.path.join(export_dir, str(version))
            if os.path.isfile(os.path.join(path, "saved_model.pb")):
                return path
    raise FileNotFoundError(f"{export_dir}: no saved_model.pb in it or in a version folder")


def length_sorted_batches(lines: list[bytes], batch_size: int) -> list[list[int]]:
    """Line indices in batches of similar length (words, then bytes), longest first."""
    order = sorted(range(len(lines)), key=lambda i: (len(lines[i].split()), len(lines[i])), reverse=True)
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def translate_lines(translate_fn, lines: list[bytes], batch_size: int, progress=True) -> tuple[list[str], list[float]]:
    """Runs `translate_fn(tf.string [N]) -> {"translations", "scores"}` over sorted batches.

    Returns translations (str) and scores in the order of `lines`.
    """
    import keras  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    translations, scores = [""] * len(lines), [0.0] * len(lines)
    bar = keras.utils.Progbar(len(lines), unit_name="sentence") if progress else None
    done = 0
    for batch in length_sorted_batches(lines, batch_size):
        out = translate_fn(tf.constant([lines[i] for i in batch], tf.string))
        for i, text, score in zip(batch, out["translations"].numpy(), out["scores"].numpy()):
            translations[i], scores[i] = text.decode("utf-8"), float(score)
        done += len(batch)
        if bar is not None:
            with contextlib.redirect_stdout(sys.stderr):  # stdout may carry the translations
                bar.update(done)
    return translations, scores


def bleu_report(translations: list[str], reference_path: str) -> str:
    """sacreBLEU corpus BLEU against a reference file, and its signature."""
    import sacrebleu  # pylint: disable=g-import-not-at-top

    references = [line.decode("utf-8", errors="replace") for line in read_lines(reference_path)]
    if len(references) != len(translations):
        raise ValueError(
            f"{reference_path} has {len(references)} lines but the input has {len(translations)}"
        )
    bleu = sacrebleu.BLEU()
    score = bleu.corpus_score(translations, [references])
    return f"{score}\nsacreBLEU signature: {bleu.get_signature()}"


def main(argv):
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}")
    if FLAGS.export_dir:
        given = [f"--{name}" for name in DECODING_FLAGS if FLAGS[name].present]
        if given:
            raise ValueError(f"{', '.join(given)}: only with --model_dir (an export has its decoding settings built in)")
    lines = read_lines(FLAGS.input)
    if FLAGS.reference and not os.path.isfile(FLAGS.reference):
        raise FileNotFoundError(f"{FLAGS.reference}: no such file")
    tf = cli.start_tensorflow()
    start = time.perf_counter()
    if FLAGS.model_dir:
        from export import serving_module  # pylint: disable=g-import-not-at-top
        from keras_transformer import decoding  # pylint: disable=g-import-not-at-top

        config = decoding.DecodingConfig(
            beam_size=FLAGS.beam_size, alpha=FLAGS.alpha, max_extra_length=FLAGS.max_extra_length
        )
        translator, source = serving_module.from_model_dir(FLAGS.model_dir, config, FLAGS.checkpoint)
        translate_fn = translator.serving_default
    else:
        import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (tokenizer ops)

        source = saved_model_path(FLAGS.export_dir)
        translate_fn = tf.saved_model.load(source).signatures["serving_default"]
    print(f"translating {len(lines)} sentences with {source}", file=sys.stderr)

    translations, _ = translate_lines(translate_fn, lines, FLAGS.batch_size)
    text = "".join(t + "\n" for t in translations)
    if FLAGS.output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
        with open(FLAGS.output, "w", encoding="utf-8") as file:
            file.write(text)
    elapsed = time.perf_counter() - start
    print(f"{len(lines)} sentences in {elapsed:.1f} s ({len(lines) / max(elapsed, 1e-9):.1f} sentences/s)",
          file=sys.stderr)
    if FLAGS.reference:
        print(bleu_report(translations, FLAGS.reference), file=sys.stderr if FLAGS.output == "-" else sys.stdout)


if __name__ == "__main__":
    cli.run(main)
