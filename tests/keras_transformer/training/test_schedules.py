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
