"""Small text files for the data and command tests."""

from __future__ import annotations

import gzip
import pathlib


def write_lines(path: pathlib.Path, lines, gz: bool = False) -> str:
    """Writes each of `lines` plus "\\n" as UTF-8 (gzipped if `gz`); returns the path as a string."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return str(path)
