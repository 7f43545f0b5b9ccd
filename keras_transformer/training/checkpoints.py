"""A training run's checkpoints, and when to write them (section 6.1).

"For the base models, we used a single model obtained by averaging the last 5 checkpoints,
which were written at 10-minute intervals." (section 6.1)

* `Checkpoints`: the model, the optimizer and the step counter under MODEL_DIR/checkpoints,
  the last `keep` of them kept (for `average_checkpoints`); restore returns the step. A damaged
  checkpoint (truncated, missing a file) is skipped with a warning for the one before it. The
  dropout layers' random state (section 5.4's P_drop draws) is saved too, so a resumed run draws
  the masks the uninterrupted run would have drawn.
* `CheckpointTimer`: save every N updates, every M minutes and at the end; it also tells
  when `max_train_minutes` is spent, since that ends the run with a save too.
* `copy_until`: a run's checkpoints up to an update, copied into another training directory
  as the manager would have left them there (a run branching from this one at that update).

    checkpoints = Checkpoints(model_dir, model, optimizer, step, keep=5)
    start = checkpoints.restore()
    timer = CheckpointTimer(every_steps=1000, every_minutes=10, last_step=100_000, started=time.time())
    if timer.check(step, time.time()).save:
        checkpoints.save()
        timer.saved(time.time())
"""

from __future__ import annotations

import glob
import os
from typing import Callable, NamedTuple, Optional, Sequence

import keras
import tensorflow as tf

from keras_transformer.files import atomic
from keras_transformer.run_dir import averaging, best_checkpoints, readable_checkpoints
from keras_transformer.run_dir import layout
from keras_transformer.training import ema as ema_lib
from keras_transformer.training.distribution import is_chief, task_id

# The checkpoint key of the model's random state (`dropout_seed_states`).
DROPOUT_SEEDS_KEY = "dropout_seeds"


def dropout_seed_states(model) -> list:
    """The state variables of the model's `keras.random.SeedGenerator`s (its dropout layers' random
    draws), in the model's order: Keras counts them in `model.variables`, not in `model.weights`,
    and `tf.train.Checkpoint(model=model)` does not reach them."""
    if not isinstance(model, keras.layers.Layer):
        return []
    weights = {id(w) for w in model.weights}
    return [v for v in model.variables if id(v) not in weights]


