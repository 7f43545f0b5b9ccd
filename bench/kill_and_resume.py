"""Kills training and export at random moments: no work is lost, no half-written file is in view.

    python bench/kill_and_resume.py                          # 20 training kills, then 10 export kills
    python bench/kill_and_resume.py --kills=3 --export_kills=2 --keep   # a short run; keeps WORK_DIR

Training: one command, `python -m keras_transformer.train` with a tiny recipe (written to
WORK_DIR/recipe.flags; a checkpoint every 3 updates) and MODEL_DIR=WORK_DIR/run, is started
--kills times and SIGKILLed --min_seconds to --max_seconds after each start (drawn from
--seed): during start-up, the first run's tokenizer training, the first update's tracing, an
update or a checkpoint save. Right after each kill the checkpoint state file must parse and
name a checkpoint whose files exist. The next start of the same command is the resume: it
must say "resumed at step N" with N the step that state file named right after the kill
("starting at step 0" if none), and before its first update it must have removed what the
kill left half-written (TensorFlow's `ckpt-N_temp/` folders, `.tmp-*` files) and completed
tokenizer/ (tokenizer.json written last). A last start with --train_steps=<last saved step
+ 3> must run to that step and exit 0, leaving no leftover.

Export: `python -m keras_transformer.export --model_dir=MODEL_DIR --export_dir=WORK_DIR/export` is started
--export_kills times and SIGKILLed --export_min_seconds to --export_max_seconds after each
start (tracing, saving into a hidden `.tmp-<version>-<host>-<pid>-<hex>/` folder, the op check
in a child interpreter, the rename to `<version>/`). The kill ends the exporter first, as
`kill -9` would, then the op-check child it left. After each kill every integer-named folder
must be a complete SavedModel (saved_model.pb, variables/variables.index); a last export must
exit 0, after which no temporary folder of a dead process may remain.

Prints one line per start, then markdown tables; exits 1 if an invariant failed (WORK_DIR is
then kept). Each process's stdout and stderr are in WORK_DIR/logs/. Linux only (/proc).
"""

from __future__ import annotations

import glob
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Optional

from absl import app, flags

from keras_transformer.export import versions
from keras_transformer.run_dir import layout
from keras_transformer.pipelines import tokenizers

FLAGS = flags.FLAGS
flags.DEFINE_integer("kills", 20, "Training starts to SIGKILL.", lower_bound=0)
flags.DEFINE_integer("export_kills", 10, "Export starts to SIGKILL.", lower_bound=0)
flags.DEFINE_integer("seed", 0, "Seed of the kill moments.")
flags.DEFINE_string("work_dir", None, "An empty or new scratch folder (default: a new temporary one).")
flags.DEFINE_bool("keep", False, "Keep WORK_DIR at the end (it is always kept when an invariant failed).")
flags.DEFINE_float("min_seconds", 2.0, "Earliest training kill, seconds after the start.")
flags.DEFINE_float("max_seconds", 60.0, "Latest training kill, seconds after the start: past start-up and "
                   "the tracing of the first update, so that kills land mid-update and mid-save too.")
flags.DEFINE_float("export_min_seconds", 1.0, "Earliest export kill, seconds after the start.")
flags.DEFINE_float("export_max_seconds", 40.0, "Latest export kill, seconds after the start: about an "
                   "export's whole duration, so that kills land in each of its phases.")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
TIMEOUT = 900  # seconds for a run that is not killed
# The tests' tiny recipe, saving every 3 updates and logging every update (later lines win).
with open(os.path.join(ROOT, "configs", "tiny.flags"), encoding="utf-8") as _file:
    RECIPE = _file.read() + """\
--checkpoint_every_steps=3
--eval_every_steps=0
--eval_max_sentences=-1
--log_every_steps=1
--train_steps=100000
"""
CHECKPOINT_DIR, TOKENIZER_DIR = layout.CHECKPOINT_DIR, layout.TOKENIZER_DIR
TOKENIZER_FILE = tokenizers.CONFIG_FILE

_RESUME = re.compile(r"resumed at step (\d+)|starting at (step 0)")
_STEP = re.compile(r"^step (\d+)/", re.MULTILINE)
_REMOVED = "removed what an interrupted run left half-written: "


