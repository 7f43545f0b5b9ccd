"""The custom training loop: loss normalisation, accumulation, resume, NaN stop, 1 vs 2 replicas.

The loop's parts are tested alone in test_reporting.py, test_checkpoints.py, test_early_stopping.py
and test_distribution.py; here they run together on a tiny model."""

import dataclasses
import json
import os
import signal
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import TransformerConfig, label_smoothed_cross_entropy
from keras_transformer.training import trainer as trainer_lib
from keras_transformer.training.checkpoints import Checkpoints
from keras_transformer.losses import decoder_inputs
from tests.helpers.commands import run_command
from tests.helpers.summaries import read_scalars

CONFIG = TransformerConfig.tiny(vocab_size=30, max_length=16, dropout_rate=0.0)


def make_batches(count, batch=4, length=6, seed=0):
    """Random (source_ids, target_ids) batches: ids in [4, 30), EOS = 3, then 0-padding."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(count):
        pair = []
        for _side in range(2):
            ids = rng.integers(4, 30, size=(batch, length)).astype(np.int32)
            lengths = rng.integers(2, length, size=batch)
            for row, n in enumerate(lengths):
                ids[row, n - 1] = 3
                ids[row, n:] = 0
            pair.append(ids)
        batches.append(tuple(pair))
    return batches


def input_fn_from(batches):
    def input_fn(_context):
        return tf.data.Dataset.from_generator(
            lambda: iter(batches),
            output_signature=(tf.TensorSpec([None, None], tf.int32),) * 2).repeat()
    return input_fn


def training_config(**overrides):
    values = dict(train_steps=3, warmup_steps=2, checkpoint_every_steps=0, eval_every_steps=0,
                  log_every_steps=100, keep_checkpoints=3, seed=1)
    values.update(overrides)
    return trainer_lib.TrainingConfig(**values)


def weights(trainer):
    """Trainable weights except the attention key biases.

    A key bias adds the same q.b to every score of a query, which the softmax cancels:
    its true gradient is 0, and Adam's first step m / (sqrt(v) + 1e-9) turns the
    rounding noise left in it into a full +-lr step in either direction. For the same
    reason a weight whose gradient is tiny may differ by more than rounding after a
    step; `momentums` (linear in the gradient) compare gradients tightly.
    """
    return [v.numpy() for v in trainer.model.trainable_variables if not v.path.endswith("key/bias")]


def momentums(trainer):
    """Adam's first moments m = sum (1 - beta_1) beta_1^k g: the gradients, linearly."""
    return [v.numpy() for v in trainer.optimizer.variables
            if v.path.endswith("_momentum") and "key_bias" not in v.path]


def test_loss_is_normalised_by_the_global_token_count(tmp_path):
    batches = make_batches(1)
    trainer = trainer_lib.build_trainer(CONFIG, training_config(train_steps=1), str(tmp_path), batch_tokens=24)
    source, target = batches[0]
    logits = trainer.model((source, decoder_inputs(target)), training=False)
    loss_sum, tokens = label_smoothed_cross_entropy(target, logits, CONFIG.label_smoothing)
    loss, step_tokens, norm = trainer.train_step(iter(tf.data.Dataset.from_tensors(batches[0])))
    assert float(step_tokens) == float(tokens) == float(np.count_nonzero(target))
    np.testing.assert_allclose(float(loss), float(loss_sum / tokens), rtol=1e-5)
    assert float(norm) > 0
    assert int(trainer.step.numpy()) == 1 and int(trainer.optimizer.iterations.numpy()) == 1


def test_two_accumulated_micro_batches_equal_one_batch_of_both(tmp_path):
    a, b = make_batches(2, batch=2, seed=3)
    both = tuple(np.concatenate([a[i], b[i]]) for i in range(2))  # same length 6: no re-padding
    one = trainer_lib.build_trainer(CONFIG, training_config(), str(tmp_path / "one"), batch_tokens=24)
    one.train_step(iter(tf.data.Dataset.from_tensors(both)))
    two = trainer_lib.build_trainer(CONFIG, training_config(accumulation_steps=2), str(tmp_path / "two"),
                              batch_tokens=24)
    loss, tokens, _ = two.train_step(iter(tf.data.Dataset.from_tensors(a).concatenate(
        tf.data.Dataset.from_tensors(b))))
    assert float(tokens) == np.count_nonzero(both[1])
    assert len(momentums(one)) == len(weights(one))
    for x, y in zip(momentums(one), momentums(two)):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-4 * float(np.max(np.abs(x))) + 1e-12)
    # Adam's first step is lr * g / (|g| + 1e-9): equal weights wherever the gradient is
    # well above rounding; elsewhere each side moved at most lr, in either direction.
    lr = one.learning_rate(1)
    for x, y, m in zip(weights(one), weights(two), momentums(one)):
        significant = np.abs(m) > 1e-3 * np.max(np.abs(m))
        np.testing.assert_allclose(x[significant], y[significant], atol=1e-4)
        assert np.max(np.abs(x - y)) <= 2 * lr * (1 + 1e-3)
    assert all(np.all(acc.numpy() == 0) for acc in two.accumulators)


