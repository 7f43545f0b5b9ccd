"""One measurement's journal: every finished unit of work, so that a later session resumes it.

    book = Journal.start(work, measurement, host, recipe_flags, peer_pins)   # a new measurement
    book = Journal.read(work)                           # a kept work folder (--resume=WORK)
    measurement = book.resume(given, host)              # refuses another host or other flags
    book.check_unchanged(recipe_flags, peer_pins)       # refuses a changed recipe file or peer pins
    book.begin_session(command)
    book.entry(quality_key("ours", 1))                  # None: not done yet
    book.record(quality_key("ours", 1), row, run=..., processes=..., parameters=...)

A measurement takes longer than one working session, and its process does not outlive the
session, so the harness cuts it into units and writes each one's result to WORK/journal.json as
soon as the unit ends. A unit is one training run with what is measured on it (a speed round of
one toolkit and precision, a start-up run, a quality run: training, translation and scores, per
seed and toolkit), the comparison at equal wall-clock of a seed's two quality runs (translations
and scores of one checkpoint of each), a short model for serving, the serving part (exports and
timed engines), and the two set-up steps (the peer's venv; the data and the shared tokenizer). Its
key (`speed_key`, `startup_key`, `quality_key`, `quality_wallclock_key`, `serving_model_key`,
`PEER_VENV`, `WORKSPACE`, `SERVING`) is also the name of its run folder and log.

A unit added to the harness later (as `quality_wallclock_key` was) is simply one the journal does
not hold yet: a resumed measurement runs it then, from the finished units' run folders, with the
journal's flags (no new flag: `Measurement` is what a journal compares).

The file holds:

* measurement: the flags that define the measurement (`Measurement`), the recipe file's flags
  and the peer's pins: a resumed measurement keeps them all. The speed window's flags
  (`SPEED_FLAGS`) are stored as numbers, their 0 ("the shape's default") resolved by
  `SPEED_DEFAULTS` when the journal is made; a journal that holds 0 for one was made when the
  defaults were `ZERO_SPEED_DEFAULTS`, and reads as those numbers, its window unchanged;
* host: the CPU model, the instruction sets that decide which precision pays, the core count:
  a measurement's figures are of one host;
* sessions: each session's number, start date, command and the project's package versions;
* units: key -> its date, its session, its result (what the one-go run keeps) and, for a
  training run, its folder and the peer's files (`run`: the model a later part serves);
* processes, parameters: the workspace's record of every child process of the finished units
  and the parameter counts their runs said (the memory and parameter rows of the table).

It is rewritten whole after each unit (`keras_transformer.files.json_files`: a temporary
file beside it, then `os.replace`), so a kill leaves the previous journal, never half of one. A
unit cut short has no entry: the next session runs it again from scratch.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from typing import Any, Optional, Sequence

from keras_transformer.files import json_files

JOURNAL_FILE = "journal.json"
FORMAT = 1
PEER_VENV, WORKSPACE, SERVING = "peer-venv", "workspace", "serving"  # the keys of the units run once
HOST_KEYS = ("cpu", "flags", "cores")  # what makes two hosts the same one for a measurement
SPEED_FLAGS = ("speed_steps", "speed_warmup", "log_every")  # a speed run's updates, warm-up, log interval
# shape -> the numbers SPEED_FLAGS given as 0 stand for (bench/opennmt_tf_side_by_side.py's docstring says why)
SPEED_DEFAULTS = {"recipe": (1000, 400, 50), "base": (200, 50, 25)}
# shape -> what 0 stood for in a journal that holds it (journals made since hold the numbers)
ZERO_SPEED_DEFAULTS = {"recipe": (600, 100, 50), "base": (200, 50, 25)}


def speed_key(toolkit: str, precision: str, round_: int) -> str:
    return f"speed-{toolkit}-{precision}-{round_}"


def startup_key(toolkit: str, precision: str) -> str:
    return f"startup-{toolkit}-{precision}"


def quality_key(toolkit: str, seed: int) -> str:
    return f"quality-{toolkit}-seed{seed}"


def quality_wallclock_key(seed: int) -> str:
    """The seed's comparison at equal wall-clock, made on both quality runs of the seed."""
    return f"quality-wallclock-seed{seed}"


def quality_test_key(seed: int) -> str:
    """The seed's test2016 scores at equal updates: both toolkits' averaged models of its quality runs."""
    return f"quality-test-seed{seed}"


def serving_model_key(toolkit: str) -> str:
    return f"serving-model-{toolkit}"


def now() -> str:
    return datetime.datetime.now().isoformat(timespec="seconds")


