"""Runs every command on hostile but realistic input and checks that the run directory is a boundary.

    python bench/hostile_probe.py --out=/tmp/probe.json
    python bench/hostile_probe.py --only=export --work_dir=/tmp/probe   # the cases whose name holds "export"

The promise under test: bad input ends with ONE line starting `error:` on stderr and exit code
2, found before the long work; Ctrl-C ends with exit 130 and one `error: interrupted` line (the
training command saves first, says so on stdout and exits 130, or 143 for SIGTERM); no command
ends in a traceback; nothing outside a run's folder is read as its own or deleted; no export
version is published from a broken or foreign model; nothing half-written is left in view.

Once, in WORK_DIR/fixtures/ (kept there and reused by a later probe with the same --work_dir),
it builds with the real commands: a finished tiny run `run` (configs/tiny.flags, checkpoints 6
and 12, averaged), a run `other` trained with another seed (another tokenizer, the same
shapes; its ckpt-12 also copied as ckpt-30), a run `best` keeping its 2 best checkpoints by dev
loss, a run `ema` with --ema_decay=0.9, an export `export/1` of `run`, a small parallel corpus
and input files. A case that damages or resumes a run works on its own copy
(`shutil.copytree`) in WORK_DIR/cases/<case>/, removed when the case held.

Each case runs one command line (and sometimes a follow-up, such as the resume after a signal)
in a fresh process, bounded by 300 s, and records the exit code, the stderr lines starting with
`error:`, whether a `Traceback` was printed, and its checks: every fixture (the other run above
all) hashes the same after the case as before; a failed command left its outputs as they were
and published no export version; every visible version is complete; no temporary file
(`.tmp*`, `*_temp`) is left; plus checks of its own (the file an error names, the checkpoint a
warning skipped, the line count of a translation, what a resume says).

A case HOLDS when the command succeeded where success is legitimate (the case says why: many
odd inputs are fine and must translate), or failed with exit 2, exactly one `error:` line and no
traceback, and its checks passed; a signal case when it ended with 130 for SIGINT, 143 for
SIGTERM (or by SIGTERM itself, for a command without a handler for it), no traceback and its
checks passed. Else it BROKE, with the reason. Cases marked "either" accept both a success and
such a refusal. The case names start with their group: fixed/ (the recently fixed faults),
rundir/ (damaged run directories), flags/ (bad flag values), text/ (odd input text), export/
(damaged exports), signals/ (SIGINT and SIGTERM at moments of a command). Prints one line per
case and `N cases: H held, B broke`; writes the JSON report with --out; exits 1 if a case broke.
Signals go to the command's process group, as Ctrl-C at a terminal does. Linux only.
"""

from __future__ import annotations

import dataclasses
import glob
import gzip
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Optional, Sequence, Union

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", None, "Scratch folder: fixtures/ (built once, reused) and cases/ (default: a new "
                    "temporary folder).")
flags.DEFINE_string("out", None, "Write the JSON report here.")
flags.DEFINE_string("only", None, "Run only the cases whose name contains this substring.")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "configs", "tiny.flags")
TIMEOUT = 300.0  # seconds a case's command may take
OK, ERROR, EITHER, SIGNAL = "ok", "error", "either", "signal"

# The fixtures' training flags (after configs/tiny.flags).
FINISHED = ("--train_steps=12", "--checkpoint_every_steps=6", "--eval_every_steps=0", "--eval_max_sentences=8",
            "--average_checkpoints=2", "--keep_checkpoints=2")
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
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("KT_DEBUG", None)
    return env


def run(argv: Sequence, cwd: str = ROOT, stdin: Optional[bytes] = None, timeout: float = TIMEOUT,
        signals: Sequence[Signal] = ()) -> Result:
    """`python ARGV` in a session of its own; `signals` sent to its process group in order."""
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


def translate(*args):
    return ["-m", "keras_transformer.translate", *args]


def score(*args):
    return ["-m", "keras_transformer.score", *args]


def parse(*args):
    return ["-m", "keras_transformer.parse", *args]


def export(*args):
    return ["-m", "keras_transformer.export", *args]


def train(*args, flagfile=TINY):
    return ["-m", "keras_transformer.train", *([f"--flagfile={flagfile}"] if flagfile else []), *args]


def average(*args):
    return ["-m", "keras_transformer.average_checkpoints", *args]


def summary(*args):
    return ["-m", "keras_transformer.summary", *args]


def variations(*args):
    return ["-m", "keras_transformer.variations", *args]


def pipelines(*args):
    return ["-m", "keras_transformer.pipelines", *args]


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

    def build(self) -> None:
        ready = os.path.join(self.dir, "ready.json")
        if os.path.exists(ready):
            print(f"fixtures: reusing {self.dir}", flush=True)
            return
        if os.path.exists(self.dir):
            shutil.rmtree(self.dir)
        os.makedirs(self.inputs)
        write(self.src, "".join(s + "\n" for s in SENTENCES[:2]))
        write(self.ref, "Ein Hund rennt .\nDie Katze schläft .\n")
        write(self.many, "".join(f"{SENTENCES[i % 4][:-2]} number {i} .\n" for i in range(10000)))
        write(self.many_ref, "".join(f"Ein Satz {i} .\n" for i in range(10000)))
        steps = [
            ("run", train(f"--model_dir={self.run}", *FINISHED)),
            ("other", train(f"--model_dir={self.other}", *FINISHED, "--seed=1")),
            ("best", train(f"--model_dir={self.best}", *BEST)),
            ("ema", train(f"--model_dir={self.ema}", *EMA)),
            ("export", export(f"--model_dir={self.run}", f"--export_dir={self.export}")),
            ("data", ["-c", CORPUS, self.data]),
        ]
        for name, argv in steps:
            result = run(argv, timeout=900)
            print(f"fixtures: {name} exit {result.code} in {result.seconds:.0f} s", flush=True)
            if result.code != 0:
                raise SystemExit(f"building the fixture {name} failed:\n{result.command()}\n{result.stderr[-3000:]}")
        for path in os.listdir(os.path.join(self.other, "checkpoints")):
            if path.startswith("ckpt-12."):
                shutil.copy(os.path.join(self.other, "checkpoints", path),
                            os.path.join(self.other, "checkpoints", "ckpt-30" + path[len("ckpt-12"):]))
        fingerprints = {name: settings_of(folder)["tokenizer"]["sha256"]
                        for name, folder in (("run", self.run), ("other", self.other))}
        if fingerprints["run"] == fingerprints["other"]:
            raise SystemExit("the run `other` has the same tokenizer as `run`: the cross-run cases would prove nothing")
        if not os.path.isfile(os.path.join(self.best, "best", "best.json")):
            raise SystemExit("the run `best` kept no best.json")
        write(ready, json.dumps({"built": time.strftime("%Y-%m-%d %H:%M:%S")}))


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
        result = run(argv, cwd=self.dir, **kwargs)
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


