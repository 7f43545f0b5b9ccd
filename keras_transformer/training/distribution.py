"""Where training runs: devices, distribution strategies, numeric precision (section 5.2).

The paper trained on one machine with 8 GPUs. Here:

* `create_strategy`: `MirroredStrategy` over local GPUs or logical CPU devices, or
  `MultiWorkerMirroredStrategy` from `TF_CONFIG` (the only place a strategy is made from it).
* `is_chief`: whether this process owns the run's files (checkpoints, summaries, history).
* `agree`: makes a yes/no decision taken from a local clock the same on every worker.
* `resolve_precision`: "auto" -> the fastest precision the hardware runs natively.

    strategy = create_strategy(num_gpus=-1)
    precision = resolve_precision("auto", use_gpus=True)

Nothing here reads flags or sets environment variables; `keras_transformer.cli.start_tensorflow`
configures the devices (and logical CPUs) before a strategy is created.
"""

from __future__ import annotations

import os
from typing import Iterable, Optional

import tensorflow as tf


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
    * CPUs with AVX512_BF16 or AMX: mixed_bfloat16 (native bfloat16 matrix products).
    * Anything else, e.g. the paper's P100s or an AVX2 CPU, where bfloat16 is emulated
      and slower than float32: float32. Measured speeds are in docs/BENCHMARKS.md.

    Args:
        precision: "auto" or one of `config.PRECISIONS` (returned as it is).
        use_gpus: whether training runs on the local GPUs (`--num_gpus` != 0).
        gpu_capabilities: (major, minor) compute capabilities, for tests; by default
            read from this machine's GPUs.
        cpu_flags: CPU instruction-set flags, for tests; by default read from /proc/cpuinfo.
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