@dataclasses.dataclass(frozen=True)
class Measurement:
    """The flags of bench/opennmt_tf_side_by_side.py that define one measurement, each field
    named after its flag, normalized: paths absolute, parts in the harness's order, seeds as
    numbers, the speed window's numbers with 0 resolved (`with_speed_defaults`). A resumed
    measurement keeps them. Raises ValueError (one line) for a measurement the harness does not
    make: the quality part at the base shape."""

    recipe: str
    shape: str
    parts: tuple
    seeds: tuple
    data_dir: str
    quality_steps: int
    dev_sentences: int
    speed_steps: int
    speed_warmup: int
    log_every: int
    speed_rounds: int
    serving_sentences: int
    batch_size: int
    repeats: int
    threads: int
    beam_size: int
    alpha: float
    max_extra_length: int
    peer_pre_norm: bool
    peer_cooldown: bool
    serving_steps: int = 0  # a short serving model's updates (0: speed_steps); journals made before hold none
    serving_warmup: int = 0  # its learning-rate warm-up (0: the recipe's)

    def __post_init__(self):
        if self.shape == "base" and "quality" in self.parts:
            raise ValueError("--shape=base measures speed, start-up and serving; quality runs the recipe's shape "
                             "(leave quality out of --parts, or give --shape=recipe)")

    def to_dict(self) -> dict[str, Any]:
        return {name: list(value) if isinstance(value, tuple) else value
                for name, value in dataclasses.asdict(self).items()}

    def with_speed_defaults(self, defaults: Optional[dict] = None) -> "Measurement":
        """This measurement with each of `SPEED_FLAGS` that is 0 replaced by its shape's number in
        `defaults` (shape -> numbers in `SPEED_FLAGS`' order; default `SPEED_DEFAULTS`)."""
        numbers = (defaults or SPEED_DEFAULTS)[self.shape]
        return dataclasses.replace(self, **{name: getattr(self, name) or number
                                            for name, number in zip(SPEED_FLAGS, numbers)})

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "Measurement":
        names = {field.name for field in dataclasses.fields(cls)}
        needed = {field.name for field in dataclasses.fields(cls) if field.default is dataclasses.MISSING}
        if not needed <= set(values) <= names:
            raise ValueError(f"a measurement has the flags {', '.join(sorted(names))}; got {', '.join(sorted(values))}")
        return cls(**{name: tuple(value) if isinstance(value, list) else value for name, value in values.items()})


