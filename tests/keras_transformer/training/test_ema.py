"""The moving average of the weights: its formula, the swap, and its life in a training run
(updated after each update, checkpointed, resumed, evaluated, read by translation/export/averaging)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.run_dir import averaging, layout, readable_checkpoints
from keras_transformer.training import ema as ema_lib
from keras_transformer.training import trainer as trainer_lib
from tests.keras_transformer.training.test_trainer import CONFIG, input_fn_from, make_batches, training_config


def closed_form(values, decay):
    """shadow_n of w_0, ..., w_n in float64: sum_k w_k (1 - d_k) prod_{j > k} d_j, with d_0 = 0
    (the shadow starts as w_0) and d_t = min(decay, (1 + t) / (10 + t))."""
    d = [0.0] + [min(decay, (1 + t) / (10 + t)) for t in range(1, len(values))]
    total = 0.0
    for k, value in enumerate(values):
        total += np.asarray(value, np.float64) * (1 - d[k]) * np.prod(d[k + 1:])
    return total


def test_the_average_of_a_constant_model_is_the_model():
    variable = tf.Variable(np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4))
    ema = ema_lib.ExponentialMovingAverage([variable], decay=0.9999)
    for t in range(1, 50):
        ema.update(t)
    np.testing.assert_allclose(ema.shadow[0].numpy(), variable.numpy(), rtol=1e-6)


def test_after_n_updates_the_shadow_is_the_closed_form_and_tensorflows_average():
    """Two independent paths: the closed form above, and tf.train.ExponentialMovingAverage with
    num_updates (the same ramp, Marian's); both start from the first weights."""
    variable = tf.Variable([1.0, -2.0, 0.5])
    ours = ema_lib.ExponentialMovingAverage([variable], decay=0.9)
    reference = tf.train.ExponentialMovingAverage(0.9, num_updates=tf.Variable(0, dtype=tf.int64))
    reference.apply([variable])  # its shadow starts as the variable too
    values = [variable.numpy().copy()]
    rng = np.random.default_rng(0)
    for t in range(1, 40):
        variable.assign_add(rng.normal(size=3).astype(np.float32))  # an optimizer step
        values.append(variable.numpy().copy())
        ours.update(t)
        reference._num_updates.assign(t)
        reference.apply([variable])
    np.testing.assert_allclose(ours.shadow[0].numpy(), closed_form(values, 0.9), rtol=1e-5)
    np.testing.assert_allclose(ours.shadow[0].numpy(), reference.average(variable).numpy(), rtol=1e-6)
    assert float(ema_lib.decay_at(0.9, 1)) == pytest.approx(2 / 11)
    assert float(ema_lib.decay_at(0.9, 1000)) == pytest.approx(0.9)


def test_swapped_puts_the_shadow_in_and_the_weights_back_after_an_error():
    variable = tf.Variable([1.0, 2.0])
    ema = ema_lib.ExponentialMovingAverage([variable], decay=0.5)
    ema.shadow[0].assign([5.0, 6.0])
    with pytest.raises(RuntimeError):
        with ema.swapped():
            np.testing.assert_array_equal(variable.numpy(), [5.0, 6.0])
            raise RuntimeError("evaluation failed")
    np.testing.assert_array_equal(variable.numpy(), [1.0, 2.0])
    with pytest.raises(ValueError, match="in \\(0, 1\\)"):
        ema_lib.ExponentialMovingAverage([variable], decay=1.0)


def shadow(trainer):
    return [v.numpy() for v in trainer.ema.shadow]


def test_training_updates_the_average_after_each_update_and_leaves_the_weights_alone(tmp_path):
    """Off is today's loop: the weights of a run with an average are those of a run without,
    bit for bit, and its checkpoints hold no `ema`; on, the shadow is the closed form of the
    weights after each update."""
    batches = make_batches(3)
    plain = trainer_lib.build_trainer(CONFIG, training_config(), str(tmp_path / "plain"))
    assert plain.ema is None
    path = plain.checkpoints.save()
    assert {n.split("/")[0] for n, _ in tf.train.list_variables(path)} == {
        "model", "optimizer", "step", "save_counter", "_CHECKPOINTABLE_OBJECT_GRAPH"}
    smoothed = trainer_lib.build_trainer(CONFIG, training_config(ema_decay=0.99), str(tmp_path / "ema"))
    history = [[v.numpy() for v in smoothed.model.trainable_variables]]
    iterators = [iter(input_fn_from(batches)(None)) for _ in range(2)]
    for _ in range(3):
        plain.train_step(iterators[0])
        smoothed.train_step(iterators[1])
        history.append([v.numpy() for v in smoothed.model.trainable_variables])
    for a, b in zip(plain.model.trainable_variables, smoothed.model.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for i, value in enumerate(shadow(smoothed)):
        assert value.dtype == np.float32
        np.testing.assert_allclose(value, closed_form([h[i] for h in history], 0.99), rtol=1e-5, atol=1e-7)
    assert not np.allclose(shadow(smoothed)[0], history[-1][0])  # an average, not the last weights


def test_the_average_survives_a_kill_and_resume(tmp_path):
    """Stopped at step 2 and resumed to 4, the shadow equals an uninterrupted run's."""
    batches = make_batches(4)
    whole = trainer_lib.build_trainer(CONFIG, training_config(train_steps=4, ema_decay=0.9), str(tmp_path / "a"))
    whole.train(input_fn_from(batches))
    first = trainer_lib.build_trainer(CONFIG, training_config(train_steps=2, ema_decay=0.9), str(tmp_path / "b"))
    first.train(input_fn_from(batches))  # saves ckpt-2 at its end
    resumed = trainer_lib.build_trainer(CONFIG, training_config(train_steps=4, ema_decay=0.9), str(tmp_path / "b"))
    assert resumed.restore() == 2
    np.testing.assert_array_equal(shadow(resumed)[0], shadow(first)[0])
    resumed.train(lambda _: input_fn_from(batches)(None).skip(2))
    for a, b in zip(shadow(whole), shadow(resumed)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    assert not np.allclose(shadow(whole)[0], whole.model.trainable_variables[0].numpy())


def test_a_resume_that_turns_the_average_on_starts_it_from_the_restored_weights(tmp_path):
    trainer_lib.build_trainer(CONFIG, training_config(train_steps=2), str(tmp_path)).train(
        input_fn_from(make_batches(2)))
    lines = []
    resumed = trainer_lib.build_trainer(CONFIG, training_config(train_steps=4, ema_decay=0.9), str(tmp_path),
                                        log=lines.append)
    assert resumed.restore() == 2
    for a, b in zip(shadow(resumed), resumed.model.trainable_variables):
        np.testing.assert_array_equal(a, b.numpy())
    assert any("holds no moving average" in line for line in lines)


def test_evaluation_translation_and_averaging_use_the_average(tmp_path):
    """The dev evaluation sees the shadow (and training goes on with its own weights); a saved
    checkpoint read for translation or export (`layout.restore_model`) gives the shadow, and
    averaging two checkpoints averages their shadows."""
    seen = []

    def evaluator(model):
        seen.append([v.numpy() for v in model.trainable_variables])
        return {"loss": 1.0, "nll": 1.0, "perplexity": 2.7}

    model_dir = str(tmp_path)
    config = training_config(train_steps=4, ema_decay=0.9, eval_every_steps=2, checkpoint_every_steps=2)
    trainer = trainer_lib.build_trainer(CONFIG, config, model_dir)
    layout.write_config(model_dir, CONFIG, training=config.to_dict())
    trainer.train(input_fn_from(make_batches(4)), evaluator)
    assert len(seen) == 2
    for a, b in zip(seen[-1], shadow(trainer)):
        np.testing.assert_array_equal(a, b)
    weights = [v.numpy() for v in trainer.model.trainable_variables]
    assert not np.allclose(weights[0], seen[-1][0])  # swapped back after the evaluation
    restored, path = layout.restore_model(model_dir)
    assert os.path.basename(path) == "ckpt-4"
    for a, b in zip(restored.trainable_variables, shadow(trainer)):
        np.testing.assert_array_equal(a.numpy(), b)
    readable_checkpoints.read_model(restored, path, moving_average=False)  # the trained weights instead
    for a, b in zip(restored.trainable_variables, weights):
        np.testing.assert_array_equal(a.numpy(), b)
    shadows = []
    for step in (2, 4):
        model, _ = layout.restore_model(model_dir, os.path.join(model_dir, "checkpoints", f"ckpt-{step}"))
        shadows.append([v.numpy() for v in model.trainable_variables])
    averaged, _ = layout.restore_model(model_dir, averaging.average_last(model_dir, 2))
    assert not readable_checkpoints.has_ema(readable_checkpoints.load_reader(averaging.average_last(model_dir, 2)))
    for v, a, b in zip(averaged.trainable_variables, *shadows):
        np.testing.assert_allclose(v.numpy(), (a.astype(np.float64) + b) / 2, rtol=1e-6, atol=1e-7)


def test_the_average_is_float32_under_mixed_bfloat16(tmp_path):
    trainer = trainer_lib.build_trainer(CONFIG, training_config(precision="mixed_bfloat16", ema_decay=0.9),
                                        str(tmp_path))
    before = [v.numpy() for v in trainer.model.trainable_variables]
    trainer.train_step(iter(input_fn_from(make_batches(1))(None)))
    d = 2 / 11  # decay_at(0.9, 1)
    for s, w0, w1 in zip(trainer.ema.shadow, before, trainer.model.trainable_variables):
        assert s.dtype == tf.float32
        np.testing.assert_allclose(s.numpy(), d * w0 + (1 - d) * w1.numpy(), rtol=1e-5, atol=1e-7)
