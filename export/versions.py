"""TF Serving's model layout: a base folder of integer-named version folders.

    OUT/
      1/saved_model.pb ...
      2/saved_model.pb ...     <- TF Serving serves the highest version by default
      .tmp-3-host-4242-1f2e3d4c/   <- an export being written (hidden: never a version)

`next_version` numbers a new export; `saved_model_path` finds the SavedModel a user points
at (a version folder, or a base folder whose highest complete version is used). Hidden
folders such as the exporter's temporaries are never versions.

The exporter (`keras_transformer.export.serving_module.export_saved_model`) writes a version into
`temporary_folder(OUT, version)`, `.tmp-<version>-<host>-<pid>-<token>`, and `publish_version`
renames it to its number, claimed at that moment: the rename never replaces a version, and
when another export took the number meanwhile, the next free one is taken. Two exports started
at once into one OUT thus publish two versions (the one that finishes first gets the lower
number); an explicit number that was taken meanwhile is refused with one line. The name says who
writes it, so `remove_stale_temporaries` can remove what a killed export left without touching
a live one. `check_export_dir` raises the errors a user
can make (the base folder is a file, cannot be created or written, the version exists)
before anything is built. This module imports no TensorFlow: a command calls these checks
before TensorFlow starts.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import re
import secrets
import shutil
import socket
from typing import Callable, Optional, Sequence, Union

from keras_transformer.config import DecodingConfig
from keras_transformer.files import atomic, command_files, json_files

SAVED_MODEL_FILE = "saved_model.pb"
ASSETS_EXTRA = "assets.extra"  # a version's folder for files beside the SavedModel (TF Serving reads its warm-up here)
SETTINGS_FILE = "export.json"  # an export's model and decoding settings (SavedModel: in assets.extra/)
# Signatures by name, for commands that ask an export for one before TensorFlow starts (export.json
# lists an export's signatures): `keras_transformer.export.serving_module` defines them under these names.
N_BEST_SIGNATURE = "translate_n_best"
SAMPLED_SIGNATURE = "translate_sampled"
PREFIX_SIGNATURE = "translate_with_prefix"
ATTENTION_SIGNATURE = "translate_with_attention"
SCORE_SIGNATURE = "score"
# TensorFlow's DEFAULT_SERVING_SIGNATURE_DEF_KEY, spelled here as in `keras_transformer.export.warmup` (a test checks).
DEFAULT_SIGNATURE = "serving_default"
# Every signature an export can hold, in the order `python -m keras_transformer.export --help` lists them; an
# export holds them all unless `--signatures` names fewer (serving_default always).
SIGNATURES = (DEFAULT_SIGNATURE, ATTENTION_SIGNATURE, N_BEST_SIGNATURE, SCORE_SIGNATURE, SAMPLED_SIGNATURE,
              PREFIX_SIGNATURE)
_VERSION = re.compile(r"^[0-9]+$")
_TEMPORARY = re.compile(r"^\.tmp-(?P<version>[0-9]+)-(?P<host>.+)-(?P<pid>[0-9]+)-[0-9a-f]{8}$")


def versions(export_dir: str) -> list[int]:
    """The integer-named folders of `export_dir`, ascending ([] if it does not exist)."""
    if not os.path.isdir(export_dir):
        return []
    return sorted(int(name) for name in os.listdir(export_dir) if _VERSION.match(name))


def next_version(export_dir: str) -> int:
    """1 + the largest version in `export_dir` (1 if none)."""
    return max(versions(export_dir), default=0) + 1


def saved_model_path(export_dir: str) -> str:
    """`export_dir` if it holds a SavedModel, else its highest version folder that does.

    Raises:
        FileNotFoundError: neither holds a saved_model.pb.
    """
    if os.path.isfile(os.path.join(export_dir, SAVED_MODEL_FILE)):
        return export_dir
    for version in reversed(versions(export_dir)):
        path = os.path.join(export_dir, str(version))
        if os.path.isfile(os.path.join(path, SAVED_MODEL_FILE)):
            return path
    raise FileNotFoundError(f"{export_dir}: no {SAVED_MODEL_FILE} in it or in a version folder")


def settings_path(saved_model_dir: str) -> str:
    """`<saved_model_dir>/assets.extra/export.json`."""
    return os.path.join(saved_model_dir, ASSETS_EXTRA, SETTINGS_FILE)


def read_settings(saved_model_dir: str) -> dict:
    """What an export was made with: its `assets.extra/export.json` (`serving_module.export_saved_model`).

    Raises:
        FileNotFoundError: the version folder has no such file (not made by `python -m keras_transformer.export`).
        ValueError: the file is not a JSON object whose sections are objects (damaged).
    """
    path = settings_path(saved_model_dir)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: not found; was {saved_model_dir} made by python -m keras_transformer.export?")
    settings = json_files.read_json(path, "an export's settings", advice="; export the model again")
    damaged = [name for name, value in (settings.items() if isinstance(settings, dict) else [])
               if name in ("decoding", "model", "source_tokenizer", "target_tokenizer") and not isinstance(value, dict)]
    if not isinstance(settings, dict) or damaged:
        raise ValueError(f"{path}: not an export's settings (a JSON object{' whose ' + ', '.join(damaged) + ' is' if damaged else ''} "
                         "expected); export the model again")
    return settings


def recorded_decoding(settings: dict, path: str, source: str, n_best: int) -> DecodingConfig:
    """The `DecodingConfig` an export's settings (read from the file `path` of the export
    `source`) record, with `n_best`: a one-line `ValueError` naming the file when its "decoding"
    is not an export's, or naming the export unless its beam keeps that many
    (`DecodingConfig`'s check)."""
    try:
        exported = DecodingConfig(**settings.get("decoding", {}))
    except TypeError as error:  # an unknown field
        raise ValueError(f"{path}: its \"decoding\" is not an export's ({error})") from None
    try:
        return dataclasses.replace(exported, n_best=n_best)
    except ValueError as error:  # the export's beam_size, fixed when it was exported
        raise ValueError(f"--n_best with the export {source}: {error}") from None


# Writing a version ------------------------------------------------------------------


def check_export_dir(export_dir: str, version: Optional[int] = None, model_dir: Optional[str] = None) -> None:
    """Raises a one-line `ValueError` unless a version folder can be written into `export_dir`:
    it is not the training directory `model_dir` (if given) it exports, it is a writable folder
    or can be created as one (`command_files.check_writable_folder`), and `export_dir/<version>` (if
    `version` is given) does not exist yet."""
    if model_dir is not None and command_files.same_file(export_dir, model_dir):
        raise ValueError(f"--export_dir={export_dir}: is the training directory --model_dir={model_dir}; give "
                         "the export a folder of its own (TF Serving's model base path)")
    command_files.check_writable_folder(export_dir, "export_dir")
    if version is not None and os.path.lexists(os.path.join(export_dir, str(version))):
        raise ValueError(f"{os.path.join(export_dir, str(version))} already exists; pick another --version or "
                         "leave it out")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()) or "localhost"


