"""Devices, strategies, precision: the chief rule, cross-worker agreement, "auto" precision."""

import math
import time
import types

import pytest
import tensorflow as tf

from keras_transformer.training import distribution


def fake_strategy(task_type, task_id, jobs):
    """An object with a `cluster_resolver` as a multi-worker strategy has (no collectives made)."""
    cluster = tf.train.ClusterSpec({job: [f"host{i}:2222" for i in range(n)] for job, n in jobs.items()})
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, task_type=task_type, task_id=task_id)
    return types.SimpleNamespace(cluster_resolver=resolver)


def test_the_chief_is_the_chief_task_or_worker_0_without_one():
    assert distribution.is_chief(tf.distribute.get_strategy())  # one process
    assert distribution.is_chief(fake_strategy("chief", 0, {"chief": 1, "worker": 2}))
    assert not distribution.is_chief(fake_strategy("worker", 0, {"chief": 1, "worker": 2}))
    assert distribution.is_chief(fake_strategy("worker", 0, {"worker": 3}))
    assert not distribution.is_chief(fake_strategy("worker", 2, {"worker": 3}))


def test_task_id_is_none_for_one_process():
    assert distribution.task_id(tf.distribute.get_strategy()) is None
    assert distribution.task_id(fake_strategy("worker", 2, {"worker": 3})) == 2


def test_agree_without_a_cluster_returns_the_flags_unchanged():
    strategy = tf.distribute.get_strategy()
    assert distribution.agree(strategy, [True, False]) == (True, False)
    assert distribution.agree(strategy, (0, 1)) == (False, True)


