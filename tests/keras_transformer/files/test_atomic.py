"""A file is written whole or not at all, with the mode open() would give (keras_transformer.files.atomic)."""

import os

import pytest

from keras_transformer.files import atomic, command_files


def test_output_file_is_replaced_atomically(tmp_path, monkeypatch):
    path = tmp_path / "hyp.txt"
    path.write_text("earlier\n", encoding="utf-8")
    os.chmod(path, 0o600)

    def fail(*args):
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", fail)
        with pytest.raises(OSError, match="disk full"):
            atomic.write_atomically(str(path), b"new\n")
    assert path.read_text(encoding="utf-8") == "earlier\n" and os.listdir(tmp_path) == ["hyp.txt"]

    atomic.write_atomically(str(path), b"new\n")
    assert path.read_text(encoding="utf-8") == "new\n" and os.listdir(tmp_path) == ["hyp.txt"]
    assert path.stat().st_mode & 0o777 == 0o600  # an existing file keeps its mode, as with open()


def test_a_named_pipe_or_device_is_written_to_never_replaced(tmp_path):
    """`--output=/dev/null`, /dev/stdout or a named pipe: a rename over it would put a regular file in
    its place (as root, over /dev/null itself). A named pipe stands in for a device here; the output
    check passes it without probing its folder."""
    import threading

    from keras_transformer import cli

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    command_files.check_output_path(str(fifo), inputs={"input": str(tmp_path / "source.txt")})
    atomic.write_output(str(fifo), "ein Hund\n")
    reader.join(timeout=30)
    assert received == [b"ein Hund\n"]
    assert atomic.is_special_file(str(fifo)) and os.listdir(tmp_path) == ["pipe"]  # no temporary left
    assert not atomic.is_special_file(str(tmp_path)) and not atomic.is_special_file(str(tmp_path / "no"))


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler for the test (a shell starts a background job with SIGINT
    ignored), the one found before restored after."""
    import signal  # pylint: disable=import-outside-toplevel
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_ctrl_c_waits_for_the_end_of_an_uninterrupted_block(python_sigint):  # pylint: disable=unused-argument
    import signal  # pylint: disable=import-outside-toplevel
    written = []
    with pytest.raises(KeyboardInterrupt):
        with atomic.uninterrupted():
            os.kill(os.getpid(), signal.SIGINT)  # delivered at once, held back
            written.append("files")
            written.append("state file")
    assert written == ["files", "state file"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with atomic.uninterrupted():  # no signal: nothing raised
        written.append("again")
    assert written[-1] == "again"
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # SIGINT ignored: the block changes nothing
    with atomic.uninterrupted():
        os.kill(os.getpid(), signal.SIGINT)
        written.append("ignored")
    assert written[-1] == "ignored" and signal.getsignal(signal.SIGINT) is signal.SIG_IGN


@pytest.fixture
def synced(monkeypatch):
    """The paths `os.fsync` is called on, in order (read from the descriptor before the real call)."""
    calls, real = [], os.fsync

    def recording(fd):
        calls.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    return calls


def test_a_written_file_reaches_the_disk_before_its_name_then_its_folder(tmp_path, synced):
    target = tmp_path / "settings.json"
    atomic.write_atomically(str(target), b"{}")
    assert len(synced) == 2 and os.path.basename(synced[0]).startswith(".tmp-settings.json-")  # the data, unnamed
    assert synced[1] == str(tmp_path) and target.read_bytes() == b"{}"  # then the rename, in its folder


def test_sync_tree_syncs_every_file_before_its_folder(tmp_path, synced):
    (tmp_path / "v" / "variables").mkdir(parents=True)
    for name in ("v/saved_model.pb", "v/variables/variables.index", "v/variables/variables.data-00000-of-00001"):
        (tmp_path / name).write_bytes(b"x")
    atomic.sync_tree(str(tmp_path / "v"))
    files = [p for p in synced if os.path.isfile(p)]
    assert sorted(files) == sorted(str(tmp_path / n) for n in ("v/saved_model.pb", "v/variables/variables.index",
                                                                 "v/variables/variables.data-00000-of-00001"))
    for file in files:  # each folder after the files in it
        assert synced.index(os.path.dirname(file)) > synced.index(file)
    assert synced[-1] == str(tmp_path / "v")
