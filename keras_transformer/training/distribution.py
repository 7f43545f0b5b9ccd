"""Where training runs: devices, distribution strategies, numeric precision (section 5.2).

The paper trained on one machine with 8 GPUs. Here:

* `create_strategy`: `MirroredStrategy` over local GPUs or logical CPU devices, or
  `MultiWorkerMirroredStrategy` from `TF_CONFIG` (the only place a strategy is made from it).
* `is_chief`: whether this process owns the run's files (checkpoints, summaries, history).
* `agree`: makes a yes/no decision taken from a local clock the same on every worker.
* `resolve_precision`: "auto" -> the precision this hardware trains fastest in (by the GPUs'
  compute capability; without GPUs by the CPU's rule, `keras_transformer.cpu_precision`).

    strategy = create_strategy(num_gpus=-1)
    precision = resolve_precision("auto", use_gpus=True, strategy=strategy)

Nothing here reads flags or sets environment variables; `keras_transformer.cli.start_tensorflow`
configures the devices (and logical CPUs) before a strategy is created.
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, Optional

from absl import logging
import tensorflow as tf

from keras_transformer import cpu_precision

_AUTO_CHOICES = ("float32", "mixed_float16", "mixed_bfloat16")


def create_strategy(num_gpus: int = -1, cpu_replicas: int = 0) -> tf.distribute.Strategy:
    """The distribution strategy of a run (section 5.2: one machine with 8 GPUs).

    * `TF_CONFIG` set (several machines): `MultiWorkerMirroredStrategy`.
    * GPUs visible and `num_gpus` != 0: `MirroredStrategy` over the first `num_gpus` (-1: all).
    * `cpu_replicas` > 1: `MirroredStrategy` over that many logical CPU devices (configure them
      with `keras_transformer.cli.start_tensorflow(cpu_replicas=N)` first).
    * otherwise the default (single-device) strategy.

    Raises:
        ValueError: more GPUs or CPU replicas asked for than are configured.
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
    """True unless this is a non-chief worker of a multi-worker cluster.

    The chief is the task of type "chief", or worker 0 of a cluster without one.
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "chief" or (not has_chief and resolver.task_type == "worker"
                                             and resolver.task_id == 0)


def task_id(strategy: tf.distribute.Strategy) -> Optional[int]:
    """This worker's index in a multi-worker cluster; None for a single-process strategy."""
    resolver = getattr(strategy, "cluster_resolver", None)
    return resolver.task_id if resolver is not None and resolver.task_type else None


def agree(strategy: tf.distribute.Strategy, flags: Iterable[bool]) -> tuple[bool, ...]:
    """`flags`, each true if it is true on any worker (a sum over workers, one collective).

    Decisions read from a local clock ("time to save", "out of time") can differ between
    workers by a step; every worker must then still save and stop at the same step, since a
    save and each training step are collective. A no-op (no collective) unless `strategy` is a
    `MultiWorkerMirroredStrategy`; every worker must call it at the same points.
    """
    flags = tuple(bool(f) for f in flags)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return flags
    values = tf.constant([float(f) for f in flags])
    # ReduceOp has SUM and MEAN only: a flag is true on some worker where the sum is positive.
    reduced = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.identity(values)), axis=None)
    return tuple(bool(v > 0) for v in reduced.numpy())


def _auto_precision(use_gpus: bool, gpu_capabilities, cpu_flags) -> tuple[str, str]:
    """`resolve_precision`'s choice for "auto" on this process's hardware, and why."""
    if use_gpus:
        if gpu_capabilities is None:
            gpu_capabilities = [tf.config.experimental.get_device_details(gpu).get("compute_capability")
                                for gpu in tf.config.list_physical_devices("GPU")]
        if gpu_capabilities:
            oldest = min(tuple(c or (0, 0)) for c in gpu_capabilities)
            choice = "mixed_bfloat16" if oldest >= (8, 0) else "mixed_float16" if oldest >= (7, 0) else "float32"
            return choice, f"oldest GPU of compute capability {oldest[0]}.{oldest[1]}"
    return cpu_precision.choose(cpu_flags)


def resolve_precision(precision: str, use_gpus: bool = True, gpu_capabilities=None, cpu_flags=None,
                      strategy: Optional[tf.distribute.Strategy] = None,
                      log: Callable[[str], None] = logging.info) -> str:
    """`precision`, or for "auto" the one this hardware trains fastest in.

    Mixed precision keeps float32 variables, softmax and loss (see the layers), so
    it changes speed, not results, where the hardware multiplies in 16 bits:

    * GPUs of compute capability 8.0 or more (A100, H100, ...): mixed_bfloat16.
    * GPUs of compute capability 7.x (V100, T4): mixed_float16, with loss scaling.
    * GPUs older than that, e.g. the paper's P100s: float32.
    * No GPU used: the CPU's rule, `keras_transformer.cpu_precision.choose` (which decoding's
      "auto" follows too): mixed_bfloat16 only where the CPU has AVX512_BF16 or AMX and its
      bfloat16 matrix products are timed at `cpu_precision.BFLOAT16_MIN_SPEEDUP` (1.15) times
      float32's speed or more, once per process; else (a tie included) float32. Measured
      speeds are in docs/speed.md#precision.

    Logs one line with the choice and its reason (the measured speed-up on a CPU).

    Args:
        precision: "auto" or one of `config.PRECISIONS` (returned as it is).
        use_gpus: whether training runs on the local GPUs (`--num_gpus` != 0).
        gpu_capabilities: (major, minor) compute capabilities, for tests; by default
            read from this machine's GPUs.
        cpu_flags: CPU instruction-set flags, for tests; by default read from /proc/cpuinfo.
        strategy: the run's strategy. Under `MultiWorkerMirroredStrategy` every worker must call
            this (one collective, `agree`): each chooses for its own hardware (a timing differs
            between machines, even alike ones, near the threshold) and all then train in the
            precision they all chose, else in float32, which every worker runs.
            None: this process's choice alone.
        log: where the line goes.
    """
    if precision != "auto":
        return precision
    choice, reason = _auto_precision(use_gpus, gpu_capabilities, cpu_flags)
    if strategy is not None:
        chosen = agree(strategy, (choice == c for c in _AUTO_CHOICES))
        if sum(chosen) > 1:
            all_chosen = ", ".join(c for c, a in zip(_AUTO_CHOICES, chosen) if a)
            choice, reason = "float32", f"the workers chose {all_chosen}; this one {choice}: {reason}"
    log(cpu_precision.auto_line(choice, reason))
    return choice
