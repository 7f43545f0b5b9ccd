"""What every command-line entry point shares, one module a concern:

  startup    quiet TensorFlow start-up (`start_tensorflow`, `silence_native_stderr`).
  files      a command's files, checked before any work (an output never one of the inputs, a
             --checkpoint that names one, a --model_dir that is a training directory);
             the lines of a file or stdin.
  progress   the progress bar on stderr.
  errors     one `error:` line and exit 2 for bad input and for a file system's refusal (a full
             disk, a read-only file system, ...: `os_error_message`) (`run`, `fail`, `USER_ERRORS`).

Entry points import the package and call `cli.run(main)`, `cli.start_tensorflow()`, ...:
the names below are those modules'. The flags the commands share are defined in
`tasks/flags.py`. Importing it changes no process-wide state and imports no TensorFlow.
"""

from keras_transformer.cli.errors import USER_ERRORS, fail, run
from keras_transformer.cli.files import (check_checkpoint_prefix, check_input_file, check_output_path,
                                         check_training_directory, check_writable_folder, read_lines, same_file)
from keras_transformer.cli.progress import stderr_progress
from keras_transformer.cli.startup import silence_native_stderr, start_tensorflow

__all__ = [
    "USER_ERRORS",
    "check_checkpoint_prefix",
    "check_input_file",
    "check_output_path",
    "check_training_directory",
    "check_writable_folder",
    "fail",
    "read_lines",
    "run",
    "same_file",
    "silence_native_stderr",
    "start_tensorflow",
    "stderr_progress",
]