def fixed_cases() -> list:
    """The cases of the recent fixes."""
    cases = []
    for command, kind in (("export", "relative"), ("translate", "absolute"), ("score", "relative"),
                          ("parse", "absolute"), ("evaluate", "absolute")):
        def prepare(ctx, command=command, kind=kind):
            return run_reads(ctx, run_with_best(ctx, outside_entry(ctx, kind)), command)
        cases.append(Case(f"fixed/best.json-{kind}-outside/{command}", ERROR, prepare,
                          "best.json naming a checkpoint outside the run", ("best.json", "outside"),
                          unchanged("other") if kind == "relative" else None))

    def average_outside(ctx):
        return run_reads(ctx, run_with_best(ctx, outside_entry(ctx, "absolute")), "average")
    cases.append(Case("fixed/best.json-absolute-outside/average_checkpoints", EITHER, average_outside,
                      "averaging reads the last checkpoints of checkpoints/, not best/: it may average them "
                      "(ckpt-6, ckpt-12) or refuse the run", ("best.json", "outside"),
                      lambda ctx, r: [] if r.code != 0 or "ckpt-6, ckpt-12" in r.stdout else
                      [f"averaged something else: {r.stdout.strip()[:200]}"]))

    for command in ("translate", "export", "score", "resume"):
        def prepare(ctx, command=command):
            model_dir = ctx.copy(ctx.f.run)
            shutil.rmtree(os.path.join(model_dir, "averaged"))
            outside = os.path.join(ctx.f.other, "checkpoints", "ckpt-30")
            write(os.path.join(model_dir, "checkpoints", "checkpoint"),
                  f'model_checkpoint_path: "{outside}"\nall_model_checkpoint_paths: "ckpt-6"\n'
                  f'all_model_checkpoint_paths: "{outside}"\n')
            extra = ("--train_steps=18",) if command == "resume" else ()
            return run_reads(ctx, model_dir, command, extra=extra)
        cases.append(Case(f"fixed/checkpoint-state-absolute-outside/{command}", ERROR, prepare,
                          "checkpoints/checkpoint naming another run's checkpoint", ("checkpoint", "outside"),
                          absent("run/checkpoints/ckpt-18.index") if command == "resume" else None))

    for command in ("translate", "score", "export", "parse"):
        def prepare(ctx, command=command):
            return run_reads(ctx, ctx.f.run, command,
                             extra=(f"--checkpoint={os.path.join(ctx.f.other, 'checkpoints', 'ckpt-30')}",))
        cases.append(Case(f"fixed/checkpoint-flag-of-another-run/{command}", ERROR, prepare,
                          "--checkpoint of a run with another tokenizer", ("--checkpoint=", "{fixtures}/other")))

    for kind in ("relative", "absolute"):
        def prepare(ctx, kind=kind):
            model_dir = ctx.copy(ctx.f.best)
            if kind == "relative":
                entry = os.path.relpath(os.path.join(ctx.f.other, "checkpoints", "ckpt-30"),
                                        os.path.join(model_dir, "best"))
            else:
                entry = os.path.join(ctx.f.other, "checkpoints", "ckpt-30")
            best_list(os.path.join(model_dir, "best", "best.json"), [("ckpt-12", 98.0), (entry, 99.0)])
            return train(f"--model_dir={model_dir}", *BEST, "--train_steps=18")
        cases.append(Case(f"fixed/keep-2-best-resume-with-{kind}-outside-entry/train", ERROR, prepare,
                          "a resume whose next evaluation would push the outside entry out (and delete it)",
                          ("best.json", "outside"), absent("run/checkpoints/ckpt-18.index")))

    def long_line(side):
        def prepare(ctx):
            line = " ".join(["word"] * 200_000) + "\n"
            source = ctx.write("source.txt", line if side == "source" else "A dog runs .\n")
            target = ctx.write("target.txt", line if side == "target" else "Ein Hund rennt .\n")
            return score(f"--model_dir={ctx.f.run}", f"--source={source}", f"--target={target}",
                         f"--output={ctx.out()}")
        return prepare
    for side in ("source", "target"):
        cases.append(Case(f"fixed/score-200000-word-{side}-line", ERROR, long_line(side),
                          "a pair longer than the model scores, before the model loads", (f"{side}.txt",)))

    def translate_long(ctx):
        source = ctx.write("source.txt", " ".join(["word"] * 200_000) + "\nA dog runs .\n")
        return translate(f"--model_dir={ctx.f.run}", f"--input={source}", f"--output={ctx.out()}", "--beam_size=1")
    cases.append(Case("fixed/translate-200000-word-line", EITHER, translate_long,
                      "a 200,000-word line may be translated (cut to what the model reads) or refused with one "
                      "line; not a crash or an out-of-memory kill", check=output_lines(2)))

    for command in ("translate", "export", "score", "parse", "average", "evaluate"):
        def prepare(ctx, command=command):
            model_dir = ctx.copy(ctx.f.run)
            edit_json(os.path.join(model_dir, "model_config.json"), lambda s: s["model"].update(d_ff=10 ** 12))
            remember(ctx, "run")
            return run_reads(ctx, model_dir, command)
        cases.append(Case(f"fixed/model_config-d_ff-1e12/{command}", ERROR, prepare,
                          "a model no machine can build", ("model_config.json", "needs about"),
                          unchanged("run")))

    for keep in ("half", "empty"):
        def prepare(ctx, keep=keep):
            serving = ctx.copy(ctx.f.export, "serving")
            data = os.path.join(serving, "1", "variables", "variables.data-00000-of-00001")
            damage(data, keep)
            return translate(f"--export_dir={serving}", f"--input={ctx.f.src}", f"--output={ctx.out()}")
        cases.append(Case(f"fixed/translate-export-variables-data-{keep}", ERROR, prepare,
                          "an export whose variables are cut short", ("not a readable SavedModel",)))

    flagfile_commands = {
        "train": lambda ff, ctx: ["-m", "keras_transformer.train", f"--model_dir={ctx.path('new')}", ff],
        "export": lambda ff, ctx: export(f"--model_dir={ctx.f.run}", f"--export_dir={ctx.path('serving')}", ff),
        "translate": lambda ff, ctx: translate(f"--model_dir={ctx.f.run}", f"--input={ctx.f.src}", ff),
        "score": lambda ff, ctx: score(f"--model_dir={ctx.f.run}", f"--source={ctx.f.src}",
                                       f"--target={ctx.f.ref}", ff),
        "parse": lambda ff, ctx: parse(f"--model_dir={ctx.f.run}", f"--input={ctx.f.src}", ff),
        "average_checkpoints": lambda ff, ctx: average(f"--model_dir={ctx.f.run}", ff),
        "summary": lambda ff, ctx: summary(ff),
        "variations": lambda ff, ctx: variations(f"--out={ctx.path('table')}", ff),
        "pipelines": lambda ff, ctx: pipelines("train_tokenizer", f"--tokenizer_dir={ctx.path('tok')}", ff),
    }
    for name, build in flagfile_commands.items():
        def prepare(ctx, build=build):
            ctx.write("bad.flags", b"--beam_size=2\n--model_dir=caf\xe9\n")
            return build("--flagfile=bad.flags", ctx)
        cases.append(Case(f"fixed/flagfile-not-utf8/{name}", ERROR, prepare, "a flagfile in Latin-1",
                          ("bad.flags", "not UTF-8"), absent("new", "serving", "table", "tok")))

    def included_not_utf8(ctx):
        ctx.write("bad.flags", b"--train_steps=1\n# caf\xe9\n")
        ctx.write("recipe.flags", open(TINY, encoding="utf-8").read() + "--flagfile=bad.flags\n")
        return train(f"--model_dir={ctx.path('new')}", "--flagfile=recipe.flags", flagfile=None)
    cases.append(Case("fixed/flagfile-includes-a-non-utf8-one/train", ERROR, included_not_utf8,
                      "a flagfile included by the recipe in Latin-1", ("bad.flags", "recipe.flags"), absent("new")))

    def itself(ctx):
        ctx.write("rec.flags", "--train_steps=1\n--flagfile=rec.flags\n")
        return train(f"--model_dir={ctx.path('new')}", "--flagfile=rec.flags", flagfile=None)
    cases.append(Case("fixed/flagfile-includes-itself/train", ERROR, itself, "a recipe that includes itself",
                      ("includes itself",), absent("new")))

    def itself_other_spelling(ctx):
        ctx.write("rec.flags", f"--flagfile={ctx.path('.', 'rec.flags')}\n--train_steps=1\n")
        return translate(f"--model_dir={ctx.f.run}", f"--input={ctx.f.src}", "--flagfile=rec.flags")
    cases.append(Case("fixed/flagfile-includes-itself-by-absolute-path/translate", ERROR, itself_other_spelling,
                      "a flagfile that includes itself spelled otherwise", ("includes itself",)))

    for name in ("train", "translate", "export", "summary"):
        def prepare(ctx, name=name):
            ctx.write("recipe.flags", "--beam_size=1\n--flagfile=more.flags\n")
            ctx.write("more.flags", "--flagfile=./recipe.flags\n")
            return flagfile_commands[name]("--flagfile=recipe.flags", ctx)
        cases.append(Case(f"fixed/flagfile-cycle/{name}", ERROR, prepare, "two flagfiles including each other",
                          ("cycle",), absent("new", "serving")))

    def first_start(ctx):
        return train(f"--model_dir={ctx.path('new', 'run')}", "--max_length=1", *SHORT)

    def then_vocab_400(ctx, result):
        problems = []
        if os.path.exists(ctx.path("new")):
            problems.append(f"the refused first start left {sorted(os.listdir(ctx.path('new')))} in new/")
        again = ctx.run(train(f"--model_dir={ctx.path('new', 'run')}", "--vocab_size=400", *SHORT))
        if again.code != 0:
            return problems + [f"the rerun with --vocab_size=400 exited {again.code}: {again.tail(2)}"]
        settings = settings_of(ctx.path("new", "run"))
        if settings["data"]["vocab_size"] != 400:
            problems.append(f"model_config data.vocab_size {settings['data']['vocab_size']}, not 400")
        if settings["model"]["vocab_size"] != 400:
            problems.append(f"model_config model.vocab_size {settings['model']['vocab_size']}, not 400")
        if "400 ids" not in again.stdout:
            problems.append("the rerun did not train a 400-id tokenizer")
        return problems
    cases.append(Case("fixed/max_length-1-first-start-then-vocab_size-400/train", ERROR, first_start,
                      "no pair fits --max_length=1", ("max_length=1",), then_vocab_400))

    def glob_data_dir(escaped):
        def prepare(ctx):
            data = ctx.copy(ctx.f.data, "ünï [x]*")
            value = glob.escape(data) if escaped else data
            return train(f"--model_dir={ctx.path('new')}", "--dataset=files", f"--data_dir={value}",
                         "--source_file={split}.en", "--target_file={split}.de", *SHORT)
        return prepare

    def trained_on_glob_dir(ctx, result):
        if result.code != 0:
            return []
        recorded = settings_of(ctx.path("new"))["data"]["data_dir"]
        return [] if recorded == ctx.path("ünï [x]*") else [f"model_config records data_dir {recorded!r}"]
    cases.append(Case("fixed/data_dir-named-uni-glob/train", OK, glob_data_dir(False),
                      "a folder named `ünï [x]*` is a folder, not a pattern: the run trains on it",
                      check=all_of(trained_on_glob_dir, said("step 1/1"))))
    cases.append(Case("fixed/data_dir-glob-escaped-spelling/train", ERROR, glob_data_dir(True),
                      "the glob-escaped spelling names no folder", ("no such folder",), absent("new")))

    for signum, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        def prepare(ctx):
            return variations(f"--flagfile={TINY}", "--rows=C/N=4", f"--out={ctx.path('table')}",
                              "--train_steps=100000", "--eval_max_sentences=-1", "--log_every_steps=1",
                              "--checkpoint_every_steps=0")
        cases.append(Case(f"fixed/variations-{signal.Signals(signum).name}-during-a-row", SIGNAL, prepare,
                          "the table stops with the row's exit code and one error line",
                          signals=(Signal(signum, 1.0, r"^step 2/"),), codes=(code,)))

    for command in ("score", "translate", "parse"):
        def prepare(ctx, command=command):
            if command == "parse":  # `run` is no parsing model: the baseline writes trees the same way
                return parse("--baseline=right_branching", f"--input={ctx.f.src}", "--output=/dev/full")
            return run_reads(ctx, ctx.f.run, command, out="/dev/full")
        cases.append(Case(f"fixed/output-dev-full/{command}", ERROR, prepare, "a full output device",
                          ("/dev/full", "No space left")))

    def ema_resume(*flags_, drop_ema=True):
        def prepare(ctx):
            model_dir = ctx.copy(ctx.f.ema)
            remember(ctx, "run")
            kept = [f for f in EMA if not (drop_ema and f.startswith("--ema_decay"))]
            return train(f"--model_dir={model_dir}", *kept, "--train_steps=14", *flags_)
        return prepare

    def kept_ema(ctx, result):
        problems = no_raw_warnings(ctx, result)
        if result.code == 0:
            decay = settings_of(ctx.path("run"))["training"]["ema_decay"]
            if decay != 0.9:
                problems.append(f"model_config ema_decay is {decay}, not 0.9")
            if not os.path.isfile(ctx.path("run", "checkpoints", "ckpt-14.index")):
                problems.append("no ckpt-14 saved")
        return problems
    cases.append(Case("fixed/ema-resume-without-ema_decay/train", OK, ema_resume(),
                      "leaving --ema_decay out of a resume keeps the run's moving average",
                      check=all_of(kept_ema, said("goes on with the moving average", "resumed at step 12"))))

    def other_dataset(ctx):
        argv = ema_resume("--dataset=files", f"--data_dir={ctx.f.data}", "--source_file={split}.en",
                          "--target_file={split}.de")(ctx)
        return argv
    cases.append(Case("fixed/ema-resume-with-another-dataset/train", ERROR, other_dataset,
                      "a resume on another data set", ("--dataset=files",), unchanged("run")))

    def with_init_from(ctx):
        return ema_resume(f"--init_from={ctx.f.run}")(ctx)
    cases.append(Case("fixed/ema-resume-with-init_from/train", ERROR, with_init_from,
                      "--init_from on a run that has checkpoints", ("--init_from=",), unchanged("run")))
    cases.append(Case("fixed/ema-resume-with-ema_decay-0/train", ERROR, ema_resume("--ema_decay=0"),
                      "turning the moving average off on a resume", ("--ema_decay=0",), unchanged("run")))
    return cases