@pytest.mark.slow
def test_r_drop_without_dropout_is_the_plain_update(tmp_path):
    """Without dropout both copies of R-Drop's doubled batch give the same distributions: the KL
    term is 0 and the mean of the two losses is the plain loss, so the update is the plain one."""
    batch = make_batches(1, seed=5)[0]
    plain = trainer_lib.build_trainer(CONFIG, training_config(), str(tmp_path / "plain"), batch_tokens=24)
    r_drop = trainer_lib.build_trainer(CONFIG, training_config(rdrop_alpha=5.0), str(tmp_path / "r_drop"),
                                       batch_tokens=24)
    (loss, tokens, _), (r_loss, r_tokens, _) = (t.train_step(iter(tf.data.Dataset.from_tensors(batch)))
                                                for t in (plain, r_drop))
    assert float(r_tokens) == float(tokens) == np.count_nonzero(batch[1])  # the batch counted once
    np.testing.assert_allclose(float(r_loss), float(loss), rtol=1e-5)
    for x, y in zip(momentums(plain), momentums(r_drop)):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-4 * float(np.max(np.abs(x))) + 1e-12)


def test_r_drop_adds_alpha_times_a_positive_kl_term_with_dropout(tmp_path):
    """With dropout the two copies differ (their own masks): the same seed draws the same masks at
    every alpha, so the first update's loss is CE + alpha * KL / 2 per token, linear in alpha with
    a positive slope (Liang et al., 2021, equation 3, as fairseq's `--rdrop-alpha` normalises it)."""
    config = dataclasses.replace(CONFIG, dropout_rate=0.3)
    batch = make_batches(1, seed=5)[0]
    losses = []
    for alpha in (1.0, 3.0, 5.0):
        trainer = trainer_lib.build_trainer(config, training_config(rdrop_alpha=alpha), str(tmp_path / str(alpha)),
                                            batch_tokens=24)
        losses.append(float(trainer.train_step(iter(tf.data.Dataset.from_tensors(batch)))[0]))
    slope = (losses[2] - losses[0]) / 4.0
    assert slope > 1e-4, losses  # half the KL per token
    np.testing.assert_allclose(losses[1], losses[0] + 2.0 * slope, rtol=1e-5)


@pytest.mark.slow
def test_the_loss_is_compiled_after_the_first_updates_with_the_same_updates(tmp_path):
    """A process's first `compile_loss_after` updates use TensorFlow's loss kernels, the later ones
    XLA's (only they are traced then); from the same start both make the same update."""
    batches = make_batches(3, length=5) + make_batches(2, length=9, seed=1)  # two shapes
    kernels = trainer_lib.build_trainer(CONFIG, training_config(train_steps=5), str(tmp_path / "k"),
                                        compile_loss_after=5)
    switching = trainer_lib.build_trainer(CONFIG, training_config(train_steps=5), str(tmp_path / "s"),
                                          compile_loss_after=2)
    compiled = trainer_lib.build_trainer(CONFIG, training_config(train_steps=5), str(tmp_path / "c"),
                                         compile_loss_after=0)
    assert trainer_lib.COMPILE_LOSS_AFTER > 0 and trainer_lib.build_trainer(
        CONFIG, training_config(), str(tmp_path / "d")).compile_loss_after == trainer_lib.COMPILE_LOSS_AFTER
    losses = {}
    for name, trainer in ("kernels", kernels), ("switching", switching), ("compiled", compiled):
        iterator = iter(input_fn_from(batches)(None))
        losses[name] = [float(trainer.train_step(iterator)[0]) for _ in range(5)]
    assert kernels._compiled_step_fns[1].experimental_get_tracing_count() == 0
    assert compiled._step_fns[1].experimental_get_tracing_count() == 0
    assert switching._step_fns[1].experimental_get_tracing_count() >= 1
    assert switching._compiled_step_fns[1].experimental_get_tracing_count() >= 1
    np.testing.assert_allclose(losses["switching"], losses["kernels"], rtol=1e-5)
    np.testing.assert_allclose(losses["compiled"], losses["kernels"], rtol=1e-5)
    for x, y in zip(momentums(kernels), momentums(compiled)):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-4 * float(np.max(np.abs(x))) + 1e-12)


