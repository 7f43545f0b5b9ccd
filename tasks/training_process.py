"""The training command in a child process: for the tasks and benches that chain training runs.

    summary, code = run_training(["--flagfile=configs/tiny.flags", "--model_dir=runs/a"], log=print)

Each run is `python -m keras_transformer.train ARGS` started as a user would start it (this
interpreter, the current folder), so it resumes, refuses bad flags and reports as the command
does; the caller reads its `done:` (or `interrupted:`) line and its exit status. SIGINT and
SIGTERM sent to the caller reach the run (which saves and stops), and a caller killed outright
takes its run with it (Linux's PR_SET_PDEATHSIG): a chain stopped anywhere is started again with
the same command. Used by `keras_transformer.tasks.model_variations` (Table 3) and `bench/compute_robustness.py`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Callable, Optional, Sequence

SUMMARY_PREFIXES = ("done: ", "interrupted: ")  # the training command's last line (keras_transformer/train.py)


def run_training(args: Sequence[str], log: Callable[[str], None]) -> tuple[Optional[dict], int]:
    """`python -m keras_transformer.train ARGS` in a child process, each line of its stdout passed
    to `log` (its stderr is this process's); returns the JSON of its last "done:"/"interrupted:"
    line (or None) and its exit status (128 + N for a run killed by signal N, as a shell reports
    it). SIGINT and SIGTERM are passed to it (once: it runs in a session of its own) while it runs."""
    command = [sys.executable, "-m", "keras_transformer.train", *args]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1, start_new_session=True,
                             preexec_fn=_terminate_with_parent)

    def forward(signum, _frame):
        child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    summary = None
    try:
        for line in child.stdout:
            log(line.rstrip("\n"))
            for prefix in SUMMARY_PREFIXES:
                if line.startswith(prefix):
                    summary = json.loads(line[len(prefix):])
        code = child.wait()
        code = 128 - code if code < 0 else code  # killed by a signal: as a shell reports it
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return summary, code


def _terminate_with_parent() -> None:
    """In the child, before it runs: SIGTERM when the parent dies (Linux's PR_SET_PDEATHSIG), so a
    killed chain leaves no run training on its own (it saves and stops)."""
    try:
        import ctypes  # pylint: disable=g-import-not-at-top

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: a killed parent leaves its run going
        pass
