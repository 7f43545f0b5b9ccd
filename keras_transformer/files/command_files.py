"""A command's files, checked before any work: inputs that exist, outputs that can be written (never
one of the inputs), and the lines of an input file or of stdin ("-"), gzip-compressed or not.
Imports no TensorFlow.

A training directory and its checkpoints are checked by their owner,
`keras_transformer.training_directory.TrainingDirectory.check_exists` and
`keras_transformer.run_dir.layout.check_checkpoint_prefix`."""

from __future__ import annotations

import gzip
import os
import secrets
import sys
import zlib
from typing import Mapping, Optional

from keras_transformer.files import atomic


def check_writable_folder(path: str, flag: str) -> None:
    """Raises a one-line `ValueError` unless `path` is a folder this process can write in, or can
    be created as one (its nearest existing ancestor is a writable folder). An entry point calls
    it before any work, so that a bad path never costs a training or a translation.

    Besides the permissions, it writes one byte to a hidden file in that folder and removes it
    (the only trace: the folder's modification time): a full disk, an exhausted quota or a
    read-only file system seen past the permissions (as root) is found here, not after the work.
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
    probe = os.path.join(ancestor, f".tmp-write-probe-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with open(probe, "xb") as file:
            file.write(b"\n")
            file.flush()
            os.fsync(file.fileno())
    except OSError as error:
        raise ValueError(f"--{flag}={path}: {ancestor} cannot be written: {error.strerror or error}") from None
    finally:
        try:
            os.remove(probe)
        except OSError:
            pass


def is_stream(path: Optional[str]) -> bool:
    """True for an input that can be read only once: stdin ("-" or /dev/stdin), a named pipe (the
    `<(zcat test.en.gz)` of a shell), a device such as /dev/null. A command reads such an input once
    and counts its lines then, not before."""
    if path is None:
        return False
    return path == "-" or (os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path))


GZIP_MAGIC = b"\x1f\x8b"


def read_lines(path: str) -> list[bytes]:
    """The lines of a file, a stream (`is_stream`) or stdin ("-") as bytes, without line endings
    (invalid UTF-8 is kept). Gzip-compressed text (known by its first two bytes, whatever the
    name, as training's `keras_transformer.pipelines.text_files` knows it) is decompressed; a damaged one is a
    one-line `ValueError`."""
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        if os.path.isdir(path):
            raise ValueError(f"{path}: is a folder, not a text file")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such file")
        with open(path, "rb") as file:
            data = file.read()
    if data.startswith(GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise ValueError(f"{'stdin' if path == '-' else path}: damaged gzip data ({error})") from None
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line.rstrip(b"\r") for line in lines]


def check_input_file(path: Optional[str], flag: str, stdin: bool = True) -> None:
    """Raises a one-line error unless `path` (the value of --`flag`) is a file or a stream
    (`is_stream`: a pipe, /dev/stdin); None passes, and "-" (stdin) where `stdin` (a command reads
    stdin for one flag, --input: a second flag given "-" would find it already read)."""
    if path == "-" and not stdin:
        raise ValueError(f"--{flag}=-: must be a file (stdin is for --input)")
    if path in (None, "-"):
        return
    if os.path.isdir(path):
        raise ValueError(f"--{flag}={path}: is a folder, not a file")
    if not os.path.exists(path):
        raise FileNotFoundError(f"--{flag}={path}: no such file")


def same_file(path: str, other: Optional[str]) -> bool:
    """True if `path` and `other` are one existing file: the same name, a symbolic or a hard link
    (`os.path.samefile`); None and "-" (stdin, stdout) are never a file."""
    if path in (None, "-") or other in (None, "-"):
        return False
    try:
        return os.path.samefile(path, other)
    except OSError:  # one of them does not exist (or cannot be looked at): not the same file
        return False


def check_output_path(path: str, inputs: Mapping[str, Optional[str]] = None) -> None:
    """Raises a one-line `ValueError` unless a command's output can be written to `path` ("-"
    is stdout): it is not a folder, not one of the command's `inputs` (`{flag: path}`, e.g.
    `{"input": ..., "reference": ...}`; the same file by name or link, `same_file`: the output
    would replace what is being read), and its folder is writable or can be created
    (`check_writable_folder`)."""
    if path == "-":
        return
    if os.path.isdir(path):
        raise ValueError(f"--output={path}: is a folder, not a file")
    for flag, input_path in (inputs or {}).items():
        if same_file(path, input_path):
            raise ValueError(f"--output={path}: is the input --{flag}={input_path}; write the output elsewhere "
                             "(it would replace what is read)")
    if atomic.is_special_file(path):  # /dev/null, a named pipe: written to, not replaced
        if not os.access(path, os.W_OK):
            raise ValueError(f"--output={path}: is not writable")
        return
    check_writable_folder(os.path.dirname(os.path.abspath(path)), "output")
