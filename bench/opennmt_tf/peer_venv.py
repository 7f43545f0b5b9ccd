"""The peer's own virtual environment: OpenNMT-tf 2.32.0 with the TensorFlow it supports, pinned.

    versions = peer_venv.ensure("/work/onmt-venv", log=print)   # creates it once, then reuses it
    peer_venv.refuse_unsupported_python(folder)                 # before any work: can this Python make it?

OpenNMT-tf 2.32.0 (its setup.py) supports TensorFlow >= 2.6, < 2.14 and needs tensorflow-addons
>= 0.16, < 0.22, ctranslate2 >= 3.0, < 4 (its `export --format ctranslate2`), pyonmttok, sacrebleu,
rouge and pyyaml; its `[tensorflow]` extra adds tensorflow-text for the in-graph SentencePiece
tokenizer. `PINS` fixes every one of them at one version (TensorFlow 2.12, which OpenNMT-tf 2.32
is tested with, and the tensorflow-addons and ctranslate2 releases built for it), and
`CONSTRAINTS` (peer_constraints.txt, `pip freeze` of the venv the measurement used) every package
they pull in. pip installs them from PyPI (without filling pip's cache) into a venv of its own
made with this interpreter's `venv` module, then `pip check` must find every requirement met;
nothing is installed by hand. TensorFlow 2.12 has wheels for CPython 3.8 to 3.11 only
(`SUPPORTED_PYTHONS`): another interpreter is refused before any work. A venv whose stamp file
(`STAMP`) lists the same pins is reused; any other folder is refused rather than overwritten (a
venv made elsewhere, or other pins: remove it or give another folder).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import venv
from typing import Callable, Optional

PINS = (
    "OpenNMT-tf==2.32.0",
    "tensorflow==2.12.1",
    "tensorflow-text==2.12.1",
    "tensorflow-addons==0.21.0",
    "ctranslate2==3.24.0",
    "pyonmttok==1.37.1",
    "numpy==1.23.5",  # TensorFlow 2.12 wants numpy < 1.24
)
CONSTRAINTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer_constraints.txt")
SUPPORTED_PYTHONS = ((3, 8), (3, 11))  # TensorFlow 2.12's wheels: CPython 3.8 to 3.11, both included
STAMP = "keras_transformer_peer.json"  # in the venv folder: the pins it was made with
CHECK_COMMAND = ("onmt-main", "-h")
# The venv's versions (`check`): its Python and each pinned package, after importing what the harness runs.
PROBE = ("import importlib.metadata, json, platform, sys; import opennmt, tensorflow, tensorflow_text, ctranslate2; "
         "print(json.dumps({'python': platform.python_version(), "
         "**{name: importlib.metadata.version(name) for name in sys.argv[1:]}}))")


def python_of(folder: str) -> str:
    """The venv's interpreter."""
    return os.path.join(folder, "bin", "python")


def script_of(folder: str, name: str) -> str:
    """One of the venv's console scripts (onmt-main, ct2-opennmt-tf-converter)."""
    return os.path.join(folder, "bin", name)


def _stamped_pins(folder: str):
    try:
        with open(os.path.join(folder, STAMP), encoding="utf-8") as file:
            return tuple(json.load(file)["pins"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def refuse_unsupported_python(folder: Optional[str], version: Optional[tuple] = None) -> None:
    """Raises ValueError (one line) if the venv in `folder` has to be made (None: a folder not
    made yet; else one without a stamp of `PINS`) and this interpreter's `version` (major, minor;
    default `sys.version_info`), whose `venv` would make it, is outside `SUPPORTED_PYTHONS`."""
    if folder is not None and _stamped_pins(os.path.abspath(folder)) == PINS:
        return
    major, minor = tuple(version or sys.version_info)[:2]
    (low_major, low_minor), (high_major, high_minor) = SUPPORTED_PYTHONS
    if not (low_major, low_minor) <= (major, minor) <= (high_major, high_minor):
        raise ValueError(f"the peer's venv is made with this Python, {major}.{minor}, and TensorFlow 2.12 has wheels "
                         f"for Python {low_major}.{low_minor} to {high_major}.{high_minor} only; run the harness "
                         "with such a Python, or give --peer_venv a venv this harness made")


def check(folder: str) -> dict:
    """Runs `onmt-main -h` and imports OpenNMT-tf, TensorFlow, tensorflow-text and ctranslate2 in
    the venv; returns its versions: {"python": ..., each package of `PINS`: ...}. Raises
    RuntimeError with the command's output if not."""
    result = subprocess.run([script_of(folder, CHECK_COMMAND[0]), *CHECK_COMMAND[1:]], capture_output=True,
                            text=True, check=False)
    if result.returncode != 0 or "{train,eval,infer,export" not in result.stdout:
        raise RuntimeError(f"{folder}: `onmt-main -h` failed ({result.returncode}): {result.stderr[-2000:]}")
    result = subprocess.run([python_of(folder), "-c", PROBE, *(pin.split("==")[0] for pin in PINS)],
                            capture_output=True, text=True, check=False,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if result.returncode != 0:
        raise RuntimeError(f"{folder}: the peer's packages do not import: {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def shown(versions: dict) -> str:
    """`check`'s versions as one line: "python 3.11.7, OpenNMT-tf 2.32.0, ..."."""
    return ", ".join(f"{name} {version}" for name, version in versions.items())


def _file_digest(path: str) -> str:
    with open(path, "rb") as file:
        return hashlib.sha256(file.read()).hexdigest()


def ensure(folder: str, log: Callable[[str], None] = print) -> dict:
    """The venv in `folder` with `PINS`, created (pip from PyPI, `CONSTRAINTS`) if the folder does
    not exist or is empty; returns its versions (`check`). Raises ValueError for a folder that
    holds something else or an interpreter that cannot make it, RuntimeError if `pip check` finds
    a requirement unmet."""
    folder = os.path.abspath(folder)
    stamped = _stamped_pins(folder)
    if stamped == PINS:
        versions = check(folder)
        log(f"peer venv {folder}: reused ({shown(versions)})")
        return versions
    if os.path.exists(folder) and (not os.path.isdir(folder) or os.listdir(folder)):
        what = "other pins" if stamped else "no stamp of this harness"
        raise ValueError(f"--peer_venv={folder}: exists with {what} ({STAMP}); remove it or give another folder")
    refuse_unsupported_python(None)
    log(f"peer venv {folder}: creating ({', '.join(PINS)}; constraints {CONSTRAINTS})")
    venv.EnvBuilder(with_pip=True, clear=False, symlinks=True).create(folder)
    pip = [python_of(folder), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-cache-dir"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "-c", CONSTRAINTS, *PINS], check=True)
    result = subprocess.run([python_of(folder), "-m", "pip", "check"], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        unmet = "; ".join(line.strip() for line in (result.stdout + result.stderr).splitlines() if line.strip())
        raise RuntimeError(f"{folder}: `pip check` finds requirements unmet in the peer's venv: {unmet}")
    versions = check(folder)
    with open(os.path.join(folder, STAMP), "w", encoding="utf-8") as file:
        json.dump({"pins": list(PINS), "constraints_sha256": _file_digest(CONSTRAINTS), "python": versions["python"],
                   "versions": versions}, file, indent=1)
    log(f"peer venv {folder}: ready ({shown(versions)})")
    return versions
