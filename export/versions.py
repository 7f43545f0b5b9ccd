"""TF Serving's model layout: a base folder of integer-named version folders.

    OUT/
      1/saved_model.pb ...
      2/saved_model.pb ...     <- TF Serving serves the highest version by default

`next_version` numbers a new export; `saved_model_path` finds the SavedModel a user points
at (a version folder, or a base folder whose highest complete version is used). Hidden
folders such as the exporter's `.tmp-<version>-*` are never versions.
"""

from __future__ import annotations

import os
import re

SAVED_MODEL_FILE = "saved_model.pb"
_VERSION = re.compile(r"^[0-9]+$")


def versions(export_dir: str) -> list[int]:
    """The integer-named folders of `export_dir`, ascending ([] if it does not exist)."""
    if not os.path.isdir(export_dir):
        return []
    return sorted(int(name) for name in os.listdir(export_dir) if _VERSION.match(name))


def next_version(export_dir: str) -> int:
    """1 + the largest version in `export_dir` (1 if none)."""
    return max(versions(export_dir), default=0) + 1


def saved_model_path(export_dir: str) -> str:
    """`export_dir` if it holds a SavedModel, else its highest version folder that does.

    Raises:
        FileNotFoundError: neither holds a saved_model.pb.
    """
    if os.path.isfile(os.path.join(export_dir, SAVED_MODEL_FILE)):
        return export_dir
    for version in reversed(versions(export_dir)):
        path = os.path.join(export_dir, str(version))
        if os.path.isfile(os.path.join(path, SAVED_MODEL_FILE)):
            return path
    raise FileNotFoundError(f"{export_dir}: no {SAVED_MODEL_FILE} in it or in a version folder")
