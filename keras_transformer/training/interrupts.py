"""Ctrl-C and `kill` during training: finish the update, save, then stop.

A long run is stopped by SIGINT (Ctrl-C at the terminal) or SIGTERM (`kill`, a cluster
scheduler's pre-emption, `docker stop`). Python's default turns SIGINT into a
`KeyboardInterrupt` wherever the interpreter happens to be and lets SIGTERM kill the
process: either way, every update since the last checkpoint is lost.

`StopSignals` replaces both handlers while the training loop runs. The handler only notes
the signal; the loop reads `received` after each update, saves a checkpoint and returns, and
the command exits with 128 + the signal number (130 for SIGINT, 143 for SIGTERM), as a
shell reports a process that the signal ended. A second signal while the first is being
handled (e.g. a long save or evaluation) stops at once, without saving, by raising
`KeyboardInterrupt`.

    with StopSignals() as signals:
        while ...:
            train_step()
            if signals.received:
                save(); break
"""

from __future__ import annotations

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


class StopSignals:
    """A context manager that turns SIGINT and SIGTERM into a request to stop.

    Inside the `with` block the first signal sets `received` (its number); a second one
    raises `KeyboardInterrupt`. The previous handlers are restored on exit. Outside the
    main thread (where Python cannot install handlers) it does nothing and `received`
    stays None.
    """

    def __init__(self):
        self.received: Optional[int] = None
        self._previous = {}

    def _handle(self, signum, frame):  # pylint: disable=unused-argument
        if self.received is not None:
            raise KeyboardInterrupt(f"{name(signum)} again: stopping without saving")
        self.received = signum

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in HANDLED:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
