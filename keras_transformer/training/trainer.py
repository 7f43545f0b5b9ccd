"""The custom training loop: `tf.distribute`, gradient accumulation, resumable checkpoints.

Section 5 of "Attention Is All You Need" (Vaswani et al., 2017), as a library:

* 5.1: each step consumes about `batch_tokens` source and target tokens. On fewer
  devices than the paper's 8 GPUs, `accumulation_steps` micro-batches add up to one
  update; the loss is normalised once by the number of non-padding target tokens of
  the whole global batch (all replicas, all micro-batches), so 2 replicas, 2 micro-batches
  or one big batch give the same update.
* 5.2: any `tf.distribute` strategy (`keras_transformer.training.distribution.create_strategy`).
* 5.3: Adam(0.9, 0.98, 1e-9) with the warm-up / inverse square-root schedule.
* 5.4: label-smoothed cross-entropy; dropout lives in the model.
* 6.1: checkpoints every N steps and/or minutes, the last K kept (for averaging), and the
  K best by a dev metric (`run_dir.best_checkpoints`), each evaluated step then saved.
* Not in the paper: with `ema_decay`, an exponential moving average of the weights
  (`ema.ExponentialMovingAverage`, Marian's exponential smoothing) is updated after every update,
  saved in the checkpoints and swapped in for each dev evaluation.
* Not in the paper: with `rdrop_alpha`, R-Drop (Liang et al., 2021): each micro-batch goes through
  the model twice (one forward pass over the batch stacked on itself, so the dropout masks differ),
  and the loss is the label-smoothed cross-entropy of both copies plus alpha times the symmetric KL
  between their output distributions (`losses.symmetric_kl`), normalised by both copies' tokens as
  in fairseq's `--rdrop-alpha` (the training loss logged is that objective; tokens and tokens/s
  count the batch once). An update then costs about two: halve `batch_tokens` for the same work.

The model, optimizer and checkpoints are built outside the loop and handed to the `Trainer`;
`build_trainer` builds them and the `Trainer` in one call:

    trainer = build_trainer(model_config, TrainingConfig(train_steps=1000), model_dir, batch_tokens=4096)
    start = trainer.restore()                   # 0, or the step of the latest checkpoint
    result = trainer.train(input_fn, evaluator) # input_fn(tf.distribute.InputContext) -> dataset

`Trainer.train` is a list of named parts, each in its own module and tested alone: the
update (`train_step`, here), the report (`reporting.Reporter`), the checkpoint
(`checkpoints.CheckpointTimer`, `checkpoints.Checkpoints`), the evaluation and its record
(`reporting.EvalHistory`) and the stop (`early_stopping.EarlyStopping`, the time budget, and
SIGINT/SIGTERM after an update or during an evaluation, the final one included:
`interrupts.StopSignals`).

Nothing here reads command-line flags; `keras_transformer.train` turns them into
`TransformerConfig` and `TrainingConfig`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
from typing import Callable, Optional

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.training.checkpoints import CheckpointTimer, Checkpoints
from keras_transformer.training.ema import ExponentialMovingAverage
from keras_transformer.config import PRECISIONS, TrainingConfig, TransformerConfig
from keras_transformer.training.distribution import agree, is_chief
from keras_transformer.training.early_stopping import EarlyStopping
from keras_transformer.training.interrupts import Interrupted, StopSignals, name as signal_name
from keras_transformer.losses import decoder_inputs, label_smoothed_cross_entropy, symmetric_kl
from keras_transformer.model import Transformer
from keras_transformer.training.reporting import EvalHistory, Reporter, read_eval_history
from keras_transformer.run_dir import layout
from keras_transformer.run_dir.best_checkpoints import BestCheckpoints
from keras_transformer.training.schedules import create_optimizer, learning_rate, schedule_of

__all__ = ["LoopState", "Trainer", "TrainingConfig", "TrainingDiverged", "build_model_and_optimizer",
           "build_trainer", "planned_end", "read_eval_history"]


# The training loss and its gradient by XLA (`losses.token_losses(compiled=True)`) make an update of
# the Multi30k recipe about a tenth faster, but each batch shape is compiled on first use, and the
# compilations cost a process seconds of CPU: a short run (a test, a smoke run, a fine-tune of a few
# hundred updates) would lose more than it gains. A process trains with TensorFlow's kernels first
# and with the compiled loss from its update number COMPILE_LOSS_AFTER + 1 on
# (docs/speed.md#training-step-design).
COMPILE_LOSS_AFTER = 200
# The key of history.json's record where the trainer noted the last update of a cool-down that
# early stopping started (`Trainer._plan_end`; read back by `planned_end`).
COOLDOWN_KEY = "cooldown_to"


def planned_end(records: list[dict]) -> Optional[int]:
    """The last update a cool-down started by early stopping fixed, as the run noted it in its
    dev history (`read_eval_history`), None if it noted none: the run stops there (or at its
    `train_steps`, whichever comes first), and its cool-down starts `cooldown_steps` before."""
    planned = [record[COOLDOWN_KEY] for record in records if COOLDOWN_KEY in record]
    return planned[-1] if planned else None


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; nothing was saved after the last good checkpoint."""


