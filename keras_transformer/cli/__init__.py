"""What every command-line entry point shares, one module a concern:

  startup    quiet TensorFlow start-up (`start_tensorflow`, `silence_native_stderr`).
  progress   the progress bar on stderr.
  errors     one `error:` line and exit 2 for bad input and for a file system's refusal (a full
             disk, a read-only file system, ...: `os_error_message`) (`run`, `fail`, `USER_ERRORS`).

Entry points import the package and call `cli.run(main)`, `cli.start_tensorflow()`, ...:
the names below are those modules'. A command's files are checked by
`keras_transformer.files.command_files`. The flags the commands share are defined in
`tasks/flags.py`. Importing it changes no process-wide state and imports no TensorFlow.
"""

from keras_transformer.cli.errors import USER_ERRORS, fail, run
from keras_transformer.cli.progress import stderr_progress
from keras_transformer.cli.startup import silence_native_stderr, start_tensorflow

__all__ = [
    "USER_ERRORS",
    "fail",
    "run",
    "silence_native_stderr",
    "start_tensorflow",
    "stderr_progress",
]
