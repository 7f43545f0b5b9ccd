"""Compute robustness: the recipe run at 1x, 2x and 4x its update budget, by one command.

The check on the Multi30k recipe (`configs/multi30k_en_de.flags`): run at 1x, 2x and 4x its
update budget with the same seed, neither dev BLEU nor test2016 BLEU drops by more than 0.3 as
compute grows, and the 4x run is the best of the three, on both kinds of host. This makes that
table (a host's figures go to docs/results.md#compute-robustness); host D's, with seed 1:

    python bench/compute_robustness.py --flagfile=configs/multi30k_en_de.flags \\
        --data_dir=../shared/data/multi30k --tfds_dir=/tmp/tfds --out_dir=runs/compute_robustness \\
        --seed=1 --score

The recipe is given as the training command takes it, `--flagfile=RECIPE` (default
configs/multi30k_en_de.flags); every flag not defined here goes to each training command after
the recipe's (e.g. `--precision=float32`, or `--train_steps=N --cooldown_steps=C` for another
budget), and the budget B (`--train_steps`) and cool-down C (`--cooldown_steps`) are read from
them as that command reads them.

One long run and branches of it
-------------------------------
Equation (3) (section 5.3) does not depend on the budget; the recipe's cool-down does
(`--cooldown_steps=C`: the last C of `--train_steps=B` updates bring the rate linearly to 0,
`keras_transformer/training/schedules.py`). So with one seed and one data order, runs of B, 2B
and 4B updates follow one path until each one's cool-down starts at its budget - C. The table is:

1. OUT_DIR/x4: the recipe with `--train_steps=4B`, every checkpoint kept (`--keep_checkpoints`
   counted from the recipe's saves, with spares for resumes);
2. for each smaller multiple m, OUT_DIR/xm: the long run's directory as it stood at update mB - C
   (its checkpoints up to there: `keras_transformer.training.checkpoints.copy_until`, hard links
   where the filesystem allows; its dev history up to there:
   `keras_transformer.training.reporting.copy_history`; its best checkpoints as they stood:
   `keras_transformer.run_dir.best_checkpoints.rebuild`), then the recipe's command with
   `--train_steps=mB`, which resumes there and makes the cool-down;
3. with `--score`, each run scored by `bench/multi30k_scores.py --decodings=... --test` (the
   run's model: the average of its best checkpoints) into OUT_DIR/xm.test_scores;
4. the table (printed, and OUT_DIR/table.md): multiple, updates, training minutes, validation and
   test_2016_flickr BLEU cased and lowercased Moses-tokenized, and the two checks above.

Every run is `python -m keras_transformer.train` in a child process (`keras_transformer.tasks.training_process`),
its command the first line of OUT_DIR/xm.log, so a user can repeat it. A branch is the shorter
run as it would be had it stopped at its branch point and been resumed: a fresh run of its
budget has its dev figures up to the branch point to the last digit, and after it differs by
the data order only (a resumed run's is a fresh shuffle seeded by the seed and the update,
`tasks/training.py`; the long run's too, where it resumed). A branch's training minutes count
its own updates only.

Early stopping. The recipe's patience (`--early_stopping_patience`) starts the cool-down where it
runs out: at update S the run plans to stop at S + C (history.json's note,
`keras_transformer.training.trainer.planned_end`). If the long run's patience ran out at
S <= mB - C, a run of budget mB would have seen the same dev scores up to S (the same path), run
out of patience there too, cooled down over the same C updates and stopped at S + C <= mB: it
is the long run, update for update. Such a row is not trained; it is the long run's, and its
line says so. Where the patience ran out after mB - C, the branch is the run (its own patience
acts within its own cool-down).

Running the same command again goes on where it stopped: each training command resumes (a
finished one trains nothing), a branch made before is kept when it is still the long run's
branch (OUT_DIR/xm.branch.json and its dev history say so; a cut a kill interrupted is made
again), and a run scored before (its test row there) is not scored again. Refused with one
`error:` line and exit 2 before any training: a recipe without a cool-down or with a time
budget, multiples that do not grow to the largest last, a branch point that is no checkpoint
step of the long run, a cool-down that leaves a run no update before it, a --model_dir, and an
OUT_DIR/x4 trained with another seed or budget.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shlex
import shutil
import sys
from typing import Callable, Optional, Sequence

from absl import flags

import child
from keras_transformer import cli
from keras_transformer.files import command_files, json_files
from keras_transformer.config import TrainingConfig

FLAGS = flags.FLAGS
flags.DEFINE_string("out_dir", None, "Holds the runs x1/, x2/, x4/ (one a multiple), their logs xN.log, scores "
                    "xN.test_scores and the table, table.md.")
flags.DEFINE_list("multiples", ["1", "2", "4"], "Budgets as multiples of the recipe's --train_steps, growing, the "
                  "largest (the long run the others branch from) last.")
flags.DEFINE_integer("seed", 1, "Every run's --seed (issue 28's runs: 1).")
flags.DEFINE_string("data_dir", None, "The training command's --data_dir (and multi30k_scores.py's).")
flags.DEFINE_string("tfds_dir", None, "The training command's --tfds_dir.")
flags.DEFINE_boolean("score", False, "Score each run with bench/multi30k_scores.py --test into OUT_DIR/xN.test_scores "
                     "(the test split: once per recipe).")
flags.DEFINE_list("decodings", ["5:1.4"], "multi30k_scores.py's beam:alpha settings; the first also translates the "
                  "test split (the recipe's search, chosen on validation).")
flags.mark_flag_as_required("out_dir")

BENCH = os.path.dirname(os.path.abspath(__file__))
DEFAULT_RECIPE = os.path.join(os.path.dirname(BENCH), "configs", "multi30k_en_de.flags")
SCORES = os.path.join(BENCH, "multi30k_scores.py")
SPARE_CHECKPOINTS = 20  # the long run's checkpoints beyond its scheduled saves: one a resume
# The training settings the table depends on: the training command's flag -> TrainingConfig's field.
SETTINGS = {**{name: name for name in ("train_steps", "cooldown_steps", "max_train_minutes", "checkpoint_every_steps",
                                       "eval_every_steps", "keep_checkpoints", "keep_best_checkpoints",
                                       "best_checkpoint_metric", "early_stopping_patience")},
            "average_checkpoints": "average_last"}
_print = functools.partial(print, flush=True)


@dataclasses.dataclass(frozen=True)
class Run:
    """One row: `multiple` times the recipe's budget, `train_steps` updates; `branch_at`, the
    long run's update it starts from (None: the long run)."""

    multiple: int
    train_steps: int
    branch_at: Optional[int] = None

    @property
    def name(self) -> str:
        return f"x{self.multiple}"


