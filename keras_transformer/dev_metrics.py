"""The registry of dev metrics: the scores of a dev evaluation that rank checkpoints.

A run keeps its K best checkpoints (`keras_transformer.run_dir.best_checkpoints`) and stops
early (`keras_transformer.training.early_stopping`) by one dev metric, `--best_checkpoint_metric`.
Each metric is a `DevMetric` registered under its name, the key of a dev evaluation's results
that holds its value:

    >>> names()                            # what --best_checkpoint_metric accepts
    ('bleu', 'loss', 'f1')
    >>> lookup("loss").higher_is_better    # the dev loss: lower is better
    False

The stock metrics are BLEU (section 6.1), the dev loss (label-smoothed cross-entropy, section
5.4) and a parsing run's labelled EVALB F1 of its dev trees (section 6.3). Every list of them is
derived from this registry: the values `TrainingConfig.best_checkpoint_metric` accepts, the
direction checkpoints are ranked in, the names early stopping prints, the flag's choices and
help (`choices_help`). A new metric is one `register_metric` call; docs/architecture.md
("Adding a metric") shows one.

This module imports no TensorFlow (`keras_transformer.config` reads it before TensorFlow starts).
"""

from __future__ import annotations

import dataclasses

from keras_transformer.registry import Registry


@dataclasses.dataclass(frozen=True)
class DevMetric:
    """One dev metric that may rank checkpoints.

    Attributes:
        name: str, the key of a dev evaluation's results that holds its value, and its value of
            `--best_checkpoint_metric`.
        display_name: str, its name in console lines ("best BLEU 37.20 at step 2100").
        higher_is_better: bool, whether a larger value is a better checkpoint.
        digits: int (default 2), decimals in console lines.
        decoded: bool (default True), whether it is computed from decoded dev sentences (a run
            that decodes none, `--eval_max_sentences=-1`, has no value of it).
        task: str (default "": every task), the only task whose dev evaluation computes it
            ("parsing" for EVALB F1).
        full_name: str (default: `display_name`), its name in error messages ("EVALB F1").
        help: str (default ""), what `choices_help` says of it besides its direction.
    """

    name: str
    display_name: str
    higher_is_better: bool
    digits: int = 2
    decoded: bool = True
    task: str = ""
    full_name: str = ""
    help: str = ""

    def __post_init__(self):
        if not self.full_name:
            object.__setattr__(self, "full_name", self.display_name)

    @property
    def sign(self) -> float:
        """1.0 where a larger value is better, -1.0 where a smaller one is (times the value, larger is better)."""
        return 1.0 if self.higher_is_better else -1.0

    def format(self, value: float) -> str:
        """`value` with this metric's decimals: "37.20" (BLEU), "2.1000" (the loss)."""
        return f"{value:.{self.digits}f}"


_METRICS: Registry[DevMetric] = Registry("dev metric", "best_checkpoint_metric")


def register_metric(metric: DevMetric) -> DevMetric:
    """Registers `metric` under its name; returns it.

    Raises:
        ValueError: `metric` is not a `DevMetric`, has no name, or its name is taken.
    """
    if not isinstance(metric, DevMetric):
        raise ValueError(f"{metric!r} is not a DevMetric")
    return _METRICS.add(metric.name, metric)


def unregister_metric(name: str) -> None:
    """Removes the metric `name` from the registry (a test's or a plug-in's own metric)."""
    _METRICS.remove(name)


def names() -> tuple[str, ...]:
    """The registered metrics' names, in the order they were registered."""
    return _METRICS.names()


def lookup(name: str) -> DevMetric:
    """The registered metric `name`.

    Raises:
        ValueError: no metric has that name ("best_checkpoint_metric must be one of bleu,
            loss, f1, got 'chrf'").
    """
    return _METRICS.lookup(name)


def choices_help() -> str:
    """The metrics for a flag's help, each with its direction:
    "bleu (higher is better), loss (lower is better) or f1 (parsing runs, ...; higher is better)"."""
    parts = [f"{m.name} ({m.help + '; ' if m.help else ''}{'higher' if m.higher_is_better else 'lower'} is better)"
             for m in _METRICS.values()]
    return " or ".join([", ".join(parts[:-1]), parts[-1]]) if len(parts) > 1 else "".join(parts)


register_metric(DevMetric("bleu", "BLEU", higher_is_better=True))
register_metric(DevMetric("loss", "loss", higher_is_better=False, digits=4, decoded=False))
register_metric(DevMetric("f1", "F1", higher_is_better=True, task="parsing", full_name="EVALB F1",
                          help="parsing runs, --dataset=ptb: labelled EVALB F1 of the dev trees"))