def test_the_optimizer_and_the_log_follow_the_cooldown(tmp_path):
    """With --cooldown_steps the rate Adam applies at each update is the one the trainer logs."""
    trainer = trainer_lib.build_trainer(CONFIG, training_config(train_steps=10, warmup_steps=2, cooldown_steps=4),
                                        str(tmp_path))
    plain = trainer_lib.build_trainer(CONFIG, training_config(train_steps=10, warmup_steps=2), str(tmp_path / "p"))
    for update in range(1, 11):
        trainer.optimizer.iterations.assign(update - 1)
        assert float(trainer.optimizer.learning_rate) == pytest.approx(trainer.learning_rate(update), rel=1e-6)
        factor = min(1.0, (11 - update) / 4)
        assert trainer.learning_rate(update) == pytest.approx(plain.learning_rate(update) * factor, rel=1e-6)


@pytest.mark.slow
def test_patience_starts_the_cooldown_which_a_resume_continues(tmp_path):
    """With --cooldown_steps C, early stopping's patience running out at step S makes S + C the
    last update. The run reaches the weights of a run told from the start to end there, and runs
    killed during the evaluation at S or during the cool-down, then resumed, reach them too (one
    batch, no dropout: the same updates)."""
    scores = {1: 10.0, 2: 12.0, 3: 11.0, 4: 11.5, 5: 12.5, 6: 13.0, 7: 14.0}
    batches = make_batches(1)
    config = training_config(train_steps=20, warmup_steps=2, eval_every_steps=1, early_stopping_patience=2,
                             cooldown_steps=3, log_every_steps=1)

    def run(model_dir, lines, interrupt_at=None):
        trainer = trainer_lib.build_trainer(CONFIG, config, str(model_dir), log=lines.append)
        trainer.restore()

        def evaluate(_model):
            step = int(trainer.step.numpy())
            if step == interrupt_at:
                os.kill(os.getpid(), signal.SIGINT)  # during the evaluation: not recorded, redone on resume
            return {"loss": 1.5, "nll": 1.25, "perplexity": 3.5, "bleu": scores[step], "signature": "s"}
        return trainer, trainer.train(input_fn_from(batches), evaluate)

    lines = []
    cooled, state = run(tmp_path / "cooled", lines)
    assert (state.step, state.stop_reason, state.best_value) == (7, "early stopping", 14.0)
    assert ("patience ran out at step 4: no better dev BLEU for 2 evaluations (best 12.00 at step 2): the cool-down starts, the "
            "learning rate falling to 0 over 3 updates; the run stops at step 7") in lines
    assert [line.split(" loss ")[0] for line in lines if line.startswith("step ")][3:] == [
        "step 4/20", "step 5/7", "step 6/7", "step 7/7"]
    assert lines[-1] == ("stopped at step 7, the end of the cool-down that early stopping started at step 4 "
                         "(best BLEU 14.00 at step 7)")
    history = trainer_lib.read_eval_history(str(tmp_path / "cooled"))
    assert [(r["step"], r.get("cooldown_to")) for r in history] == [(1, None), (2, None), (3, None), (4, 7), (5, None),
                                                                    (6, None), (7, None)]
    assert trainer_lib.planned_end(history) == 7 and trainer_lib.planned_end(history[:3]) is None
    rates = read_scalars(tmp_path / "cooled" / "train")["learning_rate"]
    plain = trainer_lib.build_trainer(CONFIG, training_config(train_steps=20, warmup_steps=2), str(tmp_path / "p"))
    assert [rates[s] / plain.learning_rate(s) for s in range(1, 8)] == pytest.approx([1, 1, 1, 1, 1, 2 / 3, 1 / 3],
                                                                                    rel=1e-5)
    cooled.optimizer.iterations.assign(7)  # the schedule Adam reads ends there too: update 8 would get 0
    assert float(cooled.optimizer.learning_rate) == 0.0
    told = trainer_lib.build_trainer(CONFIG, training_config(train_steps=7, warmup_steps=2, cooldown_steps=3),
                                     str(tmp_path / "told"))
    told.train(input_fn_from(batches))
    for a, b in zip(weights(cooled), weights(told)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # Killed during the evaluation at 4 (where patience runs out) or at 6 (during the cool-down), then
    # the same command: the dropped evaluation is made first, and the run ends at 7 with the same weights.
    for kill_at in (4, 6):
        model_dir, killed_lines = tmp_path / f"killed_{kill_at}", []
        _, state = run(model_dir, killed_lines, interrupt_at=kill_at)
        assert (state.step, state.stop_reason) == (kill_at, "interrupted")
        resumed, state = run(model_dir, killed_lines)
        assert (state.step, state.stop_reason) == (7, "early stopping")
        assert [r["step"] for r in trainer_lib.read_eval_history(str(model_dir))] == [1, 2, 3, 4, 5, 6, 7]
        assert f"the evaluation of step {kill_at} was interrupted before; evaluating it first" in killed_lines
        for a, b in zip(weights(resumed), weights(cooled)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # Run once more, it has ended: nothing to train.
    again_lines = []
    _, state = run(model_dir, again_lines)
    assert (state.step, state.stop_reason) == (7, "early stopping")
    assert again_lines[0] == ("the run cooled down and stopped before, at step 7 (early stopping, best BLEU 14.00 "
                              "at step 7); nothing to train")


def test_a_run_stopped_early_without_a_cooldown_cools_down_when_run_again_with_one(tmp_path):
    """Early stopping without --cooldown_steps stops at once; the same command with it resumes the
    stopped run for its cool-down (the 4x run of docs/results.md#compute-robustness)."""
    scores = iter([10.0, 12.0, 11.0, 11.5, 12.5, 12.4])

    def evaluator(_model):
        return {"loss": 1.5, "nll": 1.25, "perplexity": 3.5, "bleu": next(scores), "signature": "s"}

    config = training_config(train_steps=20, eval_every_steps=1, early_stopping_patience=2, log_every_steps=1)
    stopped = trainer_lib.build_trainer(CONFIG, config, str(tmp_path))
    assert stopped.train(input_fn_from(make_batches(4)), evaluator).step == 4
    # An evaluation recorded after the checkpoint restored (a kill lost its weights) is dropped, not replayed.
    path = tmp_path / "eval" / "history.json"
    records = json.loads(path.read_text())
    records["evaluations"].append({"step": 5, "bleu": 99.0, "loss": 1.0})
    path.write_text(json.dumps(records))
    lines = []
    cooled = trainer_lib.build_trainer(CONFIG, dataclasses.replace(config, cooldown_steps=2), str(tmp_path),
                                       log=lines.append)
    assert cooled.restore() == 4
    state = cooled.train(input_fn_from(make_batches(4)), evaluator)
    assert (state.step, state.stop_reason, state.best_value) == (6, "early stopping", 12.5)
    assert [line.split(" lr ")[0].split(" loss ")[0] for line in lines if line.startswith("step ")] == [
        "step 5/6", "step 6/6"]
    assert lines[0] == f"{path}: 1 evaluation(s) after step 4, the checkpoint restored, dropped (their weights " \
        "were not saved; they are evaluated again)"
    assert lines[1] == ("patience ran out at step 4: no better dev BLEU for 2 evaluations (best 12.00 at step 2): "
                        "the cool-down starts, the learning rate falling to 0 over 2 updates; the run stops at step 6")
    assert cooled.learning_rate(5) == pytest.approx(stopped.learning_rate(5))
    assert cooled.learning_rate(6) == pytest.approx(stopped.learning_rate(6) / 2)
    cooled.optimizer.iterations.assign(5)  # Adam's own schedule: update 6 at half the rate, then 0
    assert float(cooled.optimizer.learning_rate) == pytest.approx(stopped.learning_rate(6) / 2, rel=1e-6)
    cooled.optimizer.iterations.assign(6)
    assert float(cooled.optimizer.learning_rate) == 0.0


def test_resume_continues_the_step_counter_and_the_optimizer(tmp_path):
    batches = make_batches(2, length=5) + make_batches(2, length=8)  # bucketed shapes
    config = training_config(train_steps=4, checkpoint_every_steps=2)
    first = trainer_lib.build_trainer(CONFIG, config, str(tmp_path))
    assert first.restore() == 0
    first.train(input_fn_from(batches))
    assert os.path.basename(first.checkpoints.manager.latest_checkpoint) == "ckpt-4"
    resumed = trainer_lib.build_trainer(CONFIG, training_config(train_steps=6, checkpoint_every_steps=2), str(tmp_path))
    assert resumed.restore() == 4
    assert int(resumed.optimizer.iterations.numpy()) == 4  # the learning-rate position
    for x, y in zip(weights(first), weights(resumed)):
        np.testing.assert_array_equal(x, y)
    state = resumed.train(input_fn_from(batches))
    assert state.step == 6 and int(resumed.step.numpy()) == 6
    assert [os.path.basename(p) for p in resumed.checkpoints.manager.checkpoints] == ["ckpt-2", "ckpt-4", "ckpt-6"]
    assert resumed._step_fns[1].experimental_get_tracing_count() == 1  # no retracing on new shapes


def test_a_resumed_run_draws_the_dropout_masks_the_uninterrupted_run_draws(tmp_path):
    """The dropout layers' random state is in the checkpoint: after a restore, the next update is
    the one the run that was not stopped makes on the same batch (same weights, masks, Adam)."""
    with_dropout = dataclasses.replace(CONFIG, dropout_rate=0.3)
    batches = make_batches(4)
    running = trainer_lib.build_trainer(with_dropout, training_config(train_steps=4), str(tmp_path))
    iterator = iter(input_fn_from(batches)(None))
    for _ in range(3):
        running.train_step(iterator)
    running.save()
    resumed = trainer_lib.build_trainer(with_dropout, training_config(train_steps=4), str(tmp_path))
    assert resumed.restore() == 3
    last = iter(tf.data.Dataset.from_tensors(batches[3]))
    running.train_step(last)
    resumed.train_step(iter(tf.data.Dataset.from_tensors(batches[3])))
    for x, y in zip(weights(running), weights(resumed)):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    trainer = trainer_lib.build_trainer(CONFIG, training_config(train_steps=10, checkpoint_every_steps=2),
                                  str(tmp_path))
    iterator = iter(tf.data.Dataset.from_generator(
        lambda: iter(make_batches(100)), output_signature=(tf.TensorSpec([None, None], tf.int32),) * 2))
    for _ in range(2):
        trainer.train_step(iterator)
    trainer.save()
    poisoned = trainer.model.trainable_variables[0]
    poisoned.assign(tf.fill(poisoned.shape, np.nan))
    with pytest.raises(trainer_lib.TrainingDiverged,
                       match=r"loss became NaN at step 3; the last good checkpoint is ckpt-2"):
        trainer.train(input_fn_from(make_batches(4)))
    assert os.path.basename(tf.train.latest_checkpoint(str(tmp_path / "checkpoints"))) == "ckpt-2"


def test_eta_counts_down_to_the_time_budget_not_train_steps(tmp_path):
    lines = []
    trainer = trainer_lib.build_trainer(
        CONFIG, training_config(train_steps=10**6, max_train_minutes=0.05, log_every_steps=10),
        str(tmp_path), log=lines.append)
    traced = trainer.train(input_fn_from(make_batches(4))).step  # tracing spends most of the 3 s
    del lines[:]
    state = trainer.train(input_fn_from(make_batches(4)))  # the same process again, traced
    assert state.stop_reason == "time budget" and traced + 10 < state.step < 10**6, (traced, state.step)
    steps = [line for line in lines if line.startswith("step ")]
    assert steps and all("/~" in line for line in steps), steps[:3]
    clocks = [line.rsplit("ETA ", 1)[1] for line in steps]
    # Unknown ("-:--:--") only on a line logged at this call's first update: no rate measured yet.
    first_update_logged = steps[0].startswith(f"step {traced + 1}/")
    assert all(clock != "-:--:--" for clock in clocks[first_update_logged:]), clocks
    etas = [sum(int(x) * 60**i for i, x in enumerate(reversed(clock.split(":"))))
            for clock in clocks[first_update_logged:]]
    assert etas and max(etas) <= 3, etas  # never more than the 3-second budget (was hours: 10^6 steps)


def test_a_trainer_is_handed_its_model_optimizer_and_checkpoints(tmp_path):
    config = training_config(train_steps=2, checkpoint_every_steps=1, precision="mixed_bfloat16")
    model, optimizer, step = trainer_lib.build_model_and_optimizer(CONFIG, config)
    assert keras.mixed_precision.global_policy().name == "float32"  # set while building, then restored
    assert model.compute_dtype == "bfloat16" and int(step.numpy()) == 0
    again, _, _ = trainer_lib.build_model_and_optimizer(CONFIG, config)  # the seed fixes the weights
    for x, y in zip(model.weights, again.weights):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    checkpoints = Checkpoints(str(tmp_path), model, optimizer, step, keep=1)
    trainer = trainer_lib.Trainer(model, optimizer, checkpoints, config, str(tmp_path), log=[].append)
    assert trainer.model is model and trainer.optimizer is optimizer and trainer.step is step
    assert trainer.train(input_fn_from(make_batches(2))).step == 2
    assert checkpoints.latest_name() == "ckpt-2"
    keys = {name.split("/")[0] for name, _ in tf.train.list_variables(checkpoints.manager.latest_checkpoint)}
    assert keys == {"model", "optimizer", "step", "save_counter", "_CHECKPOINTABLE_OBJECT_GRAPH"}


def test_auto_precision_is_resolved_before_building():
    config = training_config(precision="auto")  # a config may carry "auto" until the devices are known
    with pytest.raises(ValueError, match="resolve_precision"):
        trainer_lib.build_model_and_optimizer(CONFIG, config)
    with pytest.raises(ValueError, match="precision must be"):
        training_config(precision="float64")

def test_evaluation_history_summaries_and_early_stopping_in_the_loop(tmp_path):
    bleus = iter([10.0, 12.0, 11.0, 11.5, 11.9])

    def evaluator(_model):
        return {"loss": 1.5, "nll": 1.25, "perplexity": 3.5, "bleu": next(bleus), "signature": "sig",
                "hypotheses": ["x"]}

    lines = []
    config = training_config(train_steps=20, eval_every_steps=1, early_stopping_patience=2, log_every_steps=1)
    trainer = trainer_lib.build_trainer(CONFIG, config, str(tmp_path), log=lines.append)
    state = trainer.train(input_fn_from(make_batches(4)), evaluator)
    assert (state.step, state.stop_reason, state.evaluation["bleu"]) == (4, "early stopping", 11.5)
    assert (state.best_value, state.best_step, state.evaluations_since_best) == (12.0, 2, 2)
    assert lines[-1] == "early stopping at step 4: no better dev BLEU for 2 evaluations (best 12.00 at step 2)"
    assert [line.split(" loss ")[0] for line in lines if line.startswith("step ")] == [
        f"step {s}/20" for s in range(1, 5)]
    assert trainer.checkpoints.latest_name() == "ckpt-4"  # saved on stopping
    history = trainer_lib.read_eval_history(str(tmp_path))
    assert [(r["step"], r["bleu"]) for r in history] == [(1, 10.0), (2, 12.0), (3, 11.0), (4, 11.5)]
    assert "hypotheses" not in history[0]
    scalars = {(directory, tag): values for directory in ("train", "eval")
               for tag, values in read_scalars(tmp_path / directory).items()}
    assert sorted(scalars) == [("eval", "bleu"), ("eval", "loss"), ("eval", "nll"), ("eval", "perplexity"),
                               ("train", "gradient_norm"), ("train", "learning_rate"), ("train", "loss"),
                               ("train", "tokens_per_second")]
    assert scalars[("eval", "bleu")] == {1: 10.0, 2: 12.0, 3: 11.0, 4: 11.5}
    assert sorted(scalars[("train", "loss")]) == [1, 2, 3, 4]
    # Started again, the stopped run stays stopped: its end happened once.
    again = trainer_lib.build_trainer(CONFIG, config, str(tmp_path), log=lines.append)
    assert again.restore() == 4
    state = again.train(input_fn_from(make_batches(4)), evaluator)
    assert (state.step, state.stop_reason, state.best_value, state.evaluation["bleu"]) == (4, "early stopping", 12.0, 11.5)
    assert lines[-1].startswith("the run stopped early before") and again.checkpoints.latest_name() == "ckpt-4"
    # With more patience it resumes, keeping the best BLEU and the count from history.json: its
    # first evaluation without a better BLEU stops it.
    more = dataclasses.replace(config, eval_every_steps=2, early_stopping_patience=3)
    resumed = trainer_lib.build_trainer(CONFIG, more, str(tmp_path), log=lines.append)
    assert resumed.restore() == 4
    state = resumed.train(input_fn_from(make_batches(4)), evaluator)
    assert (state.step, state.stop_reason, state.best_value, state.best_step) == (6, "early stopping", 12.0, 2)
    assert state.evaluations_since_best == 3


def test_the_end_of_a_run_happens_once_also_when_a_kill_came_after_the_last_save(tmp_path):
    calls = []

    def evaluator(_model):
        calls.append(1)
        return {"loss": 1.5, "nll": 1.25, "perplexity": 3.5, "bleu": 20.0 + len(calls), "signature": "sig"}

    config = training_config(train_steps=3, eval_every_steps=0, checkpoint_every_steps=1)
    trainer = trainer_lib.build_trainer(CONFIG, config, str(tmp_path))
    state = trainer.train(input_fn_from(make_batches(4)), evaluator)
    assert (state.step, len(calls), state.best_value) == (3, 1, 21.0)
    os.remove(tmp_path / "eval" / "history.json")  # as if killed between the last save and the evaluation
    lines = []
    again = trainer_lib.build_trainer(CONFIG, config, str(tmp_path), log=lines.append)
    assert again.restore() == 3
    state = again.train(input_fn_from(make_batches(4)), evaluator)
    assert (state.step, state.stop_reason, len(calls), state.best_value) == (3, "train_steps", 2, 22.0)
    assert lines[0] == "the run reached --train_steps=3 before; nothing to train"
    assert lines[1].startswith("eval step 3: dev loss")
    once_more = trainer_lib.build_trainer(CONFIG, config, str(tmp_path), log=lines.append)
    once_more.restore()
    state = once_more.train(input_fn_from(make_batches(4)), evaluator)
    assert (len(calls), state.best_value, state.evaluation["bleu"]) == (2, 22.0, 22.0)  # evaluated before
    assert [r["step"] for r in trainer_lib.read_eval_history(str(tmp_path))] == [3]


def test_a_signal_finishes_the_update_saves_and_stops(tmp_path):
    """SIGINT here; SIGTERM through the command in test_faults_training.py."""
    signum = signal.SIGINT
    lines = []

    def log(line):
        lines.append(line)
        if line.startswith("step 2/"):
            os.kill(os.getpid(), signum)  # as Ctrl-C or `kill` would, mid-run

    config = training_config(train_steps=50, log_every_steps=1, checkpoint_every_steps=0)
    trainer = trainer_lib.build_trainer(CONFIG, config, str(tmp_path), log=log)
    before = signal.getsignal(signum)  # default_int_handler, in a background job too (tests/conftest.py)
    state = trainer.train(input_fn_from(make_batches(4)), lambda model: pytest.fail("no evaluation when stopped"))
    assert (state.step, state.stop_reason, state.signal) == (2, "interrupted", signum)
    assert lines[-1] == f"{signal.Signals(signum).name} at step 2: saved ckpt-2; run the same command to resume"
    assert signal.getsignal(signum) is before  # the handler the process had is back
    resumed = trainer_lib.build_trainer(CONFIG, config, str(tmp_path))
    assert resumed.restore() == 2


REPLICA_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    from keras_transformer import cli
    tf = cli.start_tensorflow(cpu_replicas=int(sys.argv[1]))
    from tests.keras_transformer.training.test_trainer import CONFIG, make_batches, momentums, training_config, weights
    from keras_transformer.training import distribution, trainer as trainer_lib
    replicas = int(sys.argv[1])
    strategy = distribution.create_strategy(num_gpus=0, cpu_replicas=replicas)
    assert strategy.num_replicas_in_sync == replicas
    global_batches = make_batches(3, batch=4, seed=7)
    # Replica r of step s gets rows [r * 4 / R, (r + 1) * 4 / R) of global batch s.
    parts = [tuple(x[r * 4 // replicas:(r + 1) * 4 // replicas] for x in b)
             for b in global_batches for r in range(replicas)]
    def input_fn(context):
        return tf.data.Dataset.from_generator(
            lambda: iter(parts), output_signature=(tf.TensorSpec([None, None], tf.int32),) * 2)
    trainer = trainer_lib.build_trainer(CONFIG, training_config(train_steps=3, ema_decay=0.9), sys.argv[2], strategy)
    state = trainer.train(input_fn)
    assert state.step == 3
    for shadow in trainer.ema.shadow:  # the moving average: one copy per replica, all equal
        copies = [c.numpy() for c in strategy.experimental_local_results(shadow)]
        assert len(copies) == replicas and all(np.array_equal(copies[0], c) for c in copies)
    np.savez(sys.argv[2] + "/weights.npz", *weights(trainer))
    np.savez(sys.argv[2] + "/momentums.npz", *momentums(trainer))
    np.savez(sys.argv[2] + "/shadows.npz", *[s.numpy() for s, v in zip(trainer.ema.shadow,
             trainer.model.trainable_variables) if not v.path.endswith("key/bias")])
""")


@pytest.mark.slow
def test_two_cpu_replicas_reach_the_same_weights_as_one(tmp_path):
    """MirroredStrategy over 2 logical CPUs vs 1 device, same 3 global batches (the moving
    average of the weights, `--ema_decay`, on: its replicas' copies agree, and with one device's).

    Tolerances: Adam's first moments (the gradients, linearly) agree to 1e-4 of each tensor's
    largest entry; the
    weights to 1e-4 absolute, 0.1% of the first step's learning rate (0.088): Adam turns
    rounding differences in near-zero gradients into visible steps (see `weights`).
    Measured: about 6e-5 for the weights, 1e-7 for most.
    """
    script = tmp_path / "replicas.py"
    script.write_text(REPLICA_SCRIPT)
    results = []
    for replicas in (1, 2):
        out = tmp_path / f"r{replicas}"
        out.mkdir()
        result = run_command(script, replicas, out)
        assert result.returncode == 0, result.stderr[-3000:]
        arrays = []
        for name in ("weights", "momentums", "shadows"):
            with np.load(out / f"{name}.npz") as data:
                arrays.append([data[k] for k in sorted(data.files, key=lambda k: int(k.split("_")[1]))])
        results.append(arrays)
    (w1, m1, s1), (w2, m2, s2) = results
    for a, b in zip(m1, m2):  # relative to each tensor's largest entry
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-4 * float(np.max(np.abs(a))) + 1e-12)
    worst = max(float(np.max(np.abs(a - b))) for a, b in zip(w1, w2))
    median = float(np.median(np.concatenate([np.abs(a - b).ravel() for a, b in zip(w1, w2)])))
    assert worst < 1e-4, worst
    assert len(s1) == len(w1) and max(float(np.max(np.abs(a - b))) for a, b in zip(s1, s2)) < 1e-4
    print(f"1 vs 2 replicas after 3 steps: |weight difference| max {worst:.1e}, median {median:.1e}")



# The same dev scores by two metrics: the dev loss (lower is better) and a parsing run's EVALB F1
# (higher is better), given as 50 - 10 * loss, so that both rank the steps alike.
@pytest.mark.parametrize("metric, score, shown, stop_line", [
    ("loss", lambda loss: loss, "loss 1.5", "no better dev loss for 3 evaluations (best 1.5000 at step 4)"),
    ("f1", lambda loss: 50.0 - 10.0 * loss, "f1 35", "no better dev F1 for 3 evaluations (best 35.00 at step 4)"),
])
def test_the_best_checkpoints_by_a_dev_metric_are_saved_kept_and_survive_a_resume(tmp_path, metric, score, shown,
                                                                                  stop_line):
    """--keep_best_checkpoints: every evaluated step is saved (no checkpoint is due by count here),
    the best by the dev metric are copied to MODEL_DIR/best, and a resumed run goes on with the list;
    early stopping watches the same metric."""
    losses = iter([3.0, 2.0, 2.5, 1.5, 2.2, 2.4, 2.6])

    def evaluator(_model):
        loss = next(losses)
        return {"loss": loss, "nll": 1.0, "perplexity": 2.7, "bleu": 1.0, "signature": "sig",
                **({"f1": score(loss), "repaired": 0.0} if metric == "f1" else {})}

    config = training_config(train_steps=4, eval_every_steps=1, keep_checkpoints=1, keep_best_checkpoints=2,
                             best_checkpoint_metric=metric, early_stopping_patience=3)
    lines = []
    trainer = trainer_lib.build_trainer(CONFIG, config, str(tmp_path), log=lines.append)
    state = trainer.train(input_fn_from(make_batches(4)), evaluator)
    assert (state.step, state.best_metric, state.best_value, state.best_step) == (4, metric, score(1.5), 4)
    listed = json.loads((tmp_path / "best" / "best.json").read_text())
    assert listed["metric"] == metric
    assert [(e["step"], e["value"]) for e in listed["checkpoints"]] == [(4, score(1.5)), (2, score(2.0))]
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["checkpoint", "ckpt-4.data-00000-of-00001", "ckpt-4.index"]
    # The copy of step 2 holds step 2's weights, though rotation removed checkpoints/ckpt-2.
    step_of = tf.train.load_variable(str(tmp_path / "best" / "ckpt-2"), "step/.ATTRIBUTES/VARIABLE_VALUE")
    assert int(step_of) == 2
    assert any(line.startswith(f"best checkpoints: ckpt-4 ({shown}) is number 1 of 2") for line in lines), lines
    # Resumed for more updates: the list goes on, and three evaluations without a better score stop it.
    more = dataclasses.replace(config, train_steps=20)
    resumed = trainer_lib.build_trainer(CONFIG, more, str(tmp_path), log=lines.append)
    assert resumed.restore() == 4
    state = resumed.train(input_fn_from(make_batches(4)), evaluator)
    assert (state.step, state.stop_reason, state.best_value, state.best_step) == (7, "early stopping", score(1.5), 4)
    best = json.loads((tmp_path / "best" / "best.json").read_text())["checkpoints"]
    assert [(e["step"], e["value"]) for e in best] == [(4, score(1.5)), (2, score(2.0))]
    assert lines[-1] == f"early stopping at step 7: {stop_line}"
