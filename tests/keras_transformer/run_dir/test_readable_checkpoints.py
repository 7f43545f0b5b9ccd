"""Whether a checkpoint's files are whole: `checkpoint_problem` names the file at fault, `check_readable` refuses it."""

import os
import re
import types

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.run_dir import readable_checkpoints
from tests.helpers.checkpoints import saved_twice


def test_checkpoint_problem_names_the_file_at_fault(tmp_path):
    older, newest = saved_twice(tmp_path)
    assert readable_checkpoints.checkpoint_problem(older) is None
    assert readable_checkpoints.listed_checkpoints(str(tmp_path / "checkpoints")) == [older, newest]
    assert readable_checkpoints.listed_checkpoints(str(tmp_path / "nothing")) == []
    os.truncate(newest + ".index", 0)
    assert readable_checkpoints.checkpoint_problem(newest).startswith("ckpt-4.index: ")
    os.remove(newest + ".index")
    assert readable_checkpoints.checkpoint_problem(newest) == "ckpt-4.index: not found"
    data = older + ".data-00000-of-00001"
    flipped = bytearray(open(data, "rb").read())
    flipped[len(flipped) // 2] ^= 0xFF  # same size, wrong bytes: the checksum tells
    open(data, "wb").write(bytes(flipped))
    assert readable_checkpoints.checkpoint_problem(older).startswith("ckpt-2.data-00000-of-00001: ")
    with pytest.raises(ValueError, match=r"checkpoint .*ckpt-2 is damaged: ckpt-2.data-00000-of-00001: "):
        readable_checkpoints.check_readable(older)


def test_a_state_file_that_lists_only_missing_checkpoints_falls_back_to_the_files(tmp_path):
    """A stale `checkpoint` state (naming ckpt-99, gone) beside intact ckpt-2 and ckpt-4: the files
    on disk are read, with a warning (was: "none of its 1 checkpoint(s) is readable", the run stuck)."""
    older, newest = saved_twice(tmp_path)
    folder = tmp_path / "checkpoints"
    (folder / "checkpoint").write_text('model_checkpoint_path: "ckpt-99"\nall_model_checkpoint_paths: "ckpt-99"\n')
    warnings = []
    assert readable_checkpoints.listed_checkpoints(str(folder), warnings.append) == [older, newest]
    assert warnings == [f"warning: {folder / 'checkpoint'} lists only checkpoints whose files are gone; using "
                        f"the 2 checkpoint file(s) found in {folder}"]
    os.remove(older + ".index")
    os.remove(newest + ".index")
    assert readable_checkpoints.listed_checkpoints(str(folder)) == [str(folder / "ckpt-99")]  # nothing to fall back on


def test_the_ema_shadow_is_read_from_its_key_into_the_trainable_variables(tmp_path):
    """A checkpoint's `ema` part is a list `shadow` of float32 tensors, one per trainable variable in
    their order (as `training.ema.ExponentialMovingAverage` saves it): `read_ema_shadow` reads it
    into a model's variables, and `has_ema` tells a checkpoint that has one."""
    shadow = tf.Module()
    shadow.shadow = [tf.Variable([1.5, -2.0]), tf.Variable([[0.25]])]
    with_ema = tf.train.Checkpoint(**{readable_checkpoints.EMA_KEY: shadow}).write(str(tmp_path / "with"))
    without = tf.train.Checkpoint(other=tf.Variable(1.0)).write(str(tmp_path / "without"))
    assert readable_checkpoints.has_ema(readable_checkpoints.load_reader(with_ema))
    assert not readable_checkpoints.has_ema(readable_checkpoints.load_reader(without))
    model = types.SimpleNamespace(trainable_variables=[tf.Variable([0.0, 0.0]), tf.Variable([[0.0]])])
    readable_checkpoints.read_ema_shadow(model, with_ema).assert_existing_objects_matched()
    np.testing.assert_array_equal(model.trainable_variables[0].numpy(), [1.5, -2.0])
    np.testing.assert_array_equal(model.trainable_variables[1].numpy(), [[0.25]])


def test_a_state_file_naming_a_checkpoint_outside_its_folder_is_refused(tmp_path):
    """A `checkpoint` state file whose entry leads out of its folder (`../`, an absolute path
    elsewhere, a file that is a symbolic link to another run's) is one line naming the file:
    nothing reads another run's weights as this one's, and no rotation removes them. An absolute
    path inside the folder, as older TensorFlow wrote them, is the folder's own."""
    older, newest = saved_twice(tmp_path / "run")
    foreign, _ = saved_twice(tmp_path / "other")
    folder = tmp_path / "run" / "checkpoints"
    state = folder / "checkpoint"

    def write_state(*entries):
        state.write_text(f'model_checkpoint_path: "{entries[-1]}"\n'
                         + "".join(f'all_model_checkpoint_paths: "{entry}"\n' for entry in entries))

    for entry in ("../../other/checkpoints/ckpt-2", foreign):
        write_state("ckpt-2", entry)
        with pytest.raises(ValueError, match=re.escape(f'{state}: entry "{entry}" is outside {folder}; ')):
            readable_checkpoints.listed_checkpoints(str(folder))
    write_state(older, newest)
    assert readable_checkpoints.listed_checkpoints(str(folder)) == [older, newest]
    os.remove(newest + ".index")
    os.symlink(foreign + ".index", newest + ".index")
    write_state("ckpt-2", "ckpt-4")
    with pytest.raises(ValueError, match=re.escape(f'{state}: entry "ckpt-4" is outside {folder} (its files are '
                                                   "symbolic links to another folder)")):
        readable_checkpoints.listed_checkpoints(str(folder))