def run_dir_cases() -> list:
    """Damaged copies of `run`: each file of the layout missing, empty, garbage, of the wrong kind."""
    cases = []

    def damaged(target: str, how: str, command: str, no_average: bool = False, extra=()):
        def prepare(ctx):
            model_dir = ctx.copy(ctx.f.run)
            if no_average:
                shutil.rmtree(os.path.join(model_dir, "averaged"))
            for one in target.split("+"):
                damage(os.path.join(model_dir, one), how)
            remember(ctx, "run")
            return run_reads(ctx, model_dir, command, extra=extra)
        return prepare

    # Files and folders whose damage every reader must refuse (one line naming it).
    refused = [
        ("model_config.json", how, "translate") for how in ("missing", "empty", "garbage", "folder")
    ] + [
        ("model_config.json", "garbage", "export"), ("model_config.json", "garbage", "score"),
        ("model_config.json", "empty", "average"), ("model_config.json", "garbage", "resume"),
        ("tokenizer", "missing", "translate"), ("tokenizer", "missing", "export"), ("tokenizer", "missing", "score"),
        ("tokenizer", "missing", "resume"), ("tokenizer", "file", "translate"), ("tokenizer", "file", "resume"),
    ] + [
        (f"tokenizer/{name}", how, "translate") for name in ("tokenizer.json", "tokenizer.model")
        for how in ("missing", "empty", "garbage", "folder")
    ] + [
        ("tokenizer/tokenizer.model", "garbage", "export"), ("tokenizer/tokenizer.json", "missing", "resume"),
        ("checkpoints", "file", "translate"), ("checkpoints", "file", "resume"), ("averaged", "file", "translate"),
        ("averaged", "file", "export"), ("eval", "file", "resume"), ("train", "file", "resume"),
        (".lock", "folder", "resume"),
    ]
    for target, how, command in refused:
        cases.append(Case(f"rundir/{target}-{how}/{command}", ERROR, damaged(target, how, command),
                      f"{target} {how}", (target.split("/")[-1],),
                      all_of(unchanged("run"), absent("run/checkpoints/ckpt-14.index"))))

    # Both checkpoints damaged, no average: nothing readable.
    for command in ("translate", "export", "score"):
        cases.append(Case(f"rundir/every-checkpoint-cut-in-half/{command}", ERROR,
                          damaged("checkpoints/ckpt-6.data-00000-of-00001+checkpoints/ckpt-12.data-00000-of-00001",
                                  "half", command, no_average=True),
                          "no readable checkpoint", ("checkpoint",), unchanged("run")))

    # The newest checkpoint damaged: skipped with a warning for ckpt-6 (README: training, export, translation).
    for target in ("ckpt-12.index", "ckpt-12.data-00000-of-00001"):
        for how in ("missing", "empty", "garbage", "half"):
            if how == "half" and target.endswith(".index"):
                continue
            cases.append(Case(f"rundir/no-average-{target}-{how}/translate", OK,
                              damaged(f"checkpoints/{target}", how, "translate", no_average=True),
                              "a damaged newest checkpoint is skipped with a warning for the newest intact one",
                              check=all_of(skipped_to("ckpt-6"), output_lines(2))))
    cases.append(Case("rundir/no-average-ckpt-12-data-half/export", OK,
                      damaged("checkpoints/ckpt-12.data-00000-of-00001", "half", "export", no_average=True),
                      "a damaged newest checkpoint is skipped with a warning for the newest intact one",
                      check=skipped_to("ckpt-6")))
    cases.append(Case("rundir/no-average-ckpt-12-data-half/score", OK,
                      damaged("checkpoints/ckpt-12.data-00000-of-00001", "half", "score", no_average=True),
                      "a damaged newest checkpoint is skipped with a warning for the newest intact one",
                      check=all_of(skipped_to("ckpt-6"), output_lines(2))))
    cases.append(Case("rundir/ckpt-12-data-garbage/resume", OK,
                      damaged("checkpoints/ckpt-12.data-00000-of-00001", "garbage", "resume"),
                      "training skips a damaged checkpoint with a warning and resumes from the newest intact one",
                      check=said("resumed at step 6")))
    cases.append(Case("rundir/averaged-data-cut-in-half/translate", OK,
                      damaged("averaged/ckpt-12.data-00000-of-00001", "half", "translate"),
                      "a damaged average is skipped with a warning for the newest checkpoint",
                      check=all_of(skipped_to("checkpoints/ckpt-12"), output_lines(2))))
    cases.append(Case("rundir/averaged-index-missing/translate", OK,
                      damaged("averaged/ckpt-12.index", "missing", "translate"),
                      "a damaged average is skipped with a warning for the newest checkpoint",
                      check=all_of(skipped_to("checkpoints/ckpt-12"), output_lines(2))))
    cases.append(Case("rundir/ckpt-6-cut-in-half/average_checkpoints", ERROR,
                      damaged("checkpoints/ckpt-6.data-00000-of-00001", "half", "average"),
                      "averaging refuses a damaged checkpoint", ("ckpt-6",), unchanged("run")))

    # Damage that a reader may survive (reading around it) or refuse: either, never a traceback.
    either = [
        ("checkpoints/checkpoint", how, "translate", True) for how in ("missing", "empty", "garbage", "folder")
    ] + [
        ("averaged/checkpoint", "garbage", "translate", False),
        ("checkpoints/ckpt-12.index", "folder", "translate", True),
        ("eval", "file", "translate", False), ("train", "file", "translate", False),
        ("eval/history.json", "garbage", "resume", False), ("eval/history.json", "folder", "resume", False),
        ("checkpoints/checkpoint", "garbage", "resume", False),
    ]
    for target, how, command, no_average in either:
        check = output_lines(2) if command == "translate" else None
        cases.append(Case(f"rundir/{'no-average-' if no_average else ''}{target}-{how}/{command}", EITHER,
                          damaged(target, how, command, no_average=no_average),
                          f"{target} {how}: reading around it or refusing it are both honest", (target.split("/")[-1],),
                          check))

    def config_edit(change: Callable[[dict], None]):
        def prepare(ctx):
            model_dir = ctx.copy(ctx.f.run)
            edit_json(os.path.join(model_dir, "model_config.json"), change)
            remember(ctx, "run")
            return run_reads(ctx, model_dir, "translate")
        return prepare
    edits = {
        "num_heads-3": lambda s: s["model"].update(num_heads=3),
        "vocab_size-negative": lambda s: s["model"].update(vocab_size=-5),
        "d_model-string": lambda s: s["model"].update(d_model="32"),
        "max_length-0": lambda s: s["model"].update(max_length=0),
        "vocab_size-1e12": lambda s: s["model"].update(vocab_size=10 ** 12),
        "num_layers-1e9": lambda s: s["model"].update(num_layers=10 ** 9),
        "dropout_rate-nan": lambda s: s["model"].update(dropout_rate=float("nan")),
        "model-a-list": lambda s: s.update(model=[]),
        "tokenizer-sha256-a-number": lambda s: s["tokenizer"].update(sha256=5),
        "tokenizer-sha256-another": lambda s: s["tokenizer"].update(sha256="0" * 64),
        "d_ff-128-not-the-checkpoints": lambda s: s["model"].update(d_ff=128),
        "vocab_size-400-not-the-checkpoints": lambda s: s["model"].update(vocab_size=400),
    }
    for name, change in edits.items():
        named = "tokenizer" if name == "tokenizer-sha256-another" else "model_config.json"  # the folder that differs
        cases.append(Case(f"rundir/model_config-{name}/translate", ERROR, config_edit(change),
                          "a model_config.json that is not this run's", (named,), unchanged("run")))
    cases.append(Case("rundir/model_config-without-tokenizer-section/translate", EITHER,
                      config_edit(lambda s: s.pop("tokenizer")),
                      "a run that recorded no tokenizer fingerprint (an older run) may be read or refused",
                      check=output_lines(2)))

    for command in ("translate", "export", "score", "average", "evaluate"):
        def prepare(ctx, command=command):
            model_dir = ctx.copy(ctx.f.run)
            shutil.rmtree(os.path.join(model_dir, "tokenizer"))
            shutil.copytree(os.path.join(ctx.f.other, "tokenizer"), os.path.join(model_dir, "tokenizer"))
            remember(ctx, "run")
            return run_reads(ctx, model_dir, command)
        cases.append(Case(f"rundir/tokenizer-of-another-run/{command}", ERROR, prepare,
                          "a tokenizer that is not the run's", ("tokenizer",), unchanged("run")))

    def lock_garbage(ctx):
        model_dir = ctx.copy(ctx.f.run)
        write(os.path.join(model_dir, ".lock"), "pid 1 on elsewhere since yesterday\n")
        return run_reads(ctx, model_dir, "resume")
    cases.append(Case("rundir/.lock-naming-a-process-not-holding-it/resume", OK, lock_garbage,
                      "the lock is an flock: a recorded holder that does not hold it is no holder",
                      check=said("resumed at step 12")))

    def glob_named(ctx):
        model_dir = ctx.copy(ctx.f.run, "g[1]")
        sibling = ctx.copy(ctx.f.run, "g1")
        for folder in ("checkpoints", "averaged"):
            for name in os.listdir(os.path.join(sibling, folder)):
                if name != "checkpoint":
                    os.truncate(os.path.join(sibling, folder, name), os.path.getsize(os.path.join(sibling, folder,
                                                                                                  name)) // 2)
        remember(ctx, "g1")
        return run_reads(ctx, model_dir, "translate")
    cases.append(Case("rundir/model_dir-g[1]-beside-a-damaged-g1/translate", OK, glob_named,
                      "a run named with glob characters reads its own files only",
                      check=all_of(unchanged("g1"), output_lines(2),
                                   lambda ctx, r: [] if "warning" not in r.stderr else ["warned: read g1's files?"])))

    def odd_name(ctx):
        return run_reads(ctx, ctx.copy(ctx.f.run, "rün dir ' \"x\""), "translate")
    cases.append(Case("rundir/model_dir-with-spaces-quotes-unicode/translate", OK, odd_name,
                      "any folder name is a run's name", check=output_lines(2)))

    def symlinked(ctx):
        os.symlink(ctx.f.run, ctx.path("link"))
        return run_reads(ctx, ctx.path("link"), "translate")
    cases.append(Case("rundir/model_dir-a-symlink/translate", OK, symlinked, "a link to a run is the run",
                      check=output_lines(2)))

    def trailing_slash(ctx):
        return run_reads(ctx, ctx.f.run + "/", "score")
    cases.append(Case("rundir/model_dir-trailing-slash/score", OK, trailing_slash, "RUN/ is RUN",
                      check=output_lines(2)))

    for name, where in (("checkpoints-subfolder", "run/checkpoints"), ("the-export", "export"),
                        ("a-file", "inputs/src.txt"), ("missing", "nowhere"), ("averaged-subfolder", "run/averaged")):
        def prepare(ctx, where=where):
            return run_reads(ctx, os.path.join(ctx.f.dir, where), "translate")
        cases.append(Case(f"rundir/model_dir-is-{name}/translate", ERROR, prepare,
                          "not a training directory", ("--model_dir=",)))
    def export_of_subfolder(ctx):
        return run_reads(ctx, os.path.join(ctx.f.run, "averaged"), "export")
    cases.append(Case("rundir/model_dir-is-averaged-subfolder/export", ERROR, export_of_subfolder,
                      "not a training directory", ("--model_dir=",)))
    return cases


def flag_cases() -> list:
    """Bad flag values, command by command: found before TensorFlow starts or before the work."""
    cases = []

    def simple(name, expect, build, why="", fragments=(), check=None):
        cases.append(Case(name, expect, build, why, fragments, check))

    # translate
    def tr(*extra, model=True):
        def prepare(ctx):
            base = [f"--model_dir={ctx.f.run}"] if model else []
            args = [a.format(case=ctx.dir, fixtures=ctx.f.dir) for a in extra]
            if not any(a.startswith("--input") for a in args):
                base.append(f"--input={ctx.f.src}")
            if not any(a.startswith("--output") for a in args):
                base.append(f"--output={ctx.out()}")
            else:
                for a in args:
                    if a.startswith("--output=") and a != "--output=":
                        ctx.watch(a.split("=", 1)[1])
            return translate(*base, *args)
        return prepare

    bad_translate = {
        "beam_size-0": ("--beam_size=0",), "beam_size-negative": ("--beam_size=-3",),
        "beam_size-not-a-number": ("--beam_size=four",), "beam_size-float": ("--beam_size=2.5",),
        "alpha-nan": ("--alpha=nan",), "alpha-negative": ("--alpha=-1",), "alpha-inf": ("--alpha=inf",),
        "max_extra_length-negative": ("--max_extra_length=-1",),
        "max_extra_length-1e9": ("--max_extra_length=1000000000",),
        "batch_size-0": ("--batch_size=0",), "n_best-0": ("--n_best=0",), "n_best-above-beam": ("--n_best=5",),
        "input-empty-string": ("--input=",), "input-a-folder": ("--input={fixtures}/inputs",),
        "input-missing": ("--input={case}/nothing.txt",), "output-a-folder": ("--output={case}",),
        "output-is-the-input": ("--output={fixtures}/inputs/src.txt",),
        "output-below-a-file": ("--output={fixtures}/inputs/src.txt/out.txt",),
        "output-empty-string": ("--output=",),
        "reference-missing": ("--reference={case}/nothing.txt",),
        "reference-a-folder": ("--reference={fixtures}/inputs",),
        "reference-stdin": ("--reference=-",),
        "reference-another-length": ("--reference={fixtures}/inputs/many_ref.txt",),
        "output-is-the-reference": ("--reference={fixtures}/inputs/ref.txt", "--output={fixtures}/inputs/ref.txt"),
        "sampling_topk-negative": ("--sampling_topk=-1",), "sampling_topp-0": ("--sampling_topp=0",),
        "sampling_topp-above-1": ("--sampling_topp=1.5",), "sampling_topp-nan": ("--sampling_topp=nan",),
        "sampling_temperature-negative": ("--sampling_temperature=-1",),
        "sampling_temperature-nan": ("--sampling_temperature=nan",),
        "seed-without-sampling": ("--seed=5",), "seed-negative": ("--sampling_topk=5", "--seed=-1"),
        "sampling-with-beam": ("--sampling_topk=5", "--beam_size=4"),
        "sampling-with-n_best": ("--sampling_topk=5", "--n_best=2"),
        "checkpoint-missing": ("--checkpoint={fixtures}/run/checkpoints/ckpt-999",),
        "checkpoint-a-folder": ("--checkpoint={fixtures}/run/checkpoints",),
        "checkpoint-empty-string": ("--checkpoint=",),
        "ensemble-of-another-tokenizer": ("--ensemble_model_dirs={fixtures}/other",),
        "ensemble-missing": ("--ensemble_model_dirs={case}/nothing",),
        "ensemble-only-commas": ("--ensemble_model_dirs=,,",),
        "moses_bleu_lang-without-reference": ("--moses_bleu_lang=de",),
        "moses_bleu_lang-not-a-language": ("--reference={fixtures}/inputs/ref.txt", "--moses_bleu_lang=d3!"),
        "prefix-with-n_best": ("--target_prefix_file={fixtures}/inputs/ref.txt", "--n_best=2", "--beam_size=4"),
        "prefix-another-length": ("--target_prefix_file={fixtures}/inputs/many_ref.txt",),
        "unknown-flag": ("--beam=4",), "positional-argument": ("extra.txt",),
        "flagfile-missing": ("--flagfile={case}/nothing.flags",),
    }
    for name, extra in bad_translate.items():
        simple(f"flags/translate-{name}", ERROR, tr(*extra), "a bad translate flag")
    simple("flags/translate-both-model_dir-and-export_dir", ERROR, tr("--export_dir={fixtures}/export"),
           "exactly one of --model_dir and --export_dir")
    simple("flags/translate-neither-model_dir-nor-export_dir", ERROR, tr(model=False), "no model")
    simple("flags/translate-export_dir-is-a-run", ERROR, tr("--export_dir={fixtures}/run", model=False),
           "a run is not an export", ("saved_model",))
    simple("flags/translate-export_dir-with-beam_size", ERROR,
           tr("--export_dir={fixtures}/export", "--beam_size=2", model=False), "an export has its decoding built in")
    simple("flags/translate-export_dir-with-ensemble", ERROR,
           tr("--export_dir={fixtures}/export", "--ensemble_model_dirs={fixtures}/run", model=False),
           "an ensemble of an export")
    simple("flags/translate-export_dir-n_best-above-its-beam", ERROR,
           tr("--export_dir={fixtures}/export", "--n_best=5", model=False), "the export's beam is 4")
    simple("flags/translate-output-dev-null", OK, tr("--output=/dev/null"), "/dev/null is written to, not replaced")
    simple("flags/translate-output-in-a-missing-folder", EITHER, tr("--output={case}/new/sub/out.txt"),
           "a missing output folder may be created or refused", check=output_lines(2, "new/sub/out.txt"))
    simple("flags/translate-batch_size-1000000", OK, tr("--batch_size=1000000"),
           "a batch larger than the input is the input", check=output_lines(2))
    simple("flags/translate-checkpoint-index-file", EITHER,
           tr("--checkpoint={fixtures}/run/checkpoints/ckpt-12.index"),
           "the .index file of a checkpoint may be taken for its prefix or refused", check=output_lines(2))
    simple("flags/translate-beam_size-20000", EITHER, tr("--beam_size=20000"),
           "a beam larger than the vocabulary may be cut to it or refused; not a crash", check=output_lines(2))

    def output_symlink_to_input(ctx):
        source = ctx.write("source.txt", "A dog runs .\n")
        os.symlink(source, ctx.path("out.txt"))
        ctx.watch(source)
        return translate(f"--model_dir={ctx.f.run}", f"--input={source}", f"--output={ctx.path('out.txt')}")
    simple("flags/translate-output-a-symlink-to-the-input", ERROR, output_symlink_to_input,
           "the output would replace the input", ("--output=",))

    # score
    def sc(*extra):
        def prepare(ctx):
            args = [a.format(case=ctx.dir, fixtures=ctx.f.dir) for a in extra]
            base = [f"--model_dir={ctx.f.run}"]
            for flag, default in (("--source", ctx.f.src), ("--target", ctx.f.ref)):
                if not any(a.startswith(flag) for a in args):
                    base.append(f"{flag}={default}")
            if not any(a.startswith("--output") for a in args):
                base.append(f"--output={ctx.out()}")
            return score(*base, *args)
        return prepare
    bad_score = {
        "batch_tokens-0": ("--batch_tokens=0",), "batch_tokens-negative": ("--batch_tokens=-5",),
        "batch_tokens-not-a-number": ("--batch_tokens=lots",), "source-missing": ("--source={case}/nothing",),
        "source-a-folder": ("--source={fixtures}/inputs",),
        "target-another-length": ("--target={fixtures}/inputs/many_ref.txt",),
        "output-is-the-source": ("--output={fixtures}/inputs/src.txt",), "output-a-folder": ("--output={case}",),
        "target-stdin": ("--target=-",), "checkpoint-missing": ("--checkpoint={fixtures}/run/checkpoints/ckpt-7",),
        "model_dir-missing": ("--model_dir={case}/nothing",), "source-empty-string": ("--source=",),
    }
    for name, extra in bad_score.items():
        simple(f"flags/score-{name}", ERROR, sc(*extra), "a bad score flag")
    simple("flags/score-without-target", ERROR,
           lambda ctx: score(f"--model_dir={ctx.f.run}", f"--source={ctx.f.src}"), "--target is required")
    simple("flags/score-batch_tokens-1", OK, sc("--batch_tokens=1"),
           "a pair longer than the batch is a batch of its own", check=output_lines(2))

    # export
    def ex(*extra, base=None):
        def prepare(ctx):
            args = [a.format(case=ctx.dir, fixtures=ctx.f.dir) for a in extra]
            serving = ctx.path("serving")
            if base == "copy":
                serving = ctx.copy(ctx.f.export, "serving")
            ctx.watch_export(serving)
            flags_ = [f"--model_dir={ctx.f.run}"]
            if not any(a.startswith("--export_dir") for a in args):
                flags_.append(f"--export_dir={serving}")
            return export(*flags_, *args)
        return prepare
    bad_export = {
        "version-negative": ("--version=-1",), "version-not-a-number": ("--version=two",),
        "export_dir-a-file": ("--export_dir={fixtures}/inputs/src.txt",),
        "export_dir-below-a-file": ("--export_dir={fixtures}/inputs/src.txt/serving",),
        "export_dir-is-the-model_dir": ("--export_dir={fixtures}/run",),
        "export_dir-is-the-model_dir-with-slash": ("--export_dir={fixtures}/run/",),
        "export_dir-empty-string": ("--export_dir=",), "beam_size-0": ("--beam_size=0",), "alpha-inf": ("--alpha=inf",),
        "max_extra_length-negative": ("--max_extra_length=-5",), "format-unknown": ("--format=onnx",),
        "quantization-without-ctranslate2": ("--quantization=int8",), "precision-unknown": ("--precision=int4",),
        "checkpoint-missing": ("--checkpoint={fixtures}/run/checkpoints/ckpt-5",),
        "ensemble-of-another-tokenizer": ("--ensemble_model_dirs={fixtures}/other",),
        "ctranslate2-with-precision": ("--format=ctranslate2", "--precision=bfloat16"),
        "positional-argument": ("now",),
    }
    for name, extra in bad_export.items():
        simple(f"flags/export-{name}", ERROR, ex(*extra), "a bad export flag")
    simple("flags/export-version-1-exists", ERROR, ex("--version=1", base="copy"), "an existing version",
           check=lambda ctx, r: [] if tree_digest(ctx.path("serving", "1")) == tree_digest(
               os.path.join(ctx.f.export, "1")) else ["version 1 changed"])

    # train: a new --model_dir that must not appear
    def tn(*extra, model_dir="new"):
        def prepare(ctx):
            args = [a.format(case=ctx.dir, fixtures=ctx.f.dir) for a in extra]
            flags_ = [] if any(a.startswith("--model_dir") for a in args) else [f"--model_dir={ctx.path(model_dir)}"]
            return train(*flags_, *SHORT, *args)
        return prepare
    bad_train = {
        "train_steps-0": ("--train_steps=0",), "train_steps-negative": ("--train_steps=-5",),
        "train_steps-not-a-number": ("--train_steps=many",), "train_steps-float": ("--train_steps=1e3",),
        "warmup_steps-0": ("--warmup_steps=0",), "warmup_steps-negative": ("--warmup_steps=-1",),
        "learning_rate_scale-nan": ("--learning_rate_scale=nan",),
        "learning_rate_scale-negative": ("--learning_rate_scale=-1",),
        "vocab_size-0": ("--vocab_size=0",), "vocab_size-negative": ("--vocab_size=-1",),
        "vocab_size-1e12": ("--vocab_size=1000000000000",), "vocab_size-5": ("--vocab_size=5",),
        "d_model-not-divisible-by-heads": ("--d_model=33",), "num_heads-0": ("--num_heads=0",),
        "num_layers-0": ("--num_layers=0",), "d_ff-0": ("--d_ff=0",), "d_k-0": ("--d_k=0",),
        "d_ff-1e12": ("--d_ff=1000000000000",),
        "dropout_rate-1.5": ("--dropout_rate=1.5",), "dropout_rate-negative": ("--dropout_rate=-0.1",),
        "dropout_rate-nan": ("--dropout_rate=nan",), "label_smoothing-1.5": ("--label_smoothing=1.5",),
        "label_smoothing-negative": ("--label_smoothing=-0.1",),
        "batch_tokens-0": ("--batch_tokens=0",), "batch_tokens-negative": ("--batch_tokens=-1",),
        "max_length-0": ("--max_length=0",), "accumulation_steps-0": ("--accumulation_steps=0",),
        "keep_checkpoints-0": ("--keep_checkpoints=0",),
        "average-more-than-kept": ("--average_checkpoints=5", "--keep_checkpoints=2"),
        "model_dir-a-file": ("--model_dir={fixtures}/inputs/src.txt",), "model_dir-empty-string": ("--model_dir=",),
        "dataset-unknown": ("--dataset=imagenet",), "dataset-files-without-files": ("--dataset=files",),
        "source_file-missing": ("--dataset=files", "--data_dir={fixtures}/data", "--source_file={{split}}.fr",
                                "--target_file={{split}}.de"),
        "data_dir-missing": ("--dataset=files", "--data_dir={case}/nothing", "--source_file={{split}}.en",
                             "--target_file={{split}}.de"),
        "data_dir-a-file": ("--dataset=files", "--data_dir={fixtures}/inputs/src.txt", "--source_file={{split}}.en",
                            "--target_file={{split}}.de"),
        "train_files-matching-nothing": ("--train_files={case}/web-*.{{en,de}}",),
        "init_from-missing": ("--init_from={case}/nothing",),
        "init_from-another-architecture": ("--init_from={fixtures}/run", "--d_model=64"),
        "init_from-an-export": ("--init_from={fixtures}/export",),
        "init_from-with-another-vocab_size": ("--init_from={fixtures}/run", "--vocab_size=100"),
        "bpe_dropout-1": ("--bpe_dropout=1",), "bpe_dropout-with-unigram": ("--bpe_dropout=0.1", "--tokenizer=unigram"),
        "preset-unknown": ("--preset=huge",), "ema_decay-1.5": ("--ema_decay=1.5",),
        "ema_decay-negative": ("--ema_decay=-0.1",), "ema_decay-nan": ("--ema_decay=nan",),
        "rdrop_alpha-negative": ("--rdrop_alpha=-1",), "eval_every_steps-negative": ("--eval_every_steps=-1",),
        "log_every_steps-0": ("--log_every_steps=0",), "seed-2**32": ("--seed=4294967296",),
        "max_train_minutes-negative": ("--max_train_minutes=-1",),
        "checkpoint_every_steps-negative": ("--checkpoint_every_steps=-1",),
        "cooldown_steps-negative": ("--cooldown_steps=-1",),
        "cooldown_steps-above-train_steps": ("--cooldown_steps=100", "--train_steps=50"),
        "early_stopping_patience-negative": ("--early_stopping_patience=-1",),
        "precision-unknown": ("--precision=float8",), "num_gpus-negative": ("--num_gpus=-2",),
        "tokenizer-unknown": ("--tokenizer=chars",), "shuffle_buffer-0": ("--shuffle_buffer=0",),
        "clip_norm-negative": ("--clip_norm=-1",), "dev_split-unknown": ("--dev_split=dev",),
        "evaluate_only-without-a-run": ("--evaluate_only",),
        "keep_best-with-f1-on-translation": ("--keep_best_checkpoints=2", "--best_checkpoint_metric=f1"),
    }
    for name, extra in bad_train.items():
        simple(f"flags/train-{name}", ERROR, tn(*extra), "a bad training flag", check=absent("new"))

    def avg(*extra, copy=False):
        def prepare(ctx):
            model_dir = ctx.copy(ctx.f.run) if copy else ctx.f.run
            if copy:
                remember(ctx, "run")
            args = [a.format(case=ctx.dir, fixtures=ctx.f.dir) for a in extra]
            flags_ = [] if any(a.startswith("--model_dir") for a in args) else [f"--model_dir={model_dir}"]
            return average(*flags_, *args)
        return prepare
    simple("flags/average_checkpoints-num_checkpoints-0", ERROR, avg("--num_checkpoints=0"), "0 checkpoints")
    simple("flags/average_checkpoints-more-than-kept", ERROR, avg("--num_checkpoints=5", copy=True),
           "5 of 2 checkpoints", check=unchanged("run"))
    simple("flags/average_checkpoints-model_dir-an-export", ERROR, avg("--model_dir={fixtures}/export"),
           "an export is not a run")
    simple("flags/average_checkpoints-model_dir-missing", ERROR, avg("--model_dir={case}/nothing"), "no run")
    simple("flags/average_checkpoints-without-model_dir", ERROR, lambda ctx: average(), "no run")

    for name, extra in (("preset-unknown", ("--preset=huge",)), ("vocab_size-0", ("--vocab_size=0",)),
                        ("vocab_size-1e12", ("--preset=tiny", "--vocab_size=1000000000000")),
                        ("positional-argument", ("base",))):
        simple(f"flags/summary-{name}", ERROR, lambda ctx, extra=extra: summary(*extra), "a bad summary flag")
    simple("flags/summary-tiny", OK, lambda ctx: summary("--preset=tiny", "--vocab_size=500"),
           "the tiny preset's summary", check=said("parameters"))

    def pr(*extra):
        def prepare(ctx):
            args = [a.format(case=ctx.dir, fixtures=ctx.f.dir) for a in extra]
            return parse(*args, f"--input={ctx.f.src}", f"--output={ctx.out()}")
        return prepare
    simple("flags/parse-export-of-a-translation-model", ERROR, pr("--export_dir={fixtures}/export"),
           "a translation model's export", ("translation",))
    simple("flags/parse-baseline-unknown", ERROR, pr("--baseline=left_branching"), "an unknown baseline")
    simple("flags/parse-treebank_split-without-data_dir", ERROR,
           lambda ctx: parse("--baseline=right_branching", "--treebank_split=test", f"--output={ctx.out()}"),
           "no treebank", ("data_dir",))
    simple("flags/parse-both-model_dir-and-export_dir", ERROR,
           pr("--model_dir={fixtures}/run", "--export_dir={fixtures}/export"), "two models")
    simple("flags/parse-a-translation-run", EITHER, pr("--model_dir={fixtures}/run", "--beam_size=1"),
           "a translation run may parse (its outputs repaired into trees) or be refused", check=output_lines(2))

    simple("flags/pipelines-no-command", ERROR, lambda ctx: pipelines(), "no command")
    simple("flags/pipelines-unknown-command", ERROR, lambda ctx: pipelines("train"), "an unknown command")
    simple("flags/pipelines-train_tokenizer-without-dir", ERROR, lambda ctx: pipelines("train_tokenizer"),
           "no tokenizer_dir")
    simple("flags/pipelines-train_tokenizer-into-a-file", ERROR,
           lambda ctx: pipelines("train_tokenizer", f"--tokenizer_dir={ctx.f.src}"), "a file", ("is a file",))
    simple("flags/pipelines-train_tokenizer-vocab_size-5", ERROR,
           lambda ctx: pipelines("train_tokenizer", "--vocab_size=5", f"--tokenizer_dir={ctx.path('tok')}"),
           "a vocabulary too small", ("vocab_size",), absent("tok"))
    simple("flags/pipelines-stats-missing-files", ERROR,
           lambda ctx: pipelines("stats", "--dataset=files", "--source_file={split}.xx", "--target_file={split}.yy",
                                 f"--data_dir={ctx.f.data}"), "missing files")
    simple("flags/pipelines-stats-split-unknown", ERROR,
           lambda ctx: pipelines("stats", "--split=dev", "--vocab_size=400"), "an unknown split")

    simple("flags/variations-rows-unknown", ERROR,
           lambda ctx: variations(f"--flagfile={TINY}", "--rows=Z", f"--out={ctx.path('table')}"), "unknown row",
           check=absent("table"))
    simple("flags/variations-without-flagfile", ERROR, lambda ctx: variations(f"--out={ctx.path('table')}"),
           "no recipe", check=absent("table"))
    simple("flags/variations-out-a-file", ERROR,
           lambda ctx: variations(f"--flagfile={TINY}", "--rows=A", f"--out={ctx.f.src}"), "a file")
    simple("flags/variations-seeds-0", ERROR,
           lambda ctx: variations(f"--flagfile={TINY}", "--seeds=0", f"--out={ctx.path('table')}"), "0 seeds",
           check=absent("table"))
    simple("flags/variations-rows-empty", ERROR,
           lambda ctx: variations(f"--flagfile={TINY}", "--rows=,", f"--out={ctx.path('table')}"), "no row",
           check=absent("table"))
    return cases


def text_cases() -> list:
    """Odd input text: what must translate, and what must be refused with one line."""
    cases = []
    texts = {  # name: (bytes, lines, expectation, why)
        "empty-file": (b"", 0, OK, "an empty input translates to an empty output"),
        "only-newlines": (b"\n\n\n\n\n", 5, OK, "empty lines translate, one output line each"),
        "whitespace-only-lines": (b"   \n\t\t\n", 2, OK, "blank lines translate"),
        "crlf": (b"A dog runs .\r\nThe cat sleeps .\r\n", 2, OK, "Windows line ends are line ends"),
        "no-final-newline": (b"A dog runs .\nThe cat sleeps .", 2, OK, "a last line without its newline"),
        "utf8-bom": (b"\xef\xbb\xbfA dog runs .\nThe cat sleeps .\n", 2, OK, "a byte order mark"),
        "unicode-line-separators": ("A dog\u2028runs .\nThe cat\x85sleeps\x0c .\n".encode(), 2, OK,
                                    "U+2028, NEL and form feed are not line ends of the file"),
        "emoji-rtl-combining": ("A dog 🐕 runs .\nשלום e\u0301 \u200d .\n".encode(), 2, OK, "any Unicode text"),
        "old-mac-cr-only": (b"A dog runs .\rThe cat sleeps .\r", 1, EITHER, "lone CRs are not line ends here"),
        "invalid-utf8": (b"A d\xf6g runs .\nThe cat sleeps .\n", 2, EITHER,
                         "bytes that are not UTF-8 may be translated as they are or refused naming the line"),
        "nul-byte": (b"A dog\x00 runs .\nThe cat sleeps .\n", 2, EITHER, "a NUL may be translated or refused"),
        "5000-word-line": ((" ".join(["dog"] * 5000) + "\nA dog runs .\n").encode(), 2, EITHER,
                           "a line far past max_length may be translated or refused with one line"),
        "gzip-compressed": (gzip.compress(b"A dog runs .\nThe cat sleeps .\nA man walks .\n", mtime=0), 3, OK,
                            "gzip input is read as its text (its compressed bytes split into 2 lines)"),
    }
    for name, (data, count, expect, why) in texts.items():
        for source in ("model_dir", "export_dir"):
            if source == "export_dir" and name not in ("only-newlines", "crlf", "unicode-line-separators",
                                                       "invalid-utf8", "nul-byte", "empty-file"):
                continue
            def prepare(ctx, data=data, source=source):
                path = ctx.write("input.txt", data)
                model = f"--model_dir={ctx.f.run}" if source == "model_dir" else f"--export_dir={ctx.f.export}"
                extra = ("--beam_size=1",) if source == "model_dir" else ()
                return translate(model, f"--input={path}", f"--output={ctx.out()}", *extra)
            cases.append(Case(f"text/translate-{source}-{name}", expect, prepare, why, check=output_lines(count)))

    def many(ctx):
        return translate(f"--model_dir={ctx.f.run}", f"--input={ctx.f.many}", f"--output={ctx.out()}",
                         "--beam_size=1", "--batch_size=256")
    cases.append(Case("text/translate-10000-lines", OK, many, "a long input translates line for line",
                      check=output_lines(10000)))

    def stdin_input(ctx):
        return translate(f"--model_dir={ctx.f.run}", "--input=-", "--beam_size=1")
    cases.append(Case("text/translate-stdin-crlf", OK, stdin_input, "stdin is an input like a file",
                      check=stdout_lines(3), stdin=b"A dog runs .\r\n\r\nThe cat .\r\n"))
    cases.append(Case("text/translate-input-dev-stdin", OK,
                      lambda ctx: translate(f"--model_dir={ctx.f.run}", "--input=/dev/stdin", f"--output={ctx.out()}",
                                            "--beam_size=1"),
                      "stdin by its device name, as `--input=<(zcat test.en.gz)` names a pipe",
                      check=output_lines(2), stdin=b"A dog runs .\nThe cat sleeps .\n"))
    cases.append(Case("text/score-source-dev-stdin", OK,
                      lambda ctx: score(f"--model_dir={ctx.f.run}", "--source=/dev/stdin", f"--target={ctx.f.ref}",
                                        f"--output={ctx.out()}"),
                      "stdin by its device name", check=output_lines(2), stdin=b"A dog runs .\nThe cat sleeps .\n"))
    cases.append(Case("text/translate-dev-null-input", OK,
                      lambda ctx: translate(f"--model_dir={ctx.f.run}", "--input=/dev/null", f"--output={ctx.out()}"),
                      "an empty device is an empty input", check=output_lines(0)))

    def reference(data, expect, why):
        def prepare(ctx):
            ref = ctx.write("ref.txt", data)
            return translate(f"--model_dir={ctx.f.run}", f"--input={ctx.f.src}", f"--reference={ref}",
                             f"--output={ctx.out()}", "--beam_size=1")
        return Case(f"text/translate-reference-{why}", expect, prepare, why, check=output_lines(2))
    cases.append(reference(b"Ein Hund rennt .\r\nDie Katze schl\xc3\xa4ft .\r\n", OK, "crlf"))
    cases.append(reference(b"Ein Hund r\xe4nnt .\nDie Katze .\n", EITHER, "invalid-utf8"))
    cases.append(reference(b"\n\n", OK, "empty-lines"))

    def score_text(source, target, expect, why, count):
        def prepare(ctx):
            s = ctx.write("source.txt", source)
            t = ctx.write("target.txt", target)
            return score(f"--model_dir={ctx.f.run}", f"--source={s}", f"--target={t}", f"--output={ctx.out()}")
        return Case(f"text/score-{why}", expect, prepare, why, check=output_lines(count))
    cases += [
        score_text(b"", b"", ERROR, "empty-files", 0),
        score_text(b"\n\n", b"A .\n\n", OK, "empty-lines", 2),
        score_text(b"A dog .\r\nA cat .\r\n", b"Ein Hund .\r\nEine Katze .\r\n", OK, "crlf", 2),
        score_text(b"A dog .\nA cat .\n", b"Ein H\xfcnd .\nEine Katze .\n", ERROR, "invalid-utf8-target", 2),
        score_text(b"A dog\x00 .\nA cat .\n", b"Ein Hund .\nEine Katze .\n", EITHER, "nul-byte", 2),
        score_text("A dog\u2028runs .\nA cat .\n".encode(), "Ein Hund .\nEine\x85Katze .\n".encode(), OK,
                   "unicode-line-separators", 2),
        score_text(gzip.compress(b"A dog .\n"), gzip.compress(b"Ein Hund .\n"), ERROR, "gzip", 1),
        score_text(b"A dog .\nA cat .\n", b"Ein Hund .\n", ERROR, "line-counts-differ", 2),
    ]

    def many_pairs(ctx):
        return score(f"--model_dir={ctx.f.run}", f"--source={ctx.f.many}", f"--target={ctx.f.many_ref}",
                     f"--output={ctx.out()}", "--batch_tokens=8192")
    cases.append(Case("text/score-10000-pairs", OK, many_pairs, "a long corpus scores line for line",
                      check=output_lines(10000)))

    def parse_text(data, expect, why, count):
        def prepare(ctx):
            path = ctx.write("input.txt", data)
            return parse(f"--model_dir={ctx.f.run}", f"--input={path}", f"--output={ctx.out()}", "--beam_size=1")
        return Case(f"text/parse-{why}", expect, prepare, why, check=output_lines(count))
    cases += [parse_text(b"", EITHER, "empty-file", 0), parse_text(b"The d\xf6g .\n", EITHER, "invalid-utf8", 1)]

    def train_text(name, expect, why, change):
        def prepare(ctx):
            data = ctx.copy(ctx.f.data, "data")
            change(data)
            return train(f"--model_dir={ctx.path('new')}", "--dataset=files", f"--data_dir={data}",
                         "--source_file={split}.en", "--target_file={split}.de", *SHORT)
        return Case(f"text/train-{name}", expect, prepare, why, check=absent("new") if expect == ERROR else None)

    def append(name, data):
        def change(folder):
            with open(os.path.join(folder, name), "ab") as file:
                file.write(data)
        return change
    cases += [
        train_text("invalid-utf8-in-train-de", ERROR, "not UTF-8, named by file and line",
                   append("train.de", b"Ein H\xfcnd .\n")),
        train_text("line-counts-differ", ERROR, "parallel files of different lengths", append("train.en", b"extra\n")),
        train_text("empty-validation", ERROR, "an empty dev split",
                   lambda folder: [write(os.path.join(folder, f"validation.{l}"), b"") for l in ("en", "de")]),
        train_text("validation-a-folder", ERROR, "a folder where the dev file belongs",
                   lambda folder: damage(os.path.join(folder, "validation.en"), "folder")),
    ]
    return cases


def export_cases() -> list:
    """Damaged exports read by translate (and exports written beside damaged versions)."""
    cases = []

    def damaged(target: str, how: str, point: str = "base"):
        def prepare(ctx):
            serving = ctx.copy(ctx.f.export, "serving")
            damage(os.path.join(serving, target), how)
            where = serving if point == "base" else os.path.join(serving, point)
            return translate(f"--export_dir={where}", f"--input={ctx.f.src}", f"--output={ctx.out()}")
        return prepare
    refused = [("1/saved_model.pb", how) for how in ("missing", "empty", "garbage")] + [
        ("1/variables", "missing"), ("1/variables/variables.index", "empty"),
        ("1/variables/variables.index", "missing"), ("1", "file"),
        ("1/variables/variables.data-00000-of-00001", "garbage"),
    ]
    for target, how in refused:
        cases.append(Case(f"export/{target}-{how}/translate", ERROR, damaged(target, how), f"{target} {how}"))

    def settings_list(ctx):
        serving = ctx.copy(ctx.f.export, "serving")
        write(os.path.join(serving, "1", "assets.extra", "export.json"), "[]")
        return translate(f"--export_dir={serving}", f"--input={ctx.f.src}", f"--output={ctx.out()}")
    cases.append(Case("export/export.json-a-list/translate", EITHER, settings_list,
                      "export.json is read for --n_best and the signatures: a plain translation may do without it",
                      check=output_lines(2)))
    for target, how, why in (("1/assets.extra/export.json", "garbage", "export.json is read for --n_best and the "
                              "signatures: a plain translation may do without it"),
                             ("1/assets/tokenizer.model", "missing", "the graph holds the tokenizer; the asset is a "
                              "copy for clients"),
                             ("1/assets/tokenizer.model", "garbage", "the graph holds the tokenizer; the asset is a "
                              "copy for clients"),
                             ("1/assets.extra/export.json", "missing", "an export made before export.json existed"),
                             ("1/assets.extra", "missing", "an export without assets.extra (no warm-up, no settings)"),
                             ("1/fingerprint.pb", "missing", "a SavedModel without its fingerprint")):
        cases.append(Case(f"export/{target}-{how}/translate", EITHER, damaged(target, how), why,
                          check=output_lines(2)))

    def beside(kind: str):
        def prepare(ctx):
            serving = ctx.copy(ctx.f.export, "serving")
            path = os.path.join(serving, "2")
            if kind == "file":
                write(path, "not a version\n")
            elif kind == "empty":
                os.makedirs(path)
            else:
                os.makedirs(os.path.join(serving, ".tmp-3-elsewhere-1-abcd"))
            return translate(f"--export_dir={serving}", f"--input={ctx.f.src}", f"--output={ctx.out()}")
        return prepare

    def used_version_1(ctx, result):
        if result.code != 0:
            return []
        return [] if os.path.join("serving", "1") in result.stderr else ["did not say it used serving/1"]
    cases.append(Case("export/version-2-a-file-beside-1/translate", EITHER, beside("file"),
                      "a file named 2 is no version: version 1 may be used, or the base refused",
                      check=all_of(output_lines(2), used_version_1)))
    cases.append(Case("export/version-2-an-empty-folder-beside-1/translate", EITHER, beside("empty"),
                      "an empty folder is no complete version: version 1 may be used, or the base refused",
                      check=all_of(output_lines(2), used_version_1)))
    cases.append(Case("export/a-hidden-temporary-beside-1/translate", OK, beside("tmp"),
                      "a hidden temporary folder is never a version", check=all_of(output_lines(2), used_version_1),
                      leftovers_ok=True))

    def version_folder(ctx):
        return translate(f"--export_dir={os.path.join(ctx.f.export, '1')}", f"--input={ctx.f.src}",
                         f"--output={ctx.out()}")
    cases.append(Case("export/export_dir-a-version-folder/translate", OK, version_folder,
                      "a version folder is an export", check=output_lines(2)))

    def wrong_level(ctx):
        return translate(f"--export_dir={os.path.join(ctx.f.export, '1', 'variables')}", f"--input={ctx.f.src}",
                         f"--output={ctx.out()}")
    cases.append(Case("export/export_dir-the-variables-folder/translate", ERROR, wrong_level, "no SavedModel there"))

    def only_temporary(ctx):
        os.makedirs(ctx.path("serving", ".tmp-1-host-1-abcd"))
        write(ctx.path("serving", ".tmp-1-host-1-abcd", "saved_model.pb"), b"")
        return translate(f"--export_dir={ctx.path('serving')}", f"--input={ctx.f.src}", f"--output={ctx.out()}")
    cases.append(Case("export/base-with-only-a-temporary/translate", ERROR, only_temporary, "no version",
                      leftovers_ok=True))

    def export_beside(kind: str):
        def prepare(ctx):
            serving = ctx.copy(ctx.f.export, "serving")
            if kind == "file":
                write(os.path.join(serving, "2"), "not a version\n")
            elif kind == "stale":  # as a killed export names it: version, host, pid (now dead), token
                dead = subprocess.Popen(["true"])
                dead.wait()
                host = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()) or "localhost"
                os.makedirs(os.path.join(serving, f".tmp-2-{host}-{dead.pid}-1f2e3d4c", "variables"))
            ctx.watch_export(serving)
            return export(f"--model_dir={ctx.f.run}", f"--export_dir={serving}", "--nocheck_ops")
        return prepare

    def new_version_complete(ctx, result):
        if result.code != 0:
            return []
        new = [v for v in versions_in(ctx.path("serving")) if v != "1" and os.path.isdir(ctx.path("serving", v))]
        return [] if new else ["no new version folder published"]
    cases.append(Case("export/export-beside-a-file-named-2", EITHER, export_beside("file"),
                      "a new version may take the next free number or the base may be refused",
                      check=new_version_complete))
    cases.append(Case("export/export-beside-a-stale-temporary-of-a-dead-export", OK, export_beside("stale"),
                      "a dead export's hidden folder on this host is removed, the new version published",
                      check=new_version_complete))

    def n_best_sampled(ctx):
        return translate(f"--export_dir={ctx.f.export}", f"--input={ctx.f.src}", f"--output={ctx.out()}",
                         "--sampling_topk=5", "--seed=1")
    cases.append(Case("export/translate-sampled-from-an-export", OK, n_best_sampled,
                      "the export has a sampling signature", check=output_lines(2)))
    return cases


