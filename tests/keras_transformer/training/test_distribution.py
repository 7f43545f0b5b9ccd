"""Devices, strategies, precision: the chief rule, cross-worker agreement, "auto" precision (the GPUs' rule
and the workers' vote here; the CPU's rule in test_cpu_precision.py)."""

import types

import pytest
import tensorflow as tf

from keras_transformer import cpu_precision
from keras_transformer.training import distribution
from tests.keras_transformer.test_cpu_precision import AVX2, INTEL_XEON, SAPPHIRE_RAPIDS, probe_says


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


def resolve(*args, **kwargs):
    """`resolve_precision` and the line it logged (None: nothing logged)."""
    lines = []
    return distribution.resolve_precision(*args, log=lines.append, **kwargs), (lines or [None])[-1]


@pytest.mark.parametrize("flags, speedup", [(INTEL_XEON, 2.0), (INTEL_XEON, 0.55), (AVX2, None)])
def test_auto_without_gpus_takes_the_cpu_rule_and_its_line(monkeypatch, flags, speedup):
    calls = probe_says(monkeypatch, speedup)
    choice, reason = cpu_precision.choose(flags)
    assert resolve("auto", gpu_capabilities=[], cpu_flags=flags) == (choice, cpu_precision.auto_line(choice, reason))
    # --num_gpus=0 on an A100 machine: the CPU's rule, the same measurement
    assert resolve("auto", use_gpus=False, gpu_capabilities=[(8, 0)], cpu_flags=flags)[0] == choice
    assert len(calls) == (0 if speedup is None else 3)


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
