"""One training process per training directory, and what a killed one left behind.

Two trainers on one MODEL_DIR would each overwrite the other's checkpoints, tokenizer and
history. `RunLock` takes an exclusive `fcntl.flock` on MODEL_DIR/.lock (the kernel releases
it when the holder dies, however it dies, so a lock is never stale) and writes the holder's
pid, host and start time into the file for the message a second trainer gets:

    check_free(model_dir)             # before TensorFlow starts: the same ValueError, nothing taken
    with RunLock(model_dir):          # ValueError: "... is in use by pid 4242 on host-a ..."
        ...                           # train

While it holds the lock, the process is the directory's only writer, so it may remove
what an earlier, killed writer left half-done (`remove_stale_temporaries`):
TensorFlow's `ckpt-<N>_temp/` folders of an interrupted checkpoint save and the `.tmp-*`
files of an interrupted atomic write (`atomic.write_atomically`: the run's JSON, the tokenizer's
files). On a cluster only the chief takes the lock: the other workers write only below
MODEL_DIR/workers/. `flock` works on local file systems and NFSv4.
"""

from __future__ import annotations

import fcntl
import glob
import os
import shutil
import socket
import time
from typing import Callable, Optional

LOCK_FILE = ".lock"


def holder(model_dir: str) -> str:
    """The holder recorded in MODEL_DIR/.lock ("pid 42 on host since 2026-11-23 20:14:00"), or ""."""
    try:
        with open(os.path.join(model_dir, LOCK_FILE), encoding="utf-8") as file:
            return " ".join(file.read().split())
    except OSError:
        return ""


def _in_use(model_dir: str) -> ValueError:
    who = holder(model_dir) or "another process"
    return ValueError(f"{model_dir} is in use by {who} (another training process); wait for it to end, stop "
                      "it, or use another --model_dir")


def check_free(model_dir: str) -> None:
    """The `RunLock` refusal (a one-line ValueError naming the holder) if a live process holds
    MODEL_DIR/.lock now; else nothing, and nothing created or written. The training command asks
    before TensorFlow starts, so a second trainer is refused at once, not after a model is built;
    the lock itself is taken later (`RunLock.acquire`), which still refuses a trainer that started
    meanwhile."""
    try:
        fd = os.open(os.path.join(model_dir, LOCK_FILE), os.O_RDONLY)
    except OSError:  # no lock file (a new run), or one that cannot be opened: `acquire` says so
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _in_use(model_dir) from None
    finally:
        os.close(fd)  # releases the lock if this took it


class RunLock:
    """An exclusive lock on a training directory (created if missing), held until `release`.

    Raises:
        ValueError: another live process holds it (one line naming that process).
    """

    def __init__(self, model_dir: str):
        self.model_dir = model_dir
        self._fd: Optional[int] = None

    def acquire(self) -> "RunLock":
        os.makedirs(self.model_dir, exist_ok=True)
        path = os.path.join(self.model_dir, LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise _in_use(self.model_dir) from None
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {stamp}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc_info) -> None:
        self.release()


def remove_stale_temporaries(model_dir: str, log: Callable[[str], None] = print) -> list[str]:
    """Removes the half-written leftovers of a killed writer of `model_dir`; returns their paths.

    Only call it while holding the `RunLock`: a live writer's temporaries look the same.
    """
    patterns = ("*/ckpt-*_temp", "workers/*/ckpt-*_temp", ".tmp-*", "*/.tmp-*", "tokenizer/*/.tmp-*")
    removed = []
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(glob.escape(model_dir), pattern))):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.remove(path)
                except FileNotFoundError:
                    continue
            removed.append(path)
    if removed:
        log(f"removed what an interrupted run left half-written: {', '.join(os.path.relpath(p, model_dir) for p in removed)}")
    return removed
