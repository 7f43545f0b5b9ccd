"""A command as a child process of its own: its lines time-stamped as they come, its peak RSS.

    finished = run(["onmt-main", ...], log_path, echo=lambda line: "Step =" in line)
    finished.seconds, finished.peak_rss_bytes, finished.lines   # [(seconds since start, line), ...]
    read_log(log_path)                                          # the same lines, stamped to the ms
    stop_on_signals()   # in an entry point's main(): SIGTERM and SIGHUP stop the harness as Ctrl-C does

The child gets a session of its own (so a stop reaches it and whatever it started, and nothing
else) and `PYTHONUNBUFFERED=1` (a Python child's lines arrive when printed, not when a buffer
fills: the time stamps are the moments the child printed them, to the pipe's latency). Its stdout
and stderr are one stream (OpenNMT-tf logs to stderr, the project's training command to stdout),
copied into `log_path`. Its peak resident set size is what the kernel counted for it and for the
descendants it waited for (`os.wait4`'s `ru_maxrss`), not a poll: a short peak is not missed.

`stop_when(line)` ends the child early (SIGTERM to its process group, SIGKILL after
`STOP_SECONDS`), e.g. once a start-up run has made its first update. An interrupted harness
(KeyboardInterrupt, any error) stops the child the same way before the error goes on.

A child in a session of its own gets none of the signals meant for the harness: Ctrl-C at the
terminal, `kill`, the terminal or the session going away. `stop_on_signals` makes SIGTERM and
SIGHUP raise in the main thread what Ctrl-C raises there, a KeyboardInterrupt (`SignalStop`,
which carries the exit status 128 + the signal), so that each takes the path that stops the
running child's process group and runs the entry point's `finally` (the work folder removed or
kept). Once one has come, both are ignored: a second one would cut that clean-up short.
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import time
from typing import Callable, Optional, Sequence

import child
from keras_transformer.training.interrupts import SignalStop  # no TensorFlow

STOP_SECONDS = 30
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # `stop_on_signals`: handled as Ctrl-C
LOG_LINE = re.compile(r"^\[\s*(\d+(?:\.\d*)?)\] ?(.*)$")  # a line of a log `run` wrote (`log_line`)


@dataclasses.dataclass(frozen=True)
class Finished:
    """A child process that ended.

    Attributes:
        command: what ran.
        returncode: its exit status (negative: the signal that ended it).
        seconds: wall time from its start to its end.
        peak_rss_bytes: its peak resident set size (and that of its waited-for children).
        lines: (seconds since the start, line without its newline), in order.
        log_path: the file holding its output.
        stopped: whether `stop_when` ended it.
    """

    command: tuple
    returncode: int
    seconds: float
    peak_rss_bytes: int
    lines: tuple
    log_path: str
    stopped: bool = False

    def first(self, predicate: Callable[[str], bool]) -> Optional[float]:
        """Seconds from the start to the first line for which `predicate` holds (None: no such line)."""
        return next((at for at, line in self.lines if predicate(line)), None)

    def check(self, what: str) -> "Finished":
        """Raises RuntimeError naming `what`, the status and the log's last lines unless the
        child exited 0 (or was stopped on purpose)."""
        if self.returncode != 0 and not self.stopped:
            tail = "\n".join(line for _, line in self.lines[-25:])
            raise RuntimeError(f"{what} failed with status {self.returncode} (log: {self.log_path}):\n{tail}")
        return self


def log_line(at: float, line: str) -> str:
    """A line of a child's log: its time stamp (seconds since the start, to the millisecond) and
    the line, "[  123.976] step 500/7000 ..." (`read_log` reads it back)."""
    return f"[{at:9.3f}] {line}\n"


def read_log(path: str) -> list[tuple[float, str]]:
    """The (seconds since the start, line) pairs of a log `run` wrote, the stamps to the
    millisecond; a line of another form (none are written) is left out."""
    with open(path, encoding="utf-8", errors="replace") as file:
        return [(float(m[1]), m[2]) for text in file for m in [LOG_LINE.match(text.rstrip("\n"))] if m]


def _exited(pid: int) -> bool:
    """Whether the child `pid` has ended, without reaping it (`os.wait4` reads its usage later)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the child's process group; SIGKILL if the child is still there after STOP_SECONDS."""
    for sig, wait in ((signal.SIGTERM, STOP_SECONDS), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        if wait is None:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if _exited(process.pid):
                return
            time.sleep(0.2)


def run(command: Sequence[str], log_path: str, env: Optional[dict] = None, cwd: Optional[str] = None,
        echo: Optional[Callable[[str], bool]] = None, prefix: str = "",
        stop_when: Optional[Callable[[str], bool]] = None) -> Finished:
    """Runs `command` to its end (or until `stop_when`), each line stamped and written to
    `log_path`; lines for which `echo` holds are also printed, after `prefix`."""
    environment = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
    lines, stopped = [], False
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=environment,
                                   cwd=cwd, start_new_session=True, encoding="utf-8", errors="replace")
        try:
            for line in process.stdout:
                at = time.monotonic() - start
                line = line.rstrip("\n")
                lines.append((at, line))
                log.write(log_line(at, line))
                if echo is not None and echo(line):
                    print(f"{prefix}{line}", flush=True)
                if stop_when is not None and not stopped and stop_when(line):
                    stopped = True
                    log.flush()
                    _stop(process)
            process.returncode, peak_rss_bytes = child.wait_peak_rss(process.pid)
        except BaseException:
            _stop(process)
            raise
        finally:
            process.stdout.close()
    seconds = time.monotonic() - start
    return Finished(tuple(command), process.returncode, seconds, peak_rss_bytes, tuple(lines), log_path,
                    stopped)


def _raise_stop(signum: int, frame) -> None:  # pylint: disable=unused-argument
    for ignored in STOP_SIGNALS:
        signal.signal(ignored, signal.SIG_IGN)
    raise SignalStop(signum, signal.Signals(signum).name)


def stop_on_signals() -> None:
    """Makes SIGTERM and SIGHUP raise `SignalStop` (a KeyboardInterrupt) in the main thread, then
    be ignored (module docstring). A signal this process was started with ignored (`nohup`'s
    SIGHUP) stays ignored. Call it from the main thread of an entry point."""
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _raise_stop)


def reap(process: subprocess.Popen) -> int:
    """Waits for a child whose end is under way (its stdin closed) and returns its peak RSS in bytes."""
    process.returncode, peak_rss_bytes = child.wait_peak_rss(process.pid)
    return peak_rss_bytes