def test_the_default_strategy_without_gpus_or_cpu_replicas(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    strategy = distribution.create_strategy(num_gpus=0)
    assert strategy is tf.distribute.get_strategy() and strategy.num_replicas_in_sync == 1


def test_more_cpu_replicas_than_logical_devices_is_an_error(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    configured = len(tf.config.list_logical_devices("CPU"))
    try:
        distribution.create_strategy(num_gpus=0, cpu_replicas=configured + 1)
    except ValueError as error:
        assert f"cpu_replicas={configured + 1}" in str(error) and "start_tensorflow" in str(error)
    else:
        raise AssertionError("no ValueError")


AVX2 = {"avx", "avx2", "fma"}
INTEL_XEON = {"avx2", "avx512f", "avx512_bf16"}  # AVX512_BF16, no AMX (host C)
SAPPHIRE_RAPIDS = {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}


def probe_says(monkeypatch, speedup):
    """`_bfloat16_speedup` replaced by one returning `speedup`; returns the list of its calls."""
    calls = []
    monkeypatch.setattr(distribution, "_bfloat16_speedup", lambda: calls.append(1) or speedup)
    return calls


def resolve(*args, **kwargs):
    """`resolve_precision` and the line it logged (None: nothing logged)."""
    lines = []
    return distribution.resolve_precision(*args, log=lines.append, **kwargs), (lines or [None])[-1]


@pytest.mark.parametrize("flags, speedup, expected", [
    (INTEL_XEON, 2.0, "mixed_bfloat16"),  # AMD EPYC-like: bfloat16 faster
    (SAPPHIRE_RAPIDS, 1.15, "mixed_bfloat16"),  # at the margin
    (INTEL_XEON, 1.149, "float32"),  # faster, but not by the margin
    (INTEL_XEON, 1.0, "float32"),  # a tie goes to float32, which is exact
    (INTEL_XEON, 0.55, "float32"),  # host C: bfloat16 at about half float32's speed
    ({"amx_bf16"}, 0.9, "float32"),  # AMX is not taken on trust either
])
def test_auto_on_a_bfloat16_cpu_takes_the_measured_faster(monkeypatch, flags, speedup, expected):
    calls = probe_says(monkeypatch, speedup)
    choice, line = resolve("auto", gpu_capabilities=[], cpu_flags=flags)
    assert choice == expected and len(calls) == 1
    assert line == (f"precision auto: {expected} (bfloat16 matrix products {speedup:.2f}x float32's speed "
                    "on this CPU; mixed bfloat16 needs 1.15x)")
    # --num_gpus=0 on an A100 machine: the CPU's rule, the same measurement
    assert resolve("auto", use_gpus=False, gpu_capabilities=[(8, 0)], cpu_flags=flags)[0] == expected


def test_auto_precision_follows_the_hardware(monkeypatch):
    calls = probe_says(monkeypatch, 2.0)  # were it asked, bfloat16 would win
    assert resolve("mixed_float16") == ("mixed_float16", None)  # an explicit choice is kept, nothing logged
    assert resolve("float32", gpu_capabilities=[], cpu_flags=SAPPHIRE_RAPIDS)[0] == "float32"
    # no AVX512_BF16 or AMX: bfloat16 emulated, float32 without timing anything
    assert resolve("auto", gpu_capabilities=[], cpu_flags=AVX2) == (
        "float32", "precision auto: float32 (this CPU has no AVX512_BF16 or AMX: bfloat16 would be emulated)")
    assert resolve("auto", gpu_capabilities=[], cpu_flags=set())[0] == "float32"  # flags unknown (not Linux)
    assert resolve("auto", use_gpus=False, gpu_capabilities=[(8, 0)], cpu_flags=AVX2)[0] == "float32"  # --num_gpus=0
    # GPUs: by compute capability, whatever the CPU
    assert resolve("auto", gpu_capabilities=[(8, 0)] * 8, cpu_flags=AVX2) == (
        "mixed_bfloat16", "precision auto: mixed_bfloat16 (oldest GPU of compute capability 8.0)")  # A100
    assert resolve("auto", gpu_capabilities=[(8, 0), (7, 0)], cpu_flags=AVX2)[0] == "mixed_float16"  # V100 present
    assert resolve("auto", gpu_capabilities=[(6, 0)], cpu_flags=SAPPHIRE_RAPIDS)[0] == "float32"  # the paper's P100
    assert not calls  # the probe runs only on a CPU with the bfloat16 flags


def test_workers_train_in_the_precision_all_of_them_chose_else_float32(monkeypatch):
    """Each worker resolves for its own hardware, then `agree` ORs one vote per precision over the
    workers; `agree` stands in here for the other worker's votes (a real cluster: test_train)."""
    probe_says(monkeypatch, 2.0)
    agreements = []

    def with_other_worker(choice):
        def fake_agree(strategy, flags):
            flags = tuple(flags)
            agreements.append(flags)
            return tuple(f or c == choice for f, c in zip(flags, ("float32", "mixed_float16", "mixed_bfloat16")))
        monkeypatch.setattr(distribution, "agree", fake_agree)

    strategy = tf.distribute.get_strategy()
    with_other_worker("mixed_bfloat16")
    assert resolve("auto", gpu_capabilities=[], cpu_flags=INTEL_XEON, strategy=strategy)[0] == "mixed_bfloat16"
    with_other_worker("float32")  # the other worker timed bfloat16 slower
    assert resolve("auto", gpu_capabilities=[], cpu_flags=INTEL_XEON, strategy=strategy) == (
        "float32", "precision auto: float32 (the workers chose float32, mixed_bfloat16; this one mixed_bfloat16: "
                   "bfloat16 matrix products 2.00x float32's speed on this CPU; mixed bfloat16 needs 1.15x)")
    with_other_worker("mixed_bfloat16")  # a worker without the flags still takes part in the vote
    assert resolve("auto", gpu_capabilities=[], cpu_flags=AVX2, strategy=strategy)[0] == "float32"
    assert len(agreements) == 3 and agreements[-1] == (True, False, False)
    assert resolve("float32", strategy=strategy)[0] == "float32" and len(agreements) == 3  # nothing to agree on


def test_auto_with_a_single_process_strategy_is_this_process_choice(monkeypatch):
    probe_says(monkeypatch, 0.5)
    strategy = tf.distribute.get_strategy()  # the real `agree`: no collective, the flags unchanged
    assert resolve("auto", gpu_capabilities=[], cpu_flags=INTEL_XEON, strategy=strategy)[0] == "float32"
    assert resolve("auto", gpu_capabilities=[(8, 0)], cpu_flags=AVX2, strategy=strategy)[0] == "mixed_bfloat16"


def test_the_probe_compares_the_best_times_by_the_less_favourable_clock(monkeypatch):
    """Scripted timings (ms) per call, warm-up first: float32 and bfloat16 alternate; the best of
    each after the warm-up is compared, by wall clock (8 / 4: 2x) and by CPU time (16 / 24:
    0.67x); the smaller ratio is returned."""
    script = {"float32": {"wall": [1, 8, 12, 8.5, 30, 9], "cpu": [1, 16, 17, 16.5, 18, 16]},
              "bfloat16": {"wall": [200, 5, 4, 6, 4.5, 50], "cpu": [300, 25, 24, 26, 27, 25]}}
    now, order = {"wall": 0.0, "cpu": 0.0}, []

    def fake_matmul(a, b):
        dtype = a.dtype.name
        for clock in now:
            now[clock] += script[dtype][clock][sum(d == dtype for d in order)] / 1000
        order.append(dtype)
        return a
    clocks = types.SimpleNamespace(perf_counter=lambda: now["wall"], process_time=lambda: now["cpu"])
    monkeypatch.setattr(tf.linalg, "matmul", fake_matmul)
    monkeypatch.setattr(distribution, "time", clocks)
    distribution._bfloat16_speedup.cache_clear()  # pylint: disable=protected-access
    try:
        assert distribution._bfloat16_speedup() == pytest.approx(16 / 24)  # pylint: disable=protected-access
        assert order == ["float32", "bfloat16"] * 6
        for dtype in script:  # clocks swapped: now the wall clock's 0.67x is the smaller, and the answer
            script[dtype]["wall"], script[dtype]["cpu"] = script[dtype]["cpu"], script[dtype]["wall"]
        distribution._bfloat16_speedup.cache_clear()  # pylint: disable=protected-access
        order.clear()
        assert distribution._bfloat16_speedup() == pytest.approx(16 / 24)  # pylint: disable=protected-access
    finally:
        distribution._bfloat16_speedup.cache_clear()  # pylint: disable=protected-access  (not this ratio later)


def test_the_probe_times_this_cpu_once_per_process(monkeypatch, capsys):
    """A real timing: a positive finite ratio, measured once (a second timing would differ), and
    "auto" on this machine follows it. Not asserted: which dtype wins (hosts differ)."""
    distribution._bfloat16_speedup.cache_clear()  # pylint: disable=protected-access
    started = time.perf_counter()
    speedup = distribution._bfloat16_speedup()  # pylint: disable=protected-access
    seconds = time.perf_counter() - started
    assert math.isfinite(speedup) and speedup > 0

    def no_product(*args, **kwargs):
        raise AssertionError("the probe ran again")
    monkeypatch.setattr(tf.linalg, "matmul", no_product)
    assert distribution._bfloat16_speedup() == speedup  # pylint: disable=protected-access
    flags = distribution._cpu_flags()  # pylint: disable=protected-access
    choice, line = resolve("auto", use_gpus=False, cpu_flags=INTEL_XEON)
    assert choice == ("mixed_bfloat16" if speedup >= distribution.BFLOAT16_MIN_SPEEDUP else "float32")
    with capsys.disabled():
        print(f"\nthis CPU ({'AVX512_BF16' if 'avx512_bf16' in flags else 'no AVX512_BF16'}, "
              f"{'AMX' if 'amx_bf16' in flags else 'no AMX'}): {line}; the probe took {seconds:.2f} s")
