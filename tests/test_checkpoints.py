"""Checkpoints (keys, numbering, keep, restore, the worker directory) and the checkpoint timer."""

import os
import types

import numpy as np
import tensorflow as tf

from keras_transformer.checkpoints import CheckpointTimer, Checkpoints, Due


def parts(value=0.0):
    """Stand-ins for the model and optimizer: any trackable object checkpoints the same way."""
    model = tf.Module()
    model.kernel = tf.Variable(tf.fill([2, 3], value))
    optimizer = tf.Module()
    optimizer.iterations = tf.Variable(0, dtype=tf.int64)
    return model, optimizer, tf.Variable(0, dtype=tf.int64, trainable=False, name="step")


def test_saves_model_optimizer_and_step_numbered_by_the_step(tmp_path):
    model, optimizer, step = parts(1.0)
    checkpoints = Checkpoints(str(tmp_path), model, optimizer, step, keep=2)
    assert checkpoints.restore() == 0  # nothing yet
    assert checkpoints.latest_name() == "none (no checkpoint was saved)"
    for s in (3, 6, 9):
        step.assign(s)
        path = checkpoints.save()
    assert os.path.basename(path) == "ckpt-9" and checkpoints.latest_name() == "ckpt-9"
    assert [os.path.basename(p) for p in checkpoints.manager.checkpoints] == ["ckpt-6", "ckpt-9"]  # keep=2
    keys = {name.split("/")[0] for name, _ in tf.train.list_variables(path)}
    assert keys == {"model", "optimizer", "step", "save_counter", "_CHECKPOINTABLE_OBJECT_GRAPH"}
    assert sorted(os.listdir(tmp_path)) == ["checkpoints"]


def test_restore_returns_the_step_and_the_values(tmp_path):
    model, optimizer, step = parts(2.5)
    optimizer.iterations.assign(7)
    step.assign(7)
    Checkpoints(str(tmp_path), model, optimizer, step).save()
    fresh_model, fresh_optimizer, fresh_step = parts(0.0)
    assert Checkpoints(str(tmp_path), fresh_model, fresh_optimizer, fresh_step).restore() == 7
    np.testing.assert_array_equal(fresh_model.kernel.numpy(), np.full([2, 3], 2.5, np.float32))
    assert int(fresh_optimizer.iterations.numpy()) == 7


def test_a_non_chief_worker_saves_aside_and_restores_the_chiefs(tmp_path):
    cluster = tf.train.ClusterSpec({"worker": ["a:1", "b:1"]})
    worker_1 = types.SimpleNamespace(cluster_resolver=tf.distribute.cluster_resolver.SimpleClusterResolver(
        cluster, task_type="worker", task_id=1))
    model, optimizer, step = parts(1.0)
    step.assign(4)
    Checkpoints(str(tmp_path), model, optimizer, step).save()  # the chief's
    worker_model, worker_optimizer, worker_step = parts(0.0)
    checkpoints = Checkpoints(str(tmp_path), worker_model, worker_optimizer, worker_step, strategy=worker_1)
    assert checkpoints.restore() == 4
    worker_step.assign(5)
    checkpoints.save()
    assert os.path.isfile(tmp_path / "workers" / "worker-1" / "ckpt-5.index")
    assert checkpoints.latest_name() == "ckpt-4"  # the run's latest is still the chief's


def test_timer_saves_every_n_steps_and_at_the_last_step():
    timer = CheckpointTimer(every_steps=3, last_step=8)
    assert [s for s in range(1, 9) if timer.check(s, 0.0).save] == [3, 6, 8]
    assert not CheckpointTimer().check(5, 1e9).save  # nothing configured, no last step


def test_timer_saves_when_the_interval_passed_since_the_last_save():
    timer = CheckpointTimer(every_minutes=10, started=1000.0)
    assert timer.check(1, 1000.0 + 599) == Due(save=False, out_of_time=False)
    assert timer.check(2, 1000.0 + 600) == Due(save=True, out_of_time=False)
    timer.saved(1000.0 + 605)
    assert not timer.check(3, 1000.0 + 1204).save  # counts from the save, not the start
    assert timer.check(4, 1000.0 + 1205).save


def test_timer_ends_the_time_budget_with_a_save():
    timer = CheckpointTimer(budget_minutes=1, last_step=100, started=0.0)
    assert timer.check(10, 59.9) == Due(save=False, out_of_time=False)
    assert timer.check(11, 60.0) == Due(save=True, out_of_time=True)


def test_timer_takes_the_clock_decisions_from_agree():
    calls = []

    def another_worker_is_out_of_time(flags):  # a max over workers, the other one past its budget
        calls.append(tuple(flags))
        return (True, flags[1])

    timer = CheckpointTimer(every_steps=5, budget_minutes=1, started=0.0, agree=another_worker_is_out_of_time)
    assert timer.check(1, 10.0) == Due(save=True, out_of_time=True)
    assert calls == [(False, False)]  # (out of time, save by time), one call per check
    CheckpointTimer(every_steps=5, agree=another_worker_is_out_of_time).check(2, 10.0)
    assert len(calls) == 1  # no clock-based setting: no agreement (no collective) needed
