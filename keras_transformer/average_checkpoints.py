"""Averages the last K checkpoints of a training directory (section 6.1).

"For the base models, we used a single model obtained by averaging the last 5
checkpoints, which were written at 10-minute intervals. For the big models, we
averaged the last 20 checkpoints."

    python -m keras_transformer.average_checkpoints --model_dir=runs/base --num_checkpoints=5

reads MODEL_DIR/checkpoints (the most recent K of `tf.train.CheckpointManager`'s
list), averages every model variable and writes MODEL_DIR/averaged/ckpt-<last step>:
a model-only checkpoint that `keras_transformer.model_dir.restore_model` (translation,
export) prefers over the latest training checkpoint. Optimizer slots are not averaged.
"""

from __future__ import annotations

import os

from absl import app, flags, logging

from keras_transformer import cli

FLAGS = flags.FLAGS


def define_flags() -> None:
    """Defined only when run as a command, so `keras_transformer.train` can import this module."""
    flags.DEFINE_string("model_dir", None, "Training directory holding checkpoints/.")
    flags.DEFINE_integer("num_checkpoints", 5, "Average this many of the most recent checkpoints "
                         "(paper: 5 base, 20 big).")


def checkpoint_step(path: str) -> int:
    return int(path.rsplit("-", 1)[1])


def recent_checkpoints(model_dir: str, count: int) -> list[str]:
    """The `count` most recent checkpoint prefixes of MODEL_DIR/checkpoints, oldest first."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from keras_transformer import model_dir as model_dir_lib  # pylint: disable=g-import-not-at-top

    if count < 1:
        raise ValueError(f"--num_checkpoints must be positive, got {count}")
    directory = os.path.join(model_dir, model_dir_lib.CHECKPOINT_DIR)
    state = tf.train.get_checkpoint_state(directory)
    if state is None or not state.all_model_checkpoint_paths:
        raise FileNotFoundError(f"{directory}: no checkpoints to average")
    paths = list(state.all_model_checkpoint_paths)  # already prefixed with `directory` when relative
    if len(paths) < count:
        raise ValueError(f"{directory} holds {len(paths)} checkpoint(s), fewer than the {count} asked for "
                         "(train longer or keep more with --keep_checkpoints)")
    return paths[-count:]


def average_into(model, paths: list[str]) -> None:
    """Sets every float variable of `model` (built) to its mean over the checkpoints `paths`;
    the others (e.g. dropout seed states) keep the last checkpoint's value."""
    import numpy as np  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    sums = None
    for path in paths:
        tf.train.Checkpoint(model=model).read(path).expect_partial().assert_existing_objects_matched()
        values = [v.numpy().astype(np.float64) for v in model.variables]
        sums = values if sums is None else [s + v for s, v in zip(sums, values)]
    for variable, total in zip(model.variables, sums):
        if tf.as_dtype(variable.dtype).is_floating:
            variable.assign((total / len(paths)).astype(tf.as_dtype(variable.dtype).as_numpy_dtype))


def average_last(model_dir: str, count: int) -> str:
    """Averages the last `count` checkpoints into MODEL_DIR/averaged; returns the new prefix."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from keras_transformer import model_dir as model_dir_lib  # pylint: disable=g-import-not-at-top
    from keras_transformer.model import Transformer  # pylint: disable=g-import-not-at-top

    paths = recent_checkpoints(model_dir, count)
    model = Transformer(model_dir_lib.read_config(model_dir))
    model.build()
    average_into(model, paths)
    step = tf.Variable(checkpoint_step(paths[-1]), dtype=tf.int64)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, step=step),
                                         os.path.join(model_dir, model_dir_lib.AVERAGED_DIR), max_to_keep=1)
    return manager.save(checkpoint_number=int(step.numpy()))


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    if not FLAGS.model_dir:
        raise ValueError("--model_dir is required")
    logging.set_verbosity(logging.WARNING)  # TF's per-save "Sharding callback" INFO lines
    if not os.path.isdir(FLAGS.model_dir):
        raise FileNotFoundError(f"--model_dir={FLAGS.model_dir}: no such folder")
    cli.start_tensorflow()
    paths = recent_checkpoints(FLAGS.model_dir, FLAGS.num_checkpoints)
    path = average_last(FLAGS.model_dir, FLAGS.num_checkpoints)
    print(f"averaged {', '.join(os.path.basename(p) for p in paths)} -> {path}")


if __name__ == "__main__":
    define_flags()
    cli.run(main)
