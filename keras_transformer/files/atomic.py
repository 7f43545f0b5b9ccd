"""Files written whole or not at all: the run's JSON, the tokenizer's files, the commands' outputs.

    write_atomically(path, data)   # bytes into `.tmp-<name>-<hex>` beside `path`, renamed over it

    with uninterrupted(): ...          # Ctrl-C held back until a group of files is written

A reader (a resumed run, TF Serving, a user's script) never sees a half-written file, and a
failure or a kill leaves an earlier `path` as it was. The file and then its folder are flushed to
the disk (`fsync`) before the function returns, so a power loss after it leaves the new `path`,
and one before it the old (`sync_tree` does the same for a folder TensorFlow wrote: a checkpoint, an
export). A kill can leave the temporary file;
`run_lock.remove_stale_temporaries` removes those of a training directory (`.tmp-*`). Imports
no TensorFlow.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import stat
import sys
import threading

from keras_transformer import command_start


def write_atomically(path: str, data: bytes) -> None:
    """Writes `data` to `path` through a temporary file beside it and `os.replace`.

    The mode is what `open(path, "w")` gives: an existing file's, else 0o666 less the umask
    (0o644 under the usual 022, readable by another user such as the model server;
    `tempfile.mkstemp` would give 0o600). A link is written through to its file. On any
    failure the temporary file is removed and the error raised.

    A `path` that is neither a regular file nor a folder (a device such as /dev/null, a named
    pipe, /dev/stdout) is written to as it is, never replaced: a rename over it would put a
    regular file in its place (as root, over /dev/null itself).
    """
    if is_special_file(path):
        with open(path, "wb") as file:
            file.write(data)
        return
    path = os.path.realpath(path)
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    temporary = os.path.join(folder, f".tmp-{os.path.basename(path)}-{secrets.token_hex(4)}")
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the kernel applies the umask
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())  # the data on the disk before the name points at it
        if os.path.isfile(path):
            os.chmod(temporary, os.stat(path).st_mode & 0o7777)
        os.replace(temporary, path)
        sync_folder(folder)  # the rename itself on the disk
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


def sync_folder(folder: str) -> None:
    """`fsync` of a folder: the names created, renamed or removed in it reach the disk."""
    handle = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def sync_files(paths) -> None:
    """`fsync` of each file of `paths` (written by another library, TensorFlow's checkpoints), then of their
    folders, each once."""
    folders = []
    for path in paths:
        handle = os.open(path, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in folders:
            folders.append(folder)
    for folder in folders:
        sync_folder(folder)


def sync_tree(root: str) -> None:
    """`fsync` of every file and folder under `root` (a SavedModel before its version folder is
    published), the folders after their files."""
    for folder, _, names in os.walk(root, topdown=False):
        sync_files([os.path.join(folder, name) for name in names if os.path.isfile(os.path.join(folder, name))])
        sync_folder(folder)


def is_special_file(path: str) -> bool:
    """True if `path` exists (links followed) and is neither a regular file nor a folder: a
    device, a named pipe or a socket."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def write_output(path: str, text: str) -> None:
    """A command's output: `text` to stdout when `path` is "-", else to the file `path` with
    `write_atomically` (translate's translations, score's scores).

    An `OSError` that names no file (a write, flush or close on a device such as /dev/full, or on
    a full stdout) is raised with `path` as its `filename` ("<stdout>" for "-"), so that the
    command's error line names where the output went.
    """
    try:
        if path == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            write_atomically(path, text.encode("utf-8"))
    except OSError as error:
        if error.filename is None:
            error.filename = "<stdout>" if path == "-" else path
        raise


@contextlib.contextmanager
def uninterrupted():
    """Holds Ctrl-C back while files that readers take together are written (a checkpoint's files
    and the state file that lists them): a SIGINT in the block goes to the handler it was held
    from when the block is done (a KeyboardInterrupt), so a command stops with nothing
    half-listed. Changes nothing outside the main thread or where SIGINT has a handler that does
    not raise KeyboardInterrupt (training's, which saves first; a SIGINT set to be ignored)."""
    if threading.current_thread() is not threading.main_thread() or not command_start.raises_keyboard_interrupt():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        previous(received[0], None)  # the handler the block held it from: a KeyboardInterrupt