# The plan (no TensorFlow) ------------------------------------------------------------------


def recipe_settings(train_args: Sequence[str]) -> TrainingConfig:
    """The training settings the table depends on, as the training command reads them from
    `train_args` (the recipe's flags, then the others given; the last of a flag counts), the
    command's defaults (`TrainingConfig`'s) for the others; a one-line ValueError for a value
    that is not one."""
    defaults = {field.name: field.default for field in dataclasses.fields(TrainingConfig)}
    values = {}
    for arg in train_args:
        match = re.fullmatch(r"--?(\w+)(=(.*))?", arg)
        if not match or match[1] not in SETTINGS:
            continue
        if match[2] is None:
            raise ValueError(f"{arg}: give it as --{match[1]}=VALUE")
        field = SETTINGS[match[1]]
        try:
            values[field] = type(defaults[field])(match[3])
        except ValueError:
            raise ValueError(f"{arg}: not a {type(defaults[field]).__name__}") from None
    return TrainingConfig(**values)


def parse_multiples(values: Sequence[str]) -> list[int]:
    """--multiples as whole numbers >= 1, growing (the largest, the long run, last)."""
    try:
        multiples = [int(value) for value in values]
    except ValueError:
        raise ValueError(f"--multiples={','.join(values)}: give whole numbers, e.g. 1,2,4") from None
    if not multiples or min(multiples) < 1 or any(b <= a for a, b in zip(multiples, multiples[1:])):
        raise ValueError(f"--multiples={','.join(values)}: give multiples >= 1 that grow, the largest last (the long "
                         "run the others branch from), e.g. 1,2,4")
    return multiples


