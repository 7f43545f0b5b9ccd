"""Plain parallel text files: one sentence per line, optionally gzipped.

Line i of the source file translates line i of the target file, the layout of the
WMT and Multi30k releases the paper's data comes in (section 5.1). Lines are
stripped of surrounding whitespace (Multi30k's `train.de` has trailing spaces on
40 lines).

A large corpus comes in shards: a path may be a glob pattern (`data/train-*.en.gz`), and the
target pattern names each source shard's partner through the same wildcards
(`data/train-*.de.gz`): `parallel_shards` pairs `train-007.en.gz` with `train-007.de.gz`, and
`parallel_text_files` streams the shards interleaved, never reading a corpus into memory. What
exists of a path is literal (`glob_pattern`): a folder or file whose name holds `*`, `?` or `[`
is that folder or file, never a pattern.

`check_parallel_files` runs before anything is read into TensorFlow and raises a
`DataError` with a one-line message naming the file for: a missing folder, a
missing file, a pattern that matches nothing, a shard without its partner, an unreadable gzip
file, an empty file, text that is not UTF-8 (with the line number), and parallel files whose
line counts differ. It imports no TensorFlow.
"""

import codecs
import glob
import gzip
import os
import re
import zlib
from typing import Callable, Iterator

from keras_transformer.pipelines.errors import DataError

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


def glob_pattern(path: str) -> str:
    """`path` as the glob pattern it means: what exists of it is literal. A path naming an existing
    file or folder is that path, its glob characters escaped (`glob.escape`); else its longest
    leading folder that exists is escaped and the rest is the pattern. A folder named
    "ünï [x]*" (a --data_dir, a folder in --train_files) then holds files, not a pattern, and
    `data/web-*.en` still selects shards."""
    path = os.fspath(path)
    if not glob.has_magic(path):
        return path
    if os.path.lexists(path):
        return glob.escape(path)
    head = os.path.dirname(path)
    while head and glob.has_magic(head):
        if os.path.isdir(head):
            return glob.escape(head) + path[len(head):]
        if os.path.dirname(head) == head:
            break
        head = os.path.dirname(head)
    return path


def is_pattern(path: str) -> bool:
    """Whether `path` is a glob pattern: it has `*`, `?` or `[` outside what exists of it
    (`glob_pattern`)."""
    return bool(_wildcards(glob_pattern(path)))


# A wildcard of a glob pattern, or (first alternative) a character glob.escape made literal.
_ESCAPED = re.compile(r"\[([*?[])\]")
_WILDCARD = re.compile(r"\[[*?[]\]|\*+|\?|\[[^\]]*\]")


def _wildcards(pattern: str) -> list[str]:
    return [token for token in _WILDCARD.findall(pattern) if not _ESCAPED.fullmatch(token)]


def _capture(pattern: str) -> "re.Pattern":
    """A regex matching what `pattern` matches, one group per wildcard."""
    parts, last = [], 0
    for match in _WILDCARD.finditer(pattern):
        parts.append(re.escape(pattern[last:match.start()]))
        token = match.group()
        if _ESCAPED.fullmatch(token):
            parts.append(re.escape(token[1]))
        elif token.startswith("*"):
            parts.append("(.*)" if token.startswith("**") else "([^/]*)")
        elif token == "?":
            parts.append("([^/])")
        else:
            negate = token[1:2] == "!"
            parts.append("([" + ("^" if negate else "") + token[1 + negate:-1].replace("\\", "\\\\") + "])")
        last = match.end()
    parts.append(re.escape(pattern[last:]))
    return re.compile("".join(parts))


def _fill(pattern: str, values) -> str:
    values = iter(values)
    return _WILDCARD.sub(lambda m: m.group()[1] if _ESCAPED.fullmatch(m.group()) else next(values), pattern)


def parallel_shards(source_pattern: str, target_pattern: str) -> list[tuple[str, str]]:
    """The (source, target) file pairs of a sharded corpus, sorted by source path.

    Plain paths give one pair. Glob patterns must have the same wildcards in the same order:
    each source shard's partner is the target pattern with the wildcards filled by what they
    matched in the source path (`train-*.en.gz` -> `train-007.en.gz` <-> `train-007.de.gz`).
    What exists of a path is literal (`glob_pattern`): glob characters in the name of an
    existing folder or file are its own characters, not wildcards.

    Raises:
        DataError: a pattern that matches no file, wildcards that differ, or a shard of either
            side without its partner (naming the missing file).
    """
    source_pattern, target_pattern = os.fspath(source_pattern), os.fspath(target_pattern)
    source_glob, target_glob = glob_pattern(source_pattern), glob_pattern(target_pattern)
    if not (_wildcards(source_glob) or _wildcards(target_glob)):
        return [(source_pattern, target_pattern)]
    if _wildcards(source_glob) != _wildcards(target_glob):
        raise DataError(f"{source_pattern} and {target_pattern}: the source and target patterns must have "
                        "the same wildcards, which pair each source shard with its target shard")
    sources = sorted(p for p in glob.glob(source_glob) if os.path.isfile(p))
    if not sources:
        raise DataError(f"{source_pattern}: matches no file")
    source_capture = _capture(source_glob)
    pairs = [(path, _fill(target_glob, source_capture.fullmatch(path).groups())) for path in sources]
    for source, target in pairs:
        if not os.path.isfile(target):
            raise DataError(f"{target}: no such file (the target shard of {source}, by {target_pattern})")
    target_capture = _capture(target_glob)
    paired = {target for _, target in pairs}
    for target in sorted(p for p in glob.glob(target_glob) if os.path.isfile(p)):
        if target not in paired:
            source = _fill(source_glob, target_capture.fullmatch(target).groups())
            raise DataError(f"{source}: no such file (the source shard of {target}, by {source_pattern})")
    return pairs


