"""A file is written whole or not at all, with the mode open() would give (keras_transformer.run_dir.atomic_files)."""

import os

import pytest

from keras_transformer.run_dir import atomic_files


def test_output_file_is_replaced_atomically(tmp_path, monkeypatch):
    path = tmp_path / "hyp.txt"
    path.write_text("earlier\n", encoding="utf-8")
    os.chmod(path, 0o600)

    def fail(*args):
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", fail)
        with pytest.raises(OSError, match="disk full"):
            atomic_files.write_atomically(str(path), b"new\n")
    assert path.read_text(encoding="utf-8") == "earlier\n" and os.listdir(tmp_path) == ["hyp.txt"]

    atomic_files.write_atomically(str(path), b"new\n")
    assert path.read_text(encoding="utf-8") == "new\n" and os.listdir(tmp_path) == ["hyp.txt"]
    assert path.stat().st_mode & 0o777 == 0o600  # an existing file keeps its mode, as with open()