def signal_cases() -> list:
    """SIGINT/SIGTERM at moments of train, translate, score, export, averaging, tokenizer training."""
    cases = []
    int_, term = signal.SIGINT, signal.SIGTERM

    def long_train(ctx):
        return train(f"--model_dir={ctx.path('run')}", *LONG)

    def resumes(ctx, result):
        """The run stopped at a saved step N resumes there and trains to N + 2."""
        problems = []
        stopped = re.search(r"(SIGINT|SIGTERM) at step (\d+): saved ckpt-\d+", result.stdout)
        if result.code in (130, 143) and not stopped and len(result.errors) != 1:  # stopped before the loop
            problems.append("the stop neither said which step it saved nor printed one error line")
        steps = int(stopped.group(2)) if stopped else 0
        again = ctx.run(train(f"--model_dir={ctx.path('run')}", *LONG[1:], f"--train_steps={steps + 2}"))
        if again.code != 0:
            return problems + [f"the resume exited {again.code}: {again.tail(2)}"]
        expected = f"resumed at step {steps}" if steps else "starting at step 0"
        if expected not in again.stdout:
            problems.append(f"the resume did not say {expected!r}")
        return problems

    cases.append(Case("signals/train-SIGINT-after-step-3-then-resume", SIGNAL, long_train,
                      "Ctrl-C finishes the update, saves, exits 130; the same command resumes",
                      check=resumes, signals=(Signal(int_, 0.0, r"^step 3/"),), codes=(130,), error_lines=(0, 1)))
    cases.append(Case("signals/train-SIGTERM-after-step-3-then-resume", SIGNAL, long_train,
                      "kill finishes the update, saves, exits 143; the same command resumes",
                      check=resumes, signals=(Signal(term, 0.0, r"^step 3/"),), codes=(143,), error_lines=(0, 1)))
    cases.append(Case("signals/train-two-SIGINTs-mid-run", SIGNAL, long_train,
                      "a second Ctrl-C while the first is handled stops at once, still 130, no traceback",
                      check=resumes, signals=(Signal(int_, 0.0, r"^step 5/"), Signal(int_, 0.05)),
                      codes=(130,), error_lines=(0, 1)))
    cases.append(Case("signals/train-SIGINT-after-the-tokenizer-line-then-rerun", SIGNAL, long_train,
                      "Ctrl-C while the model is built on a first start: 130, then the run starts or resumes",
                      check=resumes, signals=(Signal(int_, 0.3, r"^tokenizer: "),), codes=(130,), error_lines=(0, 1)))
    cases.append(Case("signals/train-SIGINT-during-imports", SIGNAL, long_train,
                      "Ctrl-C before anything starts: 130 and one error line, nothing written",
                      check=lambda ctx, r: [] if not os.path.exists(ctx.path("run")) or r.code != 130 else
                      resumes(ctx, r), signals=(Signal(int_, 0.6),), codes=(130,)))

    def finishing(ctx):
        model_dir = ctx.copy(ctx.f.run)
        return train(f"--model_dir={model_dir}", *FINISHED, "--train_steps=18", "--eval_max_sentences=20",
                     "--log_every_steps=1")

    def finishes_later(ctx, result):
        again = ctx.run(train(f"--model_dir={ctx.path('run')}", *FINISHED, "--train_steps=18",
                              "--eval_max_sentences=20"))
        if again.code != 0:
            return [f"the rerun exited {again.code}: {again.tail(2)}"]
        problems = [] if "done: " in again.stdout else ["the rerun did not finish"]
        if not os.path.isfile(ctx.path("run", "averaged", "ckpt-18.index")):
            problems.append("no averaged/ckpt-18 after the rerun")
        return problems
    cases.append(Case("signals/train-SIGTERM-during-the-final-evaluation-then-rerun", SIGNAL, finishing,
                      "the final evaluation stops at once (143); the rerun evaluates and averages",
                      check=finishes_later, signals=(Signal(term, 0.4, r"^step 18/18"),), codes=(143,),
                      error_lines=(0, 1)))

    def translating(source="model_dir", existing=False):
        def prepare(ctx):
            out = ctx.path("out.txt")
            if existing:
                write(out, "an earlier translation\n")
            ctx.watch(out)
            model = f"--model_dir={ctx.f.run}" if source == "model_dir" else f"--export_dir={ctx.f.export}"
            extra = ("--beam_size=1",) if source == "model_dir" else ()
            return translate(model, f"--input={ctx.f.many}", f"--output={out}", "--batch_size=16", *extra)
        return prepare
    cases.append(Case("signals/translate-SIGINT-mid-translation", SIGNAL, translating(),
                      "Ctrl-C: 130, one error line, no output file", signals=(Signal(int_, 2.0, r"^translating "),)))
    cases.append(Case("signals/translate-SIGINT-mid-translation-existing-output", SIGNAL, translating(existing=True),
                      "Ctrl-C: 130, one error line, the earlier output kept",
                      signals=(Signal(int_, 2.0, r"^translating "),)))
    cases.append(Case("signals/translate-SIGTERM-mid-translation-existing-output", SIGNAL,
                      translating(existing=True), "kill: ended (143, or the default action), the earlier output kept",
                      signals=(Signal(term, 2.0, r"^translating "),), codes=(143, -15), error_lines=(0, 1)))
    cases.append(Case("signals/translate-export-SIGINT-mid-translation", SIGNAL, translating("export_dir"),
                      "Ctrl-C: 130, one error line, no output", signals=(Signal(int_, 2.0, r"^translating "),)))
    cases.append(Case("signals/translate-SIGINT-during-imports", SIGNAL, translating(),
                      "Ctrl-C before anything starts: 130 and one error line", signals=(Signal(int_, 0.5),)))
    cases.append(Case("signals/translate-SIGINT-while-the-model-loads", SIGNAL, translating(),
                      "Ctrl-C while TensorFlow starts and the model loads: 130, one error line",
                      signals=(Signal(int_, 3.0),)))

    def translated(ctx):  # the output is not watched: it is complete before the signal comes
        return translate(f"--model_dir={ctx.f.run}", f"--input={ctx.f.src}", f"--output={ctx.path('out.txt')}",
                         "--beam_size=1")
    for signum, name in ((int_, "SIGINT"), (term, "SIGTERM")):
        cases.append(Case(f"signals/translate-{name}-after-its-last-line", SIGNAL, translated,
                          "a signal as the interpreter exits, the output written: any end but a traceback "
                          "(0, 130/143, or the signal itself)", check=output_lines(2),
                          signals=(Signal(signum, 0.0, r"^2 sentences in "),),
                          codes=(0, 128 + signum, -signum), error_lines=(0, 1)))

    def scoring(ctx):
        return score(f"--model_dir={ctx.f.run}", f"--source={ctx.f.many}", f"--target={ctx.f.many_ref}",
                     f"--output={ctx.out()}", "--batch_tokens=256")
    cases.append(Case("signals/score-SIGINT-mid-scoring", SIGNAL, scoring, "Ctrl-C: 130, one error line, no output",
                      signals=(Signal(int_, 1.5, r"^scoring "),)))

    def exporting(ctx):
        ctx.watch_export(ctx.path("serving"))
        return export(f"--model_dir={ctx.f.run}", f"--export_dir={ctx.path('serving')}")

    def temporary_there(ctx):
        return lambda: any(n.startswith(".tmp") for n in os.listdir(ctx.path("serving"))) \
            if os.path.isdir(ctx.path("serving")) else False

    for moment, spec in (("during-imports", lambda ctx: Signal(int_, 1.5)),
                         ("while-tracing", lambda ctx: Signal(int_, 8.0)),
                         ("while-saving", lambda ctx: Signal(int_, 0.2, temporary_there(ctx))),
                         ("during-the-op-check", lambda ctx: Signal(int_, 2.5, temporary_there(ctx)))):
        def prepare(ctx, spec=spec):
            argv = exporting(ctx)
            ctx.dynamic_signals = (spec(ctx),)
            return argv
        cases.append(Case(f"signals/export-SIGINT-{moment}", SIGNAL, prepare,
                          "Ctrl-C: 130, one error line, no version and no temporary folder left",
                          signals=("dynamic",)))

    def export_again(ctx, result):
        problems = []
        if versions_in(ctx.path("serving")):
            problems.append("a version is visible after the kill")
        again = ctx.run(export(f"--model_dir={ctx.f.run}", f"--export_dir={ctx.path('serving')}", "--nocheck_ops"))
        if again.code != 0:
            return problems + [f"the next export exited {again.code}: {again.tail(2)}"]
        left = [n for n in os.listdir(ctx.path("serving")) if n.startswith(".tmp")]
        if left:
            problems.append(f"the next export left the killed one's {left}")
        return problems

    def export_term(ctx):
        argv = exporting(ctx)
        ctx.dynamic_signals = (Signal(term, 0.2, temporary_there(ctx)),)
        return argv
    cases.append(Case("signals/export-SIGTERM-while-saving-then-export-again", SIGNAL, export_term,
                      "kill: no version visible; the next export removes the hidden folder and publishes",
                      check=export_again, signals=("dynamic",), codes=(143, -15), error_lines=(0, 1),
                      leftovers_ok=True))

    def averaging(ctx):
        model_dir = ctx.copy(ctx.f.run)
        shutil.rmtree(os.path.join(model_dir, "averaged"))
        return average(f"--model_dir={model_dir}", "--num_checkpoints=2")

    def no_half_average(ctx, result):
        """averaged/ is absent, empty or a listed checkpoint; the command run again averages."""
        problems = []
        folder = ctx.path("run", "averaged")
        names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        if names and "checkpoint" not in names:
            problems.append(f"averaged/ left holding {names} without its state file (readers warn and use them)")
        again = ctx.run(average(f"--model_dir={ctx.path('run')}", "--num_checkpoints=2"))
        if again.code != 0 or not os.path.isfile(os.path.join(folder, "checkpoint")):
            problems.append(f"the rerun exited {again.code}: {again.tail(2)}")
        return problems
    cases.append(Case("signals/average_checkpoints-SIGINT-while-tensorflow-starts", SIGNAL, averaging,
                      "Ctrl-C: 130, one error line, no half-written average", check=no_half_average,
                      signals=(Signal(int_, 2.0),)))

    def average_appears(ctx):
        argv = averaging(ctx)
        index = ctx.path("run", "averaged", "ckpt-12.index")
        ctx.dynamic_signals = (Signal(int_, 0.0, lambda: os.path.exists(index)),)
        return argv
    def listed_or_finished(ctx, result):
        """A signal that came after the work (as the interpreter exits) ends the process by itself."""
        problems = []
        if result.code == -signal.SIGINT and "averaged ckpt-6, ckpt-12 ->" not in result.stdout:
            problems.append("ended by SIGINT itself before it had averaged")
        return problems + no_half_average(ctx, result)
    cases.append(Case("signals/average_checkpoints-SIGINT-as-the-average-appears", SIGNAL, average_appears,
                      "Ctrl-C between the save of the average's files and their listing (a race: the signal may "
                      "also come after the work, as the interpreter exits): 130 and one error line, no average "
                      "left without its state file", check=listed_or_finished, signals=("dynamic",),
                      codes=(130, -signal.SIGINT), error_lines=(0, 1)))

    def evaluating(ctx):
        model_dir = ctx.copy(ctx.f.run)
        return train(f"--model_dir={model_dir}", *FINISHED, "--evaluate_only", "--eval_max_sentences=0")
    cases.append(Case("signals/evaluate_only-SIGINT", SIGNAL, evaluating, "Ctrl-C: 130, no traceback",
                      signals=(Signal(int_, 6.0),), error_lines=(0, 1)))

    def tokenizing(ctx):
        return pipelines("train_tokenizer", "--vocab_size=400", f"--tokenizer_dir={ctx.path('tok')}")

    def no_half_tokenizer(ctx, result):
        folder = ctx.path("tok")
        if os.path.isdir(folder) and os.listdir(folder) and not os.path.isfile(os.path.join(folder, "tokenizer.json")):
            return [f"tok/ half-written: {os.listdir(folder)}"]
        return []
    cases.append(Case("signals/pipelines-train_tokenizer-SIGINT", SIGNAL, tokenizing,
                      "Ctrl-C: 130, one error line, no half-written tokenizer", check=no_half_tokenizer,
                      signals=(Signal(int_, 3.0),)))
    return cases


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