def check_parallel_files(source_path: str, target_path: str) -> int:
    """Checks both files of a pair (or every shard pair of two patterns, `parallel_shards`) and
    returns their common line count (summed over the shards)."""
    total = 0
    for source, target in parallel_shards(source_path, target_path):
        source_lines = check_file(source)
        target_lines = check_file(target)
        if source_lines != target_lines:
            raise DataError(
                    f"{target}: has {target_lines} lines but {source} has "
                    f"{source_lines}; parallel files must have the same number of lines")
        total += source_lines
    return total


def text_bytes(source_path: str, target_path: str) -> int:
    """The uncompressed size in bytes of a pair of files or patterns: what a training run reads per
    epoch (a gzip file's size is read from its trailer: exact below 4 GiB, else a lower bound)."""
    total = 0
    for pair in parallel_shards(source_path, target_path):
        for path in pair:
            size = os.path.getsize(path)
            if is_gzip(path) and size >= 18:
                with open(path, "rb") as f:
                    f.seek(-4, os.SEEK_END)
                    stored = int.from_bytes(f.read(4), "little")  # ISIZE: the size mod 2**32
                while size >= 1 << 32 and stored < size:  # a lower bound above 4 GiB (text shrinks in gzip)
                    stored += 1 << 32
                size = stored
            total += size
    return total


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


def any_parallel_line(source_path: str, target_path: str, keep: Callable[[str, str], bool]) -> bool:
    """True as soon as `keep(source, target)` holds for a stripped line pair of two parallel
    files or shard patterns (`parallel_shards`), read no further; False if it holds for none.
    Checks nothing (`check_parallel_files` does); text that is not UTF-8 is read replaced."""
    for source, target in parallel_shards(source_path, target_path):
        with _open_binary(source) as fs, _open_binary(target) as ft:
            for s, t in zip(fs, ft):
                if keep(s.decode("utf-8", errors="replace").strip(), t.decode("utf-8", errors="replace").strip()):
                    return True
    return False


def read_parallel_pairs(source_path: str, target_path: str) -> list[tuple[str, str]]:
    """All (source, target) pairs of two parallel files, as a Python list."""
    return list(iter_parallel_lines(source_path, target_path))


SHARDS_READ_AT_ONCE = 16


def parallel_text_files(source_path: str, target_path: str, validate: bool = True):
    """A `tf.data.Dataset` of stripped (source, target) `tf.string` scalars.

    Streams the files with `tf.data.TextLineDataset` (gzip detected from each file's first
    bytes), so it scales to WMT-sized corpora: memory does not grow with the corpus. Glob
    patterns (`parallel_shards`) are read interleaved, one line from each of up to 16 shards in
    turn, in a fixed order (shuffling is the batching stage's job). With `validate`, the files
    are first checked (one pass, no memory growth) and a `DataError` names any bad file.
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    plain = tf.autograph.experimental.do_not_convert  # plain TF: AutoGraph would only lengthen start-up
    if validate:
        check_parallel_files(source_path, target_path)
    shards = parallel_shards(source_path, target_path)

    def pairs(source, target, source_compression, target_compression):
        return tf.data.Dataset.zip((tf.data.TextLineDataset(source, compression_type=source_compression),
                                    tf.data.TextLineDataset(target, compression_type=target_compression)))

    def compression(path):
        return "GZIP" if is_gzip(path) else ""

    if len(shards) == 1:
        (source, target), = shards
        ds = pairs(source, target, compression(source), compression(target))
    else:
        columns = [list(column) for column in zip(*[(s, t, compression(s), compression(t)) for s, t in shards])]
        ds = tf.data.Dataset.from_tensor_slices(tuple(columns)).interleave(
            plain(pairs), cycle_length=min(len(shards), SHARDS_READ_AT_ONCE), block_length=1,
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.map(plain(lambda s, t: (tf.strings.strip(s), tf.strings.strip(t))))
