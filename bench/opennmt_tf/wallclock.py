"""Quality at equal wall-clock: the checkpoint of each toolkit that stands for the same training time.

    saves = {toolkit: training_logs.checkpoint_saves(toolkit, lines, every) for toolkit in TOOLKITS}
    timing = choose(saves)                     # T, the faster toolkit, each one's update at T
    prefixes = locate(timing, checkpoints)     # each chosen checkpoint on disk (NotMeasured: why not)

The quality part compares the toolkits at equal updates (each run's whole schedule, each with its
own checkpoint averaging). At equal wall-clock, per seed, after both quality runs of the seed:

* every checkpoint of a run is timed by the seconds from its training command's start to the
  progress line of the update it holds (`training_logs.checkpoint_saves`: both toolkits print
  that line, then save; the harness's stamps, WORK/logs/NAME.log, the clock of `train_minutes`);
* T is the faster toolkit's time of its last checkpoint (its final update), by that same rule.
  Not `train_minutes`, the whole command, which adds what each toolkit does after its last
  checkpoint exists (the final dev evaluation, the averaging, the process's exit) and differs
  between the toolkits;
* the slower toolkit's state at T is its newest checkpoint made at or before T (one made at
  exactly T counts);
* both are single checkpoints, not averaged: the faster toolkit's last, the slower's at T, each
  translated by its toolkit's own command with the quality part's beam search and scored in both
  conventions.

A checkpoint the run no longer keeps (rotated away: the project keeps its last
--keep_checkpoints in MODEL_DIR/checkpoints and its best in MODEL_DIR/best, OpenNMT-tf its last
`keep_checkpoint_max`) is not measured: `NotMeasured` carries which update was needed and which
are kept, and the harness records that instead of failing.
"""

from __future__ import annotations

import dataclasses
import glob
import os

TOOLKITS = ("ours", "peer")
NAMES = {"ours": "ours", "peer": "OpenNMT-tf"}
OF = {"ours": "ours'", "peer": "OpenNMT-tf's"}  # possessives
RULE = ("T: the faster toolkit's seconds from its training command's start to the progress line of its final "
        "update (its last checkpoint); the slower toolkit's newest checkpoint whose update's progress line came "
        "at or before T from its own start; single checkpoints, not averaged")


class NotMeasured(Exception):
    """Why the comparison at equal wall-clock cannot be made for a seed; `details` are JSON values
    for the record (the reason among them)."""

    def __init__(self, reason: str, **details):
        super().__init__(reason)
        self.details = {"reason": reason, **details}


def _updates(steps) -> str:
    return ", ".join(str(s) for s in steps) or "none"


def choose(saves: dict) -> dict:
    """T and each toolkit's checkpoint at T from both runs' `training_logs.Saves` (module
    docstring): {"faster", "slower", "t_seconds", toolkit: {"update", "seconds", "last_update"}}.
    Raises NotMeasured if a run saved nothing, or an untimed save could be the one at T."""
    for toolkit in TOOLKITS:
        if saves[toolkit].last is None:
            raise NotMeasured(f"{OF[toolkit]} training console shows no checkpoint")
        if saves[toolkit].last not in saves[toolkit].seconds:
            raise NotMeasured(f"{OF[toolkit]} console has no progress line of its final update "
                              f"{saves[toolkit].last} to time its last checkpoint")
    last = {toolkit: saves[toolkit].seconds[saves[toolkit].last] for toolkit in TOOLKITS}
    faster = min(TOOLKITS, key=lambda toolkit: last[toolkit])  # a tie: ours, and the peer's last at T
    slower = next(toolkit for toolkit in TOOLKITS if toolkit != faster)
    t_seconds = last[faster]
    timed = saves[slower].seconds
    before = [step for step, seconds in timed.items() if seconds <= t_seconds]
    step = max(before) if before else None
    after = min((s for s, seconds in timed.items() if seconds > t_seconds), default=None)
    unknown = [u for u in saves[slower].untimed if (step is None or u > step) and (after is None or u < after)]
    details = {"faster": faster, "slower": slower, "t_seconds": t_seconds}
    if unknown:
        raise NotMeasured(f"{OF[slower]} console has no progress line of update(s) {_updates(unknown)}, "
                          "saved about T: its checkpoint at T is unknown", **details)
    if step is None:
        raise NotMeasured(f"{NAMES[slower]} had saved no checkpoint by T = {t_seconds:.1f} s", **details)
    chosen = {faster: saves[faster].last, slower: step}
    return {**details, **{toolkit: {"update": chosen[toolkit], "seconds": saves[toolkit].seconds[chosen[toolkit]],
                                    "last_update": saves[toolkit].last} for toolkit in TOOLKITS}}


