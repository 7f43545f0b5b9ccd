"""Averages the last K checkpoints of a training directory (section 6.1).

Writes MODEL_DIR/averaged/ckpt-<last step> (`keras_transformer.run_dir.averaging`), which
translate, parse, score and export then read by default. Training does the same at its end with
--average_checkpoints=K (with --keep_best_checkpoints: the K best by the dev metric).

Typical command line:

    python -m keras_transformer.average_checkpoints --model_dir=runs/base --num_checkpoints=5

docs/guide/training.md explains checkpoints and selection; docs/reference/errors.md lists what
it refuses; docs/reference/commands.md every flag.
"""

from __future__ import annotations

import os

from absl import app, flags, logging

from keras_transformer import cli
from keras_transformer.files import command_files
from keras_transformer.training_directory import TrainingDirectory

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Training directory holding checkpoints/.")
flags.DEFINE_integer("num_checkpoints", 5, "Average this many of the most recent checkpoints "
                     "(paper: 5 base, 20 big).", lower_bound=1)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    if not FLAGS.model_dir:
        raise ValueError("--model_dir is required")
    TrainingDirectory(FLAGS.model_dir).check_exists()
    command_files.check_writable_folder(FLAGS.model_dir, "model_dir")  # the average is written there: a read-only run, at once
    cli.start_tensorflow()
    logging.set_verbosity(logging.WARNING)  # TF's per-save "Sharding callback" INFO lines
    from keras_transformer.run_dir import averaging  # pylint: disable=g-import-not-at-top

    TrainingDirectory(FLAGS.model_dir).open(need_tokenizer=False)  # a damaged run, a tokenizer not the run's: refused
    path, paths = averaging.average_recent(FLAGS.model_dir, FLAGS.num_checkpoints)
    print(f"averaged {', '.join(os.path.basename(p) for p in paths)} -> {path}")

