"""A checkpoint's files on disk: which checkpoints a folder lists, and whether one is readable.

A TensorFlow checkpoint `PREFIX` is `PREFIX.index` (a table of every tensor's place and
checksum) and `PREFIX.data-NNNNN-of-MMMMM` (the values). A crash, a full disk or a bad copy
can leave either truncated; restoring one then ends in `OpError: not an sstable` or
`IndexError: Read less bytes than requested`. Training, translation, export and averaging ask
here first, so that they fall back to an earlier checkpoint or stop with one line:

    problem = checkpoint_problem(prefix)   # None, or e.g. "ckpt-4.index: not an sstable (...)"
    prefix, skipped = newest_readable(listed_checkpoints(directory), warn=print)
    check_readable(prefix)                 # a one-line ValueError naming the file at fault

"Readable" means that the index opens and every tensor it lists reads back with its checksum:
the check reads the whole checkpoint once (the restore that follows finds it in the page cache).
Nothing here writes, moves or deletes a file.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from typing import Callable, Optional, Sequence

import tensorflow as tf

# What reading a damaged checkpoint raises: OpError (bad or missing index, missing data
# file, checksum mismatch), IndexError (truncated data file), ValueError and OSError.
READ_ERRORS = (tf.errors.OpError, IndexError, ValueError, OSError)


def warn_on_stderr(line: str) -> None:
    """The default `warn`: one line on stderr."""
    print(line, file=sys.stderr, flush=True)


def listed_checkpoints(directory: str, warn: Callable[[str], None] = warn_on_stderr) -> list[str]:
    """The checkpoint prefixes `tf.train.CheckpointManager` lists in `directory`, oldest first
    (relative entries come back joined to `directory`).

    Without a readable `checkpoint` state file (lost, or damaged: TensorFlow then ignores the
    folder, and a resume would silently start again at step 0), the `ckpt-<N>.index` files
    on disk are listed instead, by step, with one `warn` line; [] if there are none.
    """
    try:
        state = tf.train.get_checkpoint_state(directory)
    except READ_ERRORS:
        state = None
    paths = list(state.all_model_checkpoint_paths) if state is not None else []
    if state is not None and state.model_checkpoint_path and state.model_checkpoint_path not in paths:
        paths.append(state.model_checkpoint_path)
    if paths:
        return paths
    found = indexed_checkpoints(directory)
    if found:
        warn(f"warning: {os.path.join(directory, 'checkpoint')} is missing or unreadable; using the "
             f"{len(found)} checkpoint file(s) found in {directory}")
    return found


def indexed_checkpoints(directory: str) -> list[str]:
    """The prefixes of the `ckpt-<N>.index` files in `directory`, by step, whatever the
    `checkpoint` state file says ([] for a missing folder). `directory` is never read as a glob."""
    found = glob.glob(os.path.join(glob.escape(directory), "ckpt-*.index"))
    numbered = sorted((int(m.group(1)), path[: -len(".index")])
                      for path in found if (m := re.search(r"ckpt-(\d+)\.index$", path)))
    return [prefix for _, prefix in numbered]


def data_files(prefix: str) -> list[str]:
    """The data shards present on disk for `prefix`."""
    return sorted(glob.glob(glob.escape(prefix) + ".data-?????-of-?????"))


def _describe(prefix: str, error: BaseException, default: str) -> str:
    """One line: the file at fault (the data shard TensorFlow's message names, else `default`)
    and TensorFlow's reason."""
    text = str(error).strip() or type(error).__name__
    message = " ".join(text.splitlines()[0].split())
    named = re.search(re.escape(os.path.basename(prefix)) + r"\.data-\d{5}-of-\d{5}", message)
    if named:
        path = os.path.join(os.path.dirname(prefix), named.group(0))
        return f"{named.group(0)}: " + ("not found" if not os.path.exists(path) else message)
    return f"{default}: {message}"


def checkpoint_problem(prefix: str) -> Optional[str]:
    """None if the checkpoint `prefix` reads completely, else one line naming the file at fault
    and why (not found, truncated, not an sstable, checksum mismatch)."""
    name = os.path.basename(prefix)
    if not os.path.isfile(prefix + ".index"):
        return f"{name}.index: not found"
    try:
        reader = tf.train.load_checkpoint(prefix)
    except READ_ERRORS as error:
        return _describe(prefix, error, f"{name}.index")
    shards = data_files(prefix)
    try:
        for key in reader.get_variable_to_shape_map():
            reader.get_tensor(key)
    except READ_ERRORS as error:
        return _describe(prefix, error, os.path.basename(shards[0]) if len(shards) == 1 else f"{name}.data-*")
    return None


def check_readable(prefix: str) -> None:
    """Raises ValueError (one line naming the file at fault) unless the checkpoint `prefix` is readable."""
    problem = checkpoint_problem(prefix)
    if problem:
        raise ValueError(f"checkpoint {prefix} is damaged: {problem}")


def newest_readable(prefixes: Sequence[str], warn: Callable[[str], None] = warn_on_stderr
                    ) -> tuple[Optional[str], list[str]]:
    """The newest readable checkpoint of `prefixes` (oldest first, as `listed_checkpoints` gives
    them), trying them newest first; `warn` gets one line for each damaged one skipped.

    Returns:
        `(prefix or None, the damaged prefixes skipped, newest first)`.
    """
    skipped = []
    for prefix in reversed(prefixes):
        problem = checkpoint_problem(prefix)
        if problem is None:
            return prefix, skipped
        warn(f"warning: skipping damaged checkpoint {prefix}: {problem}")
        skipped.append(prefix)
    return None, skipped
