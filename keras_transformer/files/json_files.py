"""JSON files: read with one error line naming the file, written whole or not at all.

    settings = read_json(path, "the run's settings file")   # one-line ValueError naming the file
    write_json_atomically(path, settings)             # indented, sorted keys, never half-written

The run's model_config.json, a tokenizer's tokenizer.json and an export's export.json are read
here, so a damaged one is refused the same way everywhere. Imports no TensorFlow.
"""

from __future__ import annotations

import json
import os
from typing import Any, Type

from keras_transformer.files import atomic


def read_json(path: str, what: str, advice: str = "", error: Type[Exception] = ValueError) -> Any:
    """The JSON value of the file `path`; a folder there, or a file that is not UTF-8 JSON, is
    one `error` line (default `ValueError`) naming the file: "PATH: is a folder, not WHAT" or
    "PATH: not valid JSON (REASON)ADVICE". A missing file is a `FileNotFoundError` "PATH: not
    found": a caller that can say more (which command writes it) checks first."""
    if os.path.isdir(path):
        raise error(f"{path}: is a folder, not {what}")
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as reason:
        raise error(f"{path}: not valid JSON ({reason}){advice}") from None


def write_json_atomically(path: str, values: Any) -> None:
    """Writes `values` as indented, sorted JSON with `atomic.write_atomically`: never a
    half-written file, and the mode the umask allows (0o644 under 022, not mkstemp's 0o600)."""
    atomic.write_atomically(path, (json.dumps(values, indent=2, sort_keys=True) + "\n").encode("utf-8"))
