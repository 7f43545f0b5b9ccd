"""Ctrl-C in a command: one `error: interrupted` line and exit 130, never a traceback.

`python -m keras_transformer.<command>` (or `python -m keras_transformer.export`, `python -m keras_transformer.pipelines`) spends its
first tenth of a second importing modules, before `keras_transformer.cli.run` turns a
KeyboardInterrupt into one line. The packages' `__init__` call `guard()` first: when Python is
starting a module with `-m` (`sys.argv[0]` is "-m" while the module is being located), SIGINT
prints the line and ends the process at once (nothing has been written yet).

`cli.run` then installs `raise_interrupt` (`release()`): Python's own behaviour, a
KeyboardInterrupt, plus a record that Ctrl-C came (`interrupted()`). TensorFlow's C++ code can
swallow the KeyboardInterrupt and raise an error of its own instead (a TypeError from a tensor
conversion cut short); `cli.run` reads the record and reports the interrupt, not that error.

Importing the packages from Python code (a notebook, a test, a server) changes nothing, and a
SIGINT the shell set to be ignored (a background job) stays ignored.
"""

import os
import signal
import sys

_received = []


def _interrupted_while_starting(signum, frame):  # pylint: disable=unused-argument
    os.write(2, b"error: interrupted\n")
    os._exit(128 + signum)  # pylint: disable=protected-access  (no clean-up to run: only imports happened)


def raise_interrupt(signum, frame):  # pylint: disable=unused-argument
    """SIGINT while a command runs: recorded (`interrupted`), then a KeyboardInterrupt as Python's own handler raises."""
    _received.append(signum)
    raise KeyboardInterrupt


def guard(starting: bool = False) -> None:
    """Installs the start-up SIGINT handler when a `-m` command is starting (see the module docstring), or
    when `starting` says a command is (a console script: `keras_transformer.commands.launch`)."""
    if (starting or sys.argv[:1] == ["-m"]) and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_while_starting)


def release() -> None:
    """Replaces Python's SIGINT handler, or `guard`'s, by `raise_interrupt` (a KeyboardInterrupt, recorded)."""
    if signal.getsignal(signal.SIGINT) in (_interrupted_while_starting, signal.default_int_handler):
        signal.signal(signal.SIGINT, raise_interrupt)


def raises_keyboard_interrupt() -> bool:
    """True if SIGINT raises a KeyboardInterrupt here: Python's handler or `raise_interrupt`."""
    return signal.getsignal(signal.SIGINT) in (signal.default_int_handler, raise_interrupt)


def interrupted() -> bool:
    """True once `raise_interrupt` has seen a SIGINT in this process."""
    return bool(_received)