def saved_steps(training: TrainingConfig, last: int) -> set[int]:
    """The updates at which a run of `training`'s settings and `last` updates saves a checkpoint:
    every --checkpoint_every_steps, every evaluation when it keeps the best checkpoints (the
    trainer saves the weights it evaluates), and the last (besides any a resume or the clock adds)."""
    steps = {last}
    if training.checkpoint_every_steps:
        steps.update(range(training.checkpoint_every_steps, last + 1, training.checkpoint_every_steps))
    if training.keep_best_checkpoints and training.eval_every_steps:
        steps.update(range(training.eval_every_steps, last + 1, training.eval_every_steps))
    return steps


def plan_runs(multiples: Sequence[int], training: TrainingConfig) -> list[Run]:
    """The table's runs, the long run last, each shorter one branching at its budget less the
    cool-down; a one-line ValueError for a configuration that cannot make the table."""
    budget, cooldown = training.train_steps, training.cooldown_steps
    if not cooldown:
        raise ValueError("the recipe has no cool-down (--cooldown_steps=0): runs of any budget then follow one path "
                         "and this bench has no branch point; give --cooldown_steps")
    if training.max_train_minutes:
        raise ValueError(f"--max_train_minutes={training.max_train_minutes:g}: a time budget stops runs by the "
                         "clock, not by updates; give --max_train_minutes=0")
    longest = multiples[-1] * budget
    saved = saved_steps(training, longest)
    runs = []
    for multiple in multiples[:-1]:
        steps = multiple * budget
        start = steps - cooldown
        if start < 1:
            raise ValueError(f"the {multiple}x run ({steps} updates) would cool down over all of them "
                             f"(--cooldown_steps={cooldown}): give a shorter cool-down or larger multiples")
        if start not in saved:
            every = f"--checkpoint_every_steps={training.checkpoint_every_steps}" + (
                f", or --eval_every_steps={training.eval_every_steps} with --keep_best_checkpoints"
                if training.keep_best_checkpoints and training.eval_every_steps else "")
            raise ValueError(f"the {multiple}x run branches at update {start} ({steps} - --cooldown_steps={cooldown}), "
                             f"where the long run saves no checkpoint ({every}): make it a multiple")
        runs.append(Run(multiple, steps, start))
    return runs + [Run(multiples[-1], longest)]


def same_as_long_run(run: Run, long_end: Optional[int], longest: int) -> bool:
    """Whether the run of `run.train_steps` updates is the long run itself: the long run's patience
    ran out (and its cool-down started) at or before `run`'s branch point, so that it stopped at
    `long_end` (`planned_end` of its history) <= `run.train_steps` (module docstring)."""
    return long_end is not None and long_end < longest and long_end <= run.train_steps


def long_run_keep(training: TrainingConfig, longest: int) -> int:
    """--keep_checkpoints of the long run: every checkpoint it saves, and spares."""
    return max(training.keep_checkpoints, len(saved_steps(training, longest)) + SPARE_CHECKPOINTS)


# The runs ----------------------------------------------------------------------------------


class Stopped(Exception):
    """A child process ended without finishing; `exit_code` is this command's."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def train(out_dir: str, run: Run, args: Sequence[str], log: Callable[[str], None]) -> Optional[dict]:
    """`run`'s training command (resumes, or trains nothing when finished), its lines appended to
    OUT_DIR/<name>.log after its command line, and passed to `log`; its summary line's JSON."""
    from keras_transformer.tasks import training_process  # pylint: disable=g-import-not-at-top

    command = [*args, f"--seed={FLAGS.seed}", *data_flags(), f"--model_dir={os.path.join(out_dir, run.name)}"]
    log_path = os.path.join(out_dir, run.name + ".log")
    with open(log_path, "a", encoding="utf-8") as file:
        def tee(line: str) -> None:
            file.write(line + "\n")
            file.flush()
            log(f"[{run.name}] {line}")

        tee("command: " + shlex.join(["python", "-m", "keras_transformer.train", *command]))
        summary, code = training_process.run_training(command, tee)
    if code:
        stopped = {130: "SIGINT", 143: "SIGTERM"}.get(code)
        raise Stopped(f"{run.name}: its run " + (f"stopped by {stopped}" if stopped else f"failed (exit {code})")
                      + f" ({log_path}); run the same command to go on", code)
    return summary


