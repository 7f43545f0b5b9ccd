"""Damaged checkpoints through the real commands: a warning and the checkpoint before it, or one
`error:` line (exit 2) and no traceback; the damaged files are left byte for byte as they were.

The fallback logic itself is tested in-process (tests/keras_transformer/training/test_checkpoints.py,
tests/keras_transformer/run_dir/: test_readable_checkpoints.py, test_layout.py, test_averaging.py); each
run here pays TensorFlow's start-up, so there are few of them.
"""

import os
import pathlib
import shutil

import pytest
import tensorflow as tf

from keras_transformer.run_dir import layout
from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.export_models import make_model_dir

STEPS = 20  # the training checkpoint of make_model_dir is ckpt-20; a second one, ckpt-30, follows it


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A training directory with two checkpoints, ckpt-20 and ckpt-30 (built once)."""
    path = tmp_path_factory.mktemp("run")
    make_model_dir(path, steps=STEPS)
    model, _ = layout.restore_model(str(path))
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model),
                                         str(path / layout.CHECKPOINT_DIR), max_to_keep=5)
    manager.save(checkpoint_number=STEPS + 10)
    return path


@pytest.fixture
def model_dir(pristine, tmp_path):
    """A copy of the pristine directory, free to damage."""
    return pathlib.Path(shutil.copytree(pristine, tmp_path / "run"))


def damage(model_dir, name):
    """Truncates MODEL_DIR/checkpoints/NAME to half its size; returns (path, its bytes now)."""
    path = model_dir / layout.CHECKPOINT_DIR / name
    os.truncate(path, os.path.getsize(path) // 2)
    return path, path.read_bytes()


def test_export_skips_a_damaged_newest_checkpoint_with_a_warning(model_dir, tmp_path):
    damaged, before = damage(model_dir, f"ckpt-{STEPS + 10}.index")
    result = run_command("-m", "keras_transformer.export", f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'out'}",
                         "--nocheck_ops")
    assert result.returncode == 0, result.stderr[-3000:]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and f"ckpt-{STEPS + 10}.index: " in warnings[0], result.stderr
    assert f"exported {model_dir / 'checkpoints' / f'ckpt-{STEPS}'} to" in result.stdout
    assert damaged.read_bytes() == before


def test_export_of_an_explicit_damaged_checkpoint_is_one_error_line(model_dir, tmp_path):
    damaged, before = damage(model_dir, f"ckpt-{STEPS + 10}.data-00000-of-00001")
    checkpoint = model_dir / "checkpoints" / f"ckpt-{STEPS + 10}"
    result = run_command("-m", "keras_transformer.export", f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'out'}",
                         f"--checkpoint={checkpoint}")
    assert_one_error_line(result, str(checkpoint), "is damaged", f"ckpt-{STEPS + 10}.data-00000-of-00001")
    assert not (tmp_path / "out").exists()
    assert damaged.read_bytes() == before


def test_export_with_every_checkpoint_damaged_is_one_error_line(model_dir, tmp_path):
    files = [damage(model_dir, f"ckpt-{STEPS}.index"), damage(model_dir, f"ckpt-{STEPS + 10}.data-00000-of-00001")]
    result = run_command("-m", "keras_transformer.export", f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'out'}")
    assert_one_error_line(result, str(model_dir), "no readable checkpoint")
    assert len([line for line in result.stderr.splitlines() if line.startswith("warning: ")]) == 2
    assert not (tmp_path / "out").exists()
    assert all(path.read_bytes() == before for path, before in files)


def test_averaging_a_damaged_checkpoint_is_one_error_line_and_writes_nothing(model_dir):
    damaged, before = damage(model_dir, f"ckpt-{STEPS}.data-00000-of-00001")
    result = run_command("-m", "keras_transformer.average_checkpoints", f"--model_dir={model_dir}",
                         "--num_checkpoints=2")
    assert_one_error_line(result, f"ckpt-{STEPS}.data-00000-of-00001", "is damaged")
    assert not (model_dir / layout.AVERAGED_DIR).exists()
    assert damaged.read_bytes() == before
