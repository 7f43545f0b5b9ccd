"""Exports a training directory as a SavedModel that stock TF Serving serves, or for CTranslate2.

The SavedModel takes raw sentences and returns translations: the tokenizer (tensorflow-text ops,
its model file in assets/) and the beam search of section 6.1 (--beam_size=4 --alpha=0.6
--max_extra_length=50, fixed in the export; a parsing run gets section 6.3's beam 21, alpha 0.3
and input length + 300) run inside the graph, with core TensorFlow and tensorflow-text ops only.
Its signatures: `serving_default`, `translate_with_attention`, `translate_n_best`, `score`,
`translate_sampled` and `translate_with_prefix` (export/serving_module.py), with TF Serving
warm-up requests in assets.extra/; --signatures=serving_default exports that one alone, which
loads and serves in less memory. It is written to EXPORT_DIR/<version>/ (default: the next free
integer), which appears in one rename once complete and checked, so TF Serving never loads half
an export.

--ensemble_model_dirs exports one SavedModel that decodes the ensemble of --model_dir's model and
those runs'. --format=ctranslate2 writes a CTranslate2 4.x model folder with the tokenizer beside
it (export/ctranslate2_model.py), for serving on CPU outside TF Serving. --precision=bfloat16 runs
the matrix products in bfloat16 and the rest in float32.

Typical command lines:

    python -m keras_transformer.export --model_dir=runs/multi30k --export_dir=/tmp/serving/transformer
    python -m keras_transformer.export --model_dir=runs/multi30k --export_dir=/tmp/serving/transformer \\
        --beam_size=5 --alpha=1.4 --version=3
    python -m keras_transformer.export --model_dir=runs/a --ensemble_model_dirs=runs/b,runs/c \\
        --export_dir=/tmp/serving/ensemble
    python -m keras_transformer.export --model_dir=runs/multi30k --export_dir=/tmp/serving/lean --signatures=serving_default
    python -m keras_transformer.export --model_dir=runs/multi30k --export_dir=/tmp/ct2 --format=ctranslate2

docs/guide/serving.md explains serving both and which to choose; docs/reference/errors.md lists
what it refuses; docs/reference/commands.md every flag.
"""

from __future__ import annotations

import dataclasses
import os
import sys

from absl import flags, logging

from keras_transformer.export import versions
from keras_transformer import cli
from keras_transformer.files import command_files
from keras_transformer.tasks import flags as task_flags
from keras_transformer.training_directory import TrainingDirectory

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Training directory (model_config.json, tokenizer/, checkpoints/).")
flags.DEFINE_string("export_dir", None, "TF Serving model base path; the export goes to EXPORT_DIR/<version>/.")
task_flags.define_checkpoint_flag("Checkpoint prefix to export (default: averaged/, else the latest).")
task_flags.define_ensemble_flag()
task_flags.define_decoding_flags()
flags.DEFINE_integer("version", None, "Version folder number (default: next integer in --export_dir).", lower_bound=0)
flags.DEFINE_boolean("check_ops", True, "Refuse to publish an export with ops stock TF Serving lacks.")
flags.DEFINE_enum("format", "saved_model", ["saved_model", "ctranslate2"],
                  "saved_model: a SavedModel for TF Serving; ctranslate2: a CTranslate2 model folder.")
flags.DEFINE_string("quantization", None, "--format=ctranslate2: weights as int8, int16, float16, ... "
                    "(default float32).")
flags.DEFINE_enum("precision", "float32", ["float32", "bfloat16", "auto"],
                  "--format=saved_model: what the model computes in. bfloat16: matrix products in bfloat16 "
                  "(weights stored so), softmax, layer normalization and beam scores in float32; faster on "
                  "some CPUs with AVX512_BF16 or AMX, correct but slower than float32 on others. auto: bfloat16 "
                  "if this machine's CPU has AVX512_BF16 or AMX and a start-up timing finds its bfloat16 "
                  "matrix products >= 1.15x as fast as float32's, else float32.")
flags.DEFINE_string("shortlist", None, "A vocabulary map (python -m keras_transformer.shortlist) the export's "
                    "searches are restricted by: held in the SavedModel; a CTranslate2 export keeps it as vmap.txt "
                    "and translates with it.")
