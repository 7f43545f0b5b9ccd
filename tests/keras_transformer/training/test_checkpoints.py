"""Checkpoints (keys, numbering, keep, restore, the worker directory, damaged checkpoints) and the timer.

Which checkpoint files are readable is tested in tests/keras_transformer/run_dir/test_readable_checkpoints.py."""

import os
import types

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer, TransformerConfig, create_optimizer
from keras_transformer.run_dir import readable_checkpoints
from keras_transformer.training.checkpoints import (DROPOUT_SEEDS_KEY, CheckpointTimer, Checkpoints, Due,
                                                    copy_until, dropout_seed_states)
from tests.helpers.checkpoints import parts, saved_twice


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


def test_a_saved_checkpoint_is_on_the_disk_before_save_returns(tmp_path, monkeypatch):
    """Power loss after `save` loses nothing it wrote: its data and index, then the state file naming it,
    then their folder, each `fsync`ed (TensorFlow's own writes are not)."""
    synced, real = [], os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    model, optimizer, step = parts(1.0)
    step.assign(5)
    path = Checkpoints(str(tmp_path), model, optimizer, step).save()
    state = os.path.join(os.path.dirname(path), "checkpoint")
    assert synced[-4:] == [*readable_checkpoints.data_files(path), path + ".index", state, os.path.dirname(path)]


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


def damage(prefix, part):
    """Truncates the index or the data file of `prefix` to half (or deletes the data file)."""
    path = prefix + (".index" if part == "index" else ".data-00000-of-00001")
    if part == "missing data":
        os.remove(path)
        return None
    os.truncate(path, os.path.getsize(path) // 2)
    return path


def contents(directory):
    return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))}


@pytest.mark.parametrize("part", ["index", "data", "missing data"])
def test_restore_skips_a_damaged_checkpoint_for_the_one_before(tmp_path, part):
    _, newest = saved_twice(tmp_path)
    damaged = damage(newest, part)
    before = contents(tmp_path / "checkpoints")
    model, optimizer, step = parts(-1.0)
    lines = []
    assert Checkpoints(str(tmp_path), model, optimizer, step, log=lines.append).restore() == 2
    np.testing.assert_array_equal(model.kernel.numpy(), np.full([2, 3], 2.0, np.float32))
    assert int(optimizer.iterations.numpy()) == 2  # every variable from ckpt-2, none from ckpt-4
    assert len(lines) == 1 and lines[0].startswith(f"warning: skipping damaged checkpoint {newest}: ")
    assert os.path.basename(damaged or newest + ".data-00000-of-00001") in lines[0], lines
    assert contents(tmp_path / "checkpoints") == before  # nothing moved, repaired or deleted


@pytest.mark.parametrize("state", ["garbage", "empty", "missing"])
def test_a_lost_or_damaged_state_file_falls_back_to_the_checkpoint_files(tmp_path, state):
    saved_twice(tmp_path)
    path = tmp_path / "checkpoints" / "checkpoint"
    if state == "missing":
        os.remove(path)
    else:
        path.write_bytes(b"" if state == "empty" else b"model_checkpoint_path: \x00\xff{{")
    model, optimizer, step = parts(-1.0)
    lines = []
    assert Checkpoints(str(tmp_path), model, optimizer, step, log=lines.append).restore() == 4  # not 0
    np.testing.assert_array_equal(model.kernel.numpy(), np.full([2, 3], 4.0, np.float32))
    assert "missing or unreadable; using the 2 checkpoint file(s)" in lines[-1]
    assert len(lines) == (1 if state == "missing" else 2)  # a damaged one is kept as checkpoint.damaged


def test_restore_warns_on_stderr_by_default(tmp_path, capsys):
    _, newest = saved_twice(tmp_path)
    damage(newest, "index")
    assert Checkpoints(str(tmp_path), *parts()).restore() == 2  # the constructor of before still works
    assert capsys.readouterr().err.count("warning: skipping damaged checkpoint") == 1


