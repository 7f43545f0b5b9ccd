"""The machinery of tests/faults/test_faults_hostile.py: every command on hostile but realistic input.

The promise under test: bad input ends with ONE line starting `error:` on stderr and exit code
2, found before the long work; Ctrl-C ends with exit 130 and one `error: interrupted` line (the
training command saves first, says so on stdout and exits 130, or 143 for SIGTERM); no command
ends in a traceback; nothing outside a run's folder is read as its own or deleted; no export
version is published from a broken or foreign model; nothing half-written is left in view.

`Fixtures.build` makes, once per test session and with the real commands: a finished tiny run
`run` (configs/tiny.flags, checkpoints 6 and 12, averaged: `train_runs.shared_tiny_run`), a run
`other` trained with another seed (another tokenizer, the same shapes; its ckpt-12 also copied as
ckpt-30), a run `best` keeping its 2 best checkpoints by dev loss, a run `ema` with
--ema_decay=0.9, an export `export/1` of `run`, a small parallel corpus and input files. A case
that damages or resumes a run works on its own copy in its own folder.

A `Case` is one row: its command line (`prepare` writes the case's files and returns the argv
after `python`), what it expects (OK: success is legitimate, `why` says why; ERROR: exit 2, one
`error:` line holding `fragments`; EITHER: one of those; SIGNAL: `signals` sent to the process
group, one of `codes`), and its own `check`. `check_case` runs it (`commands.run_command`, or
`run_signalled` for a signal case) and asserts the case's promise and what every case shares:
every fixture hashes the same after the case as before; a failed command left its outputs as
they were and published no export version; every new version is complete; no temporary file
(`.tmp*`, `*_temp`) is left. Linux only (process groups, /dev/full).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, Optional, Sequence, Union

from tests.helpers.commands import run_command
from tests.helpers.paths import REPO
from tests.helpers.train_runs import FINISHED, shared_tiny_run

ROOT = str(REPO)
TINY = os.path.join(ROOT, "configs", "tiny.flags")
TIMEOUT = 300.0  # seconds a case's command may take
OK, ERROR, EITHER, SIGNAL = "ok", "error", "either", "signal"

# The fixtures' training flags (after configs/tiny.flags); `run` and `other` are FINISHED.
BEST = ("--train_steps=12", "--checkpoint_every_steps=6", "--eval_every_steps=6", "--eval_max_sentences=-1",
        "--keep_best_checkpoints=2", "--best_checkpoint_metric=loss", "--keep_checkpoints=2")
EMA = ("--train_steps=12", "--checkpoint_every_steps=6", "--eval_every_steps=0", "--eval_max_sentences=-1",
       "--keep_checkpoints=2", "--ema_decay=0.9")
SHORT = ("--train_steps=1", "--eval_every_steps=0", "--eval_max_sentences=-1")  # a new run that trains at all
LONG = ("--train_steps=100000", "--log_every_steps=1", "--checkpoint_every_steps=0", "--eval_every_steps=0",
        "--eval_max_sentences=-1")  # a run a signal stops
SENTENCES = ("A dog runs .", "The cat sleeps .", "The man sees the woman .", "A child reads a book .")


# Running a command -------------------------------------------------------------------------------


@dataclasses.dataclass
class Signal:
    """Send `signum` to the process group once `on` (a regex over stdout and stderr lines, or a
    callable polled) has matched, `delay` seconds later; without `on`, `delay` seconds after the start."""
    signum: int
    delay: float = 0.0
    on: Union[None, str, Callable[[], bool]] = None


@dataclasses.dataclass
class Result:
    argv: list
    code: Optional[int]
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    sent: list = dataclasses.field(default_factory=list)  # [(signal name, seconds after start, still running)]

    @property
    def errors(self) -> list:
        return [line for line in self.stderr.splitlines() if line.startswith("error:")]

    @property
    def traceback(self) -> bool:
        return "Traceback" in self.stderr or "Traceback" in self.stdout

    def command(self) -> str:
        return " ".join(shlex.quote(str(a)) for a in ["python", *self.argv])

    def tail(self, lines: int = 6) -> list:
        return [line for line in self.stderr.splitlines() if line.strip()][-lines:]


def child_env() -> dict:
    """`commands.run_command`'s environment for a child, without KT_DEBUG (which shows tracebacks)."""
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("KT_DEBUG", None)
    return env


