"""Devices, strategies, precision: the chief rule, cross-worker agreement, "auto" precision."""

import types

import tensorflow as tf

from keras_transformer.training import distribution
from keras_transformer.config import PRECISIONS


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


def test_auto_precision_follows_the_hardware():
    resolve = distribution.resolve_precision
    assert resolve("mixed_float16") == "mixed_float16"  # an explicit choice is kept
    avx2, sapphire_rapids = {"avx", "avx2", "fma"}, {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}
    assert resolve("auto", gpu_capabilities=[], cpu_flags=avx2) == "float32"  # bf16 emulated: slower
    assert resolve("auto", gpu_capabilities=[], cpu_flags=sapphire_rapids) == "mixed_bfloat16"
    assert resolve("auto", gpu_capabilities=[(8, 0)] * 8, cpu_flags=avx2) == "mixed_bfloat16"  # A100
    assert resolve("auto", gpu_capabilities=[(8, 0), (7, 0)], cpu_flags=avx2) == "mixed_float16"  # V100 present
    assert resolve("auto", gpu_capabilities=[(6, 0)], cpu_flags=sapphire_rapids) == "float32"  # the paper's P100
    assert resolve("auto", use_gpus=False, gpu_capabilities=[(8, 0)], cpu_flags=avx2) == "float32"  # --num_gpus=0
    assert resolve("auto") in PRECISIONS  # this machine
