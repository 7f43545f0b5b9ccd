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
import signal
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

    def _handle(self, signum, frame):  # pylint: disable=unused-argument
        if self.received is not None:
            raise SignalStop(signum, f"{name(signum)} again: stopping without saving")
        self.received = signum
        if self._at_once:
            self._at_once = False  # raised once; what follows (the save) runs as after an update
            raise Interrupted(signum, name(signum))

    @contextlib.contextmanager
    def at_once(self):
        """A block where the first signal raises `Interrupted` instead of waiting (one received
        before raises on entry): for long work that writes nothing until it ends."""
        if self.received is not None:
            raise Interrupted(self.received, name(self.received))
        self._at_once = True
        try:
            yield
        finally:
            self._at_once = False

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in HANDLED:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
