"""Translates a file (or stdin) with a training directory or an export; optionally scores it.

    python -m keras_transformer.translate --model_dir=/tmp/run --input=test.en --output=test.hyp.de \\
        --reference=test.de
    python -m keras_transformer.translate --export_dir=/tmp/serving/transformer --input=- --output=-
    python -m keras_transformer.translate --model_dir=runs/a --ensemble_model_dirs=runs/b,runs/c --input=test.en

--ensemble_model_dirs decodes the ensemble of those runs' models and --model_dir's: at every step
of the search, the log of the mean of their next-token probabilities
(`keras_transformer.decoding.ensemble`). They must share --model_dir's vocabulary (tokenizer and
special ids, checked before TensorFlow starts); their shapes may differ.

One sentence per line. Lines are translated in batches of --batch_size sorted by length (less
padding, fewer wasted beam steps) and written back in the input order. Both sources run the
same graph (`tasks.translation.translate_file`): from --model_dir the export's `Translator`
(beam search with the cache, section 6.1: beam 4, alpha 0.6, at most source length + 50
tokens) is built in process from the averaged or latest checkpoint; --export_dir loads the
SavedModel (a version folder, or a base folder whose highest version is used) whose decoding
settings were fixed at export time.

On stderr: a line naming the model, a progress bar only when stderr is a terminal (keras'
bar is drawn with ANSI colour codes and carriage returns, noise in a file or a pipe), and a
last line with the time and speed. The --output file is replaced atomically once every line
is translated: a failed or interrupted run leaves an existing file as it was (a device or a
pipe, such as /dev/null, is written to, never replaced).

With --n_best=K (at most the beam size), up to K hypotheses per sentence, best first, as lines
`i ||| translation ||| score` (the Moses n-best format; i counts input lines from 0), from the
export's `translate_n_best` signature; --reference then scores the best ones.

With --reference, sacreBLEU's corpus BLEU (section 6.1), chrF and chrF++ (Popović 2015, 2017;
not in the paper), each with its signature, are printed (to stdout when --output is a file,
else to stderr). Bad input prints `error: <one line>`, exits with status 2 and writes nothing;
it is found before any sentence is translated: decoding flags with --export_dir, a missing
--input or --reference, an --output that is a folder, is the --input or --reference file (by
name or link), or whose folder is a file or cannot be written, a --reference whose line count
differs from the input's, an --n_best above the export's beam, a --checkpoint that names no
checkpoint, a --model_dir that is not a training directory, an --export_dir without a
SavedModel (these before TensorFlow starts); a damaged run or export (before the model loads).
"""

from __future__ import annotations

import sys

from absl import flags

from keras_transformer import cli
from tasks import flags as task_flags

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Training directory to translate with (checkpoint + tokenizer).")
flags.DEFINE_string("export_dir", None, "SavedModel from `python -m export`: a version folder or its base folder.")
task_flags.define_checkpoint_flag("With --model_dir: this checkpoint prefix instead of averaged/latest.")
task_flags.define_ensemble_flag()
flags.DEFINE_string("input", "-", "Source sentences, one per line; '-' for stdin.")
flags.DEFINE_string("output", "-", "Where to write translations, one per line; '-' for stdout.")
flags.DEFINE_string("reference", None, "Reference translations, one per line: print BLEU, chrF, chrF++.")
flags.DEFINE_string("moses_bleu_lang", None, "With --reference, also BLEU as published Multi30k results count "
                    "it: lowercased, Moses-normalized and -tokenized for this target language (e.g. de).")
task_flags.define_decoding_flags()
flags.DEFINE_integer("batch_size", 32, "Sentences per batch.", lower_bound=1)
flags.DEFINE_integer("n_best", 1, "Hypotheses per sentence (at most the beam size); above 1, lines "
                     "'i ||| translation ||| score', best first (the Moses n-best format).", lower_bound=1)
flags.register_multi_flags_validator(
    ["model_dir", "export_dir"],
    lambda values: (values["model_dir"] is None) != (values["export_dir"] is None),
    message="give exactly one of --model_dir and --export_dir",
)


def main(argv):
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}")
    if FLAGS.export_dir:
        task_flags.check_model_dir_only("an export has its decoding settings built in")
        if FLAGS.ensemble_model_dirs is not None:
            raise ValueError("--ensemble_model_dirs: only with --model_dir (export the ensemble with python -m "
                             "export --ensemble_model_dirs, then translate with its --export_dir)")
    ensemble_model_dirs = task_flags.ensemble_model_dirs(FLAGS.model_dir) if FLAGS.model_dir else []
    decoding = task_flags.decoding_config()
    from export import client  # pylint: disable=g-import-not-at-top  (no TensorFlow yet)

    if FLAGS.model_dir:
        client.check_n_best(FLAGS.n_best, decoding.beam_size, "--beam_size")
    # The paths, before TensorFlow starts: a bad one must not cost a model load (translate_file
    # checks them again, and the reference's line count, before it loads the model).
    cli.check_input_file(FLAGS.input, "input")
    cli.check_input_file(FLAGS.reference, "reference", stdin=False)
    if FLAGS.moses_bleu_lang is not None and not FLAGS.reference:
        raise ValueError("--moses_bleu_lang: only with --reference (it scores the translations against it)")
    if FLAGS.moses_bleu_lang is not None and not FLAGS.moses_bleu_lang.isalpha():
        raise ValueError(f"--moses_bleu_lang={FLAGS.moses_bleu_lang}: expected a language code such as de, fr, en")
    from tasks import translation  # pylint: disable=g-import-not-at-top  (no TensorFlow yet)

    translation.check_files(FLAGS.input, FLAGS.output, FLAGS.reference)
    if FLAGS.model_dir:
        cli.check_training_directory(FLAGS.model_dir)
    else:  # a SavedModel (a version folder or its base folder); the export's beam, from its export.json
        client.check_export_n_best(FLAGS.export_dir, FLAGS.n_best)
    cli.start_tensorflow()

    report = translation.translate_file(
        FLAGS.input, FLAGS.output, model_dir=FLAGS.model_dir, export_dir=FLAGS.export_dir, decoding=decoding,
        checkpoint=FLAGS.checkpoint, reference=FLAGS.reference, batch_size=FLAGS.batch_size, n_best=FLAGS.n_best,
        moses_bleu_lang=FLAGS.moses_bleu_lang, ensemble_model_dirs=ensemble_model_dirs)
    if report:
        print(report, file=sys.stderr if FLAGS.output == "-" else sys.stdout)


if __name__ == "__main__":
    cli.run(main)