class Checkpoints:
    """`tf.train.Checkpoint(model=, optimizer=, step=[, ema=])` and its `tf.train.CheckpointManager`.

    A checkpoint holds the keys `model`, `optimizer` and `step` (the layout
    `keras_transformer.run_dir.layout` documents), `dropout_seeds` (`dropout_seed_states`) and `ema`
    with an `ema.ExponentialMovingAverage`, numbered by `step`. Restoring a checkpoint without
    dropout seeds (written before they were saved) leaves the seeds the model was built with.

    Args:
        model_dir: the training directory; checkpoints go to MODEL_DIR/checkpoints.
        model: the `Transformer`.
        optimizer: its optimizer (the Adam of section 5.3, maybe in a `LossScaleOptimizer`).
        step: the int64 `tf.Variable` counting updates.
        keep: how many recent checkpoints to keep.
        strategy: on a non-chief worker of a multi-worker strategy, saves go to
            MODEL_DIR/workers/worker-<task id>: every worker takes part in a save, and only
            the chief's copy is the run's. Restores always read the run's (the chief's).
        log: where the warning about a damaged checkpoint goes (default: a line on stderr).
        ema: the run's `ema.ExponentialMovingAverage`, or None. Restoring a checkpoint without
            one (a run that turns `--ema_decay` on when resumed) starts it from the restored weights.
    """

    def __init__(self, model_dir: str, model, optimizer, step: tf.Variable, keep: int = 5,
                 strategy: Optional[tf.distribute.Strategy] = None,
                 log: Optional[Callable[[str], None]] = None, ema=None):
        self.model_dir = model_dir
        self.model = model
        self.step = step
        self.ema = ema
        self.log = log or readable_checkpoints.warn_on_stderr
        self.parts = dict(model=model, optimizer=optimizer, step=step)
        self.optional_parts = {}  # restored when the checkpoint has them
        seeds = dropout_seed_states(model)
        if seeds:
            self.optional_parts[DROPOUT_SEEDS_KEY] = seeds
        if ema:
            self.optional_parts[ema_lib.CHECKPOINT_KEY] = ema
        self.checkpoint = tf.train.Checkpoint(**self.parts, **self.optional_parts)
        self.directory = os.path.join(model_dir, layout.CHECKPOINT_DIR)
        self.save_directory = self.directory
        if strategy is not None and not is_chief(strategy):
            self.save_directory = os.path.join(model_dir, layout.WORKERS_DIR, f"worker-{task_id(strategy)}")
        # The manager's rotation deletes by pattern: it gets the folder spelled without glob characters.
        manager_directory = readable_checkpoints.tf_path(self.save_directory)
        try:
            self.manager = tf.train.CheckpointManager(self.checkpoint, manager_directory, max_to_keep=keep)
        except readable_checkpoints.READ_ERRORS as error:  # a damaged `checkpoint` state file
            state = os.path.join(self.save_directory, "checkpoint")
            os.replace(state, state + ".damaged")
            self.log(f"warning: {state} is unreadable ({type(error).__name__}); kept as checkpoint.damaged")
            self.manager = tf.train.CheckpointManager(self.checkpoint, manager_directory, max_to_keep=keep)
        self.damaged: list[str] = []  # skipped by `restore`; moved aside by the next `save`

    def restore(self) -> int:
        """Restores the run's newest readable checkpoint (model, optimizer, step, dropout seeds) if any; returns the step.

        The checkpoints of the run's list are tried newest first; each damaged one is skipped
        with one warning line (`log`) and left as it is until the next `save` moves it aside.

        Raises:
            ValueError: checkpoints exist but none of them is readable, or the newest readable
                one does not fit the model (`readable_checkpoints.model_mismatch`; nothing restored).
        """
        listed = readable_checkpoints.listed_checkpoints(self.directory, self.log)
        readable, self.damaged = readable_checkpoints.newest_readable(listed, self.log)
        if readable:
            reader = readable_checkpoints.load_reader(readable)
            problem = readable_checkpoints.model_mismatch(self.model, reader)
            if problem:
                raise ValueError(f"checkpoint {readable} does not fit "
                                 f"{os.path.join(self.model_dir, layout.CONFIG_FILE)}: {problem}")
            saved = readable_checkpoints.top_level_keys(reader)
            present = {key: part for key, part in self.optional_parts.items()
                       if key in saved and (key != DROPOUT_SEEDS_KEY or
                                            readable_checkpoints.list_length(reader, key) == len(part))}
            checkpoint = tf.train.Checkpoint(**self.parts, **present)
            # expect_partial: a part the run no longer keeps (its moving average, once --ema_decay is
            # off) is left unread without TensorFlow's per-variable warnings when the checkpoint is freed.
            status = checkpoint.restore(readable_checkpoints.tf_path(readable)).expect_partial()
            status.assert_existing_objects_matched()
            without_ema = self.ema is not None and ema_lib.CHECKPOINT_KEY not in present
            if without_ema:
                self.ema.reset()
                self.log(f"{os.path.basename(readable)} holds no moving average of the weights: it starts "
                         "from the restored weights")
        elif listed:
            raise ValueError(f"{self.directory}: none of its {len(listed)} checkpoint(s) is readable (see the "
                             "warnings above); restore one, or train in another --model_dir")
        return int(self.step.numpy())

    def save(self) -> Optional[str]:
        """Saves a checkpoint numbered by the step; returns its path. TensorFlow writes the data
        files first and the `checkpoint` state file last, so a crash mid-save leaves the previous
        one as the latest.

        The first save after `restore` skipped damaged checkpoints first renames their files
        to `ckpt-<step>.damaged.*` (a save at the same step, or the `keep` rotation, would
        otherwise delete them): kept for inspection, out of the run's way.
        """
        if self.save_directory == self.directory:  # the chief's own checkpoints
            for prefix in self.damaged:
                self._move_aside(prefix)
        self.damaged = []
        saved = self.manager.save(checkpoint_number=int(self.step.numpy()))
        path = os.path.join(self.save_directory, os.path.basename(saved))
        # On the disk before the run goes on: the checkpoint's files, then the state file naming it.
        atomic.sync_files([*readable_checkpoints.data_files(path), path + ".index",
                           os.path.join(self.save_directory, "checkpoint")])
        return path

    def _move_aside(self, prefix: str) -> None:
        """Renames the files of the damaged checkpoint `prefix` to a free `prefix.damaged[-n]`."""
        files = readable_checkpoints.data_files(prefix)
        if os.path.exists(prefix + ".index"):
            files.append(prefix + ".index")
        if not files:
            return
        target, n = prefix + ".damaged", 1
        while glob.glob(glob.escape(target) + ".*"):
            n += 1
            target = f"{prefix}.damaged-{n}"
        try:
            for path in files:
                os.rename(path, target + path[len(prefix):])
        except OSError as error:
            self.log(f"warning: could not move the damaged checkpoint {prefix} aside ({error})")
            return
        self.log(f"kept the damaged checkpoint {prefix} as {os.path.basename(target)}.*")

    def path_of(self, step: int) -> str:
        """The prefix of the run's checkpoint of update `step` (saved or not)."""
        return os.path.join(self.directory, f"ckpt-{step}")

    def latest_name(self) -> str:
        """The latest checkpoint's name (e.g. "ckpt-2000"), or a phrase saying there is none."""
        latest = tf.train.latest_checkpoint(readable_checkpoints.tf_path(self.directory))
        return os.path.basename(latest) if latest else "none (no checkpoint was saved)"