def temporary_folder(export_dir: str, version: Union[int, str]) -> str:
    """Creates and returns `export_dir/.tmp-<version>-<host>-<pid>-<token>`, with the mode the
    umask allows (0o777 & ~umask, as `mkdir` gives; `tempfile.mkdtemp` would give 0o700).
    `version` may be any folder name (only integer ones are `remove_stale_temporaries`')."""
    while True:
        path = os.path.join(export_dir, f".tmp-{version}-{_host()}-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            os.mkdir(path, 0o777)
            return path
        except FileExistsError:
            continue


def publish(temporary: str, final: str) -> None:
    """Renames a finished `temporary_folder` to the folder `final`, which must not exist
    (`FileExistsError` if it does, or appears meanwhile: nothing is replaced).

    TF Serving often runs as another user than the exporter, so first every folder below gets
    the folder's own mode (0o777 & ~umask) and every file that mode without execute bits
    (0o666 & ~umask): TensorFlow and copied assets may carry narrower ones.
    """
    folder_mode = os.stat(temporary).st_mode & 0o777
    for root, folders, files in os.walk(temporary):
        for names, mode in ((folders, folder_mode), (files, folder_mode & 0o666)):
            for name in names:
                path = os.path.join(root, name)
                if not os.path.islink(path):  # chmod would change the link's target
                    os.chmod(path, mode)
    atomic.sync_tree(temporary)  # every file on the disk before the version appears
    _rename_to_new(temporary, final)
    atomic.sync_folder(os.path.dirname(os.path.abspath(final)))


def publish_version(temporary: str, export_dir: str, version: Optional[int] = None) -> str:
    """`publish`es a finished `temporary_folder` as `export_dir/<version>` and returns that path;
    with `version` None, as the next free integer at the moment of the rename (retried upward
    while other exports take numbers: two concurrent exports get two versions).

    Raises:
        ValueError: the explicit `version` exists (made by another export meanwhile).
    """
    while True:
        final = os.path.join(export_dir, str(next_version(export_dir) if version is None else version))
        try:
            publish(temporary, final)
            return final
        except FileExistsError:
            if version is not None:
                raise ValueError(f"{final} already exists (another export made it meanwhile); pick another "
                                 "--version or leave it out") from None


def _rename_to_new(source: str, destination: str) -> None:
    """`os.rename` of a non-empty folder that never replaces `destination`: Linux renames a
    folder onto an empty folder only (ENOTEMPTY or EEXIST for any other), and a file or link
    there is refused first. Raises FileExistsError."""
    if os.path.lexists(destination):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), destination)
    try:
        os.rename(source, destination)
    except OSError as error:
        if error.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), destination) from None
        raise


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_temporaries(export_dir: str, log: Callable[[str], None] = print) -> list[str]:
    """Removes the temporary folders that killed exports left in `export_dir`; returns their paths.

    A `.tmp-<version>-<host>-<pid>-<token>` folder is stale when `host` is this host and no
    process `pid` runs here. Folders of other hosts (a shared file system), of live processes
    and of other names (e.g. older exporters' `.tmp-<version>-<random>`, whose writer is not
    known) are left alone. Logs one line per removed folder.
    """
    if not os.path.isdir(export_dir):
        return []
    removed = []
    for name in sorted(os.listdir(export_dir)):
        match = _TEMPORARY.match(name)
        path = os.path.join(export_dir, name)
        if not match or match["host"] != _host() or not os.path.isdir(path) or os.path.islink(path):
            continue
        pid = int(match["pid"])
        if pid == os.getpid() or _alive(pid):
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            removed.append(path)
            log(f"removed {path}: the unfinished export of version {match['version']} by process {pid}, "
                "which no longer runs")
    return removed