def run_plain(argv: Sequence, cwd: str = ROOT, stdin: Optional[bytes] = None, timeout: float = TIMEOUT) -> Result:
    """`python ARGV` through `commands.run_command`; a timeout is a result, not an exception."""
    start = time.time()
    try:
        done = run_command(*argv, cwd=cwd, env={"KT_DEBUG": None}, timeout=timeout,
                           stdin=None if stdin is None else stdin.decode("utf-8"))
    except subprocess.TimeoutExpired:
        return Result([str(a) for a in argv], None, "", "", round(time.time() - start, 1), timed_out=True)
    return Result([str(a) for a in argv], done.returncode, done.stdout, done.stderr, round(time.time() - start, 1))


def run_signalled(argv: Sequence, cwd: str = ROOT, stdin: Optional[bytes] = None, timeout: float = TIMEOUT,
                  signals: Sequence[Signal] = ()) -> Result:
    """`python ARGV` in a session of its own; `signals` sent to its process group in order, as
    Ctrl-C at a terminal sends SIGINT to the foreground group. Its lines are read as they come."""
    argv = [str(a) for a in argv]
    start = time.time()
    process = subprocess.Popen([sys.executable, *argv], cwd=cwd, env=child_env(), start_new_session=True,
                               stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = [], []
    arrived = threading.Condition()

    def read(pipe, lines):
        for line in iter(pipe.readline, b""):
            with arrived:
                lines.append(line.decode("utf-8", errors="backslashreplace"))
                arrived.notify_all()
        pipe.close()

    readers = [threading.Thread(target=read, args=(process.stdout, out), daemon=True),
               threading.Thread(target=read, args=(process.stderr, err), daemon=True)]
    for reader in readers:
        reader.start()
    if stdin is not None:
        def feed():
            try:
                process.stdin.write(stdin)
                process.stdin.close()
            except OSError:  # the command stopped reading
                pass
        threading.Thread(target=feed, daemon=True).start()
    sent, timed_out = [], False
    for spec in signals:
        matched_at, seen = None, [0, 0]  # lines of stdout, stderr already searched
        while time.time() - start < timeout and process.poll() is None:
            if spec.on is None:
                matched_at = start
            elif callable(spec.on):
                matched_at = time.time() if spec.on() else None
            else:
                with arrived:
                    fresh = out[seen[0]:] + err[seen[1]:]
                    seen = [len(out), len(err)]
                if any(re.search(spec.on, line) for line in fresh):
                    matched_at = time.time()
            if matched_at is not None:
                break
            time.sleep(0.01)  # some moments last a few milliseconds (between a save and its listing)
        if matched_at is None:
            break  # ended (or timed out) before the moment came
        while time.time() < matched_at + spec.delay and process.poll() is None:
            time.sleep(0.02)
        alive = process.poll() is None
        if alive:
            try:
                os.killpg(process.pid, spec.signum)
            except ProcessLookupError:
                alive = False
        sent.append((signal.Signals(spec.signum).name, round(time.time() - start, 2), alive))
    try:
        process.wait(timeout=max(1.0, timeout - (time.time() - start)))
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    for reader in readers:
        reader.join(timeout=10)
    return Result(argv, process.returncode, "".join(out), "".join(err), round(time.time() - start, 1), timed_out,
                  sent)


# Files -------------------------------------------------------------------------------------------


def tree_digest(path: str) -> dict:
    """{relative path: sha256, or "dir"} below `path` (a file: {".": sha256}); {} if it does not exist."""
    if os.path.isfile(path):
        with open(path, "rb") as file:
            return {".": hashlib.sha256(file.read()).hexdigest()}
    digest = {}
    for folder, dirs, files in os.walk(path):
        for name in dirs:
            digest[os.path.relpath(os.path.join(folder, name), path)] = "dir"
        for name in files:
            full = os.path.join(folder, name)
            if os.path.islink(full) or not os.path.isfile(full):
                digest[os.path.relpath(full, path)] = "special"
                continue
            with open(full, "rb") as file:
                digest[os.path.relpath(full, path)] = hashlib.sha256(file.read()).hexdigest()
    return digest


def state(path: str):
    """What a watched output is: None (absent), "dir", or its sha256."""
    if not os.path.lexists(path):
        return None
    if os.path.isdir(path):
        return "dir"
    with open(path, "rb") as file:
        return hashlib.sha256(file.read()).hexdigest()


def write(path: str, data: Union[str, bytes]) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as file:
        file.write(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def damage(path: str, how: str) -> None:
    """Makes `path` missing, empty, garbage, half (cut in half), a folder (for a file) or a file (for a folder)."""
    if how == "half":
        os.truncate(path, os.path.getsize(path) // 2)
        return
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)
    if how == "missing":
        return
    if how == "folder":
        os.makedirs(path)
    else:
        write(path, {"empty": b"", "garbage": b"\x8b\x00garbage{[\xff\n", "file": b"not a folder\n"}[how])


def edit_json(path: str, change: Callable[[dict], None]) -> None:
    with open(path, encoding="utf-8") as file:
        settings = json.load(file)
    change(settings)
    write(path, json.dumps(settings, indent=2))


def lines_of(path: str) -> list:
    with open(path, "rb") as file:
        data = file.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def versions_in(export_dir: str) -> list:
    return sorted(n for n in os.listdir(export_dir) if n.isdigit()) if os.path.isdir(export_dir) else []


def leftovers(folder: str) -> list:
    """Temporary names below `folder`: .tmp* files and folders, TensorFlow's *_temp save folders."""
    found = []
    for parent, dirs, files in os.walk(folder):
        for name in dirs + files:
            if name.startswith(".tmp") or name.endswith("_temp"):
                found.append(os.path.relpath(os.path.join(parent, name), folder))
    return found


# Commands ----------------------------------------------------------------------------------------


def command(module: str) -> Callable[..., list]:
    """The argv builder of `python -m keras_transformer.<module> ARGS...` (after `python`)."""
    return lambda *args: ["-m", f"keras_transformer.{module}", *args]


translate, score, parse, export = (command(name) for name in ("translate", "score", "parse", "export"))
average, summary = command("average_checkpoints"), command("summary")
variations, pipelines = command("variations"), command("pipelines")


def train(*args, flagfile=TINY):
    return ["-m", "keras_transformer.train", *([f"--flagfile={flagfile}"] if flagfile else []), *args]


# Fixtures ----------------------------------------------------------------------------------------


class Fixtures:
    """The runs, the export and the inputs every case reads (never writes)."""

    def __init__(self, folder: str):
        self.dir = folder
        self.run = os.path.join(folder, "run")
        self.other = os.path.join(folder, "other")
        self.best = os.path.join(folder, "best")
        self.ema = os.path.join(folder, "ema")
        self.export = os.path.join(folder, "export")
        self.data = os.path.join(folder, "data")
        self.inputs = os.path.join(folder, "inputs")
        self.src = os.path.join(self.inputs, "src.txt")
        self.ref = os.path.join(self.inputs, "ref.txt")
        self.many = os.path.join(self.inputs, "many.txt")  # 10,000 lines
        self.many_ref = os.path.join(self.inputs, "many_ref.txt")

    def guarded(self) -> dict:
        """{name: folder} of everything a case must leave as it found it."""
        return {"other": self.other, "run": self.run, "best": self.best, "ema": self.ema, "export": self.export,
                "data": self.data, "inputs": self.inputs}

    def build(self, tmp_path_factory) -> None:
        """Trains the runs (`train_runs.shared_tiny_run`: once per session for the same flags) and
        writes the export, the corpus and the inputs; fails the caller if a command fails."""
        os.makedirs(self.inputs)
        write(self.src, "".join(s + "\n" for s in SENTENCES[:2]))
        write(self.ref, "Ein Hund rennt .\nDie Katze schläft .\n")
        write(self.many, "".join(f"{SENTENCES[i % 4][:-2]} number {i} .\n" for i in range(10000)))
        write(self.many_ref, "".join(f"Ein Satz {i} .\n" for i in range(10000)))
        for folder, flags in ((self.run, FINISHED), (self.other, (*FINISHED, "--seed=1")), (self.best, BEST),
                              (self.ema, EMA)):
            shared_tiny_run(tmp_path_factory, folder, *flags)
        for argv in (export(f"--model_dir={self.run}", f"--export_dir={self.export}"), ["-c", CORPUS, self.data]):
            done = run_command(*argv, timeout=900)
            assert done.returncode == 0, f"{shlex.join(argv)}\n{done.stderr[-3000:]}"
        for path in os.listdir(os.path.join(self.other, "checkpoints")):
            if path.startswith("ckpt-12."):
                shutil.copy(os.path.join(self.other, "checkpoints", path),
                            os.path.join(self.other, "checkpoints", "ckpt-30" + path[len("ckpt-12"):]))
        fingerprints = [settings_of(folder)["tokenizer"]["sha256"] for folder in (self.run, self.other)]
        assert fingerprints[0] != fingerprints[1], "`other` has the tokenizer of `run`: the cross-run cases prove nothing"
        assert os.path.isfile(os.path.join(self.best, "best", "best.json")), "the run `best` kept no best.json"


# Writes a small parallel corpus (embedded corpus pairs) for --dataset=files: data/{split}.{en,de}.
CORPUS = """
import os, sys
from keras_transformer.pipelines import sources
folder = sys.argv[1]
os.makedirs(folder, exist_ok=True)
for split, count in (("train", 400), ("validation", 20), ("test", 20)):
    pairs = sources.load_pair_list("embedded", split)[:count]
    for side, lang in ((0, "en"), (1, "de")):
        with open(os.path.join(folder, f"{split}.{lang}"), "w", encoding="utf-8") as f:
            f.writelines(pair[side] + "\\n" for pair in pairs)
"""


# Cases -------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    name: str
    expect: str  # OK, ERROR, EITHER or SIGNAL
    prepare: Callable[["Ctx"], list]  # makes the case's files; returns the command's argv after `python`
    why: str = ""  # OK / EITHER: why success is legitimate; ERROR: what must be refused
    fragments: tuple = ()  # ERROR: text the error line must hold (may name {case}, {fixtures})
    check: Optional[Callable[["Ctx", Result], list]] = None  # problems found, [] if none
    signals: tuple = ()
    codes: tuple = (130,)  # SIGNAL: accepted exit codes
    error_lines: tuple = (1, 1)  # SIGNAL: accepted number of error lines (min, max)
    stdin: Optional[bytes] = None
    leftovers_ok: bool = False  # a killed export may leave its hidden folder (the next export removes it)
    timeout: float = TIMEOUT


class Ctx:
    """One case's folder and bookkeeping."""

    def __init__(self, fixtures: Fixtures, folder: str):
        self.f = fixtures
        self.dir = folder
        self.watched = {}  # outputs a failure must leave as they were
        self.exports = {}  # export base folders: {path: versions before}
        self.followups = []  # follow-up commands' results
        self.notes = []

    def path(self, *parts) -> str:
        return os.path.join(self.dir, *parts)

    def copy(self, source: str, name: str = "run") -> str:
        return shutil.copytree(source, self.path(name), symlinks=True)

    def write(self, name: str, data: Union[str, bytes]) -> str:
        return write(self.path(name), data)

    def watch(self, *paths: str) -> None:
        for path in paths:
            self.watched[path] = state(path)

    def watch_export(self, path: str) -> None:
        self.exports[path] = versions_in(path)

    def out(self, name: str = "out.txt") -> str:
        """An output path in the case folder, watched."""
        path = self.path(name)
        self.watch(path)
        return path

    def run(self, argv, **kwargs) -> Result:
        """A follow-up command in the case's folder (a resume, a rerun), kept for the checks."""
        result = run_plain(argv, cwd=self.dir, **kwargs)
        self.followups.append(result)
        return result


# Case checks: each returns a list of problems.


def output_lines(count: int, name: str = "out.txt") -> Callable:
    """On success, the output file has `count` lines (split on newlines only)."""
    def check(ctx: Ctx, result: Result) -> list:
        if result.code != 0:
            return []
        path = ctx.path(name)
        if not os.path.isfile(path):
            return [f"succeeded without writing {path}"]
        got = len(lines_of(path))
        return [] if got == count else [f"{name} has {got} lines, the input {count}"]
    return check


def stdout_lines(count: int) -> Callable:
    def check(ctx: Ctx, result: Result) -> list:
        if result.code != 0:
            return []
        got = len(result.stdout.splitlines())  # stdout: also the report lines of a reference, if any
        return [] if got == count else [f"stdout has {got} lines, the input {count}"]
    return check


def skipped_to(checkpoint: str) -> Callable:
    """On success, a `warning:` line and the model read from `checkpoint` (a path's tail)."""
    def check(ctx: Ctx, result: Result) -> list:
        if result.code != 0:
            return []
        problems = []
        if not any(line.startswith("warning:") for line in result.stderr.splitlines()):
            problems.append("no warning: line about the damaged checkpoint it skipped")
        if checkpoint not in result.stderr + result.stdout:  # export names it on stdout
            problems.append(f"did not say it read {checkpoint}")
        return problems
    return check


def said(*texts: str, stream: str = "stdout") -> Callable:
    def check(ctx: Ctx, result: Result) -> list:
        text = getattr(result, stream)
        return [f"{stream} lacks {t!r}" for t in texts if t not in text]
    return check


def absent(*names: str) -> Callable:
    def check(ctx: Ctx, result: Result) -> list:
        return [f"{name} exists" for name in names if os.path.lexists(ctx.path(name))]
    return check


def unchanged(name: str) -> Callable:
    """A folder of the case (copied before the command) is as it was: call `remember` in prepare."""
    def check(ctx: Ctx, result: Result) -> list:
        before = ctx.notes_digest.get(name)
        after = tree_digest(ctx.path(name))
        if before == after:
            return []
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        return [f"{name} changed: {', '.join(changed[:6])}"]
    return check


def remember(ctx: Ctx, *names: str) -> None:
    if not hasattr(ctx, "notes_digest"):
        ctx.notes_digest = {}
    for name in names:
        ctx.notes_digest[name] = tree_digest(ctx.path(name))


def all_of(*checks: Callable) -> Callable:
    def check(ctx: Ctx, result: Result) -> list:
        return [problem for c in checks for problem in c(ctx, result)]
    return check


def no_raw_warnings(ctx: Ctx, result: Result) -> list:
    """Only our own lines on stderr: no TensorFlow/absl warnings (W0000, WARNING:, 'unrestored')."""
    raw = [line for line in result.stderr.splitlines()
           if re.search(r"^W\d{4}|WARNING|unrestored|ema\.shadow|Value in checkpoint", line)]
    return [f"raw TensorFlow warnings on stderr: {raw[0][:160]}"] if raw else []


def settings_of(path: str) -> dict:
    with open(os.path.join(path, "model_config.json"), encoding="utf-8") as file:
        return json.load(file)


# Preparations shared by many cases.


def run_reads(ctx: Ctx, model_dir: str, command: str, out: Optional[str] = None, extra: Sequence[str] = ()) -> list:
    """argv of a reading command (translate, score, parse, export, average, evaluate) on `model_dir`."""
    out = out or ctx.out()
    if command == "translate":
        return translate(f"--model_dir={model_dir}", f"--input={ctx.f.src}", f"--output={out}", "--beam_size=1",
                         *extra)
    if command == "score":
        return score(f"--model_dir={model_dir}", f"--source={ctx.f.src}", f"--target={ctx.f.ref}",
                     f"--output={out}", *extra)
    if command == "parse":
        return parse(f"--model_dir={model_dir}", f"--input={ctx.f.src}", f"--output={out}", "--beam_size=1", *extra)
    if command == "export":
        ctx.watch_export(ctx.path("serving"))
        return export(f"--model_dir={model_dir}", f"--export_dir={ctx.path('serving')}", "--nocheck_ops", *extra)
    if command == "average":
        ctx.watch(os.path.join(model_dir, "averaged"))
        return average(f"--model_dir={model_dir}", "--num_checkpoints=2", *extra)
    if command == "evaluate":
        return train(f"--model_dir={model_dir}", *FINISHED, "--evaluate_only", *extra)
    if command == "resume":
        return train(f"--model_dir={model_dir}", *FINISHED, "--train_steps=14", *extra)
    raise ValueError(command)


def best_list(path: str, entries: Sequence[tuple]) -> None:
    """best.json listing (name, dev loss) entries, best first."""
    write(path, json.dumps({"metric": "loss", "checkpoints": [
        {"step": int(name.rsplit("-", 1)[1]), "value": value, "name": name} for name, value in entries]}))


def run_with_best(ctx: Ctx, entry: str) -> str:
    """A copy of `run` without its average whose best/ holds ckpt-12 and lists `entry` first."""
    model_dir = ctx.copy(ctx.f.run)
    shutil.rmtree(os.path.join(model_dir, "averaged"))
    best = os.path.join(model_dir, "best")
    os.makedirs(best)
    for name in os.listdir(os.path.join(model_dir, "checkpoints")):
        if name.startswith("ckpt-12."):
            shutil.copy(os.path.join(model_dir, "checkpoints", name), best)
    best_list(os.path.join(best, "best.json"), [(entry, 1.0), ("ckpt-12", 2.0)])
    return model_dir


def outside_entry(ctx: Ctx, kind: str) -> str:
    """A best.json entry outside the run: the literal relative one (to a copy of `other` beside the
    copied run, checked unchanged) or an absolute one into the fixture `other`."""
    if kind == "relative":
        ctx.copy(ctx.f.other, "other")
        remember(ctx, "other")
        return "../../other/checkpoints/ckpt-30"
    return os.path.join(ctx.f.other, "checkpoints", "ckpt-30")


# Running and judging the cases ---------------------------------------------------------------------


def judge(case: Case, ctx: Ctx, result: Result, problems: list) -> tuple:
    """(held, reason)."""
    errors = result.errors
    if result.timed_out:
        return False, f"timed out after {case.timeout:.0f} s"
    if result.traceback:
        return False, "a Traceback on stderr"
    if case.expect == SIGNAL:
        if result.sent and not result.sent[-1][2]:
            if result.code == 0 and not problems:
                return True, "finished before the signal came (nothing to judge)"
        if not result.sent:
            return False, f"ended (exit {result.code}) before the moment of the signal"
        if result.code not in case.codes:
            return False, f"exit {result.code}, expected {'/'.join(map(str, case.codes))}"
        low, high = case.error_lines
        if not low <= len(errors) <= high:
            return False, f"{len(errors)} error: lines, expected {low}-{high}"
        if problems:
            return False, "; ".join(problems)
        note = " (no handler: ended by the default action)" if result.code == -15 else ""
        return True, case.why + note
    fragments = [f.format(case=ctx.dir, fixtures=ctx.f.dir) for f in case.fragments]
    refused_well = result.code == 2 and len(errors) == 1
    if case.expect == OK and result.code != 0:
        return False, f"exit {result.code}, expected success: {case.why}"
    if case.expect == ERROR:
        if result.code == 0:
            return False, f"succeeded, expected a refusal: {case.why}"
        if not refused_well:
            return False, f"exit {result.code} with {len(errors)} error: lines, expected exit 2 and one"
        missing = [f for f in fragments if f not in errors[0]]
        if missing:
            return False, f"the error line lacks {missing}"
    if case.expect == EITHER and result.code != 0 and not refused_well:
        return False, f"exit {result.code} with {len(errors)} error: lines, expected success or exit 2 and one"
    if problems:
        return False, "; ".join(problems)
    if result.code == 0:
        return True, f"succeeded: {case.why}" if case.expect != ERROR else case.why
    return True, f"refused: {errors[0][:150]}"


def guarded_problems(fixtures: Fixtures, guarded_before: dict) -> list:
    """Every fixture (`other` above all) as it was; a change is reported once, then taken as the new state."""
    problems = []
    for name, folder in fixtures.guarded().items():
        after = tree_digest(folder)
        before = guarded_before[name]
        if after != before:
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            problems.append(f"the fixture {name} changed: {', '.join(changed[:5])}")
            guarded_before[name] = after
    return problems


def generic_problems(case: Case, ctx: Ctx, result: Result, guarded_before: dict) -> list:
    """The checks of every case, right after its command: fixtures, outputs, versions, temporaries."""
    problems = guarded_problems(ctx.f, guarded_before)
    failed = result.code != 0
    if failed:
        for path, before in ctx.watched.items():
            if path.startswith("/dev/"):
                continue
            if state(path) != before:
                problems.append(f"{path} {'appeared' if before is None else 'changed'} although the command failed")
    for base, before in ctx.exports.items():
        after = versions_in(base)
        new = [v for v in after if v not in before]
        if failed and new:
            problems.append(f"version {new} published by a failed export")
        for version in after:
            folder = os.path.join(base, version)
            if os.path.isdir(folder) and version in new and not (
                    os.path.isfile(os.path.join(folder, "saved_model.pb"))
                    and os.path.isfile(os.path.join(folder, "variables", "variables.index"))):
                problems.append(f"version {version} is incomplete")
    if not case.leftovers_ok:
        left = leftovers(ctx.dir)
        if left:
            problems.append(f"temporaries left: {', '.join(left[:4])}")
    return problems


def check_case(case: Case, fixtures: Fixtures, guarded: dict, folder: str) -> None:
    """Runs `case` in `folder` (new, empty) and asserts it held (`judge`): its promise, its own
    checks and every case's (`generic_problems`); the message names the command and its stderr."""
    ctx = Ctx(fixtures, folder)
    argv = case.prepare(ctx)
    if case.expect == SIGNAL:
        signals_ = getattr(ctx, "dynamic_signals", ()) if case.signals == ("dynamic",) else case.signals
        result = run_signalled(argv, cwd=folder, stdin=case.stdin, timeout=case.timeout, signals=signals_)
    else:
        result = run_plain(argv, cwd=folder, stdin=case.stdin, timeout=case.timeout)
    problems = generic_problems(case, ctx, result, guarded)  # before any follow-up command
    if not result.timed_out and case.check:
        problems += case.check(ctx, result)
    if ctx.followups:
        problems += guarded_problems(fixtures, guarded)
    problems += [f"a Traceback in the follow-up {f.command()[:160]}:\n{f.stderr[-2000:]}"
                 for f in ctx.followups if f.traceback]
    held, reason = judge(case, ctx, result, problems)
    assert held, (f"{case.name}: {reason}\n{result.command()}\nexit {result.code}, signals sent {result.sent}\n"
                  f"stdout:\n{result.stdout[-1500:]}\nstderr:\n{result.stderr[-3000:]}")