class Due(NamedTuple):
    """What `CheckpointTimer.check` decided for one update."""

    save: bool  # save a checkpoint now
    out_of_time: bool  # max_train_minutes is spent: save and stop


class CheckpointTimer:
    """Decides after each update whether to save: every `every_steps` updates, when `every_minutes`
    passed since the last save (section 6.1: 10-minute intervals), at `last_step`, and when the
    time budget `budget_minutes` is spent.

    The two clock decisions go through `agree` together, so that on a cluster every worker
    saves (a collective operation) and stops at the same update even when their clocks straddle
    a boundary; without clock-based settings `agree` is never called.

    Args:
        every_steps: save when the step is a multiple of this (0: never by count).
        every_minutes: save when this much time passed since the last save (0: never by time).
        budget_minutes: training time this process may spend (0: no limit).
        last_step: the final update (`train_steps`), always saved.
        started: `time.time()` when training started; the first interval counts from it.
        agree: `flags -> flags` made the same on every worker, e.g.
            `functools.partial(distribution.agree, strategy)` (default: as they are).
    """

    def __init__(self, every_steps: int = 0, every_minutes: float = 0.0, budget_minutes: float = 0.0,
                 last_step: Optional[int] = None, started: float = 0.0,
                 agree: Optional[Callable[[Sequence[bool]], Sequence[bool]]] = None):
        self.every_steps = every_steps
        self.every_minutes = every_minutes
        self.budget_minutes = budget_minutes
        self.last_step = last_step
        self.started = started
        self.last_save = started
        self.agree = agree or tuple

    def check(self, step: int, now: float) -> Due:
        """The decision after update `step` at time `now` (`time.time()`)."""
        out_of_time = bool(self.budget_minutes) and now - self.started >= 60.0 * self.budget_minutes
        by_time = bool(self.every_minutes) and now - self.last_save >= 60.0 * self.every_minutes
        if self.budget_minutes or self.every_minutes:  # the same settings on every worker
            out_of_time, by_time = self.agree((out_of_time, by_time))
        by_count = bool(self.every_steps) and step % self.every_steps == 0
        at_end = self.last_step is not None and step >= self.last_step
        return Due(save=by_count or by_time or at_end or out_of_time, out_of_time=out_of_time)

    def saved(self, now: float) -> None:
        """Notes a save at time `now`: the next `every_minutes` interval starts here."""
        self.last_save = now


def copy_until(model_dir: str, target_dir: str, step: int) -> list[str]:
    """The checkpoints the run in `model_dir` lists up to update `step`, copied into
    `target_dir`/checkpoints (`best_checkpoints.copy_checkpoint`: hard links where the filesystem
    allows), with a `checkpoint` state file that lists them as the run's manager listed them
    (their times included, so the next save rotates them as it would have), ckpt-`step` the
    newest. A run started in `target_dir` then resumes at `step` as this run would have, had it
    stopped there: a shorter budget branching from a longer run (`bench/compute_robustness.py`).
    Returns the copies' prefixes, oldest first.

    Raises:
        FileNotFoundError: the run lists no checkpoint of update `step`.
    """
    source = os.path.join(model_dir, layout.CHECKPOINT_DIR)
    try:
        state = tf.train.get_checkpoint_state(readable_checkpoints.tf_path(source))
    except readable_checkpoints.READ_ERRORS:  # damaged: `listed_checkpoints` lists the files, without times
        state = None
    times = {os.path.basename(path): stamp for path, stamp in
             zip(state.all_model_checkpoint_paths, state.all_model_checkpoint_timestamps)} if state else {}
    listed = sorted((prefix for prefix in readable_checkpoints.listed_checkpoints(source)
                     if averaging.checkpoint_step(prefix) <= step), key=averaging.checkpoint_step)
    if not listed or averaging.checkpoint_step(listed[-1]) != step:
        raise FileNotFoundError(f"{source}: no checkpoint of update {step} (ckpt-{step}) among the run's")
    directory = os.path.join(target_dir, layout.CHECKPOINT_DIR)
    copies = [best_checkpoints.copy_checkpoint(prefix, directory) for prefix in listed]
    names = [os.path.basename(prefix) for prefix in copies]
    stamps = [times.get(name) for name in names]
    # As `tf.train.CheckpointManager` writes it after a save (the public v1 twin is deprecated).
    save_dir = readable_checkpoints.tf_path(directory)
    paths = [os.path.join(save_dir, name) for name in names]  # written relative to save_dir
    tf.__internal__.train.update_checkpoint_state(
        save_dir=save_dir, model_checkpoint_path=paths[-1], all_model_checkpoint_paths=paths, save_relative_paths=True,
        all_model_checkpoint_timestamps=stamps if None not in stamps else None,
        last_preserved_timestamp=state.last_preserved_timestamp if state else None)
    return copies
