"""The training pairs' `tf.data` disk cache in MODEL_DIR/cache (`--cache=disk`): keyed by what the
cached ids depend on, stale and half-written files removed."""

from __future__ import annotations

import dataclasses
import functools
import glob
import hashlib
import json
import os
from typing import Callable, Optional

from keras_transformer.run_dir import layout, readable_checkpoints
from keras_transformer.pipelines.data_config import DataConfig

_print = functools.partial(print, flush=True)


def prepare_disk_cache(model_dir: str, data: DataConfig, fingerprint: str, log: Callable[[str], None] = _print,
                       clean: bool = True) -> str:
    """The file prefix of the training data's `tf.data` disk cache, MODEL_DIR/cache/train-<key>
    (spelled for TensorFlow, `readable_checkpoints.tf_path`).

    The key hashes what the cached ids depend on (the tokenizer, the corpora with their files'
    sizes and times, `max_length`), so changed data never reads a stale cache; caches of other
    keys are removed (the caller holds the run lock), and so are the lock and temporary files
    a killed run left (tf.data refuses to write a cache while its lockfile exists). A cache of
    this key that is damaged (`cache_problem`: truncated by a full disk or a bad copy, which
    tf.data would find only mid-epoch, on every resume) is removed with a line saying so, and
    written again during the first epoch.
    """
    from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top

    files = []
    for corpus in data.train_files:
        if not corpus.dataset:
            for pair in text_files.parallel_shards(*data.corpus_files(corpus)):
                files += [(p, os.path.getsize(p), os.path.getmtime(p)) for p in pair]
    inputs = {k: v for k, v in dataclasses.asdict(data).items()
              if k in ("dataset", "data_dir", "source_file", "target_file", "train_files", "max_length", "seed")}
    key = hashlib.sha256(json.dumps([fingerprint, inputs, files], sort_keys=True, default=str).encode()).hexdigest()
    folder = os.path.join(model_dir, layout.CACHE_DIR)
    prefix = os.path.join(folder, f"train-{key[:16]}")
    name = os.path.basename(prefix)

    def is_stale(path):
        base = os.path.basename(path)
        ours = base[len(name):len(name) + 1] in (".", "-", "_") and base.startswith(name)
        return not ours or base.endswith(".lockfile") or ".tempstate" in base

    stale = [p for p in sorted(glob.glob(os.path.join(glob.escape(folder), "*"))) if clean and is_stale(p)]
    for path in stale:
        os.remove(path)
    if stale:
        log(f"removed {len(stale)} stale or half-written cache file(s) from {folder}")
    os.makedirs(folder, exist_ok=True)
    problem = cache_problem(prefix) if clean and os.path.exists(prefix + ".index") else None
    if problem:
        for path in glob.glob(glob.escape(prefix) + ".*"):
            os.remove(path)
        log(f"removed the damaged disk cache {prefix} ({problem}); it is written again this epoch")
    return readable_checkpoints.tf_path(prefix)  # tf.data tests for the cache's files by pattern


def cache_problem(prefix: str) -> Optional[str]:
    """None if the `tf.data` file cache `prefix` (a tensor bundle like a checkpoint) opens and its
    last element reads back, else why not. The elements are written in order, so a truncated
    data file loses the last one first; reading one element keeps the check cheap at any size."""
    try:
        reader = readable_checkpoints.load_reader(prefix)
        keys = [key for key in reader.get_variable_to_shape_map() if _element_index(key) is not None]
        if keys:
            last = max(_element_index(key) for key in keys)
            for key in keys:
                if _element_index(key) == last:
                    reader.get_tensor(key)
    except readable_checkpoints.READ_ERRORS as error:
        return " ".join(str(error).strip().splitlines()[0].split()) if str(error).strip() else type(error).__name__
    return None


def _element_index(key: str) -> Optional[int]:
    """The element number of a tf.data cache key ("  12062_1": element 12062, component 1)."""
    number, _, component = key.strip().partition("_")
    return int(number) if number.isdigit() and component.isdigit() else None
