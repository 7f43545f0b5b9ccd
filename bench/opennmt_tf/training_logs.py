"""What each toolkit's training console says, read from its time-stamped lines.

The project's training command (`keras_transformer.training.reporting.Reporter`) prints, every
--log_every_steps updates,

    step 250/7000 loss 5.1234 lr 1.10e-03 |g| 0.812 9,876 tok/s ETA 0:51:02

where tok/s counts the non-padding target tokens (EOS included) of the updates since its last
line, over the time since that line; before training, `... 1 replica(s); 2,349,056 parameters;
...` and, with --precision=auto, `precision auto: mixed_bfloat16 (...)`.

OpenNMT-tf 2.32 (`opennmt.training.TrainingStats.log`) logs, every `save_summary_steps`,

    Step = 250 ; steps/s = 2.41, tokens/s = 19876 (9876 source, 10000 target) ; Learning rate = ... ; Loss = ...

where the target count is the labels' lengths (EOS included) since the last report, over the time
since then; the time a checkpoint save or an evaluation takes is left out (it resets the
counters). Its `Trainer.__call__` logs `Number of model parameters: N` and `Number of model
weights: W (trainable = T, non trainable = U)` once, when its step generator has yielded update
1's loss, before that update's progress line.

`first_update` is each toolkit's progress line of update 1 (a run logging every update), the
same event in both consoles: ours' `step 1/...` and the peer's `Step = 1 ; ...`, each printed
once update 1 is applied.

`checkpoint_saves` times a run's checkpoints on the same clock (the quality part's equal
wall-clock comparison): both toolkits print an update's progress line, then save that update's
checkpoint (the project's `Trainer` right after `Reporter.train_step`, OpenNMT-tf's `Trainer`
right after `TrainingStats.log`), so a checkpoint's time is the stamp of its update's progress
line, the same event in both consoles. OpenNMT-tf also logs each save when it has ended,

    Saved checkpoint /work/.../runs/quality-peer-seed1/run/ckpt-500

which lists the peer's checkpoints (`ckpt-1` after its first update too); the project's console
has no such line, so its checkpoints are the updates its timer saves: every
`checkpoint_every_steps` and the run's last (its `done:` line's step).

`throughput` turns either toolkit's points into target tokens/s over the same updates: the
intervals that start at or after `warmup` updates, each toolkit's own rate weighted by the
interval's duration as this harness saw it (the lines' time stamps), so a slow interval weighs
what it lasted. The first update of a process, and its tracing, fall in the warm-up.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Iterable, Optional

OURS_STEP = re.compile(r"^step (\d+)/\S+ loss (\S+) lr \S+ \|g\| \S+ ([\d,]+) tok/s")
OURS_PARAMETERS = re.compile(r"replica\(s\); ([\d,]+) parameters")
OURS_PRECISION = re.compile(r"precision auto: (\w+)")
PEER_STEP = re.compile(r"Step = (\d+) ; steps/s = [\d.]+, tokens/s = \d+ \((?:\d+ source, )?(\d+) target\)"
                       r".*Loss = ([\d.naif]+)")
PEER_PARAMETERS = re.compile(r"Number of model parameters: (\d+)")
OURS_DONE = re.compile(r"^done: (\{.*\})\s*$")
PEER_SAVED = re.compile(r"\bSaved checkpoint (\S*ckpt-(\d+))\s*$")
PEER_WEIGHTS = re.compile(r"Number of model weights: \d+ \(trainable = (\d+), non trainable = (\d+)\)")
FIRST_UPDATE = {"ours": re.compile(r"^step 1/"), "peer": re.compile(r"\bStep = 1 ;")}  # update 1's progress line


@dataclasses.dataclass(frozen=True)
class Point:
    """One progress line: when it came (seconds since the command started), the update it
    reports, that interval's target tokens/s as the toolkit counted them, the loss."""

    seconds: float
    step: int
    tokens_per_second: float
    loss: float


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def ours_points(lines: Iterable[tuple[float, str]]) -> list[Point]:
    return [Point(at, _int(m[1]), float(_int(m[3])), float(m[2])) for at, line in lines
            for m in [OURS_STEP.search(line)] if m]


def peer_points(lines: Iterable[tuple[float, str]]) -> list[Point]:
    return [Point(at, int(m[1]), float(m[2]), float(m[3])) for at, line in lines
            for m in [PEER_STEP.search(line)] if m]


def points(toolkit: str, lines: Iterable[tuple[float, str]]) -> list[Point]:
    """"ours" or "peer"."""
    return {"ours": ours_points, "peer": peer_points}[toolkit](lines)


