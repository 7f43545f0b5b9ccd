"""Console lines, ETA, TensorBoard scalars and the evaluation history, on a fake clock (no model)."""

import json
import os

import pytest
import tensorflow as tf

from keras_transformer.training import reporting
from keras_transformer.training.trainer import TrainingConfig
from tests.helpers.summaries import read_scalars


def training_config(**overrides):
    values = dict(train_steps=10, warmup_steps=2, log_every_steps=4, eval_every_steps=0, checkpoint_every_steps=0)
    values.update(overrides)
    return TrainingConfig(**values)


def make_reporter(directory, config=None, start_step=0, started=0.0, learning_rate=1e-3, **kwargs):
    """A Reporter logging into a list; `learning_rate` a number or a `step -> float`."""
    lines = []
    schedule = learning_rate if callable(learning_rate) else lambda step: learning_rate
    reporter = reporting.Reporter(config or training_config(), str(directory), start_step, started, schedule,
                                  lines.append, **kwargs)
    return reporter, lines


def run_steps(reporter, steps, seconds_per_step=2.0, tokens=50.0):
    for step in steps:
        reporter.train_step(step, loss=2.0 + step, tokens=tokens, gradient_norm=tf.constant(0.5),
                            now=reporter.started + seconds_per_step * (step - reporter.start_step))


def test_projected_last_step_follows_the_time_budget():
    project = reporting.projected_last_step
    budget = training_config(train_steps=20000, max_train_minutes=57)
    # 100 steps in 150 s: 3,270 s left at 1.5 s a step is 2,180 more, so step 2,280 of 20,000.
    assert project(budget, 0, 100, 150.0) == 2280
    assert project(budget, 500, 600, 150.0) == 2780  # after a resume: this process's steps and time
    assert project(budget, 0, 100, 3500.0) == 100  # the budget is spent: this is the last step
    assert project(budget, 0, 0, 0.0) == 20000  # no rate yet
    assert project(training_config(train_steps=1000, max_train_minutes=57), 0, 100, 150.0) == 1000
    assert project(training_config(train_steps=20000), 0, 100, 150.0) == 20000  # no budget


def test_a_line_every_log_every_steps_and_at_the_last_step(tmp_path):
    reporter, lines = make_reporter(tmp_path, started=100.0, learning_rate=lambda step: 1e-3 * step,
                                    interactive=False)
    run_steps(reporter, range(1, 11))
    # 4 steps of 50 tokens in 8 s: 25 tokens/s; 6 steps left at 2 s: 12 s.
    assert lines == ["step 4/10 loss 6.0000 lr 4.00e-03 |g| 0.500 25 tok/s ETA 0:00:12",
                     "step 8/10 loss 10.0000 lr 8.00e-03 |g| 0.500 25 tok/s ETA 0:00:04",
                     "step 10/10 loss 12.0000 lr 1.00e-02 |g| 0.500 25 tok/s ETA 0:00:00"]
    scalars = read_scalars(tmp_path / "train")
    assert sorted(scalars) == ["gradient_norm", "learning_rate", "loss", "tokens_per_second"]
    assert scalars["loss"] == {4: 6.0, 8: 10.0, 10: 12.0}
    assert scalars["learning_rate"] == pytest.approx({4: 4e-3, 8: 8e-3, 10: 1e-2})
    assert scalars["gradient_norm"] == {4: 0.5, 8: 0.5, 10: 0.5}
    assert scalars["tokens_per_second"] == {4: 25.0, 8: 25.0, 10: 25.0}


def test_the_eta_counts_down_to_the_time_budget(tmp_path):
    config = training_config(train_steps=1000, max_train_minutes=1, log_every_steps=10)
    reporter, lines = make_reporter(tmp_path, config, start_step=500, interactive=False)
    run_steps(reporter, range(501, 511), seconds_per_step=1.0)
    # Resumed at 500; 10 steps in 10 s, 50 s left: step ~560, "~" because the budget ends it.
    assert lines == ["step 510/~560 loss 512.0000 lr 1.00e-03 |g| 0.500 50 tok/s ETA 0:00:50"]