def _complete(prefix: str) -> bool:
    """Whether the checkpoint `prefix` has its index and data files."""
    return os.path.isfile(prefix + ".index") and bool(glob.glob(glob.escape(prefix) + ".data-*"))


def kept(folders: list) -> dict:
    """update -> the prefix of each complete checkpoint `ckpt-<update>` in `folders` (the first
    folder holding an update wins)."""
    found: dict = {}
    for folder in folders:
        for index in glob.glob(os.path.join(glob.escape(folder), "ckpt-*.index")):
            prefix = index[:-len(".index")]
            number = os.path.basename(prefix)[len("ckpt-"):]
            if number.isdigit() and int(number) not in found and _complete(prefix):
                found[int(number)] = prefix
    return dict(sorted(found.items()))


def checkpoint_folders(toolkit: str, run) -> list:
    """Where a finished run (`train_runs.Run`) keeps its checkpoints: the project's
    MODEL_DIR/checkpoints, then MODEL_DIR/best (copies of its best ones, which the rotation of
    the last ones does not remove); the peer's model_dir."""
    if toolkit == "ours":
        return [os.path.join(run.folder, "checkpoints"), os.path.join(run.folder, "best")]
    return [run.peer_files.model_dir]


def locate(timing: dict, checkpoints: dict) -> dict:
    """toolkit -> the prefix of its chosen checkpoint, `checkpoints` being toolkit -> `kept`'s
    {update: prefix}. Raises NotMeasured naming the update needed and those kept if one is gone."""
    prefixes = {}
    for toolkit in (timing["slower"], timing["faster"]):
        update = timing[toolkit]["update"]
        if update not in checkpoints[toolkit]:
            which = "checkpoint at T" if toolkit == timing["slower"] else "last checkpoint"
            raise NotMeasured(
                f"{OF[toolkit]} {which} (update {update}, made {timing[toolkit]['seconds']:.1f} s after its "
                f"start; T = {timing['t_seconds']:.1f} s) is no longer on disk: its run keeps updates "
                f"{_updates(checkpoints[toolkit])}", faster=timing["faster"], slower=timing["slower"],
                t_seconds=timing["t_seconds"], needed={"toolkit": toolkit, "update": update},
                kept_updates=list(checkpoints[toolkit]), updates={t: timing[t] for t in TOOLKITS})
        prefixes[toolkit] = checkpoints[toolkit][update]
    return prefixes


def keep_every_checkpoint(training):
    """`training` (a `TrainingConfig`) keeping every checkpoint its run saves: --keep_checkpoints
    (OpenNMT-tf's `keep_checkpoint_max`) raised to the saves of `train_steps` updates (every
    `checkpoint_every_steps`; the project's also at each dev evaluation when it keeps its best
    checkpoints), plus one (OpenNMT-tf's `ckpt-1` after its first update; the project's last
    when `train_steps` is no multiple). Only the rotation changes, never what is averaged: the
    project averages its best (MODEL_DIR/best, apart from the rotation) or else its last
    `average_last`, OpenNMT-tf the last `average_last_checkpoints` of its list, whatever the
    list's length."""
    every = training.checkpoint_every_steps
    if not every:
        return training
    last, evaluated = training.train_steps, training.eval_every_steps if training.keep_best_checkpoints else 0
    saved = {*range(every, last + 1, every), *(range(evaluated, last + 1, evaluated) if evaluated else ()), last}
    saves = len(saved) + 1
    return dataclasses.replace(training, keep_checkpoints=max(training.keep_checkpoints, saves))
