"""A command's files, checked before any work: inputs that exist, outputs that can be written,
and the lines of an input file or of stdin ("-")."""

from __future__ import annotations

import os
import sys
from typing import Optional


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
