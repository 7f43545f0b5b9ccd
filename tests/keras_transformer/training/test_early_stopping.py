"""Early stopping: patience on dev BLEU, strict improvement, resumed from the evaluation history."""

from keras_transformer.training.early_stopping import EarlyStopping


def test_stops_after_patience_evaluations_without_a_better_bleu():
    stopper = EarlyStopping(patience=2)
    decisions = []
    for step, bleu in [(1, 10.0), (2, 12.0), (3, 12.0), (4, 11.0)]:  # equal is not better
        stopper.observe(bleu, step)
        decisions.append(stopper.should_stop)
    assert decisions == [False, False, False, True]
    assert (stopper.best_value, stopper.best_step, stopper.evaluations_since_best) == (12.0, 2, 2)
    assert stopper.message(4) == ("early stopping at step 4: no better dev BLEU for 2 evaluations "
                                  "(best 12.00 at step 2)")


def test_a_better_bleu_resets_the_count():
    stopper = EarlyStopping(patience=2, history=[{"step": 1, "bleu": 5.0}, {"step": 2, "bleu": 4.0}])
    stopper.observe(6.0, 3)
    assert not stopper.should_stop and (stopper.best_step, stopper.evaluations_since_best) == (3, 0)


def test_patience_zero_never_stops():
    stopper = EarlyStopping(patience=0)
    for step in range(1, 20):
        stopper.observe(1.0, step)
    assert not stopper.should_stop and stopper.evaluations_since_best == 18


def test_a_resumed_run_continues_from_the_history():
    history = [{"step": 100, "bleu": 20.0}, {"step": 200, "loss": 2.0},  # no BLEU: skipped
               {"step": 300, "bleu": None}, {"step": 400, "bleu": 19.0}, {"step": 500, "bleu": 18.5}]
    stopper = EarlyStopping(patience=3, history=history)
    assert (stopper.best_value, stopper.best_step, stopper.evaluations_since_best) == (20.0, 100, 2)
    assert not stopper.should_stop
    stopper.observe(19.9, 600)
    assert stopper.should_stop
    assert EarlyStopping(patience=2, history=history).should_stop  # already spent before the resume


def test_f1_is_better_higher_and_a_resume_replays_it():
    """A parsing run's dev EVALB F1: records without it (an older history) are skipped."""
    history = [{"step": 100, "f1": 30.0, "bleu": 50.0}, {"step": 200, "bleu": 60.0}, {"step": 300, "f1": 29.5}]
    stopper = EarlyStopping(patience=2, history=history, metric="f1")
    assert (stopper.best_value, stopper.best_step, stopper.evaluations_since_best) == (30.0, 100, 1)
    stopper.observe_results({"f1": 30.25, "loss": 9.0}, 400)
    assert (stopper.best_value, stopper.best_step, stopper.evaluations_since_best) == (30.25, 400, 0)
    stopper.observe_results({"f1": 12.0}, 500)
    stopper.observe_results({"f1": 30.25}, 600)  # equal is not better
    assert stopper.should_stop
    assert stopper.message(600) == ("early stopping at step 600: no better dev F1 for 2 evaluations "
                                    "(best 30.25 at step 400)")


def test_exhausted_at_is_where_patience_first_ran_out_also_when_replayed():
    """A cool-down starts there (the trainer); a later better score does not move it."""
    scores = [(1, 10.0), (2, 12.0), (3, 11.0), (4, 11.5), (5, 13.0), (6, 12.0), (7, 12.5)]
    stopper = EarlyStopping(patience=2)
    seen = []
    for step, bleu in scores:
        stopper.observe(bleu, step)
        seen.append(stopper.exhausted_at)
    assert seen == [None, None, None, 4, 4, 4, 4]
    assert stopper.ran_out() == "no better dev BLEU for 2 evaluations (best 13.00 at step 5)"
    replayed = EarlyStopping(patience=2, history=[{"step": s, "bleu": b} for s, b in scores[:5]])
    assert (replayed.exhausted_at, replayed.should_stop) == (4, False)
    assert EarlyStopping(patience=0, history=[{"step": s, "bleu": b} for s, b in scores]).exhausted_at is None
