"""Exponential moving average of the weights (Marian's `--exponential-smoothing`), `--ema_decay`.

Not in "Attention Is All You Need": section 6.1 averages the last checkpoints instead. Marian
(`--exponential-smoothing`), OpenNMT-tf (`moving_average_decay`) and tf.train.ExponentialMovingAverage
keep, beside the training weights w, a shadow copy updated after every optimizer step:

    shadow <- d_t * shadow + (1 - d_t) * w,     d_t = min(decay, (1 + t) / (10 + t))

where t counts the updates made, this one included. The ramp (1 + t) / (10 + t) is Marian's
("reduce effect of decay parameter in early training stages") and tf.train.ExponentialMovingAverage's
with `num_updates=t`: early on the shadow follows the weights closely, so that it is not held
back by the random initial weights for ~1 / (1 - decay) updates. There is no debiasing by
1 / (1 - decay^t): the shadow starts as a copy of the weights, not at zero, so it has no bias
towards zero to correct.

Why not Keras' `use_ema=True` optimizer option: its average has a fixed momentum after a first-step
copy (no ramp), lives among the optimizer's variables (the checkpoint key `optimizer`, which
translation and export never read), and `finalize_variable_values` overwrites the weights for
good, where evaluation here swaps the average in and back. tf.train.ExponentialMovingAverage
creates its shadow slots on first `apply`, inside the traced step under a distribution strategy;
the shadow here is made once, beside the weights, and its formula is tested against it.

    ema = ExponentialMovingAverage(model.trainable_variables, decay=0.9999)  # under strategy.scope()
    optimizer.apply_gradients(...); step.assign_add(1); ema.update(step)    # after each update
    with ema.swapped():                                                       # evaluate the shadow
        evaluator(model)

The shadow is float32 (the trainable variables are float32 under every precision policy, the
mixed ones included: Keras casts them at use), one `tf.Variable` per trainable variable created
under the strategy's scope, so a `MirroredStrategy` mirrors it like the weights; `update` runs in
cross-replica context (after `strategy.run`), where a mirrored variable's assignment reaches every
replica. It is a trackable object: `tf.train.Checkpoint(ema=ema)` saves and restores it under the
key `ema` (`keras_transformer.training.checkpoints`). The checkpoint's layout is the run
directory's (`run_dir.readable_checkpoints.EMA_KEY`, its list `shadow`), which also reads a
checkpoint's shadow straight into a model's weights (`readable_checkpoints.read_ema_shadow`: what
translation, export and averaging use).
"""

from __future__ import annotations

import contextlib
from typing import Sequence

import tensorflow as tf

from keras_transformer.run_dir import readable_checkpoints

# The checkpoint key of the shadow weights, the run directory's.
CHECKPOINT_KEY = readable_checkpoints.EMA_KEY


def decay_at(decay: float, updates) -> tf.Tensor:
    """d_t = min(decay, (1 + t) / (10 + t)) for `updates` = t >= 1 updates made (float32)."""
    t = tf.cast(updates, tf.float32)
    return tf.minimum(tf.constant(decay, tf.float32), (1.0 + t) / (10.0 + t))


class ExponentialMovingAverage(tf.Module):
    """Shadow weights of `variables`, updated by `update` after every optimizer step.

    Args:
        variables: the trainable variables (Keras or TF variables), e.g. `model.trainable_variables`.
        decay: the decay in (0, 1), e.g. 0.9999 (Marian's `--exponential-smoothing=1e-4`).

    Attributes:
        shadow: one float32 `tf.Variable` per variable, in the same order; starts as their copy.
    """

    def __init__(self, variables: Sequence, decay: float):
        super().__init__(name="ema")
        if not 0.0 < decay < 1.0:
            raise ValueError(f"the EMA decay must be in (0, 1), got {decay}")
        self.decay = float(decay)
        self.__dict__["_variables"] = list(variables)  # not tracked: they are the model's
        self.shadow = [tf.Variable(tf.cast(tf.convert_to_tensor(v), tf.float32), trainable=False, name="shadow")
                       for v in self._variables]

    def update(self, updates) -> None:
        """One step of the average after update number `updates` (the step counter, >= 1)."""
        d = decay_at(self.decay, updates)
        for shadow, variable in zip(self.shadow, self._variables):
            shadow.assign(d * shadow + (1.0 - d) * tf.cast(tf.convert_to_tensor(variable), tf.float32))

    def reset(self) -> None:
        """Sets the shadow to the current weights (a restored run whose checkpoint had no shadow)."""
        for shadow, variable in zip(self.shadow, self._variables):
            shadow.assign(tf.cast(tf.convert_to_tensor(variable), tf.float32))

    @contextlib.contextmanager
    def swapped(self):
        """Within the block, the variables hold the shadow; their own values come back after it,
        an exception included (OpenNMT-tf's `MovingAverage.shadow_variables`)."""
        kept = [tf.identity(tf.convert_to_tensor(v)) for v in self._variables]
        for variable, shadow in zip(self._variables, self.shadow):
            variable.assign(tf.cast(shadow, variable.dtype))
        try:
            yield
        finally:
            for variable, value in zip(self._variables, kept):
                variable.assign(value)

