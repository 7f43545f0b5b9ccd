"""The CPU's rule for "auto" precision: bfloat16 only with the AVX512_BF16 or AMX flag and a timing
that finds bfloat16 products at least 1.15x as fast; the probe times once per process."""

import math
import time
import types

import pytest
import tensorflow as tf

from keras_transformer import cpu_precision

AVX2 = {"avx", "avx2", "fma"}
INTEL_XEON = {"avx2", "avx512f", "avx512_bf16"}  # AVX512_BF16, no AMX (host C)
SAPPHIRE_RAPIDS = {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}


def probe_says(monkeypatch, speedup):
    """`_bfloat16_speedup` replaced by one returning `speedup`; returns the list of its calls."""
    calls = []
    monkeypatch.setattr(cpu_precision, "_bfloat16_speedup", lambda: calls.append(1) or speedup)
    return calls


@pytest.mark.parametrize("flags, speedup, expected", [
    (INTEL_XEON, 2.0, "mixed_bfloat16"),  # AMD EPYC-like: bfloat16 faster
    (SAPPHIRE_RAPIDS, 1.15, "mixed_bfloat16"),  # at the margin
    (INTEL_XEON, 1.149, "float32"),  # faster, but not by the margin
    (INTEL_XEON, 1.0, "float32"),  # a tie goes to float32, which is exact
    (INTEL_XEON, 0.55, "float32"),  # host C: bfloat16 at about half float32's speed
    ({"amx_bf16"}, 0.9, "float32"),  # AMX is not taken on trust either
])
def test_a_bfloat16_cpu_takes_the_measured_faster(monkeypatch, flags, speedup, expected):
    calls = probe_says(monkeypatch, speedup)
    choice, reason = cpu_precision.choose(flags)
    assert choice == expected and len(calls) == 1
    assert cpu_precision.auto_line(choice, reason) == (
        f"precision auto: {expected} (bfloat16 matrix products {speedup:.2f}x float32's speed "
        "on this CPU; mixed bfloat16 needs 1.15x)")


def test_without_native_bfloat16_float32_without_timing_anything(monkeypatch):
    calls = probe_says(monkeypatch, 2.0)  # were it asked, bfloat16 would win
    assert cpu_precision.choose(AVX2) == ("float32", "this CPU has no AVX512_BF16 or AMX: bfloat16 would be emulated")
    assert cpu_precision.choose(set())[0] == "float32"  # flags unknown (not Linux)
    monkeypatch.setattr(cpu_precision, "_cpu_flags", lambda: frozenset(AVX2))
    assert cpu_precision.choose()[0] == "float32"  # by default this machine's flags
    assert not calls


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
    monkeypatch.setattr(cpu_precision, "time", clocks)
    cpu_precision._bfloat16_speedup.cache_clear()  # pylint: disable=protected-access
    try:
        assert cpu_precision._bfloat16_speedup() == pytest.approx(16 / 24)  # pylint: disable=protected-access
        assert order == ["float32", "bfloat16"] * 6
        for dtype in script:  # clocks swapped: now the wall clock's 0.67x is the smaller, and the answer
            script[dtype]["wall"], script[dtype]["cpu"] = script[dtype]["cpu"], script[dtype]["wall"]
        cpu_precision._bfloat16_speedup.cache_clear()  # pylint: disable=protected-access
        order.clear()
        assert cpu_precision._bfloat16_speedup() == pytest.approx(16 / 24)  # pylint: disable=protected-access
    finally:
        cpu_precision._bfloat16_speedup.cache_clear()  # pylint: disable=protected-access  (not this ratio later)


def test_the_probe_times_this_cpu_once_per_process(monkeypatch, capsys):
    """A real timing: a positive finite ratio, measured once (a second timing would differ), and
    "auto" on this machine follows it. Not asserted: which dtype wins (hosts differ)."""
    cpu_precision._bfloat16_speedup.cache_clear()  # pylint: disable=protected-access
    started = time.perf_counter()
    speedup = cpu_precision._bfloat16_speedup()  # pylint: disable=protected-access
    seconds = time.perf_counter() - started
    assert math.isfinite(speedup) and speedup > 0

    def no_product(*args, **kwargs):
        raise AssertionError("the probe ran again")
    monkeypatch.setattr(tf.linalg, "matmul", no_product)
    assert cpu_precision._bfloat16_speedup() == speedup  # pylint: disable=protected-access
    flags = cpu_precision._cpu_flags()  # pylint: disable=protected-access
    choice, reason = cpu_precision.choose(INTEL_XEON)
    assert choice == ("mixed_bfloat16" if speedup >= cpu_precision.BFLOAT16_MIN_SPEEDUP else "float32")
    with capsys.disabled():
        print(f"\nthis CPU ({'AVX512_BF16' if 'avx512_bf16' in flags else 'no AVX512_BF16'}, "
              f"{'AMX' if 'amx_bf16' in flags else 'no AMX'}): {cpu_precision.auto_line(choice, reason)}; "
              f"the probe took {seconds:.2f} s")
