"""What every command-line entry point shares: quiet TensorFlow start-up and one-line errors.

    from keras_transformer import cli
    ...
    if __name__ == "__main__":
        cli.run(main)

Bad input (an unknown flag, a `ValueError` or `FileNotFoundError` raised for a
user's mistake) ends with `error: <one line>` on stderr and exit code 2, never
a traceback; Ctrl-C outside the training loop (which saves first, see
`keras_transformer.interrupts`) ends with `error: interrupted` and exit code 130.
Set KT_DEBUG=1 to see the traceback.

Nothing here runs on import: the process-wide settings (environment variables,
file descriptor 2) change only when an entry point calls `start_tensorflow` or
`run`. The flags the commands share are defined in `tasks/flags.py`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Callable, Optional

from absl import app, flags

USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, flags.Error, app.UsageError)


class _NativeStderrSilencer:
    """Points file descriptor 2 at /dev/null between start() and stop() (both idempotent)."""

    def __init__(self):
        self._saved = None

    def start(self):
        if self._saved is None:
            sys.stderr.flush()
            self._saved = os.dup(2)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.close(devnull)

    def stop(self):
        if self._saved is not None:
            sys.stderr.flush()
            os.dup2(self._saved, 2)
            os.close(self._saved)
            self._saved = None


@contextlib.contextmanager
def silence_native_stderr():
    """Sends file descriptor 2 to /dev/null: TensorFlow's C++ start-up lines ignore TF_CPP_MIN_LOG_LEVEL
    (tensorflow#100442). Python exceptions raised inside still reach the restored stderr."""
    silencer = _NativeStderrSilencer()
    silencer.start()
    try:
        yield
    finally:
        silencer.stop()


def start_tensorflow(cpu_replicas: int = 0, threads: int = 0):
    """Imports TensorFlow quietly and initialises its devices; returns the module.

    With `TF_CONFIG` set (several machines), the devices are left uninitialised:
    `MultiWorkerMirroredStrategy` (`keras_transformer.distribution.create_strategy`)
    must configure its collectives before they are.

    Args:
        cpu_replicas: if > 1, split the CPU into that many logical devices (for
            MirroredStrategy over CPUs); must happen before devices are used.
        threads: if > 0, TensorFlow's intra-op and inter-op thread pools get that many
            threads (`tf.config.threading`, which refuses once the runtime has started:
            set here, between the import and the devices). 0: TensorFlow's default (all cores).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    # A best-fit-with-coalescing pool for CPU tensors, as on GPUs, instead of malloc:
    # the step's large buffers (the logits) then come back from the pool each step
    # rather than as fresh mmap'd pages the kernel must zero (the kernel time this
    # saves is measured in docs/BENCHMARKS.md). Read when the devices are created, so
    # it must be set before; TF_CPU_ALLOCATOR_USE_BFC=false restores malloc (where TensorFlow
    # runs oneDNN's kernels, on by default on AVX-512 hosts, it pools CPU memory itself).
    os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")
    with silence_native_stderr():
        import tensorflow as tf

        if threads > 0:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        if os.environ.get("TF_CONFIG"):
            return tf
        if cpu_replicas > 1:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * cpu_replicas
            )
        tf.config.list_logical_devices()
    return tf


def check_writable_folder(path: str, flag: str) -> None:
    """Raises a one-line `ValueError` unless `path` is a folder this process can write in, or can
    be created as one (its nearest existing ancestor is a writable folder). No side effects: an
    entry point calls it before any work, so that a bad path never costs a training or a translation.
    """
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"--{flag}={path}: is a file, not a folder")
    ancestor = os.path.abspath(path)
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise ValueError(f"--{flag}={path}: {ancestor} is a file, not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValueError(f"--{flag}={path}: {ancestor} is not writable")


def read_lines(path: str) -> list[bytes]:
    """The lines of a file or stdin ("-") as bytes, without line endings (invalid UTF-8 is kept)."""
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        if os.path.isdir(path):
            raise ValueError(f"{path}: is a folder, not a text file")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such file")
        with open(path, "rb") as file:
            data = file.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line.rstrip(b"\r") for line in lines]


def check_input_file(path: Optional[str], flag: str) -> None:
    """Raises a one-line error unless `path` (the value of --`flag`) is a file; None and "-"
    (stdin) pass."""
    if path in (None, "-"):
        return
    if os.path.isdir(path):
        raise ValueError(f"--{flag}={path}: is a folder, not a file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--{flag}={path}: no such file")


def check_output_path(path: str) -> None:
    """Raises a one-line `ValueError` unless a command's output can be written to `path` ("-"
    is stdout): it is not a folder, and its folder is writable or can be created
    (`check_writable_folder`). Writes nothing."""
    if path == "-":
        return
    if os.path.isdir(path):
        raise ValueError(f"--output={path}: is a folder, not a file")
    check_writable_folder(os.path.dirname(os.path.abspath(path)), "output")


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


def fail(message: str, code: int = 2):
    """Prints `error: message` (one line) to stderr and exits."""
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr)
    sys.exit(code)


def run(main):
    """`absl.app.run(main)` with one-line errors and exit code 2 for bad input.

    Native stderr stays silenced until `main` starts: absl's start-up flushes
    TensorFlow's buffered C++ log lines.
    """
    silencer = _NativeStderrSilencer()

    def parse_flags(argv):
        try:
            return flags.FLAGS(argv)
        except flags.Error as error:
            silencer.stop()
            fail(f"{error}. Pass --helpfull to see every flag.")

    def guarded(argv):
        silencer.stop()
        try:
            return main(argv)
        except USER_ERRORS as error:
            if os.environ.get("KT_DEBUG"):
                raise
            fail(error)
        except KeyboardInterrupt as error:  # Ctrl-C where no handler of its own saves work
            if os.environ.get("KT_DEBUG"):
                raise
            fail(f"interrupted{f' ({error})' if str(error) else ''}", code=130)

    silencer.start()
    try:
        app.run(guarded, flags_parser=parse_flags)
    finally:
        silencer.stop()
