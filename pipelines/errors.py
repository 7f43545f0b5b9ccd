"""The one exception type the input pipelines raise for bad input data.

A `DataError` carries a one-line message that names the offending file or folder
(missing folder, parallel files whose line counts differ, an empty file). The
command line (`python -m keras_transformer.pipelines`) prints it as `error: <message>` on stderr and
exits with status 2, without a traceback. This module imports no TensorFlow, so
the checks that raise it can run before the (slow, noisy) TensorFlow import.
"""


class DataError(ValueError):
    """Bad input data; `str(error)` is a single line naming the file or folder."""

    def __init__(self, message: str):
        # Keep the message on one line whatever the caller passed in.
        super().__init__(" ".join(str(message).split()))
