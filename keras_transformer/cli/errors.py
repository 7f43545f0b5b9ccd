"""How a command ends: one `error:` line and exit 2 for bad input, never a traceback.

    from keras_transformer import cli
    ...
    if __name__ == "__main__":
        cli.run(main)

Bad input (an unknown flag, a `ValueError` or `FileNotFoundError` raised for a user's
mistake) ends with `error: <one line>` on stderr and exit code 2; Ctrl-C outside the
training loop (which saves first, see `keras_transformer.training.interrupts`) ends with
`error: interrupted` and exit code 130. Set KT_DEBUG=1 to see the traceback.
"""

from __future__ import annotations

import os
import sys

from absl import app, flags

from keras_transformer.cli.startup import NativeStderrSilencer


USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, flags.Error, app.UsageError)


def fail(message: str, code: int = 2):
    """Prints `error: message` (one line) to stderr and exits."""
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr)
    sys.exit(code)


def run(main):
    """`absl.app.run(main)` with one-line errors and exit code 2 for bad input.

    Native stderr stays silenced until `main` starts: absl's start-up flushes
    TensorFlow's buffered C++ log lines.
    """
    silencer = NativeStderrSilencer()

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