flags.DEFINE_list("signatures", None, "--format=saved_model: the signatures to export, of "
                  f"{', '.join(versions.SIGNATURES)} (default: all; {versions.DEFAULT_SIGNATURE} is required). "
                  "Fewer signatures load and serve in less memory.")
flags.mark_flags_as_required(["model_dir", "export_dir"])


def main(argv):
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}")
    decoding = task_flags.decoding_config()
    if FLAGS.format == "ctranslate2":
        from keras_transformer.export import ctranslate2_model  # pylint: disable=g-import-not-at-top

        ctranslate2_model.check_quantization(FLAGS.quantization)
    elif FLAGS.quantization is not None:
        raise ValueError("--quantization applies to --format=ctranslate2 only")
    if FLAGS.format == "ctranslate2" and FLAGS["precision"].present:
        raise ValueError("--precision applies to --format=saved_model only (CTranslate2: --quantization)")
    if FLAGS.format == "ctranslate2" and FLAGS.signatures is not None:
        raise ValueError("--signatures applies to --format=saved_model only")
    versions.chosen_signatures(FLAGS.signatures)  # a bad name: one line before TensorFlow starts
    TrainingDirectory(FLAGS.model_dir).check_exists()
    command_files.check_input_file(FLAGS.shortlist, "shortlist", stdin=False)
    versions.check_export_dir(FLAGS.export_dir, FLAGS.version, model_dir=FLAGS.model_dir)
    ensemble_model_dirs = task_flags.ensemble_model_dirs(FLAGS.model_dir)
    if ensemble_model_dirs and FLAGS.format == "ctranslate2":
        raise ValueError("--ensemble_model_dirs: --format=saved_model only (CTranslate2 ensembles are not exported)")
    tf = cli.start_tensorflow()
    tf.get_logger().setLevel("ERROR")
    logging.set_verbosity(logging.WARNING)
    from keras_transformer.export import serving_module  # pylint: disable=g-import-not-at-top

    from keras_transformer.run_dir import layout  # pylint: disable=g-import-not-at-top
    from keras_transformer.tasks.parsing import parse_files  # pylint: disable=g-import-not-at-top

    if os.path.isfile(os.path.join(FLAGS.model_dir, layout.CONFIG_FILE)):  # else export_model_dir says so
        decoding = task_flags.decoding_config(base=parse_files.run_decoding(FLAGS.model_dir))
    if FLAGS.format == "ctranslate2":
        if decoding.tree_constraint:  # CTranslate2 decodes as each call says, with no such rule
            print("note: CTranslate2 cannot constrain decoding to trees; its outputs are repaired instead "
                  "(python -m keras_transformer.parse)", file=sys.stderr)
            decoding = dataclasses.replace(decoding, tree_constraint=False)
        path, checkpoint = ctranslate2_model.export_model_dir(
            FLAGS.model_dir, FLAGS.export_dir, decoding, FLAGS.checkpoint, FLAGS.version, FLAGS.quantization,
            shortlist_file=FLAGS.shortlist)
        print(f"exported {checkpoint} to {path} (CTranslate2, {FLAGS.quantization or 'float32'})")
        return
    from keras_transformer.decoding import precision as precision_lib  # pylint: disable=g-import-not-at-top

    signatures = versions.chosen_signatures(FLAGS.signatures, decoding.tree_constraint)
    precision = precision_lib.resolve(FLAGS.precision, log=print)
    path, checkpoint, translator = serving_module.export_model_dir(
        FLAGS.model_dir, FLAGS.export_dir, decoding, FLAGS.checkpoint, FLAGS.version, FLAGS.check_ops,
        precision=precision, ensemble_model_dirs=ensemble_model_dirs, shortlist_file=FLAGS.shortlist,
        signatures=signatures)
    print(f"exported {checkpoint} to {path} ({precision}" + (", auto" if FLAGS.precision == "auto" else "") + ")")
    print(f"signatures: {', '.join(sorted(translator.signatures()))}; "
          f"beam_size={decoding.beam_size} alpha={decoding.alpha} max_extra_length={decoding.max_extra_length}"
          + (" tree_constraint" if decoding.tree_constraint else ""))

