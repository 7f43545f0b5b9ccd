"""The custom training loop: `tf.distribute`, gradient accumulation, resumable checkpoints.

Section 5 of "Attention Is All You Need" (Vaswani et al., 2017), as a library:

* 5.1: each step consumes about `batch_tokens` source and target tokens. On fewer
  devices than the paper's 8 GPUs, `accumulation_steps` micro-batches add up to one
  update; the loss is normalised once by the number of non-padding target tokens of
  the whole global batch (all replicas, all micro-batches), so 2 replicas, 2 micro-batches
  or one big batch give the same update.
* 5.2: `MirroredStrategy` over local GPUs or logical CPU devices, and
  `MultiWorkerMirroredStrategy` from `TF_CONFIG` (`create_strategy`).
* 5.3: Adam(0.9, 0.98, 1e-9) with the warm-up / inverse square-root schedule.
* 5.4: label-smoothed cross-entropy; dropout lives in the model.
* 6.1: checkpoints every N steps and/or minutes, the last K kept (for averaging).

    trainer = Trainer(model_config, TrainingConfig(train_steps=1000), model_dir, batch_tokens=4096)
    start = trainer.restore()                   # 0, or the step of the latest checkpoint
    result = trainer.train(input_fn, evaluator) # input_fn(tf.distribute.InputContext) -> dataset

Nothing here reads command-line flags; `keras_transformer.train` turns them into
`TransformerConfig` and `TrainingConfig`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from typing import Any, Callable, Optional

import keras
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import summary_pb2  # pylint: disable=g-direct-tensorflow-import

from keras_transformer import model_dir as model_dir_lib
from keras_transformer.config import TransformerConfig
from keras_transformer.evaluation import decoder_inputs
from keras_transformer.losses import label_smoothed_cross_entropy
from keras_transformer.model import Transformer
from keras_transformer.schedules import create_optimizer, learning_rate

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))


def _cpu_flags() -> frozenset:
    """The instruction-set flags of this machine's CPU (Linux; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def resolve_precision(precision: str, use_gpus: bool = True, gpu_capabilities=None, cpu_flags=None) -> str:
    """`precision`, or for "auto" the fastest one this hardware runs natively.

    Mixed precision keeps float32 variables, softmax and loss (see the layers), so
    it changes speed, not results, where the hardware multiplies in 16 bits:

    * GPUs of compute capability 8.0 or more (A100, H100, ...): mixed_bfloat16.
    * GPUs of compute capability 7.x (V100, T4): mixed_float16, with loss scaling.
    * CPUs with AVX512_BF16 or AMX: mixed_bfloat16 (1.7x float32 on a 2-core EPYC).
    * Anything else, e.g. the paper's P100s or an AVX2 CPU, where bfloat16 is emulated
      and slower than float32 (docs/BENCHMARKS.md): float32.

    Args:
        precision: "auto" or one of `PRECISIONS` (returned as it is).
        use_gpus: whether training runs on the local GPUs (`--num_gpus` != 0).
        gpu_capabilities, cpu_flags: for tests; by default read from this machine.
    """
    if precision != "auto":
        return precision
    if use_gpus:
        if gpu_capabilities is None:
            gpu_capabilities = [tf.config.experimental.get_device_details(gpu).get("compute_capability")
                                for gpu in tf.config.list_physical_devices("GPU")]
        if gpu_capabilities:
            oldest = min(tuple(c or (0, 0)) for c in gpu_capabilities)
            return "mixed_bfloat16" if oldest >= (8, 0) else "mixed_float16" if oldest >= (7, 0) else "float32"
    flags = _cpu_flags() if cpu_flags is None else frozenset(cpu_flags)
    return "mixed_bfloat16" if flags & {"avx512_bf16", "amx_bf16"} else "float32"


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; nothing was saved after the last good checkpoint."""


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """Optimisation, checkpointing and evaluation settings of one run.

    Attributes:
        train_steps: updates to make in total (paper: 100k base, 300k big).
        warmup_steps: linear warm-up of equation (3) (paper: 4000).
        learning_rate_scale: multiplier on equation (3) (paper: 1.0).
        clip_norm: clip the global gradient norm to this (0: no clipping, as in the paper).
        accumulation_steps: micro-batches per update (1: none).
        precision: "float32", "mixed_bfloat16" or "mixed_float16" (with dynamic loss scaling).
        xla: compile the forward and backward pass with XLA.
        checkpoint_every_steps: save every this many updates (0: never by count).
        checkpoint_every_minutes: also save when this much time passed since the last save
            (0: never by time; paper: 10).
        keep_checkpoints: how many recent checkpoints to keep.
        eval_every_steps: evaluate on the dev set every this many updates (0: only at the end).
        early_stopping_patience: stop after this many evaluations without a better dev
            BLEU (0: never).
        max_train_minutes: stop cleanly (and checkpoint) after this much training time in
            this process (0: no limit).
        log_every_steps: console lines and TensorBoard scalars every this many updates.
        average_last: after training, average the last this many checkpoints (section 6.1;
            paper: 5 base, 20 big; 0: none). Done by the entry point.
        seed: seeds the initial weights, dropout and the data order.
    """

    train_steps: int = 100_000
    warmup_steps: int = 4000
    learning_rate_scale: float = 1.0
    clip_norm: float = 0.0
    accumulation_steps: int = 1
    precision: str = "float32"
    xla: bool = False
    checkpoint_every_steps: int = 1000
    checkpoint_every_minutes: float = 0.0
    keep_checkpoints: int = 5
    eval_every_steps: int = 1000
    early_stopping_patience: int = 0
    max_train_minutes: float = 0.0
    log_every_steps: int = 100
    average_last: int = 0
    seed: int = 0

    def __post_init__(self):
        for name in ("train_steps", "warmup_steps", "accumulation_steps", "keep_checkpoints",
                     "log_every_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("checkpoint_every_steps", "checkpoint_every_minutes", "eval_every_steps",
                     "early_stopping_patience", "max_train_minutes", "clip_norm", "average_last"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.learning_rate_scale <= 0:
            raise ValueError(f"learning_rate_scale must be positive, got {self.learning_rate_scale}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.average_last > self.keep_checkpoints:
            raise ValueError(f"average_last ({self.average_last}) needs keep_checkpoints >= it, "
                             f"got keep_checkpoints={self.keep_checkpoints}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def create_strategy(num_gpus: int = -1, cpu_replicas: int = 0) -> tf.distribute.Strategy:
    """The distribution strategy of a run (section 5.2: one machine with 8 GPUs).

    * `TF_CONFIG` set (several machines): `MultiWorkerMirroredStrategy`.
    * GPUs visible and `num_gpus` != 0: `MirroredStrategy` over the first `num_gpus` (-1: all).
    * `cpu_replicas` > 1: `MirroredStrategy` over that many logical CPU devices (configure them
      with `keras_transformer.cli.start_tensorflow(cpu_replicas=N)` first).
    * otherwise the default (single-device) strategy.
    """
    if os.environ.get("TF_CONFIG"):
        return tf.distribute.MultiWorkerMirroredStrategy()
    gpus = tf.config.list_logical_devices("GPU")
    if gpus and num_gpus != 0:
        if num_gpus > len(gpus):
            raise ValueError(f"num_gpus={num_gpus} but only {len(gpus)} GPU(s) are visible")
        chosen = gpus if num_gpus < 0 else gpus[:num_gpus]
        return tf.distribute.MirroredStrategy([d.name for d in chosen])
    if cpu_replicas > 1:
        cpus = tf.config.list_logical_devices("CPU")
        if len(cpus) < cpu_replicas:
            raise ValueError(f"cpu_replicas={cpu_replicas} but {len(cpus)} logical CPU device(s) are "
                             "configured; call cli.start_tensorflow(cpu_replicas=N) first")
        return tf.distribute.MirroredStrategy([d.name for d in cpus[:cpu_replicas]])
    return tf.distribute.get_strategy()


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True unless this is a non-chief worker of a multi-worker cluster."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "chief" or (not has_chief and resolver.task_type == "worker"
                                             and resolver.task_id == 0)


class Trainer:
    """A Transformer, its optimizer and its checkpoints, trained by a custom loop.

    Args:
        model_config: the `TransformerConfig`.
        config: the `TrainingConfig`.
        model_dir: the training directory (`keras_transformer.model_dir` layout).
        strategy: a `tf.distribute.Strategy` (default: the current one).
        batch_tokens: the global token budget of one update (all replicas and micro-batches);
            only used to keep the un-normalised loss near 1 for loss scaling.
        log: where console lines go.
    """

    def __init__(self, model_config: TransformerConfig, config: TrainingConfig, model_dir: str,
                 strategy: Optional[tf.distribute.Strategy] = None, batch_tokens: int = 25000,
                 log: Optional[Callable[[str], None]] = None):
        self.model_config = model_config
        self.config = config
        self.model_dir = model_dir
        self.strategy = strategy or tf.distribute.get_strategy()
        self.log = log or (lambda line: print(line, flush=True))
        self.chief = is_chief(self.strategy)
        replicas = self.strategy.num_replicas_in_sync
        # The loss is differentiated as sum / normalizer, then rescaled by normalizer / tokens.
        self.normalizer = float(max(1, batch_tokens // (replicas * config.accumulation_steps)))
        keras.utils.set_random_seed(config.seed)
        previous_policy = keras.mixed_precision.global_policy()
        keras.mixed_precision.set_global_policy(config.precision)
        try:
            with self.strategy.scope():
                self.model = Transformer(model_config)
                self.model.build()
                optimizer = create_optimizer(model_config.d_model, config.warmup_steps,
                                             config.learning_rate_scale)
                if config.precision == "mixed_float16":
                    optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
                optimizer.build(self.model.trainable_variables)  # PITFALLS: before the first step
                self.optimizer = optimizer
                self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
                self.accumulators = []
                if config.accumulation_steps > 1:
                    on_read = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                                   aggregation=tf.VariableAggregation.SUM)
                    self.accumulators = [tf.Variable(tf.zeros(v.shape, tf.float32), **on_read)
                                         for v in self.model.trainable_variables]
                    self.accumulated = tf.Variable(tf.zeros([2]), **on_read)  # loss sum, tokens
        finally:
            keras.mixed_precision.set_global_policy(previous_policy)
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, step=self.step)
        directory = os.path.join(model_dir, model_dir_lib.CHECKPOINT_DIR)
        if not self.chief:  # every worker takes part in a save; only the chief's copy is the run's
            directory = os.path.join(model_dir, "workers", f"worker-{self.strategy.cluster_resolver.task_id}")
        self.manager = tf.train.CheckpointManager(self.checkpoint, directory, max_to_keep=config.keep_checkpoints)
        self._compute = tf.function(self._gradients, jit_compile=True) if config.xla else self._gradients
        self._step_fns = self._make_step_fns()

    # Steps -------------------------------------------------------------------------------

    def _gradients(self, source_ids, target_ids):
        """One replica's micro-batch: gradients of loss_sum / normalizer, loss_sum, tokens."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            logits = self.model((source_ids, decoder_inputs(target_ids)), training=True)
            loss_sum, tokens = label_smoothed_cross_entropy(
                target_ids, logits, self.model_config.label_smoothing, self.model_config.pad_id)
            loss = loss_sum / self.normalizer
            if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
                loss = self.optimizer.scale_loss(loss)
        grads = tape.gradient(loss, variables)
        grads = [tf.convert_to_tensor(g) for g in grads]  # IndexedSlices of the embedding -> dense
        return grads, loss_sum, tokens

    def _replica_accumulate(self, source_ids, target_ids):
        grads, loss_sum, tokens = self._compute(source_ids, target_ids)
        for accumulator, grad in zip(self.accumulators, grads):
            accumulator.assign_add(grad)
        self.accumulated.assign_add(tf.stack([loss_sum, tokens]))

    def _replica_update(self, source_ids, target_ids):
        """The last micro-batch: add the accumulated ones, normalise by global tokens, apply."""
        grads, loss_sum, tokens = self._compute(source_ids, target_ids)
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

    def _make_step_fns(self):
        strategy = self.strategy

        def first(value):
            return strategy.experimental_local_results(value)[0]

        @tf.function(reduce_retracing=True)
        def accumulate(iterator):
            source_ids, target_ids = next(iterator)
            strategy.run(self._replica_accumulate, args=(source_ids, target_ids))

        @tf.function(reduce_retracing=True)
        def update(iterator):
            source_ids, target_ids = next(iterator)
            loss, tokens, norm = strategy.run(self._replica_update, args=(source_ids, target_ids))
            self.step.assign_add(1)
            return first(loss), first(tokens), first(norm)

        return accumulate, update

    def train_step(self, iterator):
        """One update from `accumulation_steps` micro-batches: (loss per token, tokens, grad norm)."""
        accumulate, update = self._step_fns
        for _ in range(self.config.accumulation_steps - 1):
            accumulate(iterator)
        return update(iterator)

    # Checkpoints --------------------------------------------------------------------------

    def restore(self) -> int:
        """Restores the latest checkpoint (model, optimizer, step) if any; returns the step."""
        latest = tf.train.latest_checkpoint(os.path.join(self.model_dir, model_dir_lib.CHECKPOINT_DIR))
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
        return int(self.step.numpy())

    def save(self) -> Optional[str]:
        """Saves a checkpoint numbered by the step. TensorFlow writes the data files first and
        the `checkpoint` state file last, so a crash mid-save leaves the previous one as latest."""
        step = int(self.step.numpy())
        return self.manager.save(checkpoint_number=step)

    def latest_checkpoint_name(self) -> str:
        latest = tf.train.latest_checkpoint(os.path.join(self.model_dir, model_dir_lib.CHECKPOINT_DIR))
        return os.path.basename(latest) if latest else "none (no checkpoint was saved)"

    def learning_rate(self, step: int) -> float:
        """Equation (3) for update number `step` (the one just made)."""
        c = self.config
        return float(learning_rate(max(step, 1), self.model_config.d_model, c.warmup_steps, c.learning_rate_scale))

    # The loop -----------------------------------------------------------------------------

    def train(self, input_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset],
              evaluator: Optional[Callable[[Transformer], dict]] = None) -> LoopState:
        """Trains up to `train_steps`, evaluating, summarising and checkpointing on the way.

        Args:
            input_fn: `InputContext -> tf.data.Dataset` of (source_ids, target_ids) batches,
                repeated (e.g. `pipelines.batching.make_input_fn(..., repeat=True)`).
            evaluator: `model -> {"loss", "perplexity", ["bleu", "signature"]}`, e.g. an
                `evaluation.Evaluator`; None skips evaluation.

        Returns:
            The final `LoopState` (step, stop reason, last evaluation, best BLEU).

        Raises:
            TrainingDiverged: the loss became NaN or infinite (the bad state is not saved).
        """
        c = self.config
        start_step = step = int(self.step.numpy())
        state = LoopState(step=step)
        history = read_eval_history(self.model_dir)
        for record in history:
            if record.get("bleu") is not None:
                state.observe_bleu(record["bleu"], record["step"])
        train_writer = self._writer("train")
        eval_writer = self._writer("eval")
        iterator = iter(self.strategy.distribute_datasets_from_function(input_fn))
        interactive = self.chief and sys.stdout.isatty()
        progbar = keras.utils.Progbar(max(1, c.train_steps - start_step)) if interactive else None
        started = last_save = last_log = time.time()
        tokens_since_log, steps_since_log = 0.0, 0
        while step < c.train_steps:
            loss, tokens, norm = self.train_step(iterator)
            loss, step = float(loss.numpy()), step + 1
            if not np.isfinite(loss):
                kind = "NaN" if np.isnan(loss) else "infinite"
                raise TrainingDiverged(f"loss became {kind} at step {step}; the last good checkpoint "
                                       f"is {self.latest_checkpoint_name()}")
            tokens_since_log += float(tokens.numpy())
            steps_since_log += 1
            now = time.time()
            last_step = _projected_last_step(c, start_step, step, now - started)
            if progbar is not None:
                progbar.target = max(last_step, step + 1) - start_step  # the budget may end it first
                progbar.update(step - start_step, [("loss", loss)])
            if step % c.log_every_steps == 0 or step == c.train_steps:
                rate = tokens_since_log / max(now - last_log, 1e-9)
                values = {"loss": loss, "learning_rate": self.learning_rate(step),
                          "gradient_norm": float(norm.numpy()), "tokens_per_second": rate}
                self._summaries(train_writer, step, values)
                if not interactive and self.chief:
                    eta = (last_step - step) * (now - started) / max(step - start_step, 1)
                    of = c.train_steps if last_step == c.train_steps else f"~{last_step}"  # ~: by the budget
                    self.log(f"step {step}/{of} loss {loss:.4f} lr {values['learning_rate']:.2e} "
                             f"|g| {values['gradient_norm']:.3f} {rate:,.0f} tok/s ETA {_clock(eta)}")
                last_log, tokens_since_log, steps_since_log = now, 0.0, 0
            out_of_time, save_by_time = self._agree(
                bool(c.max_train_minutes) and now - started >= 60.0 * c.max_train_minutes,
                bool(c.checkpoint_every_minutes) and now - last_save >= 60.0 * c.checkpoint_every_minutes)
            done = step >= c.train_steps or out_of_time
            if (c.checkpoint_every_steps and step % c.checkpoint_every_steps == 0) or save_by_time or done:
                self.save()
                last_save = time.time()
            if evaluator is not None and ((c.eval_every_steps and step % c.eval_every_steps == 0) or done):
                results = self._evaluate(evaluator, step, eval_writer, history, state)
                if c.early_stopping_patience and state.evaluations_since_best >= c.early_stopping_patience:
                    self.log(f"early stopping at step {step}: no better dev BLEU for "
                             f"{state.evaluations_since_best} evaluations (best {state.best_bleu:.2f} "
                             f"at step {state.best_step})")
                    if not done:
                        self.save()
                    state.stop_reason, done = "early stopping", True
                state.evaluation = results
            if done:
                if out_of_time and step < c.train_steps:
                    state.stop_reason = "time budget"
                    self.log(f"stopped at step {step}: --max_train_minutes={c.max_train_minutes:g} spent")
                break
        state.step = step
        state.train_seconds = time.time() - started
        return state

    def _writer(self, name: str):
        if not self.chief:
            return tf.summary.create_noop_writer()
        return tf.summary.create_file_writer(os.path.join(self.model_dir, name))

    @staticmethod
    def _summaries(writer, step: int, values: dict) -> None:
        """TensorBoard scalars through core `tf.summary.write`: `tf.summary.scalar` needs the
        tensorboard package, which TF 2.21 no longer installs. Same records, same plugin."""
        with writer.as_default(step=step):
            for name, value in values.items():
                if isinstance(value, (int, float)):
                    tf.summary.write(name, tf.constant(float(value), tf.float32), metadata=SCALAR_METADATA)
        writer.flush()

    def _agree(self, *flags: bool) -> tuple[bool, ...]:
        """Time-based decisions, made the same on every worker (max over workers)."""
        timed = self.config.max_train_minutes or self.config.checkpoint_every_minutes
        if not timed or not isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            return flags
        values = tf.constant([float(f) for f in flags])
        reduced = self.strategy.reduce(tf.distribute.ReduceOp.MAX,
                                       self.strategy.run(lambda: tf.identity(values)), axis=None)
        return tuple(bool(v) for v in reduced.numpy())

    def _evaluate(self, evaluator, step: int, writer, history: list, state: "LoopState") -> dict:
        started = time.time()
        results = evaluator(self.model)
        seconds = time.time() - started
        self._summaries(writer, step, {k: v for k, v in results.items() if k in ("loss", "nll", "perplexity", "bleu")})
        line = f"eval step {step}:"
        if "loss" in results:
            line += f" dev loss {results['loss']:.4f} nll {results['nll']:.4f} ppl {results['perplexity']:.2f}"
        if "bleu" in results:
            state.observe_bleu(results["bleu"], step)
            line += f" BLEU {results['bleu']:.2f} ({results['signature']})"
        self.log(f"{line} [{seconds:.0f} s]")
        record = {"step": step, **{k: v for k, v in results.items() if k != "hypotheses"}}
        history.append(record)
        if self.chief:
            model_dir_lib.write_json_atomically(os.path.join(self.model_dir, "eval", "history.json"),
                                                {"evaluations": history})
        return results


