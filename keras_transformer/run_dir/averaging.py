"""Checkpoint averaging (section 6.1).

"For the base models, we used a single model obtained by averaging the last 5
checkpoints, which were written at 10-minute intervals. For the big models, we
averaged the last 20 checkpoints."

    path = average_last(model_dir, 5)    # MODEL_DIR/averaged/ckpt-<last step>

reads MODEL_DIR/checkpoints (the most recent K of `tf.train.CheckpointManager`'s list),
averages every model variable and writes a model-only checkpoint that
`keras_transformer.run_dir.layout.restore_model` (translation, export) prefers over the latest
training checkpoint. Optimizer slots are not averaged. The checkpoints of a run with
`--ema_decay` give their moving averages (`readable_checkpoints.read_model`): those are averaged. A damaged checkpoint among the K
stops the averaging with a one-line ValueError before anything is written; one that a training
run's rotation removes meanwhile makes `average_last` list the last K again. The command line
is `python -m keras_transformer.average_checkpoints`; training calls `average_checkpoints` at its end.
"""

from __future__ import annotations

import os
from typing import Optional

import numpy as np
import tensorflow as tf

from keras_transformer.files import atomic
from keras_transformer.run_dir import readable_checkpoints
from keras_transformer.run_dir import layout
from keras_transformer.model import Transformer


def checkpoint_step(path: str) -> int:
    """The step number of a checkpoint prefix ".../ckpt-1300" -> 1300."""
    return int(path.rsplit("-", 1)[1])


def recent_checkpoints(model_dir: str, count: int) -> list[str]:
    """The `count` most recent checkpoint prefixes of MODEL_DIR/checkpoints, oldest first."""
    if count < 1:
        raise ValueError(f"--num_checkpoints must be positive, got {count}")
    directory = os.path.join(model_dir, layout.CHECKPOINT_DIR)
    paths = readable_checkpoints.listed_checkpoints(directory)  # already prefixed with `directory` when relative
    if not paths:
        raise FileNotFoundError(f"{directory}: no checkpoints to average")
    if len(paths) < count:
        raise ValueError(f"{directory} holds {len(paths)} checkpoint(s), fewer than the {count} asked for "
                         "(train longer or keep more with --keep_checkpoints)")
    return paths[-count:]


def average_into(model, paths: list[str], source: str = "the model", moving_average: bool = True) -> None:
    """Sets every float variable of `model` (built) to its mean over the checkpoints `paths`;
    the others (e.g. dropout seed states) keep the last checkpoint's value. `source` names what
    the model was built from, for the error of a checkpoint that does not fit it;
    `moving_average` is `readable_checkpoints.read_model`'s (False: a run's trained weights, not
    its `--ema_decay` average)."""
    sums = None
    for path in paths:
        readable_checkpoints.read_model(model, path, source, moving_average=moving_average)
        if sums is None:
            sums = [v.numpy().astype(np.float64) for v in model.variables]
        else:  # in place, a variable at a time: no second copy of the model in float64
            for total, variable in zip(sums, model.variables):
                total += variable.numpy()
    for variable, total in zip(model.variables, sums):
        if tf.as_dtype(variable.dtype).is_floating:
            variable.assign((total / len(paths)).astype(tf.as_dtype(variable.dtype).as_numpy_dtype))


def average_last(model_dir: str, count: int) -> str:
    """Averages the last `count` checkpoints into MODEL_DIR/averaged; returns the new prefix.

    Raises:
        ValueError: one of them is damaged (nothing is written; a previous average stays).
    """
    return average_recent(model_dir, count)[0]


def average_recent(model_dir: str, count: int) -> tuple[str, list[str]]:
    """`average_last`, returning `(the new prefix, the checkpoints averaged)`. When a training
    run's rotation removes one of them before it is read, the last `count` are listed again
    (`layout.READ_ATTEMPTS` times in all)."""
    attempt = 1
    while True:
        paths = recent_checkpoints(model_dir, count)
        try:
            return average_checkpoints(model_dir, paths), paths
        except readable_checkpoints.CheckpointRemoved:
            if attempt == layout.READ_ATTEMPTS:
                raise
        attempt += 1


def average_checkpoints(model_dir: str, paths: list[str], step: Optional[int] = None,
                        moving_average: bool = True, directory: Optional[str] = None) -> str:
    """Averages the checkpoints `paths` (e.g. the best ones of MODEL_DIR/best) into
    MODEL_DIR/averaged/ckpt-<step> (default: the step of the last of `paths`); returns the prefix.
    `moving_average` is `average_into`'s; `directory` replaces MODEL_DIR/averaged (e.g. a run's
    trained weights averaged outside it, `bench/ema_against_trained_weights.py`).

    Raises:
        ValueError: one of them is damaged (nothing is written; a previous average stays).
    """
    if not paths:
        raise ValueError(f"{model_dir}: no checkpoints to average")
    for path in paths:
        if not os.path.isfile(path + ".index"):  # listed a moment ago
            raise readable_checkpoints.CheckpointRemoved(f"checkpoint {path} was removed before it was read "
                                                         "(a training run rotating its checkpoints?)")
        readable_checkpoints.check_readable(path)
    model = Transformer(layout.read_config(model_dir))
    model.build()
    average_into(model, paths, os.path.join(model_dir, layout.CONFIG_FILE), moving_average=moving_average)
    step = tf.Variable(checkpoint_step(paths[-1]) if step is None else step, dtype=tf.int64)
    directory = directory or os.path.join(model_dir, layout.AVERAGED_DIR)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, step=step),
                                         readable_checkpoints.tf_path(directory), max_to_keep=1)
    with atomic.uninterrupted():  # Ctrl-C between the files and the state file listing them waits for both
        prefix = manager.save(checkpoint_number=int(step.numpy()))
    return os.path.join(directory, os.path.basename(prefix))