def chosen_signatures(names: Optional[Sequence[str]], tree_constraint: bool = False) -> tuple[str, ...]:
    """The signatures an export holds: every one of `SIGNATURES` when `names` is None (but
    `translate_with_prefix` under a tree constraint, which takes no prefix), else `names` in
    `SIGNATURES`' order. A one-line ValueError for an unknown or repeated name, a choice
    without `serving_default` (TF Serving's default and the warm-up's), or
    `translate_with_prefix` with a tree constraint."""
    if names is None:
        return tuple(name for name in SIGNATURES if not (tree_constraint and name == PREFIX_SIGNATURE))
    unknown = [name for name in names if name not in SIGNATURES]
    if unknown:
        raise ValueError(f"--signatures: unknown {', '.join(unknown)}; choose from {', '.join(SIGNATURES)}")
    if len(set(names)) != len(names):
        raise ValueError(f"--signatures: a signature named twice: {','.join(names)}")
    if DEFAULT_SIGNATURE not in names:
        raise ValueError(f"--signatures: {DEFAULT_SIGNATURE} is required (TF Serving's default signature)")
    if tree_constraint and PREFIX_SIGNATURE in names:
        raise ValueError(f"--signatures: a tree-constrained search takes no prefix: no {PREFIX_SIGNATURE}")
    return tuple(name for name in SIGNATURES if name in names)
