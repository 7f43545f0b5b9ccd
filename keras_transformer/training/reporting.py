"""Where a training run's numbers go: the console, TensorBoard, and MODEL_DIR/eval/history.json.

* `Reporter`: one console line every `log_every_steps` updates (loss, learning rate of
  equation (3), gradient norm, tokens per second, ETA) or a progress bar on a terminal, and
  the same numbers as TensorBoard scalars in MODEL_DIR/train; each evaluation as a line and
  as scalars in MODEL_DIR/eval.
* `EvalHistory`: every evaluation of the run, resumes included, in MODEL_DIR/eval/history.json
  (read back by early stopping on resume, and by the notebooks); `copy_history`, its first
  evaluations as another directory's (a run branching from this one).
* `projected_last_step`: the step the run will end at, what the ETA counts down to.

    reporter = Reporter(config, model_dir, start_step, time.time(), learning_rate_fn, print)
    reporter.train_step(step, loss, tokens, gradient_norm, time.time())
    reporter.evaluation(step, results, seconds)

Scalars are written with `tf.summary.scalar` (the `tensorboard` package): one float32 tensor
per tag, readable with `tf.compat.v1.train.summary_iterator` and `tf.make_ndarray(value.tensor)`.
Tags in train: "loss", "learning_rate", "gradient_norm", "tokens_per_second"; in eval: "loss",
"nll", "perplexity", "bleu" (section 6.1), "chrf" and "chrf_pp" (chrF and chrF++: Popović 2015,
2017, not in the paper). Only the chief writes files; the other workers get no-op writers.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any, Callable, Optional

import keras
import tensorflow as tf

from keras_transformer.files import json_files
from keras_transformer.run_dir import layout

# An evaluation's result keys -> their TensorBoard tags. chrF++ is tagged "chrf_pp": tf.summary
# writes "chrf++" as it is, but TF1's summary ops rename it "chrf__", and in TensorBoard's tag
# filter (a regular expression) '+' is an operator.
EVAL_SCALARS = {"loss": "loss", "nll": "nll", "perplexity": "perplexity", "bleu": "bleu", "chrf": "chrf",
                "chrf++": "chrf_pp"}
NOT_A_SCALAR = ("tokens",)  # an evaluation's result that is a count, not a score


def projected_last_step(config, start_step: int, step: int, elapsed: float) -> int:
    """The step this run will stop at: `config.train_steps`, or earlier where `config.max_train_minutes`
    runs out at the rate of the steps so far (what the ETA and the progress bar count down to).

    Args:
        config: a `TrainingConfig` (`train_steps`, `max_train_minutes`).
        start_step: the step the rate is measured from (where this process started or resumed).
        step: the last update made.
        elapsed: seconds since this process started training.
    """
    if not config.max_train_minutes or step <= start_step:
        return config.train_steps
    seconds_left = max(0.0, 60.0 * config.max_train_minutes - elapsed)
    return min(config.train_steps, step + int(seconds_left * (step - start_step) / max(elapsed, 1e-9)))


def eta_seconds(last_step: int, step: int, first: Optional[tuple[int, float]], now: float) -> Optional[float]:
    """Seconds until `last_step` at the rate measured since `first` = (step, time) of this process's
    first update, or None before there is a second update to measure. The first update is left
    out: it includes tracing the step function, which can take longer than hundreds of updates.
    """
    if first is None or step <= first[0]:
        return None
    return (last_step - step) * (now - first[1]) / (step - first[0])


def _clock(seconds: Optional[float]) -> str:
    """H:MM:SS ("-:--:--" when not known yet)."""
    if seconds is None:
        return "-:--:--"
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def write_scalars(writer, step: int, values: dict[str, Any]) -> None:
    """Writes the numeric entries of `values` as TensorBoard scalars at `step`, then flushes."""
    with writer.as_default(step=step):
        for name, value in values.items():
            if isinstance(value, (int, float)):
                tf.summary.scalar(name, float(value))
    writer.flush()


class Reporter:
    """Console lines, the progress bar and TensorBoard scalars of one `Trainer.train` call.

    Args:
        config: the `TrainingConfig` (`train_steps`, `max_train_minutes`, `log_every_steps`).
        model_dir: the training directory; scalars go to MODEL_DIR/train and MODEL_DIR/eval.
        start_step: the step training starts (or resumes) at.
        started: `time.time()` when training started; the ETA and tokens/s count from it.
        learning_rate: `step -> float`, the learning rate of update `step` (equation (3)).
        log: where console lines go.
        chief: False on the non-chief workers of a cluster: no files, no step lines.
        interactive: show a `keras.utils.Progbar` instead of step lines (default: on the
            chief when stdout is a terminal).
    """

    def __init__(self, config, model_dir: str, start_step: int, started: float,
                 learning_rate: Callable[[int], float], log: Callable[[str], None], chief: bool = True,
                 interactive: Optional[bool] = None):
        self.config = config
        self.start_step = start_step
        self.started = started
        self.learning_rate = learning_rate
        self.log = log
        self.chief = chief
        self.interactive = (chief and sys.stdout.isatty()) if interactive is None else interactive
        self.train_writer = self._writer(model_dir, layout.TRAIN_DIR)
        self.eval_writer = self._writer(model_dir, layout.EVAL_DIR)
        self.progbar = keras.utils.Progbar(max(1, config.train_steps - start_step)) if self.interactive else None
        self._last_log = started
        self._tokens_since_log = 0.0
        self._first: Optional[tuple[int, float]] = None  # (step, time) of this process's first update
        self._bar_closed = False

    def _writer(self, model_dir: str, name: str):
        if not self.chief:
            return tf.summary.create_noop_writer()
        return tf.summary.create_file_writer(os.path.join(model_dir, name))

    def train_step(self, step: int, loss: float, tokens: float, gradient_norm, now: float) -> None:
        """Reports update `step`: the progress bar every step, a line and scalars every
        `log_every_steps` and at `train_steps`.

        Args:
            step: the update just made.
            loss: its loss per target token.
            tokens: its number of non-padding target tokens (global batch).
            gradient_norm: a float or scalar tensor, read only on the steps that are logged.
            now: `time.time()` after the update.
        """
        c = self.config
        self._tokens_since_log += tokens
        if self._first is None:
            self._first = (step, now)
        last_step = projected_last_step(c, self.start_step, step, now - self.started)
        if self.progbar is not None:
            # The budget may end the run first; the bar ends (with its newline) only in `close`.
            self.progbar.target = max(last_step, step + 1) - self.start_step
            self.progbar.update(step - self.start_step, [("loss", loss)])
        if step % c.log_every_steps == 0 or step == c.train_steps:
            rate = self._tokens_since_log / max(now - self._last_log, 1e-9)
            values = {"loss": loss, "learning_rate": self.learning_rate(step),
                      "gradient_norm": float(gradient_norm), "tokens_per_second": rate}
            write_scalars(self.train_writer, step, values)
            if not self.interactive and self.chief:
                eta = eta_seconds(last_step, step, self._first, now)
                of = c.train_steps if last_step == c.train_steps else f"~{last_step}"  # ~: by the budget
                self.log(f"step {step}/{of} loss {loss:.4f} lr {values['learning_rate']:.2e} "
                         f"|g| {values['gradient_norm']:.3f} {rate:,.0f} tok/s ETA {_clock(eta)}")
            self._last_log, self._tokens_since_log = now, 0.0

    def end_at(self, last_step: int) -> None:
        """The run now ends at update `last_step` (a cool-down started by early stopping): the lines,
        the ETA and the progress bar count to it."""
        self.config = dataclasses.replace(self.config, train_steps=last_step)

    def close(self, step: int) -> None:
        """Ends the progress bar at update `step` (the last of this process), "N/N" and a newline."""
        if self.progbar is not None and not self._bar_closed:
            self.progbar.target = max(step - self.start_step, 1)
            self.progbar.update(self.progbar.target, finalize=True)
            self._bar_closed = True

    def evaluation(self, step: int, results: dict, seconds: float) -> None:
        """Reports an evaluation: `{"loss", "nll", "perplexity"}` and/or `{"bleu", "signature"}`, with
        `{"chrf", "chrf++"}` when the evaluator gives them (`EVAL_SCALARS` names their tags), and
        any other number a task adds (parsing's "f1" and "repaired"), under its own name.
        On a terminal, a progress bar still running is left on its line, not written over."""
        if self.progbar is not None and not self._bar_closed:
            print(flush=True)
        scalars = {tag: results[key] for key, tag in EVAL_SCALARS.items() if key in results}
        # A task's own scores (`Evaluator.task_scores`, e.g. parsing's f1): under their own names.
        task = {key: value for key, value in results.items() if key not in EVAL_SCALARS and key not in NOT_A_SCALAR
                and isinstance(value, (int, float)) and not isinstance(value, bool)}
        scalars.update(task)
        write_scalars(self.eval_writer, step, scalars)
        line = f"eval step {step}:"
        if "loss" in results:
            line += f" dev loss {results['loss']:.4f} nll {results['nll']:.4f} ppl {results['perplexity']:.2f}"
        if "bleu" in results:
            line += f" BLEU {results['bleu']:.2f} ({results['signature']})"
        if "chrf" in results:
            line += f" chrF {results['chrf']:.1f}"
        if "chrf++" in results:
            line += f" chrF++ {results['chrf++']:.1f}"
        for key, value in task.items():
            line += f" {key} {value:.2f}"
        self.log(f"{line} [{seconds:.0f} s]")


def read_eval_history(model_dir: str) -> list[dict]:
    """The evaluations recorded in MODEL_DIR/eval/history.json (oldest first); a damaged file
    (not JSON, not `{"evaluations": [{"step": N, ...}, ...]}`) is a one-line ValueError naming it."""
    path = os.path.join(model_dir, layout.EVAL_DIR, layout.HISTORY_FILE)
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as file:
        try:
            records = json.load(file)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            records = error
    evaluations = records.get("evaluations") if isinstance(records, dict) else None
    if not isinstance(evaluations, list) or not all(isinstance(r, dict) and isinstance(r.get("step"), int)
                                                    for r in evaluations):
        found = f"not valid JSON ({records})" if isinstance(records, Exception) else "not a run's evaluation history"
        raise ValueError(f"{path}: {found}; restore it from a backup, or move it away to start the history again")
    return evaluations


class EvalHistory:
    """MODEL_DIR/eval/history.json: `{"evaluations": [{"step", "loss", ..., "bleu", ...}, ...]}`.

    Loads the records of earlier runs in the directory; `append` adds one and rewrites the
    file atomically (never half-written), so a resumed run continues the same history.

    Args:
        model_dir: the training directory.
        write: False on the non-chief workers: records are kept in memory only.
    """

    def __init__(self, model_dir: str, write: bool = True):
        self.path = os.path.join(model_dir, layout.EVAL_DIR, layout.HISTORY_FILE)
        self.write = write
        self.records = read_eval_history(model_dir)

    def forget_after(self, step: int) -> int:
        """Drops the records of evaluations after `step`, the checkpoint a run resumes from (a kill
        between an evaluation and the next save lost their weights; the resumed run evaluates
        those steps again); returns how many."""
        kept = [record for record in self.records if record["step"] <= step]
        dropped, self.records = len(self.records) - len(kept), kept
        if dropped:
            self._write()
        return dropped

    def note(self, key: str, value) -> None:
        """Adds `key: value` to the last record (a decision taken after that evaluation, e.g. the
        trainer's "cooldown_to")."""
        self.records[-1][key] = value
        self._write()

    def append(self, step: int, results: dict) -> dict:
        """Records the evaluation at `step` (without its "hypotheses"); returns the record."""
        record = {"step": step, **{k: v for k, v in results.items() if k != "hypotheses"}}
        self.records.append(record)
        self._write()
        return record

    def _write(self) -> None:
        """Rewrites the file atomically (never half-written); nothing on the non-chief workers."""
        if self.write:
            json_files.write_json_atomically(self.path, {"evaluations": self.records})


def copy_history(model_dir: str, target_dir: str, until_step: int) -> list[dict]:
    """The evaluations of the run in `model_dir` up to update `until_step`, written as the
    history of `target_dir` (which must have none): what a run branching from this one at
    `until_step` has behind it (`bench/compute_robustness.py`). Returns them. TensorBoard's
    scalars are not copied: the branch's begin at its first update after `until_step`."""
    history = EvalHistory(target_dir)
    if history.records:
        raise ValueError(f"{history.path}: already holds {len(history.records)} evaluation(s)")
    for record in read_eval_history(model_dir):
        if record["step"] <= until_step:
            history.append(record["step"], {key: value for key, value in record.items() if key != "step"})
    return history.records
