"""Translates a file (or stdin) with a training directory or an export, and scores it (section 6.1).

From --model_dir it decodes the run's averaged, else best, else latest checkpoint with the paper's
beam search (beam 4, alpha 0.6, at most source length + 50 tokens); from --export_dir it runs the
SavedModel of `python -m keras_transformer.export`, whose decoding was fixed when it was exported. Both run the same
graph. One sentence per line; lines are translated in length-sorted batches and written in input
order, and --output is replaced only once every line is translated. With --reference it prints
sacreBLEU's BLEU, chrF and chrF++ with their signatures.

Beyond the paper: n-best lists (--n_best, the Moses format), sampling (--sampling_topk,
--sampling_topp, --sampling_temperature, --seed), target prefixes to continue
(--target_prefix_file), and ensembles of runs (--ensemble_model_dirs: the mean of their
next-token probabilities at every step).

Typical command lines:

    python -m keras_transformer.translate --model_dir=runs/multi30k --input=test.en \\
        --output=test.hyp.de --reference=test.de
    python -m keras_transformer.translate --export_dir=/tmp/serving/transformer < sentences.txt
    python -m keras_transformer.translate --model_dir=runs/a --ensemble_model_dirs=runs/b,runs/c \\
        --input=test.en --output=test.hyp.de
    python -m keras_transformer.translate --model_dir=runs/de_en --input=mono.de \\
        --output=synthetic.en --sampling_topk=10 --seed=1

docs/guide/translating.md explains each option; docs/reference/errors.md lists what it refuses;
docs/reference/commands.md every flag.
"""

from __future__ import annotations

import sys

from absl import flags

from keras_transformer import cli
from keras_transformer.files import command_files
from keras_transformer.tasks import flags as task_flags

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Training directory to translate with (checkpoint + tokenizer).")
flags.DEFINE_string("export_dir", None, "An export of `python -m keras_transformer.export` (a SavedModel, a "
                    "CTranslate2 model, any registered --format): a version folder or its base folder.")
task_flags.define_checkpoint_flag("With --model_dir: this checkpoint prefix instead of averaged/latest.")
task_flags.define_ensemble_flag()
flags.DEFINE_string("input", "-", "Source sentences, one per line, plain or gzipped; '-' for stdin.")
flags.DEFINE_string("output", "-", "Where to write translations, one per line; '-' for stdout.")
flags.DEFINE_string("reference", None, "Reference translations, one per line, plain or gzipped: print BLEU, chrF, "
                    "chrF++.")
flags.DEFINE_string("moses_bleu_lang", None, "With --reference, also BLEU as published Multi30k results count "
                    "it: lowercased, Moses-normalized and -tokenized for this target language (e.g. de).")
task_flags.define_decoding_flags()
task_flags.define_sampling_flags()
flags.DEFINE_string("target_prefix_file", None, "Target prefixes, one per input line (empty: none): each "
                    "translation continues its prefix (greedy or beam search).")
flags.DEFINE_integer("batch_size", 32, "Sentences per batch.", lower_bound=1)
flags.DEFINE_string("shortlist", None, "A vocabulary map (python -m keras_transformer.shortlist): each batch "
                    "searches over its candidate target pieces only, which decodes faster (--model_dir only; an "
                    "export holds its own).")
flags.DEFINE_integer("n_best", 1, "Hypotheses per sentence (at most the beam size); above 1, lines "
                     "'i ||| translation ||| score', best first (the Moses n-best format).", lower_bound=1)


def main(argv):
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}")
    from keras_transformer.export import client  # pylint: disable=g-import-not-at-top  (no TensorFlow yet)

    decoding = task_flags.decoding_config()
    sampling = task_flags.sampling_config()
    engine = client.Engine(  # exactly one of --model_dir and --export_dir; what may be asked together
        FLAGS.model_dir, FLAGS.export_dir, FLAGS.checkpoint, shortlist_file=FLAGS.shortlist,
        request=client.Request(n_best=FLAGS.n_best, sampling=sampling, prefixed=bool(FLAGS.target_prefix_file),
                               beam_size=FLAGS.beam_size if FLAGS["beam_size"].present else None))
    if FLAGS.export_dir:
        task_flags.check_model_dir_only("an export has its decoding settings built in")
    ensemble_model_dirs = task_flags.ensemble_model_dirs(FLAGS.model_dir)  # refused with --export_dir
    # The paths, before TensorFlow starts: a bad one must not cost a model load (translate_file
    # checks them again, and the reference's line count, before it loads the model).
    command_files.check_input_file(FLAGS.input, "input")
    for flag in ("reference", "target_prefix_file", "shortlist"):
        command_files.check_input_file(FLAGS[flag].value, flag, stdin=False)
    if FLAGS.moses_bleu_lang is not None and not FLAGS.reference:
        raise ValueError("--moses_bleu_lang: only with --reference (it scores the translations against it)")
    if FLAGS.moses_bleu_lang is not None and not FLAGS.moses_bleu_lang.isalpha():
        raise ValueError(f"--moses_bleu_lang={FLAGS.moses_bleu_lang}: expected a language code such as de, fr, en")
    from keras_transformer.tasks import translation  # pylint: disable=g-import-not-at-top  (no TensorFlow yet)

    translation.check_files(FLAGS.input, FLAGS.output, FLAGS.reference, FLAGS.target_prefix_file)
    engine.check(decoding)  # the run exists and its beam keeps --n_best; the export serves the request
    cli.start_tensorflow()

    report = translation.translate_file(
        FLAGS.input, FLAGS.output, model_dir=FLAGS.model_dir, export_dir=FLAGS.export_dir, decoding=decoding,
        checkpoint=FLAGS.checkpoint, reference=FLAGS.reference, batch_size=FLAGS.batch_size, n_best=FLAGS.n_best,
        moses_bleu_lang=FLAGS.moses_bleu_lang, ensemble_model_dirs=ensemble_model_dirs, sampling=sampling,
        target_prefix_file=FLAGS.target_prefix_file, shortlist_file=FLAGS.shortlist)
    if report:
        print(report, file=sys.stderr if FLAGS.output == "-" else sys.stdout)

