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

Sampling instead of a search (back-translation, diverse outputs): any of --sampling_topk (0 =
the whole vocabulary, K = the K most probable tokens, 1 = greedy), --sampling_topp (nucleus, in
(0, 1]) and --sampling_temperature (>= 0; 0 = greedy) draws one translation per sentence, each
token from the model's distribution so reshaped (`keras_transformer.decoding.sampling`), with
--seed: the same input, seed and --batch_size give the same output. It draws one translation, so
--beam_size above 1 and --n_best above 1 are refused with it; from an export it runs its
`translate_sampled` signature.

    python -m keras_transformer.translate --model_dir=runs/de_en --input=mono.de --output=synthetic.en \
        --sampling_topk=10 --seed=1

--target_prefix_file (one target prefix per input line; an empty line: no prefix) makes each
translation continue its prefix (interactive translation, terminology): the prefix is forced,
the search (greedy or beam) goes on from it, and the output starts with it (cut at the length
limit, source tokens + --max_extra_length). Not with sampling or --n_best; from an export it
runs `translate_with_prefix`.

With --reference, sacreBLEU's corpus BLEU (section 6.1), chrF and chrF++ (Popović 2015, 2017;
not in the paper), each with its signature, are printed (to stdout when --output is a file,
else to stderr). Bad input prints `error: <one line>`, exits with status 2 and writes nothing;
it is found before any sentence is translated: decoding flags with --export_dir, a missing
--input or --reference, an --output that is a folder, is the --input or --reference file (by
name or link), or whose folder is a file or cannot be written, a --reference whose line count
differs from the input's (or a --target_prefix_file's), an --n_best above the export's beam, a
sampling value out of range (--sampling_topk < 0, --sampling_topp outside (0, 1],
--sampling_temperature < 0), --seed without sampling, an export without the signature asked for, a
--checkpoint that names no checkpoint, a --model_dir that is not a training directory, an
--export_dir without a SavedModel (these before TensorFlow starts); a damaged run or export (before
the model loads).
"""

from __future__ import annotations

import dataclasses
import sys

from absl import flags

from keras_transformer import cli
from keras_transformer.files import command_files
from tasks import flags as task_flags
from training_directory import TrainingDirectory

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
task_flags.define_sampling_flags()
flags.DEFINE_string("target_prefix_file", None, "Target prefixes, one per input line (empty: none): each "
                    "translation continues its prefix (greedy or beam search).")
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
    ensemble_model_dirs = task_flags.ensemble_model_dirs(FLAGS.model_dir)  # refused with --export_dir
    decoding = task_flags.decoding_config()
    sampling = task_flags.sampling_config()
    if sampling is not None and (FLAGS.n_best > 1 or decoding.beam_size > 1 and FLAGS["beam_size"].present):
        raise ValueError("sampling draws one translation per sentence: no --beam_size or --n_best above 1 with it")
    if sampling is not None and FLAGS.target_prefix_file:
        raise ValueError("--target_prefix_file: not with sampling (--sampling_*)")
    if FLAGS.target_prefix_file and FLAGS.n_best > 1:
        raise ValueError("--target_prefix_file: not with --n_best above 1")
    from export import client, versions  # pylint: disable=g-import-not-at-top  (no TensorFlow yet)

    if sampling is not None or FLAGS.target_prefix_file:
        if FLAGS.export_dir:  # an older export lacks the signature
            client.check_export_signature(FLAGS.export_dir, versions.SAMPLED_SIGNATURE if sampling else
                                          versions.PREFIX_SIGNATURE)
    elif FLAGS.model_dir:  # DecodingConfig checks it against --beam_size
        decoding = dataclasses.replace(decoding, n_best=FLAGS.n_best)
    # The paths, before TensorFlow starts: a bad one must not cost a model load (translate_file
    # checks them again, and the reference's line count, before it loads the model).
    command_files.check_input_file(FLAGS.input, "input")
    for flag in ("reference", "target_prefix_file"):
        command_files.check_input_file(FLAGS[flag].value, flag, stdin=False)
    if FLAGS.moses_bleu_lang is not None and not FLAGS.reference:
        raise ValueError("--moses_bleu_lang: only with --reference (it scores the translations against it)")
    if FLAGS.moses_bleu_lang is not None and not FLAGS.moses_bleu_lang.isalpha():
        raise ValueError(f"--moses_bleu_lang={FLAGS.moses_bleu_lang}: expected a language code such as de, fr, en")
    from tasks import translation  # pylint: disable=g-import-not-at-top  (no TensorFlow yet)

    translation.check_files(FLAGS.input, FLAGS.output, FLAGS.reference, FLAGS.target_prefix_file)
    if FLAGS.model_dir:
        TrainingDirectory(FLAGS.model_dir).check_exists()
    else:  # a SavedModel (a version folder or its base folder); the export's beam, from its export.json
        client.check_export_n_best(FLAGS.export_dir, FLAGS.n_best)
    cli.start_tensorflow()

    report = translation.translate_file(
        FLAGS.input, FLAGS.output, model_dir=FLAGS.model_dir, export_dir=FLAGS.export_dir, decoding=decoding,
        checkpoint=FLAGS.checkpoint, reference=FLAGS.reference, batch_size=FLAGS.batch_size, n_best=FLAGS.n_best,
        moses_bleu_lang=FLAGS.moses_bleu_lang, ensemble_model_dirs=ensemble_model_dirs, sampling=sampling,
        target_prefix_file=FLAGS.target_prefix_file)
    if report:
        print(report, file=sys.stderr if FLAGS.output == "-" else sys.stdout)


if __name__ == "__main__":
    cli.run(main)
