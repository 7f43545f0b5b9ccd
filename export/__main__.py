"""Exports a training directory as a SavedModel that stock TF Serving serves.

    python -m export --model_dir=/tmp/run --export_dir=/tmp/serving/transformer
    python -m export --model_dir=/tmp/run --export_dir=OUT --beam_size=4 --alpha=0.6 \\
        --max_extra_length=50 --version=3

writes OUT/<version>/ (default: the next integer in OUT) with the signatures
`serving_default` (sentences -> translations, scores) and `translate_with_attention`
(see export/serving_module.py and docs/serving.md). The version folder appears at once
(written beside it, renamed at the end) and only after the op check passed: stock TF
Serving runs core TensorFlow and tensorflow-text ops only. Bad input (missing or
incomplete training directory, existing version, bad flag) prints `error: <one line>`
and exits with status 2.
"""

from __future__ import annotations

from absl import flags, logging

from keras_transformer import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Training directory (model_config.json, tokenizer/, checkpoints/).")
flags.DEFINE_string("export_dir", None, "TF Serving model base path; the export goes to EXPORT_DIR/<version>/.")
flags.DEFINE_string("checkpoint", None, "Checkpoint prefix to export (default: averaged/, else the latest).")
flags.DEFINE_integer("beam_size", 4, "Beam size (paper: 4).", lower_bound=1)
flags.DEFINE_float("alpha", 0.6, "Length penalty exponent (paper: 0.6).", lower_bound=0.0)
flags.DEFINE_integer(
    "max_extra_length", 50,
    "At most source tokens (EOS included) + this many output tokens (paper: 50).", lower_bound=0,
)
flags.DEFINE_integer("version", None, "Version folder number (default: next integer in --export_dir).", lower_bound=0)
flags.DEFINE_boolean("check_ops", True, "Refuse to publish an export with ops stock TF Serving lacks.")
flags.mark_flags_as_required(["model_dir", "export_dir"])


def main(argv):
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}")
    tf = cli.start_tensorflow()
    tf.get_logger().setLevel("ERROR")
    logging.set_verbosity(logging.WARNING)
    from export import serving_module  # pylint: disable=g-import-not-at-top
    from keras_transformer import decoding  # pylint: disable=g-import-not-at-top

    decoding_config = decoding.DecodingConfig(
        beam_size=FLAGS.beam_size, alpha=FLAGS.alpha, max_extra_length=FLAGS.max_extra_length
    )
    translator, checkpoint = serving_module.from_model_dir(FLAGS.model_dir, decoding_config, FLAGS.checkpoint)
    path = serving_module.export_saved_model(
        translator, FLAGS.export_dir, FLAGS.version, extra={"checkpoint": checkpoint},
        check=serving_module.check_servable if FLAGS.check_ops else None,
    )
    print(f"exported {checkpoint} to {path}")
    print(f"signatures: {', '.join(sorted(translator.signatures()))}; "
          f"beam_size={FLAGS.beam_size} alpha={FLAGS.alpha} max_extra_length={FLAGS.max_extra_length}")


if __name__ == "__main__":
    cli.run(main)