def test_no_readable_checkpoint_is_a_one_line_error_naming_the_folder(tmp_path):
    for prefix in saved_twice(tmp_path):
        damage(prefix, "data")
    before = contents(tmp_path / "checkpoints")
    lines = []
    with pytest.raises(ValueError, match=r"checkpoints: none of its 2 checkpoint\(s\) is readable") as error:
        Checkpoints(str(tmp_path), *parts(), log=lines.append).restore()
    assert "\n" not in str(error.value) and str(tmp_path / "checkpoints") in str(error.value)
    assert len(lines) == 2
    assert contents(tmp_path / "checkpoints") == before


def test_a_save_at_the_damaged_step_keeps_the_damaged_files_aside(tmp_path):
    _, newest = saved_twice(tmp_path)
    damaged = damage(newest, "data")
    damaged_bytes = {name: (tmp_path / "checkpoints" / name).read_bytes() for name in ("ckpt-4.index",
                                                                                      "ckpt-4.data-00000-of-00001")}
    model, optimizer, step = parts()
    lines = []
    checkpoints = Checkpoints(str(tmp_path), model, optimizer, step, keep=2, log=lines.append)
    assert checkpoints.restore() == 2 and damaged.endswith("ckpt-4.data-00000-of-00001")
    model.kernel.assign(tf.fill([2, 3], 40.0))
    step.assign(4)
    assert os.path.basename(checkpoints.save()) == "ckpt-4"
    assert lines[-1] == f"kept the damaged checkpoint {newest} as ckpt-4.damaged.*"
    for name, data in damaged_bytes.items():  # byte for byte, under another name
        assert (tmp_path / "checkpoints" / name.replace("ckpt-4.", "ckpt-4.damaged.")).read_bytes() == data
    state = tf.train.get_checkpoint_state(str(tmp_path / "checkpoints"))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["ckpt-2", "ckpt-4"]
    step.assign(6)
    checkpoints.save()  # keep=2: the rotation deletes ckpt-2, not the damaged files
    assert sorted(os.listdir(tmp_path / "checkpoints")) == [
        "checkpoint", "ckpt-4.damaged.data-00000-of-00001", "ckpt-4.damaged.index", "ckpt-4.data-00000-of-00001",
        "ckpt-4.index", "ckpt-6.data-00000-of-00001", "ckpt-6.index"]
    fresh_model, fresh_optimizer, fresh_step = parts()
    again = []
    assert Checkpoints(str(tmp_path), fresh_model, fresh_optimizer, fresh_step, log=again.append).restore() == 6
    assert again == []
    assert readable_checkpoints.checkpoint_problem(newest) is None  # the new ckpt-4 is whole


def built_transformer(config):
    """A built Transformer, its Adam with slots, and a step counter at 0."""
    model = Transformer(config)
    model.build()
    optimizer = create_optimizer(config.d_model, warmup_steps=10)
    optimizer.build(model.trainable_variables)
    return model, optimizer, tf.Variable(0, dtype=tf.int64, trainable=False)


def test_a_transformer_and_its_optimizer_come_whole_from_the_intact_checkpoint(tmp_path):
    """The real model and Adam's slots: every variable equals the intact ckpt-2's, none the damaged ckpt-4's."""
    config = TransformerConfig.tiny(vocab_size=20, max_length=8)

    model, optimizer, step = built_transformer(config)
    checkpoints = Checkpoints(str(tmp_path), model, optimizer, step)
    rng = np.random.default_rng(0)
    saved = {}
    for s in (2, 4):
        for v in model.variables + optimizer.variables:
            if v.dtype == "float32":
                v.assign(rng.normal(size=v.shape).astype(np.float32))
        step.assign(s)
        checkpoints.save()
        saved[s] = [v.numpy() for v in model.variables + optimizer.variables]
    damage(str(tmp_path / "checkpoints" / "ckpt-4"), "data")
    model, optimizer, step = built_transformer(config)
    assert Checkpoints(str(tmp_path), model, optimizer, step, log=[].append).restore() == 2
    for restored, expected in zip(model.variables + optimizer.variables, saved[2]):
        np.testing.assert_array_equal(restored.numpy(), expected)


