"""Whether a checkpoint's files are whole: `checkpoint_problem` names the file at fault, `check_readable` refuses it."""

import os

import pytest

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
