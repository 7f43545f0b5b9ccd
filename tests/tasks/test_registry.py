"""`keras_transformer.tasks.registry`: the stock tasks, lookups by name, data set and training directory,
registration; and a task a plugin registers (tests/helpers/plugin_task.py), trained by the training
command in a child process and scored by its own dev metric."""

import json

import pytest

from keras_transformer.config import DecodingConfig
from keras_transformer.tasks import registry
from keras_transformer.tasks.parsing.task import ParsingTask
from keras_transformer.tasks.task import Task, TranslationTask
from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.train_runs import train_args


def test_the_stock_tasks():
    assert registry.names() == ("translation", "parsing")
    assert type(registry.lookup("translation")) is TranslationTask
    assert type(registry.lookup("parsing")) is ParsingTask


def test_an_unknown_task_is_an_error_naming_the_known_ones():
    with pytest.raises(ValueError) as error:
        registry.lookup("summarization")
    assert str(error.value) == "task must be one of translation, parsing, got 'summarization'"


@pytest.mark.parametrize("dataset, task", [("ptb", "parsing"), ("embedded", "translation"),
                                           ("multi30k_en_de", "translation"), ("files", "translation"),
                                           ("no_longer_registered", "translation")])
def test_a_data_set_names_its_task(dataset, task):
    assert registry.of_dataset(dataset).name == task


def test_the_dataset_flag_labels_the_data_sets_of_other_tasks_than_translation():
    assert [registry.dataset_label(name) for name in ("embedded", "ptb", "multi30k")] == \
        ["embedded", "ptb (parsing)", "multi30k"]


def write_settings(model_dir, **settings):
    model_dir.mkdir()
    (model_dir / "model_config.json").write_text(json.dumps({"model": {}, **settings}))
    return str(model_dir)


def test_a_run_has_the_task_it_recorded_else_its_data_sets(tmp_path):
    assert registry.of_run(write_settings(tmp_path / "a", task="parsing", data={"dataset": "embedded"})).name == \
        "parsing"
    assert registry.of_run(write_settings(tmp_path / "b", data={"dataset": "ptb"})).name == "parsing"  # older runs
    assert registry.of_run(write_settings(tmp_path / "c")).name == "translation"
    with pytest.raises(ValueError, match="task must be one of translation, parsing, got 'reverse'"):
        registry.of_run(write_settings(tmp_path / "d", task="reverse"))  # its plugin not loaded


class Summarization(Task):
    name = "summarization"
    decoding = DecodingConfig(beam_size=5, alpha=1.0, max_extra_length=0)


@pytest.fixture
def summarization():
    """A task registered for one test, then removed: other tests see the stock registry."""
    registry.register_task(Summarization)
    yield registry.lookup("summarization")
    registry.unregister_task("summarization")


def test_a_registered_task_is_looked_up_by_name_in_the_order_registered(summarization):
    assert registry.names() == ("translation", "parsing", "summarization")
    assert isinstance(summarization, Summarization) and summarization.decoding.beam_size == 5
    assert [m.name for m in summarization.metrics()] == ["bleu", "loss"]  # every task's metrics


def test_registration_refuses_a_taken_name_and_what_is_not_a_task(summarization):
    with pytest.raises(ValueError, match="a task named 'summarization' is already registered"):
        registry.register_task(Summarization)
    with pytest.raises(ValueError, match="is not a Task subclass"):
        registry.register_task(dict)
    with pytest.raises(ValueError, match="a task needs a name"):
        registry.register_task(type("Nameless", (Task,), {}))


PLUGIN = {"KT_PLUGINS": "tests.helpers.plugin_task"}


def test_a_plugins_task_refuses_ranking_a_run_of_another_task_by_its_metric(tmp_path, flagfile):
    result = run_command(*train_args(tmp_path / "run", "--keep_best_checkpoints=1", "--best_checkpoint_metric=exact",
                                     flagfile=flagfile), env=PLUGIN)
    assert_one_error_line(result, "--best_checkpoint_metric=exact ranks by the dev exact match of a reverse run, but "
                                  "--dataset=embedded is not a reverse data set")


@pytest.mark.slow
def test_a_plugins_task_trains_is_scored_by_its_own_metric_and_is_recorded(tmp_path, flagfile):
    """The plugin registers a data source, a dev metric and a task; the training command ranks the
    run's checkpoints by the task's exact match, which every dev evaluation reports."""
    model_dir = tmp_path / "run"
    result = run_command(*train_args(model_dir, "--dataset=reversed_words", "--train_steps=20", "--eval_every_steps=10",
                                     "--eval_max_sentences=8", "--keep_best_checkpoints=1",
                                     "--best_checkpoint_metric=exact", "--precision=float32", flagfile=flagfile),
                         env=PLUGIN)
    assert result.returncode == 0, result.stderr[-2000:]
    history = json.loads((model_dir / "eval" / "history.json").read_text())["evaluations"]
    assert [h["step"] for h in history] == [10, 20]
    assert all(0.0 <= h["exact"] <= 100.0 for h in history), history
    evaluations = [line for line in result.stdout.splitlines() if line.startswith("eval step")]
    assert len(evaluations) == 2 and all(" exact " in line for line in evaluations), result.stdout
    assert '"best_exact": ' in result.stdout  # the done line names the ranking metric
    assert json.loads((model_dir / "model_config.json").read_text())["task"] == "reverse"

    code = ("import sys, tests.helpers.plugin_task as plugin; from keras_transformer.tasks import registry; "
            "print(registry.of_run(sys.argv[1]).decoding == plugin.DECODING)")
    found = run_command("-c", code, model_dir)
    assert found.returncode == 0 and found.stdout.strip() == "True", found.stderr[-2000:]
