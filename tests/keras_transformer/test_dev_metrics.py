"""The registry of dev metrics: the stock ones, and new ones registered here used by every list.

`chrF` (higher is better; the dev evaluation computes it, `keras_transformer.metrics`) and `TER`
(lower is better) are registered by this module alone, nothing in the library edited: the config
accepts them, the best checkpoints rank by them the right way round and early stopping names them.
"""

import pytest

from keras_transformer import dev_metrics
from keras_transformer.config import TrainingConfig
from keras_transformer.dev_metrics import DevMetric
from keras_transformer.run_dir.best_checkpoints import BestCheckpoints
from keras_transformer.training.early_stopping import EarlyStopping
from tests.helpers.checkpoints import save_checkpoints

CHRF = DevMetric("chrf", "chrF", higher_is_better=True, help="character n-gram F-score")
TER = DevMetric("ter", "TER", higher_is_better=False, help="translation edit rate")


@pytest.fixture
def new_metrics():
    """chrF and TER registered for one test, then removed: other tests see the stock registry."""
    for metric in (CHRF, TER):
        dev_metrics.register_metric(metric)
    yield CHRF, TER
    for metric in (CHRF, TER):
        dev_metrics.unregister_metric(metric.name)


def test_the_stock_metrics():
    assert dev_metrics.names() == ("bleu", "loss", "f1")
    bleu, loss, f1 = (dev_metrics.lookup(name) for name in dev_metrics.names())
    assert (bleu.sign, loss.sign, f1.sign) == (1.0, -1.0, 1.0)
    assert (bleu.display_name, loss.display_name, f1.display_name) == ("BLEU", "loss", "F1")
    assert (bleu.format(37.2), loss.format(2.1)) == ("37.20", "2.1000")
    assert not loss.decoded and f1.task == "parsing" and f1.full_name == "EVALB F1" and bleu.full_name == "BLEU"
    assert dev_metrics.choices_help() == (
        "bleu (higher is better), loss (lower is better) or f1 (parsing runs, --dataset=ptb: labelled EVALB F1 "
        "of the dev trees; higher is better)")


def test_unknown_and_repeated_names_are_refused():
    with pytest.raises(ValueError, match="^best_checkpoint_metric must be one of bleu, loss, f1, got .chrf.$"):
        dev_metrics.lookup("chrf")
    with pytest.raises(ValueError, match="'bleu' is already registered"):
        dev_metrics.register_metric(DevMetric("bleu", "BLEU", higher_is_better=True))
    with pytest.raises(ValueError, match="is not a DevMetric"):
        dev_metrics.register_metric("chrf")
    with pytest.raises(ValueError, match="best_checkpoint_metric must be one of bleu, loss, f1, got 'chrf'"):
        TrainingConfig(best_checkpoint_metric="chrf")


def test_a_registered_metric_is_in_every_derived_list(new_metrics):
    assert dev_metrics.names() == ("bleu", "loss", "f1", "chrf", "ter")
    assert dev_metrics.choices_help().endswith(
        "f1 (parsing runs, --dataset=ptb: labelled EVALB F1 of the dev trees; higher is better), chrf (character "
        "n-gram F-score; higher is better) or ter (translation edit rate; lower is better)")
    assert TrainingConfig(best_checkpoint_metric="chrf").best_checkpoint_metric == "chrf"
    with pytest.raises(ValueError, match="must be one of bleu, loss, f1, chrf, ter, got 'wer'"):
        TrainingConfig(best_checkpoint_metric="wer")


@pytest.mark.parametrize("metric, values, best_first", [
    ("chrf", [(100, 40.0), (200, 55.5), (300, 38.0), (400, 51.0)], ["ckpt-200", "ckpt-400"]),
    ("ter", [(100, 40.0), (200, 55.5), (300, 38.0), (400, 51.0)], ["ckpt-300", "ckpt-100"]),
])
def test_a_registered_metric_ranks_checkpoints_its_way_round(new_metrics, tmp_path, metric, values, best_first):
    prefixes = save_checkpoints(str(tmp_path / "checkpoints"), [step for step, _ in values])
    best = BestCheckpoints(str(tmp_path / "best"), keep=2, metric=metric, log=lambda _: None)
    for step, value in values:
        best.offer(step, {"bleu": 100.0 - value, "loss": value, metric: value}, prefixes[step])
    assert [prefix.rsplit("/", 1)[-1] for prefix in best.prefixes()] == best_first


def test_early_stopping_watches_a_registered_metric_by_its_name(new_metrics):
    stopper = EarlyStopping(patience=2, history=[{"step": 1, "ter": 50.0}, {"step": 2, "bleu": 9.0}], metric="ter")
    stopper.observe(48.0, 3)
    stopper.observe(48.0, 4)  # equal is not better
    stopper.observe(49.0, 5)
    assert stopper.should_stop and stopper.describe_best() == "best TER 48.00 at step 3"
    assert stopper.message(5) == "early stopping at step 5: no better dev TER for 2 evaluations (best 48.00 at step 3)"