def test_the_progress_bar_replaces_the_lines_on_a_terminal(tmp_path):
    config = training_config(train_steps=1000, max_train_minutes=1, log_every_steps=5)
    reporter, lines = make_reporter(tmp_path, config, interactive=True)
    run_steps(reporter, range(1, 11), seconds_per_step=1.0)
    assert lines == [] and reporter.progbar.target == 60  # counts down to the budget's last step
    assert sorted(read_scalars(tmp_path / "train")["loss"]) == [5, 10]  # the scalars are still written


def test_the_eta_leaves_out_the_first_step_which_traces_the_step_function(tmp_path):
    config = training_config(train_steps=100, log_every_steps=1)
    reporter, lines = make_reporter(tmp_path, config, started=0.0, interactive=False)
    reporter.train_step(1, 2.0, 50.0, 0.5, now=120.0)  # tracing: 2 minutes
    reporter.train_step(2, 2.0, 50.0, 0.5, now=121.0)
    reporter.train_step(3, 2.0, 50.0, 0.5, now=122.0)  # then 1 s a step: 97 steps left
    assert [line.split("ETA ")[1] for line in lines] == ["-:--:--", "0:01:38", "0:01:37"]
    assert reporting.eta_seconds(100, 3, None, 122.0) is None


def test_the_progress_bar_ends_at_the_last_step_and_an_evaluation_starts_a_new_line(tmp_path, capsys):
    config = training_config(train_steps=6, log_every_steps=100)
    reporter, lines = make_reporter(tmp_path, config, interactive=True)
    run_steps(reporter, range(1, 4), seconds_per_step=1.0)
    capsys.readouterr()
    reporter.evaluation(3, {"loss": 1.0, "nll": 0.75, "perplexity": 2.12}, 0.0)
    assert capsys.readouterr().out == "\n"  # the bar keeps its line; the eval line goes below it
    run_steps(reporter, range(4, 7), seconds_per_step=1.0)
    reporter.close(6)
    assert reporter.progbar.target == 6 and reporter.progbar._seen_so_far == 6  # "6/6", not "6/7"
    assert capsys.readouterr().out.endswith("\n")
    reporter.evaluation(6, {"loss": 1.0, "nll": 0.75, "perplexity": 2.12}, 0.0)
    assert capsys.readouterr().out == ""  # the finished bar already ended its line
    assert len(lines) == 2


def test_evaluations_as_a_line_and_scalars(tmp_path):
    reporter, lines = make_reporter(tmp_path, interactive=False)
    results = {"loss": 1.5, "nll": 1.25, "perplexity": 3.49, "tokens": 120, "bleu": 20.125,
               "signature": "nrefs:1|case:mixed", "chrf": 55.125, "chrf_signature": "nrefs:1|nc:6|nw:0",
               "chrf++": 53.1875, "chrf++_signature": "nrefs:1|nc:6|nw:2", "hypotheses": ["ein Haus"]}
    reporter.evaluation(4, results, 2.4)
    reporter.evaluation(8, {"loss": 1.0, "nll": 0.75, "perplexity": 2.12, "tokens": 120}, 0.2)
    assert lines == ["eval step 4: dev loss 1.5000 nll 1.2500 ppl 3.49 BLEU 20.12 (nrefs:1|case:mixed) "
                     "chrF 55.1 chrF++ 53.2 [2 s]",
                     "eval step 8: dev loss 1.0000 nll 0.7500 ppl 2.12 [0 s]"]
    scalars = read_scalars(tmp_path / "eval")
    # "chrf++" as the tag "chrf_pp": a name TF1's summary ops keep and TensorBoard's regex filter matches.
    assert sorted(scalars) == ["bleu", "chrf", "chrf_pp", "loss", "nll", "perplexity"]
    assert scalars["loss"] == {4: 1.5, 8: 1.0} and scalars["bleu"] == {4: 20.125}
    assert scalars["chrf"] == {4: 55.125} and scalars["chrf_pp"] == {4: 53.1875}


