"""Plain parallel text files: one sentence per line, optionally gzipped.

Line i of the source file translates line i of the target file, the layout of the
WMT and Multi30k releases the paper's data comes in (section 5.1). Lines are
stripped of surrounding whitespace (Multi30k's `train.de` has trailing spaces on
40 lines).

`check_parallel_files` runs before anything is read into TensorFlow and raises a
`DataError` with a one-line message naming the file for: a missing folder, a
missing file, an unreadable gzip file, an empty file, text that is not UTF-8
(with the line number), and parallel files whose line counts differ. It imports no TensorFlow.
"""

import codecs
import gzip
import os
import zlib
from typing import Iterator

from pipelines.errors import DataError

_CHUNK = 1 << 20


def is_gzip(path: str) -> bool:
    """True if the file starts with the gzip magic bytes (whatever its name)."""
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _open_binary(path: str):
    path = os.fspath(path)
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")


def check_file(path: str) -> int:
    """Returns the number of lines in `path`; raises `DataError` if unusable.

    Counts lines the way `tf.data.TextLineDataset` splits them: a last line
    without a final newline still counts.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise DataError(f"{folder}: no such folder (looking for {os.path.basename(path)})")
    if os.path.isdir(path):
        raise DataError(f"{path}: is a folder, expected a text file")
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such file")
    lines, last = 0, b"\n"
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with _open_binary(path) as f:
            while chunk := f.read(_CHUNK):
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as e:
                    raise DataError(_not_utf8(path, lines, chunk, e)) from None
                lines += chunk.count(b"\n")
                last = chunk[-1:]
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError as e:
                raise DataError(_not_utf8(path, lines - (last == b"\n"), b"", e)) from None
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(f"{path}: cannot read ({e})") from None
    if last != b"\n":
        lines += 1
    if lines == 0:
        raise DataError(f"{path}: file is empty")
    return lines


def _not_utf8(path: str, lines_before: int, chunk: bytes, error: UnicodeDecodeError) -> str:
    """The message for invalid UTF-8 in `chunk`, which follows `lines_before` complete lines."""
    start = max(error.start, 0)
    line = lines_before + chunk[:start].count(b"\n") + 1
    column = start - (chunk.rfind(b"\n", 0, start) + 1) + 1
    return f"{path}: line {line}: not UTF-8 text ({error.reason} at byte {column} of the line)"


def check_folder(folder: str, names=(), what: str = "data") -> None:
    """Raises `DataError` unless `folder` exists and holds the non-empty files `names`."""
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise DataError(f"{folder}: no such folder (expected the {what} files)")
    for name in names:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            raise DataError(f"{path}: no such file ({what} folder is incomplete)")
        if os.path.getsize(path) == 0:
            raise DataError(f"{path}: file is empty")


def check_parallel_files(source_path: str, target_path: str) -> int:
    """Checks both files of a pair and returns their common line count."""
    source_lines = check_file(source_path)
    target_lines = check_file(target_path)
    if source_lines != target_lines:
        raise DataError(
                f"{target_path}: has {target_lines} lines but {source_path} has "
                f"{source_lines}; parallel files must have the same number of lines")
    return source_lines


def read_lines(path: str) -> list[str]:
    """All lines of a (possibly gzipped) UTF-8 file, each stripped."""
    check_file(path)
    with _open_binary(path) as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return [line.strip() for line in lines]


def iter_parallel_lines(source_path: str, target_path: str) -> Iterator[tuple[str, str]]:
    """Yields stripped (source, target) line pairs after `check_parallel_files`."""
    check_parallel_files(source_path, target_path)
    with _open_binary(source_path) as fs, _open_binary(target_path) as ft:
        for s, t in zip(fs, ft):
            yield s.decode("utf-8").strip(), t.decode("utf-8").strip()


def read_parallel_pairs(source_path: str, target_path: str) -> list[tuple[str, str]]:
    """All (source, target) pairs of two parallel files, as a Python list."""
    return list(iter_parallel_lines(source_path, target_path))


def parallel_text_files(source_path: str, target_path: str, validate: bool = True):
    """A `tf.data.Dataset` of stripped (source, target) `tf.string` scalars.

    Streams the files with `tf.data.TextLineDataset` (gzip detected from the
    file's first bytes), so it scales to WMT-sized corpora. With `validate`, the files are first
    checked (one pass, no memory growth) and a `DataError` names any bad file.
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    if validate:
        check_parallel_files(source_path, target_path)

    def lines(path):
        compression = "GZIP" if is_gzip(os.fspath(path)) else ""
        return tf.data.TextLineDataset(os.fspath(path), compression_type=compression)

    return tf.data.Dataset.zip((lines(source_path), lines(target_path))).map(
            lambda s, t: (tf.strings.strip(s), tf.strings.strip(t)))