class Child:
    """A command started in its own process group, its stdout and stderr written to files.
    (Its own group: a Ctrl-C of this script does not reach it; `main` kills what still runs.)"""

    started_children: list["Child"] = []

    def __init__(self, argv: list[str], log_prefix: str):
        self.stdout_path, self.stderr_path = log_prefix + ".out", log_prefix + ".err"
        with open(self.stdout_path, "w", encoding="utf-8") as out, open(self.stderr_path, "w", encoding="utf-8") as err:
            self.process = subprocess.Popen(argv, cwd=ROOT, env=ENV, stdout=out, stderr=err, start_new_session=True)
        self.started = time.monotonic()
        Child.started_children.append(self)

    @property
    def pid(self) -> int:
        return self.process.pid

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def running(self) -> bool:
        return self.process.poll() is None

    def stdout(self) -> str:
        with open(self.stdout_path, encoding="utf-8", errors="replace") as file:
            return file.read()

    def stderr_tail(self, lines: int = 15) -> str:
        with open(self.stderr_path, encoding="utf-8", errors="replace") as file:
            return "\n".join(file.read().splitlines()[-lines:])

    def helpers(self) -> list[int]:
        """The other live processes of its group (e.g. the export's op-check interpreter)."""
        return sorted(pid for pid in process_group(self.pid) if pid != self.pid)

    def kill(self) -> list[int]:
        """SIGKILLs the process, then each helper it left running; returns the helpers' pids."""
        os.kill(self.pid, signal.SIGKILL)
        helpers = self.helpers()  # before the wait: the unreaped pid cannot be reused meanwhile
        for pid in helpers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()
        return helpers

    def wait(self, seconds: float) -> Optional[int]:
        """The exit status, or None (and the process killed) after `seconds`."""
        try:
            return self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.kill()
            return None


def process_group(pgid: int) -> set[int]:
    """The pids whose process group is `pgid` (from /proc/<pid>/stat)."""
    members = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as file:
                stat = file.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid:
            members.add(int(name))
    return members


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# Training directory checks -----------------------------------------------------------


def latest_step(model_dir: str) -> Optional[int]:
    """The step of the checkpoint the state file names first, or None (as tests/keras_transformer/test_train.py)."""
    state = os.path.join(model_dir, CHECKPOINT_DIR, "checkpoint")
    if not os.path.exists(state):
        return None
    with open(state, encoding="utf-8") as file:
        first = file.read().splitlines()[0]  # model_checkpoint_path: "ckpt-N"
    return int(first.split("ckpt-")[1].rstrip('"'))


def state_problem(model_dir: str) -> Optional[str]:
    """None if MODEL_DIR/checkpoints/checkpoint is missing with no checkpoint on disk, or parses
    (one `key: value` text-proto field a line, model_checkpoint_path first) and names a
    checkpoint whose .index and data files exist; else one line saying what is wrong."""
    directory = os.path.join(model_dir, CHECKPOINT_DIR)
    state = os.path.join(directory, "checkpoint")
    if not os.path.exists(state):
        found = glob.glob(os.path.join(directory, "ckpt-*.index"))
        return f"no state file beside {len(found)} checkpoint(s)" if found else None
    with open(state, encoding="utf-8", errors="replace") as file:
        lines = file.read().splitlines()
    fields = [re.fullmatch(r'(\w+): ("[^"]*"|[-+0-9.eE]+)', line) for line in lines]
    if not lines or not all(fields) or fields[0][1] != "model_checkpoint_path":
        return f"state file does not parse: {lines[:2]!r}"
    prefix = os.path.join(directory, fields[0][2].strip('"'))
    if not os.path.isfile(prefix + ".index"):
        return f"{os.path.basename(prefix)}.index is missing"
    if not glob.glob(glob.escape(prefix) + ".data-?????-of-?????"):
        return f"{os.path.basename(prefix)}.data-* is missing"
    return None


def leftovers(model_dir: str) -> list[str]:
    """Half-written things in view, relative to MODEL_DIR: `*_temp` folders, `.tmp-*` files or
    folders anywhere, and a tokenizer folder without its tokenizer.json."""
    found = []
    for root, folders, files in os.walk(model_dir):
        for name in folders + files:
            if name.startswith(".tmp-") or (name.endswith("_temp") and name in folders):
                found.append(os.path.relpath(os.path.join(root, name), model_dir))
    tokenizer = os.path.join(model_dir, TOKENIZER_DIR)
    if os.path.isdir(tokenizer):
        sides = [tokenizer] + [os.path.join(tokenizer, s) for s in ("source", "target")
                               if os.path.isdir(os.path.join(tokenizer, s))]
        complete = (os.path.isfile(os.path.join(tokenizer, TOKENIZER_FILE))
                    or (len(sides) == 3 and all(os.path.isfile(os.path.join(s, TOKENIZER_FILE)) for s in sides[1:])))
        if not complete:
            found.append(f"{TOKENIZER_DIR}/ without {TOKENIZER_FILE}")
    return sorted(found)


