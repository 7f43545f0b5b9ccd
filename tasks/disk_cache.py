"""The training pairs' `tf.data` disk cache in MODEL_DIR/cache (`--cache=disk`): keyed by what the
cached ids depend on, stale and half-written files removed."""

from __future__ import annotations

import dataclasses
import functools
import glob
import hashlib
import json
import os
from typing import Callable

from keras_transformer.run_dir import layout
from pipelines.data_config import DataConfig

_print = functools.partial(print, flush=True)


def prepare_disk_cache(model_dir: str, data: DataConfig, fingerprint: str, log: Callable[[str], None] = _print,
                       clean: bool = True) -> str:
    """The file prefix of the training data's `tf.data` disk cache, MODEL_DIR/cache/train-<key>.

    The key hashes what the cached ids depend on (the tokenizer, the corpora with their files'
    sizes and times, `max_length`), so changed data never reads a stale cache; caches of other
    keys are removed (the caller holds the run lock), and so are the lock and temporary files
    a killed run left (tf.data refuses to write a cache while its lockfile exists).
    """
    from pipelines import text_files  # pylint: disable=g-import-not-at-top

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
    return prefix