@dataclasses.dataclass
class LoopState:
    """Where a `Trainer.train` call ended.

    Attributes:
        step: the last update made.
        stop_reason: "train_steps", "time budget", "early stopping" (after the cool-down it started,
            with `cooldown_steps`) or "interrupted".
        signal: the signal number that interrupted the run (SIGINT, SIGTERM), else None.
        evaluation: the last evaluation's results (empty if none).
        best_metric: the dev metric that ranks checkpoints and early stopping watches (a name of
            `keras_transformer.dev_metrics`: "bleu", "loss", "f1", ...).
        best_value, best_step: the best dev score by it so far (resumes included).
        evaluations_since_best: evaluations without a better score since then.
        train_seconds: wall time of this call.
    """

    step: int = 0
    stop_reason: str = "train_steps"
    evaluation: dict = dataclasses.field(default_factory=dict)
    best_metric: str = "bleu"
    best_value: Optional[float] = None
    best_step: Optional[int] = None
    evaluations_since_best: int = 0
    train_seconds: float = 0.0
    signal: Optional[int] = None


@dataclasses.dataclass
class _Loop:
    """What the parts of one `Trainer.train` call share: the evaluator (None: no evaluation), the dev
    history, early stopping, the report, the checkpoint timer, the signals and the state returned."""

    evaluator: Optional[Callable[[Transformer], dict]]
    history: EvalHistory
    stopper: EarlyStopping
    reporter: Reporter
    timer: CheckpointTimer
    signals: StopSignals
    state: LoopState


def build_model_and_optimizer(model_config: TransformerConfig, config: TrainingConfig,
                              strategy: Optional[tf.distribute.Strategy] = None):
    """The seeded model, its optimizer and the step counter, built under `strategy.scope()`.

    In this order, which fixes the initial weights for a seed: `keras.utils.set_random_seed`,
    the Transformer (every sublayer built), Adam of section 5.3 on equation (3) (in a
    `LossScaleOptimizer` for "mixed_float16") with its slots built before the first
    distributed step, then the int64 `step` variable. The global dtype policy is
    `config.precision` meanwhile and restored afterwards.

    Args:
        model_config: the `TransformerConfig`.
        config: the `TrainingConfig` (`seed`, `precision`, `warmup_steps`, `learning_rate_scale`,
            `cooldown_steps` with `train_steps`).
        strategy: a `tf.distribute.Strategy` (default: the current one).

    Returns:
        `(model, optimizer, step)`.

    Raises:
        ValueError: `config.precision` is still "auto".
    """
    if config.precision not in PRECISIONS:
        raise ValueError(f"precision {config.precision!r}: resolve it first, e.g. dataclasses.replace(config, "
                         "precision=distribution.resolve_precision(config.precision, use_gpus=...))")
    strategy = strategy or tf.distribute.get_strategy()
    keras.utils.set_random_seed(config.seed)
    previous_policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(config.precision)
    try:
        with strategy.scope():
            model = Transformer(model_config)
            model.build()
            optimizer = create_optimizer(model_config.d_model, config.warmup_steps, config.learning_rate_scale,
                                         cooldown_steps=config.cooldown_steps, total_steps=config.train_steps)
            if config.precision == "mixed_float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            optimizer.build(model.trainable_variables)  # PITFALLS: before the first step
            step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)
    return model, optimizer, step