def removed_by(stdout: str) -> set[str]:
    """The paths a start's "removed what an interrupted run left half-written" line lists."""
    removed = set()
    for line in stdout.splitlines():
        if line.startswith(_REMOVED):
            removed.update(line[len(_REMOVED):].split(", "))
    return removed


def _show(step: Optional[int]) -> str:
    return "none" if step is None else str(step)


def resumed_at(stdout: str) -> Optional[int]:
    match = _RESUME.search(stdout)
    return None if match is None else int(match[1] or 0)


def last_update(stdout: str) -> Optional[int]:
    steps = _STEP.findall(stdout)
    return int(steps[-1]) if steps else None


def still_present(pending: list[str], model_dir: str, stdout: str) -> list[str]:
    """What a kill left (`pending`) that a start, now training, neither removed nor completed.
    A path its cleanup line lists counts as removed even if it exists again (the new run's own
    save of the same step)."""
    now, removed = set(leftovers(model_dir)), removed_by(stdout)
    return [path for path in pending if path in now and path not in removed]


# Export directory checks -------------------------------------------------------------


def incomplete_versions(export_dir: str) -> list[str]:
    """Integer-named folders without saved_model.pb or variables/variables.index."""
    bad = []
    for version in versions.versions(export_dir):
        path = os.path.join(export_dir, str(version))
        if not (os.path.isfile(os.path.join(path, versions.SAVED_MODEL_FILE))
                and os.path.isfile(os.path.join(path, "variables", "variables.index"))):
            bad.append(str(version))
    return bad


def temporary_folders(export_dir: str) -> list[str]:
    if not os.path.isdir(export_dir):
        return []
    return sorted(name for name in os.listdir(export_dir) if name.startswith(".tmp-"))