def test_the_dropout_seeds_are_saved_and_a_checkpoint_without_them_still_restores(tmp_path):
    """The dropout layers' `SeedGenerator` states come back with the weights; a checkpoint written
    before they were saved (model, optimizer, step only) restores and leaves the built seeds."""
    config = TransformerConfig.tiny(vocab_size=20, max_length=8, dropout_rate=0.3)

    model, optimizer, step = built_transformer(config)
    seeds = dropout_seed_states(model)
    assert seeds and not any(any(s is w for w in model.weights) for s in seeds)
    for s in seeds:
        s.assign(s.numpy() + np.array([0, 7], dtype=s.numpy().dtype))  # as 7 draws advance them
    step.assign(5)
    path = Checkpoints(str(tmp_path / "new"), model, optimizer, step).save()
    assert DROPOUT_SEEDS_KEY in {name.split("/")[0] for name, _ in tf.train.list_variables(path)}
    old = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=optimizer, step=step),
                                     str(tmp_path / "old" / "checkpoints"), max_to_keep=1)
    old.save(checkpoint_number=5)

    fresh, fresh_optimizer, fresh_step = built_transformer(config)
    assert Checkpoints(str(tmp_path / "new"), fresh, fresh_optimizer, fresh_step).restore() == 5
    for restored, saved in zip(dropout_seed_states(fresh), seeds):
        np.testing.assert_array_equal(restored.numpy(), saved.numpy())
    fresh, fresh_optimizer, fresh_step = built_transformer(config)
    initial = [s.numpy() for s in dropout_seed_states(fresh)]
    assert Checkpoints(str(tmp_path / "old"), fresh, fresh_optimizer, fresh_step).restore() == 5
    for restored, built_seed in zip(dropout_seed_states(fresh), initial):
        np.testing.assert_array_equal(restored.numpy(), built_seed)
    for restored, saved in zip(fresh.weights, model.weights):
        np.testing.assert_array_equal(restored.numpy(), saved.numpy())


def test_copy_until_starts_another_run_where_this_one_stood(tmp_path):
    """The checkpoints up to update 6 in a new directory, listed as the manager listed them: a run
    there resumes at 6 with 6's values, and its next saves rotate the copies as the first run's would."""
    model, optimizer, step = parts()
    source = Checkpoints(str(tmp_path / "long"), model, optimizer, step, keep=10)
    for s in (2, 4, 6, 8):
        model.kernel.assign(tf.fill([2, 3], float(s)))
        step.assign(s)
        source.save()
    copies = copy_until(str(tmp_path / "long"), str(tmp_path / "short"), 6)
    assert [os.path.basename(p) for p in copies] == ["ckpt-2", "ckpt-4", "ckpt-6"]
    folder = tmp_path / "short" / "checkpoints"
    assert sorted(os.listdir(folder)) == ["checkpoint"] + [f"ckpt-{s}.{e}" for s in (2, 4, 6)
                                                          for e in ("data-00000-of-00001", "index")]
    assert os.path.samefile(folder / "ckpt-4.index", tmp_path / "long" / "checkpoints" / "ckpt-4.index")
    copied, long = (tf.train.get_checkpoint_state(str(d)) for d in (folder, tmp_path / "long" / "checkpoints"))
    assert copied.all_model_checkpoint_timestamps == long.all_model_checkpoint_timestamps[:3]
    assert "ckpt-6" in (folder / "checkpoint").read_text().splitlines()[0] and str(tmp_path) not in (
        folder / "checkpoint").read_text()  # names relative to the folder: the run can be moved

    fresh_model, fresh_optimizer, fresh_step = parts()
    short = Checkpoints(str(tmp_path / "short"), fresh_model, fresh_optimizer, fresh_step, keep=2)
    assert short.restore() == 6 and float(fresh_model.kernel[0, 0]) == 6.0
    fresh_step.assign(7)
    short.save()
    assert [os.path.basename(p) for p in short.manager.checkpoints] == ["ckpt-6", "ckpt-7"]  # keep=2 rotated them
    assert os.path.isfile(tmp_path / "long" / "checkpoints" / "ckpt-2.index")  # the long run's own stay
    with pytest.raises(FileNotFoundError, match="no checkpoint of update 5"):
        copy_until(str(tmp_path / "long"), str(tmp_path / "other"), 5)
