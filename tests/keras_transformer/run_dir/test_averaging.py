"""Checkpoint averaging (section 6.1): the mean of the last K checkpoints' variables."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer, TransformerConfig
from keras_transformer.run_dir import averaging
from keras_transformer.run_dir import layout
from tests.helpers.commands import assert_one_error_line, run_command

CONFIG = TransformerConfig.tiny(vocab_size=20, max_length=16)


def write_checkpoints(model_dir, steps):
    """Saves one checkpoint per step with random weights; returns each one's float weights."""
    model = Transformer(CONFIG)
    model.build()
    layout.write_config(str(model_dir), CONFIG)
    step = tf.Variable(0, dtype=tf.int64)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, step=step),
                                         str(model_dir / layout.CHECKPOINT_DIR), max_to_keep=5)
    rng = np.random.default_rng(0)
    saved = []
    for s in steps:
        for v in model.variables:
            if v.dtype == "float32":
                v.assign(rng.normal(size=v.shape).astype(np.float32))
        step.assign(s)
        manager.save(checkpoint_number=s)
        saved.append([v.numpy() for v in model.variables])
    return saved


def test_average_of_three_checkpoints_is_the_numpy_mean(tmp_path):
    saved = write_checkpoints(tmp_path, [10, 20, 30, 40])
    path = averaging.average_last(str(tmp_path), 3)
    assert path == str(tmp_path / "averaged" / "ckpt-40")
    restored, used = layout.restore_model(str(tmp_path))  # prefers averaged/
    assert used == path
    for i, variable in enumerate(restored.variables):
        expected = np.mean([saved[k][i] for k in (1, 2, 3)], axis=0)
        np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-6, atol=1e-7)


def test_too_few_checkpoints_is_a_one_line_error(tmp_path):
    write_checkpoints(tmp_path, [10])
    with pytest.raises(ValueError, match="holds 1 checkpoint"):
        averaging.recent_checkpoints(str(tmp_path), 2)
    result = run_command("-m", "keras_transformer.average_checkpoints", f"--model_dir={tmp_path}",
                         "--num_checkpoints=5", timeout=600)  # TensorFlow alone took ~110 s to start on a busy host
    assert_one_error_line(result, "fewer than the 5")


def test_relative_model_dir(tmp_path, monkeypatch):
    """`--model_dir=runs/x`, as the README writes it: paths must not get the directory twice."""
    saved = write_checkpoints(tmp_path / "runs" / "x", [10, 20])
    monkeypatch.chdir(tmp_path)
    assert averaging.recent_checkpoints(os.path.join("runs", "x"), 2) == [
        os.path.join("runs", "x", layout.CHECKPOINT_DIR, f"ckpt-{s}") for s in (10, 20)]
    path = averaging.average_last(os.path.join("runs", "x"), 2)
    model, _ = layout.restore_model(str(tmp_path / "runs" / "x"), path)
    floats = [i for i, v in enumerate(model.variables) if v.dtype == "float32"]
    np.testing.assert_allclose(model.variables[floats[0]].numpy(),
                               (saved[0][floats[0]] + saved[1][floats[0]]) / 2, rtol=1e-6)


def test_a_damaged_checkpoint_stops_the_averaging_and_keeps_the_previous_average(tmp_path):
    write_checkpoints(tmp_path, [10, 20, 30])
    first = averaging.average_last(str(tmp_path), 2)
    averaged = {name: (tmp_path / "averaged" / name).read_bytes() for name in os.listdir(tmp_path / "averaged")}
    data = tmp_path / "checkpoints" / "ckpt-20.data-00000-of-00001"
    os.truncate(data, os.path.getsize(data) // 2)
    damaged = data.read_bytes()
    with pytest.raises(ValueError) as error:
        averaging.average_last(str(tmp_path), 3)
    assert str(error.value).startswith(f"checkpoint {tmp_path / 'checkpoints' / 'ckpt-20'} is damaged: "
                                       "ckpt-20.data-00000-of-00001: ")
    assert "\n" not in str(error.value)
    assert {name: (tmp_path / "averaged" / name).read_bytes() for name in os.listdir(tmp_path / "averaged")} == averaged
    assert layout.latest_checkpoint(str(tmp_path)) == first
    assert data.read_bytes() == damaged
    assert averaging.average_last(str(tmp_path), 1).endswith("ckpt-30")  # the damaged one is not among them
