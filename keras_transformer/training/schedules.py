"""The optimizer of section 5.3: Adam with warm-up and inverse square-root decay.

"We used the Adam optimizer with beta_1 = 0.9, beta_2 = 0.98 and epsilon = 1e-9.
We varied the learning rate over the course of training, according to the formula:

    lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5)     (3)

This corresponds to increasing the learning rate linearly for the first
warmup_steps training steps, and decreasing it thereafter proportionally to the
inverse square root of the step number. We used warmup_steps = 4000."

Not in the paper: a cool-down. With `cooldown_steps` C and the run's `total_steps` T, updates
T - C + 1 ... T multiply equation (3) by (T + 1 - step_num) / C, a line from 1 down to 1 / C: the
rate reaches about 0 at the last update, as budget-aware schedules do (linear decay to zero; the
"cooldown" of warmup-stable-decay schedules), instead of ending at half the peak or more. Equation
(3) alone does not depend on the budget, so a longer run passes through a shorter one's models; a
cool-down does, from update T - C on. With early stopping, the cool-down can start earlier: when
the dev score's patience runs out at update S, the trainer moves the last update to S + C
(`TransformerSchedule.end_at`), so a run that stops learning before T ends cooled too.
"""

from __future__ import annotations

import keras
import tensorflow as tf


def learning_rate(step_num, d_model, warmup_steps=4000, scale=1.0, cooldown_steps=0, total_steps=0):
    """Equation (3) for update number `step_num` >= 1 (a number or a tensor), times the linear
    cool-down over the last `cooldown_steps` of `total_steps` updates (module docstring; 0: none)."""
    step_num = tf.maximum(tf.cast(step_num, tf.float32), 1.0)
    rate = scale * d_model**-0.5 * tf.minimum(step_num**-0.5, step_num * warmup_steps**-1.5)
    if cooldown_steps:
        rate = rate * tf.clip_by_value((total_steps + 1.0 - step_num) / cooldown_steps, 0.0, 1.0)
    return rate


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Equation (3) as a Keras learning-rate schedule.

    Args:
        d_model: int, the model width (512 base, 1024 big).
        warmup_steps: int, 4000 in the paper.
        scale: float, a multiplier on the whole curve (1.0 in the paper; larger
            values help small batches, e.g. 2.0 in tensor2tensor).
        cooldown_steps: int, the last updates of `total_steps` whose rate falls linearly to
            about 0 (module docstring; 0: none, as in the paper).
        total_steps: int, the run's number of updates (needed with `cooldown_steps`); `end_at`
            can end the run and its cool-down earlier.

    Call argument:
        iterations: the optimizer's count of updates already applied (Keras'
            convention, starting at 0). The update being made is the paper's
            step_num = iterations + 1, so the peak learning rate
            d_model^-0.5 * warmup_steps^-0.5 is used at iterations = warmup_steps - 1.
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0, cooldown_steps=0, total_steps=0):
        if warmup_steps < 1:
            raise ValueError(f"warmup_steps must be positive, got {warmup_steps}")
        if cooldown_steps and not 0 < cooldown_steps <= total_steps:
            raise ValueError(f"cooldown_steps ({cooldown_steps}) must be within total_steps ({total_steps})")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale
        self.cooldown_steps = cooldown_steps
        self.total_steps = total_steps
        # The cool-down's last update: a variable, so that an optimizer step already traced reads
        # the value `end_at` gives it. Not checkpointed: the trainer sets it from the dev history.
        self.last_step = (tf.Variable(float(total_steps), trainable=False, name="cooldown_last_step")
                          if cooldown_steps else None)

    def end_at(self, last_step: int) -> None:
        """Makes update `last_step` (at most `total_steps`) the last: the cool-down becomes updates
        last_step - C + 1 ... last_step, and the rate after them 0."""
        if self.last_step is None:
            raise ValueError("end_at needs a schedule with cooldown_steps")
        self.last_step.assign(float(min(last_step, self.total_steps)))

    def __call__(self, iterations):
        return learning_rate(tf.cast(iterations, tf.float32) + 1.0, self.d_model, self.warmup_steps, self.scale,
                             self.cooldown_steps, self.total_steps if self.last_step is None else self.last_step)

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale,
                "cooldown_steps": self.cooldown_steps, "total_steps": self.total_steps}


def create_optimizer(d_model, warmup_steps=4000, scale=1.0, beta_1=0.9, beta_2=0.98, epsilon=1e-9,
                     cooldown_steps=0, total_steps=0, **kwargs):
    """Adam(beta_1=0.9, beta_2=0.98, epsilon=1e-9) on `TransformerSchedule` (section 5.3).

    Extra keyword arguments (e.g. `global_clipnorm`, `loss_scale_factor`) go to
    `keras.optimizers.Adam`.
    """
    schedule = TransformerSchedule(d_model, warmup_steps, scale, cooldown_steps, total_steps)
    return keras.optimizers.Adam(schedule, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon, **kwargs)


def schedule_of(optimizer) -> keras.optimizers.schedules.LearningRateSchedule:
    """The learning-rate schedule `optimizer` (Adam, or a `LossScaleOptimizer` around it) applies."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    return inner._learning_rate  # Keras keeps the schedule object here; `learning_rate` is its value
