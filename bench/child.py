"""A child process of a benchmark: a Python command run to its end, its reply, its peak memory.

    done = child.run_python("-m", "keras_transformer.export", "--model_dir=...")   # text stdout, stderr
    child.checked(done, "the export")      # raises ChildFailed (status, stderr's tail) unless it exited 0
    reply = child.json_reply(done, "the worker")   # checked, then its last stdout line as JSON
    returncode, peak_bytes = child.wait_peak_rss(process.pid)   # a Popen's end and its peak RSS

Every benchmark that measures in a fresh interpreter (so that one measurement's thread pools,
allocator and compiled functions never touch the next) starts it here: `sys.executable`, this
process's environment unless `env` is given, output captured as text. The peak resident set size
is what the kernel counted for the child and the descendants it waited for (`os.wait4`'s
`ru_maxrss`), not a poll: a short peak is not missed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Optional

TAIL_CHARACTERS = 3000  # of a failed child's stderr, in the error


class ChildFailed(RuntimeError):
    """A child process exited with a status other than 0."""


def run_python(*args: str, env: Optional[dict] = None, cwd: Optional[str] = None) -> subprocess.CompletedProcess:
    """`python ARGS...` with this interpreter, to its end; stdout and stderr as text. Not checked."""
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, check=False, env=env,
                          cwd=cwd)


def checked(done: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    """`done`, if it exited 0; else raises ChildFailed naming `what`, the status and stderr's tail."""
    if done.returncode:
        raise ChildFailed(f"{what} failed (exit {done.returncode}):\n{done.stderr[-TAIL_CHARACTERS:]}")
    return done


def last_json(done: subprocess.CompletedProcess) -> Any:
    """The last line a child printed, read as JSON (a worker prints its result last)."""
    return json.loads(done.stdout.strip().splitlines()[-1])


def json_reply(done: subprocess.CompletedProcess, what: str) -> Any:
    """`last_json` of a child that exited 0 (`checked`)."""
    return last_json(checked(done, what))


def wait_peak_rss(pid: int) -> tuple[int, int]:
    """Waits for the child `pid`; (its exit status as `subprocess` gives it, its peak RSS in bytes)."""
    _, status, usage = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024
