"""The peer's own virtual environment: OpenNMT-tf 2.32.0 with the TensorFlow it supports, pinned.

    python = peer_venv.ensure("/work/onmt-venv", log=print)   # creates it once, then reuses it

OpenNMT-tf 2.32.0 (its setup.py) supports TensorFlow >= 2.6, < 2.14 and needs tensorflow-addons
>= 0.16, < 0.22, ctranslate2 >= 3.0, < 4 (its `export --format ctranslate2`), pyonmttok, sacrebleu,
rouge and pyyaml; its `[tensorflow]` extra adds tensorflow-text for the in-graph SentencePiece
tokenizer. `PINS` fixes every one of them at one version (TensorFlow 2.12, which OpenNMT-tf 2.32
is tested with, and the tensorflow-addons and ctranslate2 releases built for it), installed from
PyPI by pip (without filling pip's cache) into a venv of its own made with this interpreter's
`venv` module; nothing is installed by hand. A venv whose stamp file (`STAMP`) lists the same pins is reused; any other
folder is refused rather than overwritten (a venv made elsewhere, or other pins: remove it or
give another folder).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from typing import Callable

PINS = (
    "OpenNMT-tf==2.32.0",
    "tensorflow==2.12.1",
    "tensorflow-text==2.12.1",
    "tensorflow-addons==0.21.0",
    "ctranslate2==3.24.0",
    "pyonmttok==1.37.1",
    "numpy==1.23.5",  # TensorFlow 2.12 wants numpy < 1.24
)
STAMP = "keras_transformer_peer.json"  # in the venv folder: the pins it was made with
CHECK_COMMAND = ("onmt-main", "-h")


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


def check(folder: str) -> str:
    """Runs `onmt-main -h` and imports OpenNMT-tf, TensorFlow and tensorflow-text in the venv;
    returns their versions as one line. Raises RuntimeError with the command's output if not."""
    result = subprocess.run([script_of(folder, CHECK_COMMAND[0]), *CHECK_COMMAND[1:]], capture_output=True,
                            text=True, check=False)
    if result.returncode != 0 or "{train,eval,infer,export" not in result.stdout:
        raise RuntimeError(f"{folder}: `onmt-main -h` failed ({result.returncode}): {result.stderr[-2000:]}")
    probe = ("import opennmt, tensorflow as tf, tensorflow_text, ctranslate2; "
             "print(f'OpenNMT-tf {opennmt.__version__}, TensorFlow {tf.__version__}, "
             "tensorflow-text {tensorflow_text.__version__}, ctranslate2 {ctranslate2.__version__}')")
    result = subprocess.run([python_of(folder), "-c", probe], capture_output=True, text=True, check=False,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if result.returncode != 0:
        raise RuntimeError(f"{folder}: the peer's packages do not import: {result.stderr[-2000:]}")
    return result.stdout.strip().splitlines()[-1]


def ensure(folder: str, log: Callable[[str], None] = print) -> str:
    """The venv in `folder` with `PINS`, created (pip from PyPI) if the folder does not exist or is
    empty; returns its interpreter. Raises ValueError for a folder that holds something else."""
    folder = os.path.abspath(folder)
    stamped = _stamped_pins(folder)
    if stamped == PINS:
        log(f"peer venv {folder}: reused ({check(folder)})")
        return python_of(folder)
    if os.path.exists(folder) and (not os.path.isdir(folder) or os.listdir(folder)):
        what = "other pins" if stamped else "no stamp of this harness"
        raise ValueError(f"--peer_venv={folder}: exists with {what} ({STAMP}); remove it or give another folder")
    log(f"peer venv {folder}: creating ({', '.join(PINS)})")
    venv.EnvBuilder(with_pip=True, clear=False, symlinks=True).create(folder)
    pip = [python_of(folder), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-cache-dir"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, *PINS], check=True)
    subprocess.run([python_of(folder), "-m", "pip", "check"], check=False)
    versions = check(folder)
    with open(os.path.join(folder, STAMP), "w", encoding="utf-8") as file:
        json.dump({"pins": list(PINS), "python": sys.version.split()[0], "versions": versions}, file, indent=1)
    log(f"peer venv {folder}: ready ({versions})")
    return python_of(folder)