class Trainer:
    """Trains a Transformer by a custom loop; handed its model, optimizer and checkpoints.

    Args:
        model: a built `Transformer` (its `config` gives the label smoothing and padding id).
        optimizer: its optimizer, slots built (`build_model_and_optimizer`).
        checkpoints: a `checkpoints.Checkpoints` of `model`, `optimizer` and the step counter
            (`checkpoints.step`), which `train_step` advances, and of the moving average of the
            weights (`checkpoints.ema`, None without `config.ema_decay`), which `train_step`
            updates after each update and the dev evaluations use.
        config: the `TrainingConfig`.
        model_dir: the training directory (`keras_transformer.run_dir.layout` layout); summaries go
            to MODEL_DIR/train and MODEL_DIR/eval.
        strategy: the `tf.distribute.Strategy` the model and optimizer were built under
            (default: the current one).
        batch_tokens: the global token budget of one update (all replicas and micro-batches);
            only used to keep the un-normalised loss near 1 for loss scaling.
        log: where console lines go (default: print).
        compile_loss_after: this process's updates made with TensorFlow's loss kernels before
            the loss is compiled by XLA (`COMPILE_LOSS_AFTER`; 0: from the first update). The two
            give the same losses and gradients to float rounding.
    """

    def __init__(self, model: Transformer, optimizer, checkpoints: Checkpoints, config: TrainingConfig,
                 model_dir: str, strategy: Optional[tf.distribute.Strategy] = None, batch_tokens: int = 25000,
                 log: Optional[Callable[[str], None]] = None, compile_loss_after: int = COMPILE_LOSS_AFTER):
        self.model = model
        self.model_config = model.config
        self.optimizer = optimizer
        self.checkpoints = checkpoints
        self.step = checkpoints.step
        self.ema = checkpoints.ema
        self.config = config
        self.model_dir = model_dir
        self.strategy = strategy or tf.distribute.get_strategy()
        self.log = log or (lambda line: print(line, flush=True))
        self.chief = is_chief(self.strategy)
        replicas = self.strategy.num_replicas_in_sync
        # The loss is differentiated as sum / normalizer, then rescaled by normalizer / tokens.
        self.normalizer = float(max(1, batch_tokens // (replicas * config.accumulation_steps)))
        self.accumulators = []
        if config.accumulation_steps > 1:  # the micro-batches' gradient sums, per replica
            on_read = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                           aggregation=tf.VariableAggregation.SUM)
            with self.strategy.scope():
                self.accumulators = [tf.Variable(tf.zeros(v.shape, tf.float32), **on_read)
                                     for v in self.model.trainable_variables]
                self.accumulated = tf.Variable(tf.zeros([2]), **on_read)  # loss sum, tokens
        self.best = (BestCheckpoints(os.path.join(model_dir, layout.BEST_DIR), config.keep_best_checkpoints,
                                     config.best_checkpoint_metric, write=self.chief, log=self.log)
                     if config.keep_best_checkpoints else None)
        self.compile_loss_after = compile_loss_after
        self._updates = 0  # made by this process
        self.last_step = config.train_steps  # earlier when early stopping starts the cool-down
        self._step_fns = self._make_step_fns(compiled_loss=False)
        # Under --xla the whole step is one XLA computation already: one set of step functions.
        self._compiled_step_fns = self._step_fns if config.xla else self._make_step_fns(compiled_loss=True)

    # Steps -------------------------------------------------------------------------------

    def _gradients(self, source_ids, target_ids, compiled_loss):
        """One replica's micro-batch: gradients of loss_sum / normalizer, loss_sum, tokens."""
        variables = self.model.trainable_variables
        alpha, labels = self.config.rdrop_alpha, target_ids
        if alpha:  # R-Drop: both copies in one pass, each with its own dropout masks
            source_ids, target_ids = tf.concat([source_ids, source_ids], 0), tf.concat([target_ids, target_ids], 0)
        with tf.GradientTape() as tape:
            logits = self.model((source_ids, decoder_inputs(target_ids)), training=True)
            loss_sum, tokens = label_smoothed_cross_entropy(
                target_ids, logits, self.model_config.label_smoothing, self.model_config.pad_id,
                compiled=compiled_loss)
            if alpha:  # per target token of the batch: the mean of the two losses plus alpha / 2 KL terms
                first, second = tf.split(logits, 2)
                kl_sum = symmetric_kl(first, second, labels, self.model_config.pad_id)
                loss_sum, tokens = (loss_sum + alpha * kl_sum) / 2.0, tokens / 2.0
            loss = loss_sum / self.normalizer
            if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
                loss = self.optimizer.scale_loss(loss)
        grads = tape.gradient(loss, variables)
        grads = [tf.convert_to_tensor(g) for g in grads]  # IndexedSlices of the embedding -> dense
        return grads, loss_sum, tokens

    def _replica_accumulate(self, compute, source_ids, target_ids):
        grads, loss_sum, tokens = compute(source_ids, target_ids)
        for accumulator, grad in zip(self.accumulators, grads):
            accumulator.assign_add(grad)
        self.accumulated.assign_add(tf.stack([loss_sum, tokens]))

    def _replica_update(self, compute, source_ids, target_ids):
        """The last micro-batch: add the accumulated ones, normalise by global tokens, apply."""
        grads, loss_sum, tokens = compute(source_ids, target_ids)
        if self.accumulators:
            grads = [g + a.read_value() for g, a in zip(grads, self.accumulators)]
            loss_sum, tokens = loss_sum + self.accumulated[0], tokens + self.accumulated[1]
            for accumulator in self.accumulators + [self.accumulated]:
                accumulator.assign(tf.zeros_like(accumulator))
        context = tf.distribute.get_replica_context()
        loss_sum, tokens = context.all_reduce(tf.distribute.ReduceOp.SUM, [loss_sum, tokens])
        # Section 5.1 batching: one mean over every non-padding target token of the global batch.
        grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        grads = [g * (self.normalizer / tf.maximum(tokens, 1.0)) for g in grads]
        norm = tf.linalg.global_norm(grads)
        if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
            norm = norm / tf.cast(self.optimizer.dynamic_scale, tf.float32)
        if self.config.clip_norm:
            factor = tf.minimum(1.0, self.config.clip_norm / tf.maximum(norm, 1e-12))
            grads = [g * factor for g in grads]
        # The optimizer sums gradients over replicas again; they are already summed here.
        replicas = float(context.num_replicas_in_sync)
        grads = [g / replicas for g in grads]
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss_sum / tf.maximum(tokens, 1.0), tokens, norm

    def _make_step_fns(self, compiled_loss: bool):
        """The (accumulate, update) functions, traced on first call; the loss by XLA or not."""
        strategy = self.strategy
        compute = functools.partial(self._gradients, compiled_loss=compiled_loss)
        if self.config.xla:
            compute = tf.function(compute, jit_compile=True, autograph=False)
        replica_accumulate = functools.partial(self._replica_accumulate, compute)
        replica_update = functools.partial(self._replica_update, compute)

        def first(value):
            return strategy.experimental_local_results(value)[0]

        @tf.function(reduce_retracing=True, autograph=False)
        def accumulate(iterator):
            source_ids, target_ids = next(iterator)
            strategy.run(replica_accumulate, args=(source_ids, target_ids))

        @tf.function(reduce_retracing=True, autograph=False)
        def update(iterator):
            source_ids, target_ids = next(iterator)
            loss, tokens, norm = strategy.run(replica_update, args=(source_ids, target_ids))
            self.step.assign_add(1)
            if self.ema is not None:  # cross-replica context: every replica's copy
                self.ema.update(self.step)
            return first(loss), first(tokens), first(norm)

        return accumulate, update

    def train_step(self, iterator):
        """One update from `accumulation_steps` micro-batches: (loss per token, tokens, grad norm).

        The process's first `compile_loss_after` updates compute the loss with TensorFlow's kernels,
        the later ones with XLA (`COMPILE_LOSS_AFTER`); every worker of a cluster switches at the
        same update, as they make their updates together."""
        self._updates += 1
        compiled = self._updates > self.compile_loss_after
        accumulate, update = self._compiled_step_fns if compiled else self._step_fns
        for _ in range(self.config.accumulation_steps - 1):
            accumulate(iterator)
        return update(iterator)

    # Checkpoints --------------------------------------------------------------------------

    def restore(self) -> int:
        """Restores the latest checkpoint (model, optimizer, step) if any; returns the step."""
        return self.checkpoints.restore()

    def save(self) -> Optional[str]:
        """Saves a checkpoint numbered by the step; returns its path."""
        return self.checkpoints.save()

    def learning_rate(self, step: int) -> float:
        """Equation (3), with the cool-down if any, for update number `step` (the one just made)."""
        c = self.config
        return float(learning_rate(max(step, 1), self.model_config.d_model, c.warmup_steps, c.learning_rate_scale,
                                   c.cooldown_steps, self.last_step))

    def _plan_end(self, stopper: EarlyStopping, history: EvalHistory, step: int) -> int:
        """The run's last update: `train_steps`, or with a cool-down, `cooldown_steps` updates after
        the evaluation where early stopping's patience ran out, if that comes first.

        The decision is noted in history.json ("cooldown_to" on the evaluation where it was
        taken), so a resumed run keeps it. Patience found spent by a process that did not cool
        down (a run stopped early without `cooldown_steps`, or resumed with other settings) starts
        the cool-down at `step`, where this process is. Sets the schedule's end and `self.last_step`;
        returns it."""
        c = self.config
        last = c.train_steps
        if c.cooldown_steps:
            planned = planned_end(history.records)
            if planned is not None:
                last = min(last, planned)
            elif stopper.exhausted_at is not None and step < c.train_steps:
                last = min(last, step + c.cooldown_steps)
                history.note(COOLDOWN_KEY, last)
                self.log(self._cooldown_message(step, stopper, last))
            if last < c.train_steps:
                schedule_of(self.optimizer).end_at(last)
        self.last_step = last
        return last

    def _start_cooldown(self, stopper: EarlyStopping, history: EvalHistory, step: int, timer: CheckpointTimer,
                        reporter: Reporter) -> int:
        """Patience ran out at `step`: the new last update, which the timer and the reporter count to."""
        last_step = self._plan_end(stopper, history, step)
        timer.last_step = last_step
        reporter.end_at(last_step)
        return last_step

    def _evaluation_missing(self, evaluator, history: EvalHistory, step: int) -> bool:
        """A signal during (or just before) the evaluation of `step`, an evaluation step, dropped it."""
        every = self.config.eval_every_steps
        return (evaluator is not None and bool(every) and step > 0 and step % every == 0
                and not any(record["step"] == step for record in history.records))

    def _evaluate_again(self, state: LoopState, evaluator, step: int, reporter: Reporter, history: EvalHistory,
                        stopper: EarlyStopping, signals: StopSignals) -> bool:
        """The evaluation of `step` that a signal dropped; True if a signal interrupts this one too
        (`state.stop_reason` "interrupted")."""
        try:
            state.evaluation = self._evaluate(evaluator, step, reporter, history, stopper, signals)
        except Interrupted:
            pass
        (interrupted,) = agree(self.strategy, (signals.received is not None,))
        if interrupted:
            state.stop_reason, state.signal = "interrupted", signals.received
        return interrupted

    # The loop -----------------------------------------------------------------------------

    def train(self, input_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset],
              evaluator: Optional[Callable[[Transformer], dict]] = None) -> LoopState:
        """Trains up to `train_steps`, evaluating, reporting and checkpointing on the way.

        Each update runs the parts in this order: step, report, checkpoint, evaluate, stop
        (at `train_steps`, when `max_train_minutes` is spent, or by early stopping; with
        `cooldown_steps`, early stopping starts the cool-down and the run stops at its end).

        Args:
            input_fn: `InputContext -> tf.data.Dataset` of (source_ids, target_ids) batches,
                repeated (e.g. `keras_transformer.pipelines.batching.make_input_fn(..., repeat=True)`).
            evaluator: `model -> {"loss", "nll", "perplexity", ["bleu", "signature", "chrf", ...]}`, e.g. an
                `evaluation.Evaluator`; None skips evaluation.

        Returns:
            The final `LoopState` (step, stop reason, last evaluation, best BLEU).

        Raises:
            TrainingDiverged: the loss became NaN or infinite (the bad state is not saved).
        """
        c = self.config
        step = int(self.step.numpy())
        state = LoopState(step=step)
        history, stopper = self._dev_history(step)
        last_step = self._plan_end(stopper, history, step)  # `self.last_step` from here on
        started = time.time()
        # With a cool-down, running out of patience moves `last_step` instead of stopping the run.
        if step >= last_step or (stopper.should_stop and not c.cooldown_steps):  # the run had ended: finish what is missing
            with StopSignals() as signals:
                self._finish(state, evaluator, history, stopper, signals)
            return self._final(state, stopper, started)
        iterator = iter(self.strategy.distribute_datasets_from_function(input_fn))
        reporter = Reporter(dataclasses.replace(c, train_steps=last_step), self.model_dir, step, started,
                            self.learning_rate, self.log, self.chief)
        timer = CheckpointTimer(c.checkpoint_every_steps, c.checkpoint_every_minutes, c.max_train_minutes,
                                last_step=last_step, started=started,
                                agree=functools.partial(agree, self.strategy))
        with StopSignals() as signals:
            loop = _Loop(evaluator, history, stopper, reporter, timer, signals, state)
            if self._evaluation_missing(evaluator, history, step) and self._evaluate_dropped(loop, step):
                return self._final(state, stopper, started)
            while step < self.last_step:
                step, loss, tokens, norm = self._update(iterator, step)  # step
                now = time.time()
                reporter.train_step(step, loss, float(tokens.numpy()), norm, now)  # report
                if self._interrupted(loop, step, saved=False):  # Ctrl-C or kill, after the update
                    break
                due = timer.check(step, now)  # checkpoint
                done = step >= self.last_step or due.out_of_time
                evaluating = evaluator is not None and ((c.eval_every_steps and step % c.eval_every_steps == 0)
                                                        or done)
                saved = self._checkpoint(loop, step, due.save, done, evaluating)
                if evaluating:
                    dropped = self._evaluate_update(loop, step)  # evaluate
                    if self._interrupted(loop, step, saved, dropped):  # honoured after an evaluation too
                        break
                    done = self._stop_or_cool_down(loop, step, saved) or done  # stop
                if done:
                    if due.out_of_time and step < self.last_step:
                        state.stop_reason = "time budget"
                        self.log(f"stopped at step {step}: --max_train_minutes={c.max_train_minutes:g} spent")
                    break
        state.step = step
        if state.stop_reason == "train_steps" and step >= self.last_step < c.train_steps:
            state.stop_reason = "early stopping"
            self.log(f"stopped at step {step}, the end of the cool-down that early stopping started at step "
                     f"{self.last_step - c.cooldown_steps} ({stopper.describe_best()})")
        return self._final(state, stopper, started)

    # The loop's parts, in their order --------------------------------------------------------

    def _dev_history(self, step: int) -> tuple[EvalHistory, EarlyStopping]:
        """The run's dev history (MODEL_DIR/eval/history.json), without the evaluations after `step`
        (the checkpoint restored: their weights were not saved), and early stopping replayed from it."""
        c = self.config
        history = EvalHistory(self.model_dir, write=self.chief)
        dropped = history.forget_after(step)
        if dropped:
            self.log(f"{history.path}: {dropped} evaluation(s) after step {step}, the checkpoint restored, "
                     "dropped (their weights were not saved; they are evaluated again)")
        return history, EarlyStopping(c.early_stopping_patience, history.records, c.best_checkpoint_metric)

    def _evaluate_dropped(self, loop: _Loop, step: int) -> bool:
        """A resumed run whose evaluation of `step` a signal dropped: evaluates it first, as it would
        have come before the stop. True if the call ends there (a signal again, or early stopping)."""
        self.log(f"the evaluation of step {step} was interrupted before; evaluating it first")
        signals = loop.signals
        if self._evaluate_again(loop.state, loop.evaluator, step, loop.reporter, loop.history, loop.stopper,
                                signals):
            self.log(f"{signal_name(signals.received) if signals.received else 'a signal'} during the "
                     f"evaluation of step {step}; run the same command to resume")
            return True
        return self._stop_or_cool_down(loop, step, saved=True)  # `step` is the checkpoint restored

    def _update(self, iterator, step: int) -> tuple[int, float, tf.Tensor, tf.Tensor]:
        """The step: the update after `step` (`train_step`); returns (its number, its loss per token,
        its tokens, its gradient norm).

        Raises:
            TrainingDiverged: the loss is NaN or infinite (nothing saved).
        """
        loss, tokens, norm = self.train_step(iterator)
        loss, step = float(loss.numpy()), step + 1
        if not np.isfinite(loss):
            kind = "NaN" if np.isnan(loss) else "infinite"
            raise TrainingDiverged(f"loss became {kind} at step {step}; the last good checkpoint "
                                   f"is {self.checkpoints.latest_name()}")
        return step, loss, tokens, norm

    def _interrupted(self, loop: _Loop, step: int, saved: bool, dropped: str = "") -> bool:
        """Whether a signal (Ctrl-C, kill) came before this point of update `step`, on any worker:
        every worker then stops after the same update (one collective on a cluster), the progress
        bar ends, `step` is saved unless it is (`saved`) and the state notes the signal. `dropped`:
        the words on an evaluation it cut short (`_evaluate_update`)."""
        signals, state = loop.signals, loop.state
        (interrupted,) = agree(self.strategy, (signals.received is not None,))
        if interrupted:
            loop.reporter.close(step)
            if not saved:
                self.save()
            state.stop_reason, state.signal = "interrupted", signals.received
            self.log(f"{signal_name(signals.received) if signals.received else 'a signal'} at step "
                     f"{step}{dropped}: saved {self.checkpoints.latest_name()}; run the same command to resume")
        return interrupted

    def _checkpoint(self, loop: _Loop, step: int, due: bool, done: bool, evaluating: bool) -> bool:
        """The checkpoint: saves update `step` when the timer finds a save `due`; at the run's last
        update (`done`) then ends the progress bar; before an evaluation (`evaluating`) saves the
        weights evaluated if not yet saved, for the best checkpoints to keep. Returns whether `step`
        is saved."""
        if due:
            self.save()
            loop.timer.saved(time.time())
        if done:
            loop.reporter.close(step)  # the progress bar ends at this step
        if evaluating and self.best is not None and not due:  # the weights evaluated, kept
            self.save()
            loop.timer.saved(time.time())
            return True
        return due

    def _evaluate_update(self, loop: _Loop, step: int) -> str:
        """The evaluation of update `step` (`_evaluate`), its results the state's. Returns "", or
        the words for the stop's line when a signal cut it short (nothing recorded)."""
        try:
            loop.state.evaluation = self._evaluate(loop.evaluator, step, loop.reporter, loop.history, loop.stopper,
                                                   loop.signals)
        except Interrupted:  # a signal during the evaluation (the final one too): not recorded
            return ", during the dev evaluation (not recorded; redone on resume)"
        return ""

    def _stop_or_cool_down(self, loop: _Loop, step: int, saved: bool) -> bool:
        """The stop by early stopping after the evaluation of update `step`: without `cooldown_steps`,
        saves `step` unless it is (`saved`) and returns True; with them, patience running out at
        `step` starts the cool-down (`self.last_step` moves) and the run goes on."""
        c, stopper = self.config, loop.stopper
        if stopper.should_stop and not c.cooldown_steps:  # stop
            self.log(stopper.message(step))
            if not saved:
                self.save()
            loop.state.stop_reason = "early stopping"
            return True
        if stopper.exhausted_at == step and c.cooldown_steps:  # or cool down, then stop
            self._start_cooldown(stopper, loop.history, step, loop.timer, loop.reporter)
        return False

    def _cooldown_message(self, step: int, stopper: EarlyStopping, last: int) -> str:
        """The console line when the cool-down is planned at `step` (patience ran out), to end at `last`."""
        c = self.config
        if stopper.exhausted_at == step:
            ran_out = f"patience ran out at step {step}: {stopper.ran_out()}"
        else:
            ran_out = (f"patience ran out at step {stopper.exhausted_at} ({stopper.describe_best()}) in a run "
                       f"without a cool-down; from step {step}")
        if last == c.train_steps and step > c.train_steps - c.cooldown_steps:
            return f"{ran_out}: the cool-down already runs, to step {last}"
        return (f"{ran_out}: the cool-down starts, the learning rate falling to 0 over {c.cooldown_steps} "
                f"updates; the run stops at step {last}")

    @staticmethod
    def _final(state: LoopState, stopper: EarlyStopping, started: float) -> LoopState:
        """`state` with this call's wall time and the run's best dev score."""
        state.train_seconds = time.time() - started
        state.best_metric, state.best_value, state.best_step = stopper.metric, stopper.best_value, stopper.best_step
        state.evaluations_since_best = stopper.evaluations_since_best
        return state

    def _finish(self, state: LoopState, evaluator, history: EvalHistory, stopper: EarlyStopping,
                signals: StopSignals) -> None:
        """A run restarted after its last update: the final evaluation, if a kill prevented it
        (it happens exactly once per run, in history.json), and the state of the finished run.
        A signal during that evaluation drops it (`state.stop_reason` "interrupted")."""
        step = state.step
        if self.last_step < self.config.train_steps:
            state.stop_reason = "early stopping"
            self.log(f"the run cooled down and stopped before, at step {self.last_step} (early stopping, "
                     f"{stopper.describe_best()}); nothing to train")
        elif stopper.should_stop and not self.config.cooldown_steps:
            state.stop_reason = "early stopping"
            self.log(f"the run stopped early before ({stopper.describe_best()}); nothing to train")
        else:
            self.log(f"the run reached --train_steps={self.config.train_steps} before; nothing to train")
        evaluated = [record for record in history.records if record.get("step") == step]
        if evaluator is not None and not evaluated:
            reporter = Reporter(self.config, self.model_dir, step, time.time(), self.learning_rate, self.log,
                                self.chief, interactive=False)
            if self._evaluate_again(state, evaluator, step, reporter, history, stopper, signals):
                done = "recorded" if any(record.get("step") == step for record in history.records) else "not recorded"
                self.log(f"{signal_name(signals.received) if signals.received else 'a signal'} during the final "
                         f"evaluation of step {step} ({done}); run the same command to finish")
        elif evaluated:
            state.evaluation = {k: v for k, v in evaluated[-1].items() if k != "step"}

    def _evaluate(self, evaluator, step: int, reporter: Reporter, history: EvalHistory,
                  stopper: EarlyStopping, signals: Optional[StopSignals] = None) -> dict:
        """Runs `evaluator` on the model, reports and records the results, feeds the stopper and
        offers the step's checkpoint to the best ones.

        With `signals`, a signal during `evaluator` raises `interrupts.Interrupted` at once
        (nothing is recorded) when this process trains alone; on a cluster, where every worker
        must reach the next collective, the evaluation ends first.
        """
        started = time.time()
        alone = not isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)
        with signals.at_once() if signals is not None and alone else contextlib.nullcontext():
            with self.ema.swapped() if self.ema is not None else contextlib.nullcontext():
                results = evaluator(self.model)
        reporter.evaluation(step, results, time.time() - started)
        history.append(step, results)
        stopper.observe_results(results, step)
        if self.best is not None:
            self.best.offer(step, results, self.checkpoints.path_of(step))
        return results


