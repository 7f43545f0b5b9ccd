"""Whether this machine's CPU computes faster in bfloat16: the CPU's rule for `--precision=auto`.

Training on a CPU (`training.distribution.resolve_precision`: no GPUs, or `--num_gpus=0`) and
decoding (`decoding.precision.resolve`, `python -m keras_transformer.export --precision=auto`) follow this one rule:

    choice, reason = choose()        # ("mixed_bfloat16" or "float32", why), Keras policy names
    log(auto_line(choice, reason))   # "precision auto: float32 (this CPU has no AVX512_BF16 or AMX: ...)"

bfloat16 only where the CPU multiplies it natively (the AVX512_BF16 or AMX flag) and its matrix
products are timed at least `BFLOAT16_MIN_SPEEDUP` (1.15) times as fast as float32's, once per
process (`_bfloat16_speedup`); else float32. The flag alone is not the speed: an Intel Xeon with
AVX512_BF16 and no AMX multiplied bfloat16 at about half float32's speed and trained the Multi30k
recipe 1.44x slower in mixed bfloat16, while an AMD EPYC with AVX512_BF16 multiplied it 1.9x as
fast as float32. Where bfloat16 is emulated (an AVX2 CPU) it is slower than float32, and nothing
is timed. Measured speeds are in docs/speed.md#precision.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Iterable, Optional

import tensorflow as tf

# mixed_bfloat16 on a CPU only where its matrix products are at least this much faster than
# float32's: a closer call goes to float32, which is exact and needs no second guess.
BFLOAT16_MIN_SPEEDUP = 1.15
_PROBE_SHAPE, _PROBE_REPEATS = 1024, 5  # (1024 x 1024) @ (1024 x 1024): 2.1 GFLOP, ~7 ms in float32 at 300 GFLOP/s


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


@functools.cache
def _bfloat16_speedup() -> float:
    """How many times faster this CPU multiplies bfloat16 matrices than float32 ones (> 1: bfloat16
    is faster), timed once per process (12 products of 2.1 GFLOP: about 0.1 s where float32 runs
at 300 GFLOP/s and bfloat16 at half that).

    A (1024 x 1024) @ (1024 x 1024) `tf.linalg.matmul` on the CPU in each dtype: one warm-up call
    each, then `_PROBE_REPEATS` calls each, the two dtypes interleaved so that a neighbour's load
    slows both alike; the best (shortest) time of each is compared, once by the wall clock and
    once by this process's CPU time, and the smaller of the two ratios is returned. The wall clock
    is what training waits for, but on a loaded machine the scheduler makes it noisy either way
    (on a 2-core Intel Xeon beside a training run, five processes timed 0.19x-1.65x); CPU time
    stays put under load (0.60x-0.72x there) but does not see how many cores a kernel keeps busy.
    Taking the smaller, neither a lucky wall-clock timing nor a less parallel kernel picks bfloat16.
    oneDNN's bfloat16 kernels accumulate in float32, so this is the product mixed_bfloat16 runs.
    """
    with tf.device("/CPU:0"):  # with --num_gpus=0 on a GPU machine, still the CPU's speed
        a = tf.random.stateless_uniform((_PROBE_SHAPE, _PROBE_SHAPE), seed=(1, 2))
        operands = {dtype: tf.cast(a, dtype) for dtype in (tf.float32, tf.bfloat16)}
        clocks = (time.perf_counter, time.process_time)  # wall clock, this process's CPU time
        best = {(clock, dtype): math.inf for clock in clocks for dtype in operands}
        for repeat in range(_PROBE_REPEATS + 1):
            for dtype, x in operands.items():
                started = [clock() for clock in clocks]
                tf.linalg.matmul(x, x).numpy()  # .numpy(): the product is done, not only dispatched
                if repeat:  # repeat 0 warms up (kernel selection, buffers)
                    for clock, start in zip(clocks, started):
                        best[clock, dtype] = min(best[clock, dtype], clock() - start)
    return min(best[clock, tf.float32] / best[clock, tf.bfloat16] for clock in clocks)


def choose(cpu_flags: Optional[Iterable[str]] = None) -> tuple[str, str]:
    """The precision this CPU computes fastest in, as a Keras dtype policy ("mixed_bfloat16" or
    "float32"), and why (the measured speed-up, where the CPU has native bfloat16).

    Args:
        cpu_flags: CPU instruction-set flags, for tests; by default read from /proc/cpuinfo.
    """
    flags = _cpu_flags() if cpu_flags is None else frozenset(cpu_flags)
    if not flags & {"avx512_bf16", "amx_bf16"}:
        return "float32", "this CPU has no AVX512_BF16 or AMX: bfloat16 would be emulated"
    speedup = _bfloat16_speedup()
    choice = "mixed_bfloat16" if speedup >= BFLOAT16_MIN_SPEEDUP else "float32"
    return choice, (f"bfloat16 matrix products {speedup:.2f}x float32's speed on this CPU; "
                    f"mixed bfloat16 needs {BFLOAT16_MIN_SPEEDUP:.2f}x")


def auto_line(choice: str, reason: str) -> str:
    """The line logged when "auto" resolves to `choice` for `reason`, in training and decoding alike."""
    return f"precision auto: {choice} ({reason})"
