"""Early stopping on dev BLEU: stop after `patience` evaluations without a better score.

The paper trains for a fixed number of steps (section 5.2) and picks hyperparameters on the
development set (newstest2013, section 6.2); on small corpora a run often stops improving on
the dev set long before `train_steps`, and stopping then saves the remaining time.

    stopper = EarlyStopping(patience=5, history=read_eval_history(model_dir))  # resumes count on
    stopper.observe(results["bleu"], step)
    if stopper.should_stop:
        print(stopper.message(step))
"""

from __future__ import annotations

from typing import Iterable, Optional


class EarlyStopping:
    """Tracks the best dev BLEU and the evaluations since it.

    Args:
        patience: stop after this many evaluations without a better BLEU (0: never).
        history: earlier evaluation records (`{"step", "bleu", ...}`, oldest first, e.g.
            MODEL_DIR/eval/history.json), replayed so that a resumed run keeps its best
            score and its count; records without a BLEU are skipped.

    Attributes:
        best_bleu, best_step: the best BLEU so far and its step (None before any).
        evaluations_since_best: BLEU evaluations since the best one.
    """

    def __init__(self, patience: int = 0, history: Iterable[dict] = ()):
        self.patience = patience
        self.best_bleu: Optional[float] = None
        self.best_step: Optional[int] = None
        self.evaluations_since_best = 0
        for record in history:
            if record.get("bleu") is not None:
                self.observe(record["bleu"], record["step"])

    def observe(self, bleu: float, step: int) -> None:
        """Records the dev BLEU of step `step`; only a strictly higher score is a new best."""
        if self.best_bleu is None or bleu > self.best_bleu:
            self.best_bleu, self.best_step, self.evaluations_since_best = bleu, step, 0
        else:
            self.evaluations_since_best += 1

    @property
    def should_stop(self) -> bool:
        return bool(self.patience) and self.evaluations_since_best >= self.patience

    def message(self, step: int) -> str:
        """The console line announcing the stop at `step`."""
        return (f"early stopping at step {step}: no better dev BLEU for {self.evaluations_since_best} "
                f"evaluations (best {self.best_bleu:.2f} at step {self.best_step})")
