"""Early stopping on a dev metric: stop after `patience` evaluations without a better score.

The paper trains for a fixed number of steps (section 5.2) and picks hyperparameters on the
development set (newstest2013, section 6.2); on small corpora a run often stops improving on
the dev set long before `train_steps`, and stopping then saves the remaining time (fairseq
`--patience`, OpenNMT-tf `early_stopping`).

    stopper = EarlyStopping(patience=5, history=read_eval_history(model_dir), metric="bleu")
    stopper.observe(results["bleu"], step)
    if stopper.should_stop:
        print(stopper.message(step))

With a cool-down (`--cooldown_steps`), patience running out does not stop the run at once: the
trainer brings the learning rate down over the next C updates and stops then
(`exhausted_at`, the step of the evaluation where patience ran out, tells it where to start,
also on resume).

The metric is the one that ranks the best checkpoints (`run_dir.best_checkpoints`), a registered
dev metric (`keras_transformer.dev_metrics`, which gives its direction and its name in the
messages): dev BLEU, higher is better, the dev loss, lower is better, or a parsing run's dev
EVALB F1 (section 6.3), higher is better.
"""

from __future__ import annotations

from typing import Iterable, Optional

from keras_transformer import dev_metrics
from keras_transformer.run_dir.best_checkpoints import is_better, metric_value


class EarlyStopping:
    """Tracks the best dev score and the evaluations since it.

    Args:
        patience: stop after this many evaluations without a better score (0: never).
        history: earlier evaluation records (`{"step", "bleu", "loss", ...}`, oldest first,
            e.g. MODEL_DIR/eval/history.json), replayed so that a resumed run keeps its best
            score and its count; records without the metric are skipped.
        metric: a registered dev metric: "bleu" or "f1" (higher is better), or "loss" (lower
            is better).

    Attributes:
        best_value, best_step: the best score so far and its step (None before any).
        evaluations_since_best: evaluations of the metric since the best one.
        exhausted_at: the step of the evaluation at which `patience` first ran out (None before;
            later better scores do not reset it).
    """

    def __init__(self, patience: int = 0, history: Iterable[dict] = (), metric: str = "bleu"):
        self.patience = patience
        self.metric = metric
        self.best_value: Optional[float] = None
        self.best_step: Optional[int] = None
        self.evaluations_since_best = 0
        self.exhausted_at: Optional[int] = None
        for record in history:
            value = metric_value(record, metric)
            if value is not None:
                self.observe(value, record["step"])

    def observe(self, value: float, step: int) -> None:
        """Records the dev score of step `step`; only a strictly better score is a new best."""
        if is_better(value, self.best_value, self.metric):
            self.best_value, self.best_step, self.evaluations_since_best = value, step, 0
        else:
            self.evaluations_since_best += 1
        if self.exhausted_at is None and self.should_stop:
            self.exhausted_at = step

    def observe_results(self, results: dict, step: int) -> None:
        """`observe` of an evaluation's results, if they hold the metric."""
        value = metric_value(results, self.metric)
        if value is not None:
            self.observe(value, step)

    @property
    def should_stop(self) -> bool:
        return bool(self.patience) and self.evaluations_since_best >= self.patience

    def _best(self) -> str:
        return f"{dev_metrics.lookup(self.metric).format(self.best_value)} at step {self.best_step}"

    def describe_best(self) -> str:
        """e.g. "best BLEU 37.20 at step 2100"."""
        return f"best {dev_metrics.lookup(self.metric).display_name} {self._best()}"

    def ran_out(self) -> str:
        """e.g. "no better dev BLEU for 5 evaluations (best 37.20 at step 2100)"."""
        return (f"no better dev {dev_metrics.lookup(self.metric).display_name} for {self.evaluations_since_best} "
                f"evaluations (best {self._best()})")

    def message(self, step: int) -> str:
        """The console line announcing the stop at `step`."""
        return f"early stopping at step {step}: {self.ran_out()}"
