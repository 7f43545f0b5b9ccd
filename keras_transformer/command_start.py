"""Ctrl-C while a command starts: one `error: interrupted` line and exit 130, not a traceback.

`python -m keras_transformer.<command>` (or `python -m export`, `python -m pipelines`) spends its
first tenth of a second importing modules, before `keras_transformer.cli.run` turns a
KeyboardInterrupt into one line. The packages' `__init__` call `guard()` first: when Python is
starting a module with `-m` (`sys.argv[0]` is "-m" while the module is being located), SIGINT
prints the line and ends the process at once (nothing has been written yet). `cli.run` gives
SIGINT back to Python's handler (`release()`), and from there on each command handles it.
Importing the packages from Python code (a notebook, a test, a server) changes nothing, and a
SIGINT the shell set to be ignored (a background job) stays ignored.
"""

import os
import signal
import sys


def _interrupted(signum, frame):  # pylint: disable=unused-argument
    os.write(2, b"error: interrupted\n")
    os._exit(128 + signum)  # pylint: disable=protected-access  (no clean-up to run: only imports happened)


def guard() -> None:
    """Installs the start-up SIGINT handler when a `-m` command is starting (see the module docstring)."""
    if sys.argv[:1] == ["-m"] and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted)


def release() -> None:
    """Gives SIGINT back to Python's handler (KeyboardInterrupt) if `guard` had taken it."""
    if signal.getsignal(signal.SIGINT) is _interrupted:
        signal.signal(signal.SIGINT, signal.default_int_handler)
