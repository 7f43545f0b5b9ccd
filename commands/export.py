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
it (export/ctranslate2_model.py), for serving on CPU outside TF Serving. --format takes every
registered format (export/exporters.py, a plug-in's too), and each format-specific option is
refused with a format that does not take it. --precision=bfloat16 runs
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

import os

from absl import flags, logging

from keras_transformer import cli
from keras_transformer.export import exporters, versions
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
flags.DEFINE_boolean("check_ops", True, f"--format={exporters.takers('check_ops')}: refuse to publish an export "
                     "with ops stock TF Serving lacks.")
flags.DEFINE_enum("format", exporters.names()[0], exporters.names(), exporters.choices_help())
flags.DEFINE_string("quantization", None, f"--format={exporters.takers('quantization')}: weights as int8, int16, "
                    "float16, ... (default float32).")
flags.DEFINE_enum("precision", "float32", ["float32", "bfloat16", "auto"],
                  f"--format={exporters.takers('precision')}: what the model computes in. bfloat16: matrix "
                  "products in bfloat16 (weights stored so), softmax, layer normalization and beam scores in "
                  "float32; faster on some CPUs with AVX512_BF16 or AMX, correct but slower than float32 on "
                  "others. auto: bfloat16 if this machine's CPU has AVX512_BF16 or AMX and a start-up timing "
                  "finds its bfloat16 matrix products >= 1.15x as fast as float32's, else float32.")
flags.DEFINE_string("shortlist", None, "A vocabulary map (python -m keras_transformer.shortlist) the export's "
                    "searches are restricted by: held in the SavedModel; a CTranslate2 export keeps it as vmap.txt "
                    "and translates with it.")
flags.DEFINE_list("signatures", None, f"--format={exporters.takers('signatures')}: the signatures to export, of "
                  f"{', '.join(versions.SIGNATURES)} (default: all; {versions.DEFAULT_SIGNATURE} is required). "
                  "Fewer signatures load and serve in less memory.")
flags.mark_flags_as_required(["model_dir", "export_dir"])


def main(argv):
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}")
    decoding = task_flags.decoding_config()
    # The format's options: one it does not take refused in one line, the rest checked, before TensorFlow starts.
    exporter = exporters.check_options(FLAGS.format, {name: FLAGS[name].value for name in exporters.options()
                                                      if FLAGS[name].present})
    TrainingDirectory(FLAGS.model_dir).check_exists()
    command_files.check_input_file(FLAGS.shortlist, "shortlist", stdin=False)
    versions.check_export_dir(FLAGS.export_dir, FLAGS.version, model_dir=FLAGS.model_dir)
    options = {name: FLAGS[name].value for name in exporter.options}
    if "ensemble_model_dirs" in options:
        options["ensemble_model_dirs"] = task_flags.ensemble_model_dirs(FLAGS.model_dir)
    tf = cli.start_tensorflow()
    tf.get_logger().setLevel("ERROR")
    logging.set_verbosity(logging.WARNING)
    from keras_transformer.run_dir import layout  # pylint: disable=g-import-not-at-top
    from keras_transformer.tasks import registry as task_registry  # pylint: disable=g-import-not-at-top

    if os.path.isfile(os.path.join(FLAGS.model_dir, layout.CONFIG_FILE)):  # else export_model_dir says so
        decoding = task_flags.decoding_config(base=task_registry.of_run(FLAGS.model_dir).decoding)
    exporter.export(FLAGS.model_dir, FLAGS.export_dir, decoding, options, checkpoint=FLAGS.checkpoint,
                    version=FLAGS.version, shortlist_file=FLAGS.shortlist)