@dataclasses.dataclass
class LoopState:
    """Where a `Trainer.train` call ended.

    Attributes:
        step: the last update made.
        stop_reason: "train_steps", "time budget" or "early stopping".
        evaluation: the last evaluation's results (empty if none).
        best_bleu, best_step: the best dev BLEU of the run so far (resumes included).
        evaluations_since_best: evaluations without a better BLEU since then.
        train_seconds: wall time of this call.
    """

    step: int = 0
    stop_reason: str = "train_steps"
    evaluation: dict = dataclasses.field(default_factory=dict)
    best_bleu: Optional[float] = None
    best_step: Optional[int] = None
    evaluations_since_best: int = 0
    train_seconds: float = 0.0

    def observe_bleu(self, bleu: float, step: int) -> None:
        if self.best_bleu is None or bleu > self.best_bleu:
            self.best_bleu, self.best_step, self.evaluations_since_best = bleu, step, 0
        else:
            self.evaluations_since_best += 1


def read_eval_history(model_dir: str) -> list[dict]:
    """The evaluations recorded in MODEL_DIR/eval/history.json (oldest first)."""
    path = os.path.join(model_dir, "eval", "history.json")
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as file:
        return json.load(file)["evaluations"]


def _projected_last_step(config: TrainingConfig, start_step: int, step: int, elapsed: float) -> int:
    """The step this run will stop at: `train_steps`, or earlier where `max_train_minutes` runs out
    at the rate of the steps so far (what the ETA and the progress bar count down to)."""
    if not config.max_train_minutes or step <= start_step:
        return config.train_steps
    seconds_left = max(0.0, 60.0 * config.max_train_minutes - elapsed)
    return min(config.train_steps, step + int(seconds_left * (step - start_step) / max(elapsed, 1e-9)))


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