def build_trainer(model_config: TransformerConfig, config: TrainingConfig, model_dir: str,
                  strategy: Optional[tf.distribute.Strategy] = None, batch_tokens: int = 25000,
                  log: Optional[Callable[[str], None]] = None,
                  compile_loss_after: int = COMPILE_LOSS_AFTER) -> Trainer:
    """A `Trainer` with a newly built model, optimizer and checkpoints (not yet restored).

    Args:
        model_config: the `TransformerConfig`.
        config: the `TrainingConfig`.
        model_dir: the training directory (`keras_transformer.run_dir.layout` layout).
        strategy: a `tf.distribute.Strategy`, e.g. `distribution.create_strategy(...)`
            (default: the current one).
        batch_tokens: the global token budget of one update (all replicas and micro-batches).
        log: where console lines go (default: print).
        compile_loss_after: updates before the loss is compiled by XLA (`Trainer`).
    """
    strategy = strategy or tf.distribute.get_strategy()
    model, optimizer, step = build_model_and_optimizer(model_config, config, strategy)
    ema = None
    if config.ema_decay:
        with strategy.scope():  # mirrored like the weights
            ema = ExponentialMovingAverage(model.trainable_variables, config.ema_decay)
    checkpoints = Checkpoints(model_dir, model, optimizer, step, keep=config.keep_checkpoints, strategy=strategy,
                              log=log, ema=ema)
    return Trainer(model, optimizer, checkpoints, config, model_dir, strategy, batch_tokens, log,
                   compile_loss_after)