def test_a_non_chief_worker_writes_no_files_and_no_step_lines(tmp_path):
    reporter, lines = make_reporter(tmp_path, chief=False)
    run_steps(reporter, range(1, 11))
    reporter.evaluation(10, {"loss": 1.0, "nll": 0.75, "perplexity": 2.12}, 0.0)
    assert os.listdir(tmp_path) == [] and reporter.progbar is None
    assert lines == ["eval step 10: dev loss 1.0000 nll 0.7500 ppl 2.12 [0 s]"]


def test_the_history_is_kept_across_resumes(tmp_path):
    assert reporting.read_eval_history(str(tmp_path)) == []
    history = reporting.EvalHistory(str(tmp_path))
    record = history.append(100, {"loss": 2.0, "bleu": 10.0, "chrf++": 30.0, "hypotheses": ["x"]})
    assert record == {"step": 100, "loss": 2.0, "bleu": 10.0, "chrf++": 30.0}  # no hypotheses
    resumed = reporting.EvalHistory(str(tmp_path))
    resumed.append(200, {"loss": 1.5, "bleu": 12.0})
    on_disk = json.loads((tmp_path / "eval" / "history.json").read_text())
    assert on_disk == {"evaluations": [{"step": 100, "loss": 2.0, "bleu": 10.0, "chrf++": 30.0},
                                       {"step": 200, "loss": 1.5, "bleu": 12.0}]}
    assert reporting.read_eval_history(str(tmp_path)) == on_disk["evaluations"]
    worker = reporting.EvalHistory(str(tmp_path / "worker"), write=False)
    worker.append(100, {"loss": 2.0})
    assert worker.records == [{"step": 100, "loss": 2.0}] and not (tmp_path / "worker").exists()


@pytest.mark.parametrize("text", ["garbage{", "{}", "[]", '{"evaluations": [{"loss": 1.0}]}'])
def test_a_damaged_history_is_one_line_naming_the_file(tmp_path, text):
    """Was a bare "Expecting value: line 1 column 1" (or a KeyError traceback) on every resume."""
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "history.json").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=f"{tmp_path / 'eval' / 'history.json'}: not .*move it away") as error:
        reporting.EvalHistory(str(tmp_path))
    assert "\n" not in str(error.value)


def test_eval_history_forgets_evaluations_after_the_restored_step_and_notes_decisions(tmp_path):
    from keras_transformer.training.reporting import EvalHistory, read_eval_history
    history = EvalHistory(str(tmp_path))
    for step in (100, 200, 300):
        history.append(step, {"loss": 3.0 - step / 1000})
    assert history.forget_after(200) == 1
    history.note("cooldown_to", 700)
    assert read_eval_history(str(tmp_path)) == [{"step": 100, "loss": 2.9}, {"step": 200, "loss": 2.8,
                                                                             "cooldown_to": 700}]
    assert EvalHistory(str(tmp_path)).forget_after(200) == 0


def test_copy_history_gives_another_run_the_evaluations_up_to_a_step(tmp_path):
    from keras_transformer.training.reporting import EvalHistory, copy_history, read_eval_history
    history = EvalHistory(str(tmp_path / "long"))
    for step in (100, 200, 300):
        history.append(step, {"loss": 3.0 - step / 1000, "bleu": step / 10})
    assert copy_history(str(tmp_path / "long"), str(tmp_path / "short"), 200) == read_eval_history(
        str(tmp_path / "long"))[:2]
    assert read_eval_history(str(tmp_path / "short")) == [{"step": 100, "loss": 2.9, "bleu": 10.0},
                                                          {"step": 200, "loss": 2.8, "bleu": 20.0}]
    with pytest.raises(ValueError, match="already holds 2 evaluation"):
        copy_history(str(tmp_path / "long"), str(tmp_path / "short"), 300)
