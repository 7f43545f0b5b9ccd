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