def writer_pid(name: str) -> Optional[int]:
    """The pid in `.tmp-<version>-<host>-<pid>-<hex>`, or None for another name."""
    parts = name.rsplit("-", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def export_phase(child: Child, export_dir: str) -> str:
    """Where a running export is: before its temporary folder, saving into it, or in the op check."""
    own = [name for name in temporary_folders(export_dir) if writer_pid(name) == child.pid]
    if not own:
        return "start-up/tracing"
    if child.helpers():
        return "op check"
    if os.path.isfile(os.path.join(export_dir, own[0], versions.SAVED_MODEL_FILE)):
        return "after saving"
    return "saving"


# The two experiments -------------------------------------------------------------------


def kill_training(argv: list[str], model_dir: str, logs: str, rng: random.Random, failures: list[str]) -> dict:
    """--kills starts of `argv`, each SIGKILLed at a random moment, then the last start run to
    its end; returns the counts of the table."""
    counts = dict.fromkeys(("kills", "at_last_saved", "elsewhere", "before_resume_line", "failed",
                            "left_after_kill", "left_after_start", "state_problems"), 0)
    phases: dict[str, int] = {}
    expected: Optional[int] = None  # the step the state file named right after the previous kill
    pending: list[str] = []  # what the previous kill left half-written
    for index in range(FLAGS.kills):
        delay = rng.uniform(FLAGS.min_seconds, FLAGS.max_seconds)
        child = Child(argv, os.path.join(logs, f"train-{index:02d}"))
        unclean = None  # checked once, at the new run's first update
        while child.running() and child.elapsed() < delay:
            time.sleep(0.05)
            if unclean is None and index and _STEP.search(out := child.stdout()):
                unclean = still_present(pending, model_dir, out)
        saved_before = latest_step(model_dir)
        status = None if child.running() else child.process.returncode
        seconds = child.elapsed()
        if status is None:
            child.kill()
            counts["kills"] += 1
        stdout = child.stdout()
        saved_after, problem, left = latest_step(model_dir), state_problem(model_dir), leftovers(model_dir)
        resumed, update = resumed_at(stdout), last_update(stdout)
        phase = ("start-up" if resumed is None else "before the first update" if update is None
                 else "saving" if any(path.endswith("_temp") for path in left) else "training")
        line = f"train {index}: "
        if status is None:
            phases[phase] = phases.get(phase, 0) + 1
            line += f"killed after {seconds:.1f} s ({phase}" + (f", update {update}" if update else "") + ")"
        else:
            counts["failed"] += 1
            line += f"exited by itself with status {status}"
            failures.append(f"training start {index} exited with status {status}:\n{child.stderr_tail()}")
        if index:  # a start after a kill: the resume under test
            if resumed is None:
                counts["before_resume_line"] += status is None  # else counted as failed above
            elif resumed == (expected or 0):
                counts["at_last_saved"] += 1
            else:
                counts["elsewhere"] += 1
                failures.append(f"training start {index} resumed at step {resumed}, the last saved step was "
                                f"{expected or 0}")
            line += f"; resumed at {_show(resumed)} (last saved {_show(expected)})"
            if unclean is not None:
                counts["left_after_start"] += len(unclean)
                if unclean:
                    failures.append(f"training start {index} began training with {', '.join(unclean)} still there")
                line += f"; cleaned {len(pending) - len(unclean)} of {len(pending)}"
        line += f"; saved step {_show(saved_before)} before the kill, {_show(saved_after)} after"
        if problem:
            counts["state_problems"] += 1
            failures.append(f"after training kill {index}: {problem}")
            line += f"; STATE: {problem}"
        if left:
            line += f"; left: {', '.join(left)}"
        counts["left_after_kill"] += len(left)
        print(line, flush=True)
        expected, pending = saved_after, left

    # The last start: run to the last saved step + 3 and end by itself.
    target = (expected or 0) + 3
    child = Child(argv + [f"--train_steps={target}"], os.path.join(logs, "train-final"))
    status = child.wait(TIMEOUT)
    stdout = child.stdout()
    resumed, left, problem = resumed_at(stdout), leftovers(model_dir), state_problem(model_dir)
    ended = f'"step": {target},' in stdout and latest_step(model_dir) == target
    print(f"train final (--train_steps={target}): exit status {status}; resumed at {_show(resumed)} (last saved "
          f"{_show(expected)}); ended at step {latest_step(model_dir)}; left: {', '.join(left) or 'nothing'}",
          flush=True)
    counts["final"] = f"exit {status}, resumed at {resumed}, ended at {latest_step(model_dir)} of {target}"
    if FLAGS.kills:
        if resumed == (expected or 0):
            counts["at_last_saved"] += 1
        elif resumed is not None:
            counts["elsewhere"] += 1
            failures.append(f"the final start resumed at step {resumed}, the last saved step was {expected or 0}")
        counts["left_after_start"] += len(still_present(pending, model_dir, stdout))
    if status != 0 or not ended or resumed is None:
        counts["failed"] += 1
        failures.append(f"the final training start (--train_steps={target}) exited with status {status}, "
                        f"ended at step {latest_step(model_dir)}:\n{child.stderr_tail()}")
    if left or problem:
        failures.append(f"after the final training run: {problem or ''} {', '.join(left)}".strip())
        counts["left_after_start"] += len([path for path in left if path not in pending])
    counts["phases"] = ", ".join(f"{name} {count}" for name, count in sorted(phases.items())) or "-"
    return counts


def kill_export(argv: list[str], export_dir: str, logs: str, rng: random.Random, failures: list[str]) -> dict:
    """--export_kills starts of `argv`, each SIGKILLed at a random moment, then one run to its end."""
    counts = dict.fromkeys(("kills", "finished", "incomplete", "temp_after_kill"), 0)
    for index in range(FLAGS.export_kills):
        delay = rng.uniform(FLAGS.export_min_seconds, FLAGS.export_max_seconds)
        child = Child(argv, os.path.join(logs, f"export-{index:02d}"))
        while child.running() and child.elapsed() < delay:
            time.sleep(0.05)
        if child.running():
            phase, seconds = export_phase(child, export_dir), child.elapsed()
            helpers = child.kill()
            counts["kills"] += 1
            line = f"export {index}: killed after {seconds:.1f} s ({phase}" + (
                f"; then its helper pid {', '.join(map(str, helpers))}" if helpers else "") + ")"
        else:
            status = child.process.returncode
            line = f"export {index}: exited by itself after {child.elapsed():.1f} s with status {status}"
            if status == 0:
                counts["finished"] += 1
            else:
                failures.append(f"export start {index} exited with status {status}:\n{child.stderr_tail()}")
        bad, temporary = incomplete_versions(export_dir), temporary_folders(export_dir)
        counts["incomplete"] += len(bad)
        counts["temp_after_kill"] += len(temporary)
        if bad:
            failures.append(f"after export kill {index}: incomplete version folder(s) {', '.join(bad)}")
        removed = sum(text.startswith("removed ") for text in child.stdout().splitlines())
        print(f"{line}; versions {versions.versions(export_dir)}" + (f", INCOMPLETE {bad}" if bad else "")
              + f"; removed {removed} stale; temporary: {', '.join(temporary) or 'none'}", flush=True)

    child = Child(argv, os.path.join(logs, "export-final"))
    status = child.wait(TIMEOUT)
    bad = incomplete_versions(export_dir)
    stale = [name for name in temporary_folders(export_dir) if not alive(writer_pid(name) or 0)]
    removed = sum(text.startswith("removed ") for text in child.stdout().splitlines())
    print(f"export final: exit status {status}; versions {versions.versions(export_dir)}; removed {removed} stale; "
          f"temporary left: {', '.join(stale) or 'none'}", flush=True)
    if status != 0:
        failures.append(f"the final export exited with status {status}:\n{child.stderr_tail()}")
    if bad:
        failures.append(f"after the final export: incomplete version folder(s) {', '.join(bad)}")
    if stale:
        failures.append(f"after the final export: temporary folders of dead exports remain: {', '.join(stale)}")
    counts.update(final_status=status, incomplete=counts["incomplete"] + len(bad), temp_after_final=len(stale),
                  published=len(versions.versions(export_dir)) - len(bad))
    return counts


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    if FLAGS.min_seconds > FLAGS.max_seconds or FLAGS.export_min_seconds > FLAGS.export_max_seconds:
        raise app.UsageError("--min_seconds > --max_seconds or --export_min_seconds > --export_max_seconds")
    work = FLAGS.work_dir or tempfile.mkdtemp(prefix="kill_and_resume-")
    os.makedirs(work, exist_ok=True)
    if os.listdir(work):
        raise app.UsageError(f"--work_dir={work} is not empty")
    logs, model_dir, export_dir = (os.path.join(work, name) for name in ("logs", "run", "export"))
    os.makedirs(logs)
    recipe = os.path.join(work, "recipe.flags")
    with open(recipe, "w", encoding="utf-8") as file:
        file.write(RECIPE)
    train = [sys.executable, "-m", "keras_transformer.train", f"--flagfile={recipe}", f"--model_dir={model_dir}"]
    export = [sys.executable, "-m", "keras_transformer.export", f"--model_dir={model_dir}", f"--export_dir={export_dir}"]
    print("command: python bench/kill_and_resume.py " + " ".join(sys.argv[1:]), flush=True)
    print(f"training: {' '.join(train[1:])} (cwd {ROOT}, TF_CPP_MIN_LOG_LEVEL=3)\nexport: {' '.join(export[1:])}\n"
          f"recipe: {' '.join(line for line in RECIPE.splitlines() if line.startswith('--'))}", flush=True)

    rng, failures = random.Random(FLAGS.seed), []
    started = time.monotonic()
    try:
        t = kill_training(train, model_dir, logs, rng, failures)
        e = kill_export(export, export_dir, logs, rng, failures)
    finally:  # e.g. Ctrl-C: end the command still running
        for child in Child.started_children:
            if child.running():
                child.kill()

    print(f"\nkill moments (training): {t['phases']}; {(time.monotonic() - started) / 60:.1f} minutes in all")
    print("\n| training | kills | resumed at the last saved step | resumed elsewhere | killed before the resume "
          "line | failed | state file problems | leftovers right after a kill | leftovers after the next start "
          "| final run |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    print(f"| `keras_transformer.train` | {t['kills']} | {t['at_last_saved']} | {t['elsewhere']} | "
          f"{t['before_resume_line']} | {t['failed']} | {t['state_problems']} | {t['left_after_kill']} | "
          f"{t['left_after_start']} | {t['final']} |")
    print("\n| export | kills | finished before the kill | complete versions published | incomplete versions "
          "visible | temp folders right after kills | temp folders after the final export | final export |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    print(f"| `python -m keras_transformer.export` | {e['kills']} | {e['finished']} | {e['published']} | {e['incomplete']} | "
          f"{e['temp_after_kill']} | {e['temp_after_final']} | exit {e['final_status']} |")
    if failures:
        print("\nFAILED:\n" + "\n".join(f"- {failure}" for failure in failures))
        print(f"kept {work}")
        return 1
    print("\nevery invariant held")
    if FLAGS.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    app.run(main)
