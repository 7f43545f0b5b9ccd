"""The learning-rate schedule of equation (3) and the Adam settings of section 5.3."""

import pytest

from keras_transformer import TransformerSchedule, create_optimizer, learning_rate


def test_peak_at_warmup_steps():
    d_model, warmup = 512, 4000
    peak = d_model**-0.5 * warmup**-0.5
    assert float(learning_rate(warmup, d_model, warmup)) == pytest.approx(peak, rel=1e-6)
    # Keras counts updates from 0: update number warmup_steps is iterations = warmup_steps - 1.
    assert float(TransformerSchedule(d_model, warmup)(warmup - 1)) == pytest.approx(peak, rel=1e-6)
    assert float(learning_rate(warmup - 1000, d_model, warmup)) < peak
    assert float(learning_rate(warmup + 1000, d_model, warmup)) < peak


def test_linear_warmup_and_inverse_square_root_decay():
    d_model, warmup = 512, 4000
    assert float(learning_rate(100, d_model, warmup)) == pytest.approx(d_model**-0.5 * 100 * warmup**-1.5, rel=1e-6)
    assert float(learning_rate(16000, d_model, warmup)) == pytest.approx(d_model**-0.5 / 16000**0.5, rel=1e-6)
    # Step 0 is treated as step 1, never a division by zero.
    assert float(learning_rate(0, d_model, warmup)) == pytest.approx(float(learning_rate(1, d_model, warmup)))


def test_optimizer_is_the_papers_adam():
    optimizer = create_optimizer(d_model=512, warmup_steps=4000)
    assert optimizer.beta_1 == 0.9 and optimizer.beta_2 == 0.98 and optimizer.epsilon == 1e-9
    schedule = optimizer.learning_rate if callable(optimizer.learning_rate) else optimizer._learning_rate
    assert TransformerSchedule.from_config(schedule.get_config()).get_config() == schedule.get_config()


def test_the_cooldown_brings_equation_3_linearly_to_zero_over_the_last_updates():
    """T = 8,000 updates, C = 2,000: equation (3) up to update 6,000, then x (T + 1 - step) / C."""
    d_model, warmup, scale, total, cooldown = 128, 2000, 2.5, 8000, 2000

    def rate(step, **cool):
        return float(learning_rate(step, d_model, warmup, scale, **cool))

    cool = dict(cooldown_steps=cooldown, total_steps=total)
    for step in (1, 1000, 2000, 5000, 6000):  # before the cool-down: equation (3) itself
        assert rate(step, **cool) == pytest.approx(rate(step), rel=1e-6)
    assert rate(6001, **cool) == pytest.approx(rate(6001), rel=1e-6)  # factor (8001 - 6001) / 2000 = 1
    assert rate(7000, **cool) == pytest.approx(scale * d_model**-0.5 * 7000**-0.5 * 1001 / 2000, rel=1e-5)
    assert rate(total, **cool) == pytest.approx(rate(total) / cooldown, rel=1e-5)  # the last update: 1 / C
    assert rate(total + 1, **cool) == 0.0
    rates = [rate(step, **cool) for step in range(6000, total + 1, 100)]
    assert all(a > b for a, b in zip(rates, rates[1:]))
    # Keras' iterations count from 0: the schedule's call at iterations = step - 1 is update `step`.
    schedule = TransformerSchedule(d_model, warmup, scale, cooldown, total)
    assert float(schedule(6999)) == pytest.approx(rate(7000, **cool), rel=1e-6)
    assert TransformerSchedule.from_config(schedule.get_config()).get_config() == schedule.get_config()


def test_a_cooldown_longer_than_the_run_is_refused():
    with pytest.raises(ValueError, match="cooldown_steps"):
        TransformerSchedule(128, 100, cooldown_steps=500, total_steps=400)
    from keras_transformer.config import TrainingConfig
    with pytest.raises(ValueError, match=r"cooldown_steps \(500\) must be at most train_steps \(400\)"):
        TrainingConfig(train_steps=400, cooldown_steps=500)
    with pytest.raises(ValueError, match="cooldown_steps must be >= 0"):
        TrainingConfig(cooldown_steps=-1)


@pytest.mark.parametrize("loss_scaled", [False, True])
def test_end_at_moves_the_cooldown_earlier_in_the_optimizer_adam_reads(loss_scaled):
    """`end_at(S + C)` (early stopping's patience ran out at S): Adam's own rate, read through a
    mixed_float16 LossScaleOptimizer too, follows the moved cool-down; it never goes past T."""
    import keras
    from keras_transformer.training.schedules import schedule_of
    d_model, warmup, scale = 128, 20, 2.5
    optimizer = create_optimizer(d_model, warmup, scale, cooldown_steps=4, total_steps=100)
    if loss_scaled:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    inner = getattr(optimizer, "inner_optimizer", optimizer)

    def adam_rate(update):
        inner.iterations.assign(update - 1)
        return float(inner.learning_rate)

    assert adam_rate(50) == pytest.approx(float(learning_rate(50, d_model, warmup, scale)), rel=1e-6)
    schedule_of(optimizer).end_at(50)  # the last 4 updates are now 47-50
    for update in (46, 47, 48, 49, 50, 51):
        factor = min(1.0, max(0.0, (51 - update) / 4))
        assert adam_rate(update) == pytest.approx(float(learning_rate(update, d_model, warmup, scale)) * factor,
                                                  rel=1e-6, abs=0)
    schedule_of(optimizer).end_at(500)  # at most total_steps
    assert adam_rate(100) == pytest.approx(float(learning_rate(100, d_model, warmup, scale)) / 4, rel=1e-6)
    with pytest.raises(ValueError, match="end_at needs a schedule with cooldown_steps"):
        TransformerSchedule(d_model, warmup).end_at(10)
