"""Averages the last K checkpoints of a training directory (section 6.1).

    python -m keras_transformer.average_checkpoints --model_dir=runs/base --num_checkpoints=5

writes MODEL_DIR/averaged/ckpt-<last step> (see `keras_transformer.run_dir.averaging`), which
translation and export then prefer over the latest checkpoint. Bad input (too few
checkpoints, a damaged one among them) prints one line `error: ...` and exits with status 2,
writing nothing.
"""

from __future__ import annotations

import os

from absl import app, flags, logging

from keras_transformer import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Training directory holding checkpoints/.")
flags.DEFINE_integer("num_checkpoints", 5, "Average this many of the most recent checkpoints "
                     "(paper: 5 base, 20 big).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    if not FLAGS.model_dir:
        raise ValueError("--model_dir is required")
    if not os.path.isdir(FLAGS.model_dir):
        raise FileNotFoundError(f"--model_dir={FLAGS.model_dir}: no such folder")
    cli.start_tensorflow()
    logging.set_verbosity(logging.WARNING)  # TF's per-save "Sharding callback" INFO lines
    from keras_transformer.run_dir import averaging  # pylint: disable=g-import-not-at-top

    paths = averaging.recent_checkpoints(FLAGS.model_dir, FLAGS.num_checkpoints)
    path = averaging.average_last(FLAGS.model_dir, FLAGS.num_checkpoints)
    print(f"averaged {', '.join(os.path.basename(p) for p in paths)} -> {path}")


if __name__ == "__main__":
    cli.run(main)