def is_first_update(toolkit: str, line: str) -> bool:
    """Whether `line` is the toolkit's progress line of update 1: ours' `step 1/`, the peer's
    `Step = 1 ;` (module docstring)."""
    return FIRST_UPDATE[toolkit].search(line) is not None


def first_update(toolkit: str, lines: Iterable[tuple[float, str]]) -> Optional[float]:
    """Seconds from the command's start to its first update: the stamp of its progress line of
    update 1 (`is_first_update`; a run logging every update), None if there is none."""
    return next((at for at, line in lines if is_first_update(toolkit, line)), None)


def parameters(toolkit: str, lines: Iterable[tuple[float, str]]) -> Optional[int]:
    """The trainable parameters the toolkit says its model has (None: not said). For the peer,
    `count_params()` of all its weights, which must all be trainable (a ValueError otherwise)."""
    lines = list(lines)
    pattern = OURS_PARAMETERS if toolkit == "ours" else PEER_PARAMETERS
    found = next((m for _, line in lines for m in [pattern.search(line)] if m), None)
    if found is None:
        return None
    if toolkit == "peer":
        weights = next((m for _, line in lines for m in [PEER_WEIGHTS.search(line)] if m), None)
        if weights is not None and int(weights[2]):
            raise ValueError(f"the peer's model has {weights[2]} non-trainable weights; its parameter count is not "
                             "its trainable one")
    return _int(found[1])


def auto_precision(lines: Iterable[tuple[float, str]]) -> Optional[str]:
    """What the project's --precision=auto chose (its `precision auto:` line), or None."""
    return next((m[1] for _, line in lines for m in [OURS_PRECISION.search(line)] if m), None)


def throughput(progress: list[Point], warmup: int) -> dict:
    """Target tokens/s and updates/s over the intervals of `progress` that start at or after update
    `warmup` (module docstring). Raises ValueError if there is none."""
    intervals = [(before, after) for before, after in zip(progress, progress[1:]) if before.step >= warmup]
    if not intervals:
        steps = [p.step for p in progress]
        raise ValueError(f"no progress interval after {warmup} warm-up updates (lines at updates {steps})")
    seconds = sum(after.seconds - before.seconds for before, after in intervals)
    tokens = sum(after.tokens_per_second * (after.seconds - before.seconds) for before, after in intervals)
    updates = intervals[-1][1].step - intervals[0][0].step
    return {"tokens_per_second": tokens / seconds, "updates_per_second": updates / seconds,
            "tokens_per_update": tokens / updates, "from_update": intervals[0][0].step,
            "to_update": intervals[-1][1].step, "seconds": seconds, "last_loss": progress[-1].loss}


@dataclasses.dataclass(frozen=True)
class Saves:
    """When a run's checkpoints were made, on its console's clock.

    Attributes:
        seconds: update -> seconds from the command's start to the progress line of the update
            the checkpoint holds (the peer's save of an update without a progress line, e.g.
            its `ckpt-1`: the stamp of its `Saved checkpoint` line, the save's end).
        untimed: updates saved with no line to time them (the project's, when its
            --log_every_steps does not divide its --checkpoint_every_steps).
        last: the run's final update (its last checkpoint), None if it saved none.
    """

    seconds: dict
    untimed: tuple
    last: Optional[int]


def ours_last_update(lines: Iterable[tuple[float, str]]) -> Optional[int]:
    """The update the project's run ended at: its `done:` line's step, else its last progress line's."""
    lines = list(lines)
    for _, line in reversed(lines):
        found = OURS_DONE.search(line)
        if found:
            step = json.loads(found[1]).get("step")
            if step is not None:
                return int(step)
    progress = ours_points(lines)
    return progress[-1].step if progress else None


def checkpoint_saves(toolkit: str, lines: Iterable[tuple[float, str]], checkpoint_every: int) -> Saves:
    """The checkpoints of a run of `toolkit` and when each was made (module docstring);
    `checkpoint_every` is the run's --checkpoint_every_steps (the project's saves; 0: only the
    last)."""
    lines = list(lines)
    if toolkit == "ours":
        progress = {p.step: p.seconds for p in ours_points(lines)}
        last = ours_last_update(lines)
        if last is None:
            return Saves({}, (), None)
        saved = sorted({*(range(checkpoint_every, last + 1, checkpoint_every) if checkpoint_every else ()), last})
        return Saves({s: progress[s] for s in saved if s in progress}, tuple(s for s in saved if s not in progress),
                     last)
    progress = {p.step: p.seconds for p in peer_points(lines)}
    seconds: dict = {}
    for at, line in lines:
        found = PEER_SAVED.search(line)
        if found and int(found[2]) not in seconds:
            seconds[int(found[2])] = progress.get(int(found[2]), at)
    return Saves(dict(sorted(seconds.items())), (), max(seconds) if seconds else None)