def data_flags() -> list[str]:
    return [f"--{name}={FLAGS[name].value}" for name in ("data_dir", "tfds_dir") if FLAGS[name].value]


def check_long_run(model_dir: str, run: Run) -> None:
    """A one-line ValueError when `model_dir` holds a run of another seed or budget (resuming it
    would mix two paths)."""
    from keras_transformer.run_dir import layout  # pylint: disable=g-import-not-at-top

    if not os.path.isfile(os.path.join(model_dir, layout.CONFIG_FILE)):
        return
    recorded = layout.read_settings(model_dir).get("training", {})
    wanted = {"seed": FLAGS.seed, "train_steps": run.train_steps}
    if any(recorded.get(key) != value for key, value in wanted.items()):
        raise ValueError(f"{model_dir}: a run of seed {recorded.get('seed')} and {recorded.get('train_steps')} "
                         f"updates, not seed {FLAGS.seed} and {run.train_steps}: move it away, or give another "
                         "--out_dir")


def branch(out_dir: str, run: Run, long_run: Run, training: TrainingConfig, log: Callable[[str], None]) -> None:
    """OUT_DIR/<run> as the long run's directory stood at `run.branch_at` (kept when made before
    and still the long run's branch). Made in a hidden folder, renamed into place when whole."""
    from keras_transformer.run_dir import averaging, best_checkpoints, layout  # pylint: disable=g-import-not-at-top
    from keras_transformer.training import checkpoints, reporting  # pylint: disable=g-import-not-at-top
    from keras_transformer.training.trainer import planned_end  # pylint: disable=g-import-not-at-top

    target, source, at = os.path.join(out_dir, run.name), os.path.join(out_dir, long_run.name), run.branch_at
    marker = os.path.join(out_dir, run.name + ".branch.json")
    record = {"branch_of": long_run.name, "at_update": at, "train_steps": run.train_steps, "seed": FLAGS.seed}
    before = [r for r in reporting.read_eval_history(source) if r["step"] <= at]
    if os.path.isdir(target):
        check_branch(target, marker, record, before)
        log(f"{run.name}: branched from {long_run.name} at update {at:,} before; its run goes on")
        return
    partial = os.path.join(out_dir, f".{run.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)  # a cut a kill interrupted
    os.makedirs(partial)
    shutil.copytree(os.path.join(source, layout.TOKENIZER_DIR), os.path.join(partial, layout.TOKENIZER_DIR))
    json_files.write_json_atomically(os.path.join(partial, layout.CONFIG_FILE), layout.read_settings(source))
    copies = {averaging.checkpoint_step(prefix): prefix for prefix in checkpoints.copy_until(source, partial, at)}
    missing = sorted(step for step in saved_steps(training, long_run.train_steps) - set(copies) if step <= at)
    if missing:
        raise ValueError(f"{source}: its checkpoint of update {missing[0]} is gone (rotated away, or deleted), so "
                         f"{run.name} cannot start from update {at} as the run stood: train the long run again in "
                         "another --out_dir")
    history = reporting.copy_history(source, partial, at)
    assert planned_end(history) is None, "a cool-down before the branch point: same_as_long_run"
    best = []
    if training.keep_best_checkpoints:
        best = best_checkpoints.rebuild(os.path.join(partial, layout.BEST_DIR), training.keep_best_checkpoints,
                                        training.best_checkpoint_metric,
                                        [(r["step"], r, copies[r["step"]]) for r in history])
    json_files.write_json_atomically(marker, record)
    os.rename(partial, target)
    log(f"{run.name}: {long_run.name} as it stood at update {at:,}: checkpoints {min(copies):,}..{at:,} "
        f"({len(copies)}), {len(history)} dev evaluations, best {[entry['step'] for entry in best]}; the recipe's "
        f"command goes on to {run.train_steps:,} (its cool-down from update {at + 1:,})")


def check_branch(target: str, marker: str, record: dict, before: list[dict]) -> None:
    """A one-line ValueError unless `target` is the branch `record` describes, made before: its
    record (`marker`) says so and its dev history up to the branch point is the long run's."""
    from keras_transformer.training import reporting  # pylint: disable=g-import-not-at-top

    made = None
    if os.path.isfile(marker):
        with open(marker, encoding="utf-8") as file:
            made = json.load(file)
    if made != record:
        raise ValueError(f"{target}: not the branch this table makes ({record}; {marker} says {made}): move it away, "
                         "or give another --out_dir")
    ours = [r for r in reporting.read_eval_history(target) if r["step"] <= record["at_update"]]
    if ours != before:
        step = next((a["step"] for a, b in zip(ours, before) if a != b), None)
        raise ValueError(f"{target}: its dev history up to update {record['at_update']} is not the long run's "
                         f"(first difference at update {step}): move it away, or give another --out_dir")


def score(out_dir: str, name: str, log: Callable[[str], None]) -> None:
    """OUT_DIR/<name>.test_scores by bench/multi30k_scores.py, unless it holds the test row of the
    first --decodings setting already."""
    from keras_transformer.files import atomic  # pylint: disable=g-import-not-at-top

    path = os.path.join(out_dir, name + ".test_scores")
    beam, _, alpha = FLAGS.decodings[0].partition(":")
    test = read_scores(path).get("test_2016_flickr")
    if test and (test["beam"], test["alpha"]) == (int(beam), float(alpha or 0.6)):
        log(f"{name}: scored before ({path})")
        return
    command = [SCORES, f"--model_dir={os.path.join(out_dir, name)}",
               f"--train_log={os.path.join(out_dir, name + '.log')}", f"--decodings={','.join(FLAGS.decodings)}",
               "--test", *[f"--data_dir={FLAGS.data_dir}"] * bool(FLAGS.data_dir)]
    log(f"{name}: scoring: {shlex.join(['python', *command])}")
    done = child.run_python(*command)
    if done.returncode:
        sys.stderr.write(done.stderr[-3000:])
        raise Stopped(f"{name}: scoring failed (exit {done.returncode})", done.returncode)
    atomic.write_atomically(path, (done.stdout + done.stderr).encode("utf-8"))


def read_scores(path: str) -> dict:
    """What multi30k_scores.py wrote: {"facts": its first JSON line, split: the split's row}."""
    found = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as file:
            for line in file:
                if line.startswith("{"):
                    values = json.loads(line)
                    found[values["split"] if "split" in values else "facts"] = values
    return found


# The table ---------------------------------------------------------------------------------

SPLITS = (("validation", "validation"), ("test_2016_flickr", "test"))
BLEUS = (("bleu", "cased"), ("bleu_lc_moses", "LC-tok"))


def table(out_dir: str, runs: Sequence[Run], sources: dict, notes: dict) -> list[str]:
    """The markdown table and the two checks: a row a run, from the scores of the run it is
    (`sources`: name -> the run directory's name; `notes`: name -> what the run is)."""
    from keras_transformer.training import reporting  # pylint: disable=g-import-not-at-top

    def cell(value, spec):
        return "-" if value is None else format(value, spec)

    header = ["multiple", "updates", "train_minutes", *(f"{split} {kind}" for _, split in SPLITS for _, kind in BLEUS),
              "run"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    figures = []
    for run in runs:
        source = sources[run.name]
        scores = read_scores(os.path.join(out_dir, source + ".test_scores"))
        history = reporting.read_eval_history(os.path.join(out_dir, source))
        updates = scores.get("facts", {}).get("updates") or (history[-1]["step"] if history else None)
        bleus = [scores.get(split, {}).get(key) for split, _ in SPLITS for key, _ in BLEUS]
        figures.append(bleus)
        lines.append("| " + " | ".join([f"{run.multiple}x", cell(updates, ","),
                                        cell(scores.get("facts", {}).get("train_minutes"), ".1f"),
                                        *(cell(b, ".2f") for b in bleus), notes[run.name]]) + " |")
    lines.append("")
    lines.append("train_minutes: the run's own training processes (its log's done: and interrupted: lines); a "
                 "branch's count its updates after the branch point only.")
    for index, (label, kind) in enumerate((f"{s} {k}", k) for _, s in SPLITS for _, k in BLEUS):
        values = [row[index] for row in figures]
        if None in values:
            continue
        drop = round(max([0.0] + [a - b for i, a in enumerate(values) for b in values[i + 1:]]), 2)
        lines.append(f"issue 28, {label}: {' -> '.join(f'{v:.2f}' for v in values)}; the largest drop as compute "
                     f"grows {drop:.2f} ({'within' if drop <= 0.3 else 'over'} 0.3); the "
                     f"{runs[-1].multiple}x run {'is' if values[-1] >= max(values) else 'is not'} the best")
    return lines


# The command -------------------------------------------------------------------------------


def main(argv):
    train_args = [arg for arg in argv[1:] if arg != "--"]  # the recipe's flags and the others not defined here
    if any(re.match(r"--?model_dir(=|$)", arg) for arg in train_args):
        raise ValueError("--model_dir: each run's directory is OUT_DIR/xN; leave it out")
    training = recipe_settings(train_args)
    runs = plan_runs(parse_multiples(FLAGS.multiples), training)
    for value in FLAGS.decodings:
        if not re.fullmatch(r"\d+(:\d*\.?\d*)?", value):
            raise ValueError(f"--decodings: {value!r} is not beam:alpha (e.g. 5:1.4)")
    command_files.check_writable_folder(FLAGS.out_dir, "out_dir")
    cli.start_tensorflow()
    from keras_transformer.files import atomic  # pylint: disable=g-import-not-at-top
    from keras_transformer.training import reporting  # pylint: disable=g-import-not-at-top
    from keras_transformer.training.trainer import planned_end  # pylint: disable=g-import-not-at-top

    out, long_run = FLAGS.out_dir, runs[-1]
    os.makedirs(out, exist_ok=True)
    check_long_run(os.path.join(out, long_run.name), long_run)
    keep = long_run_keep(training, long_run.train_steps)
    sources, notes = {long_run.name: long_run.name}, {long_run.name: f"{long_run.name}: every checkpoint kept"}
    try:
        _print(f"{long_run.name}: the recipe with {long_run.train_steps:,} updates, seed {FLAGS.seed}, "
               f"--keep_checkpoints={keep} (the shorter runs branch from its checkpoints)")
        train(out, long_run, [*train_args, f"--train_steps={long_run.train_steps}", f"--keep_checkpoints={keep}"],
              _print)
        long_end = planned_end(reporting.read_eval_history(os.path.join(out, long_run.name)))
        if long_end is not None and long_end < long_run.train_steps:
            notes[long_run.name] += (f"; patience ran out at update {long_end - training.cooldown_steps:,}, "
                                     f"stopped at {long_end:,}")
        for run in runs[:-1]:
            if same_as_long_run(run, long_end, long_run.train_steps):
                cooled = long_end - training.cooldown_steps
                _print(f"{run.name}: the {long_run.name} run's patience ran out at update {cooled:,}, not after "
                       f"{run.name}'s branch point ({run.branch_at:,}): a run of {run.train_steps:,} updates follows "
                       f"the same path there, runs out of patience there too, cools down over the same "
                       f"{training.cooldown_steps:,} updates and stops at update {long_end:,}; it is the "
                       f"{long_run.name} run, not trained again")
                sources[run.name] = long_run.name
                notes[run.name] = f"the {long_run.name} run (patience ran out at update {cooled:,})"
                continue
            branch(out, run, long_run, training, _print)
            train(out, run, [*train_args, f"--train_steps={run.train_steps}"], _print)
            sources[run.name] = run.name
            notes[run.name] = f"{long_run.name} to update {run.branch_at:,}, then its own cool-down"
        if FLAGS.score:
            for name in dict.fromkeys(sources.values()):
                score(out, name, _print)
    except Stopped as error:
        if error.exit_code == 2:  # the child printed its one error line
            sys.exit(2)
        cli.fail(error, code=error.exit_code)
    lines = table(out, runs, sources, notes)
    atomic.write_atomically(os.path.join(out, "table.md"), ("\n".join(lines) + "\n").encode("utf-8"))
    _print("\n".join(lines))


if __name__ == "__main__":
    if not any(arg.startswith(("--flagfile=", "-flagfile=")) for arg in sys.argv[1:]):
        sys.argv.insert(1, f"--flagfile={DEFAULT_RECIPE}")  # the Multi30k recipe
    cli.run(main, known_only=True)
