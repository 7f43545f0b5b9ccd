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

TensorFlow matches a checkpoint prefix as a glob pattern where it tests for files (its reader,
`tf.train.latest_checkpoint`, `CheckpointManager`'s rotation): in MODEL_DIR `runs/g[1]` it would
find no checkpoint, read the files of a sibling `runs/g1`, or delete them. Every prefix handed
to TensorFlow goes through `tf_path`, which spells it without glob characters:

    reader = load_reader(prefix)           # tf.train.load_checkpoint, never globbed
    read_model(model, prefix)              # the model's weights; a model that does not fit the
                                           # checkpoint is one ValueError, a checkpoint removed
                                           # meanwhile `CheckpointRemoved`, no TensorFlow warnings

A folder's `checkpoint` state file names only that folder's checkpoints: an entry that leads
elsewhere (`..`, an absolute path, a symbolic link; `outside_folder`) is a one-line ValueError
naming the file (`check_state_file`, which `listed_checkpoints` calls), so no command reads
another run's weights as this one's and no training run's rotation removes them.

Nothing here writes, moves or deletes a file.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import re
import sys
from typing import Callable, Optional, Sequence

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

# The key of the moving average of the weights in the checkpoint of a run with `--ema_decay`, beside
# "model", "optimizer" and "step": its list `shadow` holds one float32 tensor per trainable variable
# of the model, in their order (`keras_transformer.training.ema.ExponentialMovingAverage`).
EMA_KEY = "ema"
# What reading a damaged checkpoint raises: OpError (bad or missing index, missing data
# file, checksum mismatch), IndexError (truncated data file), ValueError and OSError.
READ_ERRORS = (tf.errors.OpError, IndexError, ValueError, OSError)
# What TensorFlow's file matching (`GetMatchingPaths`) reads as a pattern.
TF_GLOB_CHARACTERS = frozenset("*?[]\\")
_PROC_FD = "/proc/self/fd"
_open_folders: dict[str, int] = {}  # folder -> an open descriptor of it, for `tf_path`


class CheckpointRemoved(FileNotFoundError):
    """A checkpoint's files went away between choosing it and reading it (a training run's
    rotation deletes its oldest checkpoints): the caller may choose again."""


def tf_path(path: str) -> str:
    """`path` spelled without TensorFlow's glob characters, for TensorFlow's file functions.

    Unchanged when it has none. Else the deepest existing folder of `path` (itself, if a folder)
    is opened once (the descriptor is kept for the process) and the path is given as
    /proc/self/fd/<fd>/<the rest>: the same file, whatever the folder's name. Where that cannot
    be done (no /proc; glob characters in a part not yet created), a one-line ValueError.
    """
    if not TF_GLOB_CHARACTERS & set(path):
        return path
    folder, rest = os.path.abspath(path), []
    while not os.path.isdir(folder) and folder != os.path.dirname(folder):
        folder, name = os.path.split(folder)
        rest.insert(0, name)
    if TF_GLOB_CHARACTERS & set("".join(rest)) or not os.path.isdir(_PROC_FD):
        raise ValueError(f"{path}: TensorFlow reads the characters {''.join(sorted(TF_GLOB_CHARACTERS))} "
                         "in a checkpoint's path as a pattern; rename the folder")
    fd = _open_folders.get(folder)
    if fd is None or not _same_folder(fd, folder):
        if fd is not None:
            os.close(fd)
        fd = _open_folders[folder] = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    return os.path.join(_PROC_FD, str(fd), *rest)


def _same_folder(fd: int, folder: str) -> bool:
    """Whether the open descriptor `fd` is still the folder `folder` (not a removed one)."""
    try:
        here, there = os.fstat(fd), os.stat(folder)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def load_reader(prefix: str):
    """`tf.train.load_checkpoint(prefix)`, the prefix never read as a pattern (`tf_path`)."""
    return tf.train.load_checkpoint(tf_path(prefix))


def warn_on_stderr(line: str) -> None:
    """The default `warn`: one line on stderr."""
    print(line, file=sys.stderr, flush=True)


def outside_folder(prefix: str, folder: str) -> bool:
    """Whether the checkpoint `prefix` is not one of `folder`'s own: its name (through `..`, an
    absolute path, or a symbolic link of a folder or of one of its files) leads to another
    folder than `folder` itself. Real paths are compared, so a run reached through a link
    still owns its files."""
    home = os.path.realpath(folder)
    paths = [prefix] + [path for path in [prefix + ".index", *data_files(prefix)] if os.path.lexists(path)]
    return any(os.path.dirname(os.path.realpath(path)) != home for path in paths)


def check_own(folder: str, list_file: str, entries: Sequence[tuple[str, str]], advice: str) -> None:
    """A one-line ValueError naming `list_file` (a run's file that lists checkpoints of `folder`)
    unless every one of `entries`, `(the entry as the file spells it, the prefix it names)`, is
    `folder`'s own (`outside_folder`): a run reads, and its rotation removes, only the
    checkpoints of its own folders. `advice` ends the line."""
    for entry, prefix in entries:
        if outside_folder(prefix, folder):
            linked = os.path.dirname(os.path.realpath(prefix)) == os.path.realpath(folder)
            raise ValueError(f"{list_file}: entry {json.dumps(entry, ensure_ascii=False)} is outside {folder}"
                             f"{' (its files are symbolic links to another folder)' if linked else ''}; a run "
                             f"reads and removes only the checkpoints of its own folders: {advice}")


def _state(directory: str):
    """The `checkpoint` state file of `directory` (TensorFlow's `CheckpointState`), None when it is
    missing or unreadable."""
    try:
        return tf.train.get_checkpoint_state(directory)
    except READ_ERRORS:
        return None


def check_state_file(directory: str, state=None) -> None:
    """A one-line ValueError naming `directory`/checkpoint when it lists a checkpoint outside
    `directory` (`check_own`: its model_checkpoint_path or one of its all_model_checkpoint_paths,
    relative or absolute); a missing or unreadable state file passes. `state` is the file's
    `CheckpointState` when already read."""
    state = _state(directory) if state is None else state
    if state is None:
        return
    joined = os.path.join(directory, "")  # TensorFlow joins a relative entry to the folder
    entries = [(path[len(joined):] if path.startswith(joined) else path, path)
               for path in [state.model_checkpoint_path, *state.all_model_checkpoint_paths]]
    check_own(directory, os.path.join(directory, "checkpoint"), entries,
              "remove the entry, or the file (the checkpoints in the folder are then listed by step)")


def listed_checkpoints(directory: str, warn: Callable[[str], None] = warn_on_stderr) -> list[str]:
    """The checkpoint prefixes `tf.train.CheckpointManager` lists in `directory`, oldest first
    (relative entries come back joined to `directory`).

    Without a readable `checkpoint` state file (lost, or damaged: TensorFlow then ignores the
    folder, and a resume would silently start again at step 0), or with one that lists only
    checkpoints whose files are gone (a stale state beside checkpoints copied or restored by
    hand), the `ckpt-<N>.index` files on disk are listed instead, by step, with one `warn`
    line; [] if there are none.

    Raises:
        ValueError: the state file lists a checkpoint outside `directory` (`check_state_file`):
            neither read nor, by a training run's rotation, removed.
    """
    state = _state(directory)
    if state is not None:
        check_state_file(directory, state)
    paths = list(state.all_model_checkpoint_paths) if state is not None else []
    if state is not None and state.model_checkpoint_path and state.model_checkpoint_path not in paths:
        paths.append(state.model_checkpoint_path)
    if any(os.path.isfile(path + ".index") for path in paths):
        return paths
    found = indexed_checkpoints(directory)
    if found:
        why = "lists only checkpoints whose files are gone" if paths else "is missing or unreadable"
        warn(f"warning: {os.path.join(directory, 'checkpoint')} {why}; using the "
             f"{len(found)} checkpoint file(s) found in {directory}")
        return found
    return paths  # listed, none on disk: the reader names the missing files


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
        reader = load_reader(prefix)
    except READ_ERRORS as error:
        return _describe(prefix, error, f"{name}.index")
    shards = data_files(prefix)
    try:
        for key in reader.get_variable_to_shape_map():
            reader.get_tensor(key)
    except READ_ERRORS as error:
        return _describe(prefix, error, os.path.basename(shards[0]) if len(shards) == 1 else f"{name}.data-*")
    return None


def model_mismatch(model, reader) -> Optional[str]:
    """None if every variable of `model` has its value, of the same shape, under the key `model`
    of the checkpoint `reader` holds (a `load_reader`), else one phrase naming the first that
    does not: "decoder_layer_0/feed_forward/inner_dense/_kernel is (32, 64) in the checkpoint,
    (32, 128) in the model". Walks the checkpoint's object graph beside the model's, as a
    restore would, so that a model that does not fit is told before anything is restored (a
    failed restore leaves TensorFlow printing a warning per unrestored value at exit)."""
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    shapes = reader.get_variable_to_shape_map()
    roots = {child.local_name: child.node_id for child in graph.nodes[0].children}
    if "model" not in roots:
        return "it holds no model"
    pending, seen = collections.deque([("", model, roots["model"])]), set()
    while pending:
        path, trackable, node_id = pending.popleft()
        if node_id in seen:
            continue
        seen.add(node_id)
        node = graph.nodes[node_id]
        for attribute in node.attributes:
            if attribute.name == "VARIABLE_VALUE" and hasattr(trackable, "shape"):
                saved, wanted = tuple(shapes.get(attribute.checkpoint_key, ())), tuple(trackable.shape)
                if saved != wanted:
                    return f"{path} is {saved} in the checkpoint, {wanted} in the model"
        children = tf.train.TrackableView(trackable).children(trackable)
        saved_names = {child.local_name for child in node.children}
        for name, child in children.items():
            if name not in saved_names and (getattr(child, "variables", None) or hasattr(child, "shape")):
                return f"{'/'.join(filter(None, (path, name)))} is in the model, not in the checkpoint"
        for child in node.children:
            name = "/".join(filter(None, (path, child.local_name)))
            if child.local_name in children:
                pending.append((name, children[child.local_name], child.node_id))
            elif any(a.name == "VARIABLE_VALUE" for a in graph.nodes[child.node_id].attributes) or \
                    graph.nodes[child.node_id].children:
                return f"{name} is in the checkpoint, not in the model"
    return None


def top_level_keys(reader) -> set:
    """The keys of the root `tf.train.Checkpoint` in the checkpoint `reader` holds (a `load_reader`):
    "model", "optimizer", "step", "ema", ..."""
    return {key.split("/", 1)[0] for key in reader.get_variable_to_shape_map()}


def list_length(reader, key: str) -> int:
    """How many items the list of variables saved under `key` has (e.g. "dropout_seeds/0/...")."""
    prefix = key + "/"
    return len({name[len(prefix):].split("/", 1)[0] for name in reader.get_variable_to_shape_map()
                if name.startswith(prefix)})


def has_ema(reader) -> bool:
    """Whether the checkpoint `reader` holds (a `load_reader`) has the moving average of the
    weights of a run with `--ema_decay` (under `EMA_KEY`)."""
    return EMA_KEY in top_level_keys(reader)


class _ShadowReader(tf.Module):
    """A model's own variables listed as `shadow`: restoring the key `ema` into it reads the
    shadow weights of a checkpoint straight into the model (each tensor cast on restore)."""

    def __init__(self, variables: Sequence):
        super().__init__(name="ema")
        self.shadow = list(variables)


def read_ema_shadow(model, checkpoint_path: str):
    """Reads the `ema` shadow of the checkpoint `checkpoint_path` (a prefix TensorFlow may read,
    see `tf_path`) into `model.trainable_variables`; returns the load status
    (`assert_existing_objects_matched()` raises if the checkpoint does not fit)."""
    return tf.train.Checkpoint(**{EMA_KEY: _ShadowReader(model.trainable_variables)}).read(
        checkpoint_path).expect_partial()


def read_model(model, prefix: str, source: str = "the model", moving_average: bool = True) -> None:
    """Reads the weights of `model` (built) from the checkpoint `prefix` (its `model` part; a
    training checkpoint's optimizer and step are left), the prefix never read as a pattern.

    The checkpoint of a run with `--ema_decay` gives its moving average of the trainable
    weights (`read_ema_shadow`), the one that run evaluated: translation, export, averaging and
    `--init_from` all read it (training's own resume reads both, `training.checkpoints`).
    `moving_average=False` reads the trained weights instead (the comparison of a run with and
    without its average, `bench/ema_against_trained_weights.py`).

    Raises:
        ValueError: the checkpoint does not fit `model` (`model_mismatch`; `source` names what
            the model was built from, e.g. MODEL_DIR/model_config.json); nothing is restored.
        CheckpointRemoved: its files are gone (rotated away since it was chosen).
    """
    try:
        reader = load_reader(prefix)
        problem = model_mismatch(model, reader)
        if problem is None:
            tf.train.Checkpoint(model=model).read(tf_path(prefix)).expect_partial().assert_existing_objects_matched()
            if moving_average and has_ema(reader):
                read_ema_shadow(model, tf_path(prefix)).assert_existing_objects_matched()
    except (*READ_ERRORS, AssertionError) as error:
        if not (os.path.isfile(prefix + ".index") and data_files(prefix)):
            raise CheckpointRemoved(f"checkpoint {prefix} was removed while it was read (a training run "
                                    "rotating its checkpoints?)") from None
        raise ValueError(f"checkpoint {prefix} cannot be read into {source}: "
                         f"{_describe(prefix, error, os.path.basename(prefix) + '.index')}") from None
    if problem is not None:
        raise ValueError(f"checkpoint {prefix} does not fit {source}: {problem}")


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
