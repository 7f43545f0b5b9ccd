"""Exports a training directory as a SavedModel that stock TF Serving serves (or for CTranslate2).

    python -m export --model_dir=/tmp/run --export_dir=/tmp/serving/transformer
    python -m export --model_dir=/tmp/run --export_dir=OUT --beam_size=4 --alpha=0.6 \\
        --max_extra_length=50 --version=3
    python -m export --model_dir=/tmp/run --export_dir=OUT_CT2 --format=ctranslate2 --quantization=int8

`--ensemble_model_dirs=B,C` exports ONE SavedModel decoding the ensemble of --model_dir's model
and those runs' (`keras_transformer.decoding.ensemble`: each search step takes the log of the
mean of the members' next-token probabilities, fairseq's logsumexp - log n), with the same
signatures; the members must share one vocabulary (tokenizer and special ids) and, parsing
runs, their source tags, tagger and tree targets (`export.ensemble_members`, checked before
TensorFlow starts); their shapes may differ. `translate_with_attention` shows the first model's
attention. --checkpoint names --model_dir's checkpoint; the others use their default one.

`--format=ctranslate2` writes OUT_CT2/<version>/ as a CTranslate2 4.x model folder with the
tokenizer beside it (export/ctranslate2_model.py), for serving on CPU outside TF Serving; its
decoding flags are recorded in its export.json, as CTranslate2 takes them per call.

`--precision=bfloat16` exports a model whose matrix products (attention projections, Q K^T,
attention times V, feed-forward layers, the output projection x E^T) run in bfloat16, its
weights stored as bfloat16 variables (rounded once, at export), while softmax, layer
normalization, log-softmax, beam scores and the length penalty stay float32
(keras_transformer/decoding/precision.py). It pays on CPUs whose bfloat16 matrix products are
faster than float32's: some with AVX512_BF16 or AMX, not all (an Intel Xeon with AVX512_BF16
and no AMX multiplied bfloat16 at about half float32's speed); on CPUs without those flags it
runs correctly but slower than float32. Its outputs are mostly, not all, the float32 export's (the logits are
rounded to bfloat16). `--precision=auto` chooses bfloat16 where this machine's CPU has
AVX512_BF16 or AMX and a start-up timing finds its bfloat16 matrix products at least 1.15x as
fast as float32's, as training's --precision=auto does, else float32 (it prints the timing):
for a model served on hosts like this one. export.json records the precision; the signatures
are the float32 export's.

A parsing model (trained with --dataset=ptb) gets section 6.3's decoding (beam 21, alpha 0.3,
output up to input length + 300) instead of section 6.1's; decoding flags change only themselves.

This writes OUT/<version>/ (default: the next free integer in OUT when the export is done:
two exports at once into one OUT publish two versions) with the signatures
`serving_default` (sentences -> translations, scores) and `translate_with_attention`
(see export/serving_module.py and the README's serving section). The version folder
appears at once (written beside it in OUT/.tmp-<version>-<host>-<pid>-<token>/, renamed at
the end) and only after the op check passed: stock TF Serving runs core TensorFlow and
tensorflow-text ops only. It and its files get the modes the umask allows (0755 and 0644
with umask 022), so a TF Serving user other than the exporter can read them. An export
first removes the temporary folders that killed exports on this host left in OUT (one
line each), never those of a running export or of another host.

Bad input prints `error: <one line>` and exits with status 2, and writes nothing: a bad
flag, an --export_dir that is a file, lies below a file, is the --model_dir or cannot be
written, an existing --version, a --checkpoint prefix without its .index file, a --model_dir
that is not a training directory (these before TensorFlow starts), an incomplete or damaged
training directory (before the model is built). A file system that refuses a write later (a
full disk) is one such line too.
"""

from __future__ import annotations

import dataclasses
import os
import sys

from absl import flags, logging

from export import versions
from keras_transformer import cli
from tasks import flags as task_flags
from training_directory import TrainingDirectory

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
flags.mark_flags_as_required(["model_dir", "export_dir"])


def main(argv):
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}")
    decoding = task_flags.decoding_config()
    if FLAGS.format == "ctranslate2":
        from export import ctranslate2_model  # pylint: disable=g-import-not-at-top

        ctranslate2_model.check_quantization(FLAGS.quantization)
    elif FLAGS.quantization is not None:
        raise ValueError("--quantization applies to --format=ctranslate2 only")
    if FLAGS.format == "ctranslate2" and FLAGS["precision"].present:
        raise ValueError("--precision applies to --format=saved_model only (CTranslate2: --quantization)")
    TrainingDirectory(FLAGS.model_dir).check_exists()
    versions.check_export_dir(FLAGS.export_dir, FLAGS.version, model_dir=FLAGS.model_dir)
    ensemble_model_dirs = task_flags.ensemble_model_dirs(FLAGS.model_dir)
    if ensemble_model_dirs and FLAGS.format == "ctranslate2":
        raise ValueError("--ensemble_model_dirs: --format=saved_model only (CTranslate2 ensembles are not exported)")
    tf = cli.start_tensorflow()
    tf.get_logger().setLevel("ERROR")
    logging.set_verbosity(logging.WARNING)
    from export import serving_module  # pylint: disable=g-import-not-at-top

    from keras_transformer.run_dir import layout  # pylint: disable=g-import-not-at-top
    from tasks.parsing import parse_files  # pylint: disable=g-import-not-at-top

    if os.path.isfile(os.path.join(FLAGS.model_dir, layout.CONFIG_FILE)):  # else export_model_dir says so
        decoding = task_flags.decoding_config(base=parse_files.run_decoding(FLAGS.model_dir))
    if FLAGS.format == "ctranslate2":
        if decoding.tree_constraint:  # CTranslate2 decodes as each call says, with no such rule
            print("note: CTranslate2 cannot constrain decoding to trees; its outputs are repaired instead "
                  "(python -m keras_transformer.parse)", file=sys.stderr)
            decoding = dataclasses.replace(decoding, tree_constraint=False)
        path, checkpoint = ctranslate2_model.export_model_dir(
            FLAGS.model_dir, FLAGS.export_dir, decoding, FLAGS.checkpoint, FLAGS.version, FLAGS.quantization)
        print(f"exported {checkpoint} to {path} (CTranslate2, {FLAGS.quantization or 'float32'})")
        return
    from keras_transformer.decoding import precision as precision_lib  # pylint: disable=g-import-not-at-top

    precision = precision_lib.resolve(FLAGS.precision, log=print)
    path, checkpoint, translator = serving_module.export_model_dir(
        FLAGS.model_dir, FLAGS.export_dir, decoding, FLAGS.checkpoint, FLAGS.version, FLAGS.check_ops,
        precision=precision, ensemble_model_dirs=ensemble_model_dirs)
    print(f"exported {checkpoint} to {path} ({precision}" + (", auto" if FLAGS.precision == "auto" else "") + ")")
    print(f"signatures: {', '.join(sorted(translator.signatures()))}; "
          f"beam_size={decoding.beam_size} alpha={decoding.alpha} max_extra_length={decoding.max_extra_length}"
          + (" tree_constraint" if decoding.tree_constraint else ""))


if __name__ == "__main__":
    cli.run(main)
