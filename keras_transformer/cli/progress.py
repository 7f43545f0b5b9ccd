"""A command's progress bar on stderr (stdout may carry its output), shown only on a terminal."""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, Optional


def stderr_progress(total: int, unit_name: str, show: Optional[bool] = None) -> Callable[[int], None]:
    """`on_batch(done)` that draws a `keras.utils.Progbar` of `total` on stderr (stdout may carry
    the command's output), by default only when stderr is a terminal: the bar always writes ANSI
    colour codes and redraws itself with backspaces and carriage returns (keras' check for a
    terminal looks at stdout, and passes on any POSIX system), which only a terminal shows as a bar."""
    import keras  # pylint: disable=g-import-not-at-top

    bar = keras.utils.Progbar(total, unit_name=unit_name) if (sys.stderr.isatty() if show is None else show) else None

    def on_batch(done: int) -> None:
        if bar is not None:
            with contextlib.redirect_stdout(sys.stderr):
                bar.update(done)

    return on_batch