def all_cases() -> list:
    return fixed_cases() + run_dir_cases() + flag_cases() + text_cases() + export_cases() + signal_cases()


def main(argv):
    del argv
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:  # a background job: children would ignore Ctrl-C
        signal.signal(signal.SIGINT, signal.default_int_handler)
    cases = [c for c in all_cases() if not FLAGS.only or FLAGS.only in c.name]
    names = [c.name for c in cases]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise SystemExit(f"duplicate case names: {duplicated}")
    work = os.path.abspath(FLAGS.work_dir or tempfile.mkdtemp(prefix="hostile_probe-"))
    os.makedirs(work, exist_ok=True)
    started = time.time()
    fixtures = Fixtures(os.path.join(work, "fixtures"))
    fixtures.build()
    built = time.time() - started
    guarded = {name: tree_digest(folder) for name, folder in fixtures.guarded().items()}
    records = []
    print(f"{len(cases)} cases in {work}/cases (fixtures ready after {built:.0f} s)", flush=True)
    for index, case in enumerate(cases, 1):
        folder = os.path.join(work, "cases", f"{index:03d}-" + re.sub(r"[^A-Za-z0-9._-]+", "_", case.name))
        if os.path.exists(folder):
            shutil.rmtree(folder)
        os.makedirs(folder)
        ctx = Ctx(fixtures, folder)
        argv = case.prepare(ctx)
        signals_ = getattr(ctx, "dynamic_signals", ()) if case.signals == ("dynamic",) else case.signals
        result = run(argv, cwd=folder, stdin=case.stdin, timeout=case.timeout, signals=signals_)
        problems = generic_problems(case, ctx, result, guarded)  # before any follow-up command
        if not result.timed_out and case.check:
            try:
                problems += case.check(ctx, result)
            except Exception as error:  # pylint: disable=broad-except  (a check that cannot run is a finding)
                problems.append(f"the check failed: {type(error).__name__}: {error}")
        if ctx.followups:
            problems += guarded_problems(fixtures, guarded)
        for followup in ctx.followups:
            if followup.traceback:
                problems.append(f"a Traceback in the follow-up {followup.command()[:120]}")
        held, reason = judge(case, ctx, result, problems)
        seconds = result.seconds + sum(f.seconds for f in ctx.followups)
        print(f"{'HELD ' if held else 'BROKE'} {index:3d} {case.name:<72} exit {str(result.code):>4} "
              f"{seconds:6.1f} s  {reason[:170]}", flush=True)
        records.append({
            "name": case.name, "expect": case.expect, "held": held, "reason": reason,
            "command": result.command(), "exit_code": result.code, "error_lines": result.errors,
            "traceback": result.traceback, "seconds": seconds, "signals_sent": result.sent,
            "problems": problems, "stderr_tail": result.tail(8), "folder": folder,
            "followups": [{"command": f.command(), "exit_code": f.code, "error_lines": f.errors,
                           "traceback": f.traceback, "stderr_tail": f.tail(4)} for f in ctx.followups],
        })
        if held:
            shutil.rmtree(folder, ignore_errors=True)
    held = sum(r["held"] for r in records)
    total = time.time() - started
    print(f"{len(records)} cases: {held} held, {len(records) - held} broke  ({total / 60:.1f} min in all, "
          f"fixtures {built:.0f} s)", flush=True)
    if FLAGS.out:
        write(os.path.abspath(FLAGS.out), json.dumps({
            "work_dir": work, "minutes": round(total / 60, 2), "fixture_seconds": round(built),
            "cases": len(records), "held": held, "broke": len(records) - held, "records": records}, indent=2,
            ensure_ascii=False))
    return 0 if held == len(records) else 1


if __name__ == "__main__":
    app.run(main)
