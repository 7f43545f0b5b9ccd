"""Ctrl-C and `kill` during training: finish the update, save, then stop.

A long run is stopped by SIGINT (Ctrl-C at the terminal) or SIGTERM (`kill`, a cluster
scheduler's pre-emption, `docker stop`). Python's default turns SIGINT into a
`KeyboardInterrupt` wherever the interpreter happens to be and lets SIGTERM kill the
process: either way, every update since the last checkpoint is lost.

`StopSignals` replaces both handlers while the training loop runs. The handler only notes
the signal; the loop reads `received` after each update, saves a checkpoint and returns, and
the command exits with 128 + the signal number (130 for SIGINT, 143 for SIGTERM), as a
shell reports a process that the signal ended. Work between updates that takes long and can
be redone (the dev evaluation, the final one included, and the average at the end) runs
inside `at_once()`: there the first signal raises `Interrupted` at once, the caller drops that
work (nothing of it is written yet) and stops as after an update. A second signal while the
first is being handled (e.g. a long save) stops at once, without saving, by raising
`SignalStop` (a `KeyboardInterrupt` whose `exit_code` the command exits with: 143 for a
second SIGTERM, not Ctrl-C's 130).

A handler's exception surfaces wherever the interpreter was, and two places there lose it:
C code that calls back into Python and does not expect an error (TensorFlow's graph building)
reports one of its own instead, e.g. `SystemError: ... bad argument to internal function`;
a `__del__` swallows it and prints "Exception ignored". So once the handler has raised, an
error that ends the block, or its end without one, is taken for what it is, the signal:
`at_once()` raises `Interrupted`, the `with` block the second signal's `SignalStop`. What the
interrupted work leaves half done fails in turn when it is collected (TensorFlow's graph
stack: "Nesting violated"); those errors, and the handler's own that a `__del__` swallowed,
are not printed: after a handler's raise the `with` block collects the leftovers and keeps
their "Exception ignored" tracebacks off the console.

    with StopSignals() as signals:
        while ...:
            train_step()
            if signals.received:
                save(); break
            try:
                with signals.at_once():
                    evaluate()
            except Interrupted:
                save(); break
"""

from __future__ import annotations

import contextlib
import gc
import signal
import sys
import threading
from typing import Optional

HANDLED = (signal.SIGINT, signal.SIGTERM)


def exit_code(signum: int) -> int:
    """The exit status a shell shows for a process ended by signal `signum` (128 + its number)."""
    return 128 + int(signum)


def name(signum: int) -> str:
    """"SIGINT", "SIGTERM", ..."""
    return signal.Signals(signum).name


class SignalStop(KeyboardInterrupt):
    """A signal that stops the work where it is: `signum`, and the `exit_code` a command exits
    with (`keras_transformer.cli.run` reads it)."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = signum
        self.exit_code = exit_code(signum)


class Interrupted(SignalStop):
    """The first signal inside `StopSignals.at_once()`: the work there is dropped, and the
    caller saves what it keeps and stops in order."""


class StopSignals:
    """A context manager that turns SIGINT and SIGTERM into a request to stop.

    Inside the `with` block the first signal sets `received` (its number), and inside
    `at_once()` also raises `Interrupted`; a second one raises `SignalStop`. The previous
    handlers are restored on exit. Outside the main thread (where Python cannot install
    handlers) it does nothing and `received` stays None.
    """

    def __init__(self):
        self.received: Optional[int] = None
        self._previous = {}
        self._at_once = False
        self._raised: Optional[SignalStop] = None  # what the handler last raised
        self._swallowed: Optional[SignalStop] = None  # the same, if a __del__ swallowed it
        self._previous_hook = sys.unraisablehook
        self._quiet = False  # the handler has raised: collected leftovers fail silently

    def _handle(self, signum, frame):  # pylint: disable=unused-argument
        if self.received is not None:
            self._raised, self._quiet = SignalStop(signum, f"{name(signum)} again: stopping without saving"), True
            raise self._raised
        self.received = signum
        if self._at_once:
            self._at_once = False  # raised once; what follows (the save) runs as after an update
            self._raised, self._quiet = Interrupted(signum, name(signum)), True
            raise self._raised

    @contextlib.contextmanager
    def at_once(self):
        """A block where the first signal raises `Interrupted` instead of waiting (one received
        before raises on entry): for long work that writes nothing until it ends."""
        if self.received is not None:
            raise Interrupted(self.received, name(self.received))
        self._at_once, self._raised, self._swallowed = True, None, None
        try:
            yield
        except Exception as error:  # pylint: disable=broad-except
            if isinstance(self._raised, Interrupted):  # C code reported the handler's raise as its own
                raise self._raised from error
            raise
        finally:
            self._at_once = False
        if isinstance(self._swallowed, Interrupted):  # raised into a __del__, which swallowed it
            raise self._swallowed

    def _unraisable(self, unraisable) -> None:
        """`sys.unraisablehook`: silent once the handler has raised (its exception is raised again
        where it counts; the interrupted work's leftovers fail as they are collected)."""
        if not self._quiet:
            self._previous_hook(unraisable)
        elif unraisable.exc_value is self._raised:
            self._swallowed = self._raised

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in HANDLED:
                self._previous[signum] = signal.signal(signum, self._handle)
            self._previous_hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        return self

    def __exit__(self, exc_type, error, traceback) -> None:
        stop, swallowed, quiet = self._raised, self._swallowed, self._quiet
        self._raised = self._swallowed = None
        again = None  # a second signal, lost in a __del__ or reported as C code's error
        if not (stop is None or isinstance(stop, Interrupted) or error is stop) and (
                (error is None and swallowed is stop) or isinstance(error, Exception)):
            again = stop.with_traceback(None)
        stop = swallowed = None
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        if self._previous and not (quiet and (error is not None or again is not None)):
            if quiet:
                gc.collect()  # the interrupted work's leftovers, while the hook keeps them quiet
            sys.unraisablehook = self._previous_hook
            self._quiet = False
        # else the command ends on an error after a signal: the hook stays quiet for its leftovers
        self._previous.clear()
        if again is not None:
            raise again from error
