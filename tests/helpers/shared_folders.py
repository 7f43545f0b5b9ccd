"""Folders several test files build alike (a trained tiny model, a finished tiny run): built once
per test session and copied into each caller's folder.

`shared_copy(tmp_path_factory, key, build, path)` runs `build(folder)` the first time the session
asks for `key` and copies what it wrote into `path` each time, so every caller has a copy of its
own to change. Under pytest-xdist the workers share the session's base folder (the parent of each
worker's own) and a lock file there (`fcntl.flock`) makes a worker wait for the one building;
without xdist the session's base folder holds them. A folder is built under a temporary name and
renamed into place when whole. Only for what depends on `key` alone: its files must name no
absolute path of where they were built.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pathlib
import shutil
import tempfile
from typing import Any, Callable

FOLDER = "folder"  # in a built entry: what `build` wrote
RESULT = "result.json"  # in a built entry: what `build` returned


def key_of(*parts) -> str:
    """A short key for file names, the same for the same JSON-able `parts` (e.g. a builder's name
    and its arguments) in every process."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def _root(tmp_path_factory) -> pathlib.Path:
    """The folder every process of this test session sees: in a pytest-xdist worker the parent of
    its base folder (the controller's, which names it popen-<worker>), else the session's base folder."""
    base = tmp_path_factory.getbasetemp()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return base.parent if worker and base.name == f"popen-{worker}" else base


def shared_copy(tmp_path_factory, key: str, build: Callable[[pathlib.Path], Any], path) -> Any:
    """Copies into `path` what `build(folder)` writes into `folder` (a folder it creates), built
    once per test session for `key`. `path` is made if missing; an existing one keeps its mode.
    Returns what `build` returned (JSON-able), as JSON reads it back: lists for tuples."""
    root = _root(tmp_path_factory)
    entry = root / f"shared-{key}"
    with open(root / f"shared-{key}.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed (or the process dies)
        if not entry.is_dir():
            building = pathlib.Path(tempfile.mkdtemp(prefix=f".shared-{key}-", dir=root))
            try:
                result = build(building / FOLDER)
                (building / RESULT).write_text(json.dumps(result), encoding="utf-8")
                os.rename(building, entry)
            except BaseException:
                shutil.rmtree(building, ignore_errors=True)
                raise
    path = pathlib.Path(path)
    path.mkdir(parents=True, exist_ok=True)
    for item in (entry / FOLDER).iterdir():  # the entries, not the folder: `path` keeps its own mode
        if item.is_dir():
            shutil.copytree(item, path / item.name)
        else:
            shutil.copy2(item, path / item.name)
    return json.loads((entry / RESULT).read_text(encoding="utf-8"))