def shown(value: Any) -> str:
    """A flag's value as a command line writes it: 1,2 for a list, true/false, 0.6."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) if value else "none"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def host_identity(host: dict) -> dict:
    """The parts of `host` (the entry point's `host()`) that must match for a resumed measurement."""
    return {key: list(host[key]) if isinstance(host[key], (list, tuple)) else host[key] for key in HOST_KEYS}


class Journal:
    """WORK/journal.json (module docstring). Each change is written before the method returns."""

    def __init__(self, path: str, data: dict):
        self.path = path
        self._data = data

    @property
    def work(self) -> str:
        return os.path.dirname(self.path)

    # Opening --------------------------------------------------------------------------------------

    @classmethod
    def start(cls, work: str, measurement: Measurement, host: dict, recipe_flags: dict,
              peer_pins: Sequence[str]) -> "Journal":
        """A new measurement's journal in `work`, written at once. Raises ValueError if one of
        `SPEED_FLAGS` is 0 (a new journal holds their numbers: `Measurement.with_speed_defaults`)."""
        unresolved = [name for name in SPEED_FLAGS if not getattr(measurement, name)]
        if unresolved:
            raise ValueError(f"a new journal holds the speed window's numbers, not 0 ({', '.join(unresolved)})")
        work = os.path.realpath(work)
        book = cls(os.path.join(work, JOURNAL_FILE), {
            "format": FORMAT, "work": work, "measurement": measurement.to_dict(), "recipe_flags": dict(recipe_flags),
            "peer_pins": list(peer_pins), "host": host_identity(host), "sessions": [], "units": {},
            "processes": [], "parameters": {}})
        book._write(book._data)
        return book

    @classmethod
    def read(cls, work: str) -> "Journal":
        """The journal of the work folder `work`. Raises ValueError naming --resume for a missing
        folder or journal, a journal of another format, or a folder moved since it was written."""
        if not os.path.isdir(work):
            raise ValueError(f"--resume={work}: no such folder")
        path = os.path.join(os.path.realpath(work), JOURNAL_FILE)
        if not os.path.isfile(path):
            raise ValueError(f"--resume={work}: no {JOURNAL_FILE} there; only a measurement's work folder (kept by "
                             "--keep or by an earlier --resume) can be resumed")
        data = json_files.read_json(path, "a measurement's journal")
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"--resume={work}: {path} is not a journal of this harness (format {FORMAT})")
        if data["work"] != os.path.realpath(work):
            raise ValueError(f"--resume={work}: the journal was written in {data['work']}, whose path its runs' files "
                             "name; resume it there")
        return cls(path, data)

    def resume(self, given: dict[str, Any], host: dict) -> Measurement:
        """The journal's measurement, after checking that this is its host and that each flag of
        `given` (those on the command line, normalized as `Measurement`'s) has the journal's
        value. Raises ValueError naming the first difference."""
        recorded_host = self._data["host"]
        for key, here in host_identity(host).items():
            if here != recorded_host[key]:
                raise ValueError(f"--resume={self.work}: this host differs from the journal's ({key} {shown(here)} "
                                 f"here, {shown(recorded_host[key])} in the journal); a measurement resumes only on "
                                 "the host it began on")
        recorded = self.measurement
        for name, here in given.items():
            there = getattr(recorded, name)
            if here != there:
                raise ValueError(f"--resume={self.work}: --{name}={shown(here)} differs from the journal's "
                                 f"--{name}={shown(there)}; a measurement resumes with its own flags (leave "
                                 f"--{name} out to take the journal's)")
        return recorded

    def check_unchanged(self, recipe_flags: dict, peer_pins: Sequence[str]) -> None:
        """Raises ValueError if the recipe file says other flags, or the peer's pins are others,
        than when the measurement began."""
        recorded = self._data["recipe_flags"]
        for name in sorted(set(recorded) | set(recipe_flags)):
            then, current = recorded.get(name, "unset"), recipe_flags.get(name, "unset")
            if then != current:
                raise ValueError(f"--resume={self.work}: the recipe {self.measurement.recipe} has changed since the "
                                 f"journal began (--{name}: {current} now, {then} then)")
        if list(peer_pins) != self._data["peer_pins"]:
            raise ValueError(f"--resume={self.work}: the peer's pins have changed since the journal began "
                             f"({', '.join(peer_pins)} now; {', '.join(self._data['peer_pins'])} then)")

    def begin_session(self, command: str, date: Optional[str] = None, versions: Optional[dict] = None) -> int:
        """Records a session's start (its command and, if given, the project's package `versions`);
        returns its number (1 for the first)."""
        session = {"session": len(self._data["sessions"]) + 1, "date": date or now(), "command": command}
        if versions is not None:
            session["versions"] = dict(versions)
        sessions = [*self._data["sessions"], session]
        self._write({**self._data, "sessions": sessions})
        return len(sessions)

    # Reading --------------------------------------------------------------------------------------

    @property
    def measurement(self) -> Measurement:
        """The journal's measurement, a 0 it holds for one of `SPEED_FLAGS` read as
        `ZERO_SPEED_DEFAULTS` (module docstring)."""
        return Measurement.from_dict(self._data["measurement"]).with_speed_defaults(ZERO_SPEED_DEFAULTS)

    @property
    def sessions(self) -> list[dict]:
        return list(self._data["sessions"])

    @property
    def processes(self) -> list[dict]:
        return [dict(p) for p in self._data["processes"]]

    @property
    def parameters(self) -> dict:
        return dict(self._data["parameters"])

    def entry(self, key: str) -> Optional[dict]:
        """The unit's {"date", "session", "result", "run"?} if a session finished it, else None."""
        return self._data["units"].get(key)

    def progress(self, keys: Sequence[str]) -> tuple[list[str], list[str]]:
        """`keys` split into (done, to run), each in the given order."""
        return [k for k in keys if k in self._data["units"]], [k for k in keys if k not in self._data["units"]]

    def summary(self, keys: Sequence[str]) -> dict:
        """The record's account of the units `keys` that are done: each one's date and session,
        the sessions, and with more than one session which units each gave ("resumed")."""
        done, _ = self.progress(keys)
        units = {k: {"date": self._data["units"][k]["date"], "session": self._data["units"][k]["session"]}
                 for k in done}
        summary: dict[str, Any] = {"units": units, "sessions": self.sessions}
        if len(self._data["sessions"]) > 1:
            summary["resumed"] = [{**session, "units": [k for k in done if units[k]["session"] == session["session"]]}
                                  for session in self._data["sessions"]]
        return summary

    # Writing --------------------------------------------------------------------------------------

    def record(self, key: str, result: Any, *, processes: Sequence[dict], parameters: dict,
               run: Optional[dict] = None) -> Any:
        """Records the unit `key` as done now, in the latest session, with its `result` and `run`
        (JSON values), and the workspace's `processes` and `parameters` so far. Returns `result`
        as the journal holds it (read back from JSON), which a resumed session gets too; on any
        failure the journal, in memory and on disk, is left as it was."""
        entry = {"date": now(), "session": len(self._data["sessions"]), "result": result}
        if run is not None:
            entry["run"] = run
        entry = json.loads(json.dumps(entry))
        data = {**self._data, "units": {**self._data["units"], key: entry}, "processes": list(processes),
                "parameters": dict(parameters)}
        self._write(data)
        return entry["result"]

    def _write(self, data: dict) -> None:
        json_files.write_json_atomically(self.path, data)
        self._data = data
