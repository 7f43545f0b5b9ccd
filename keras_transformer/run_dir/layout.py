"""The layout of a training directory, shared by training, translation and export.

    MODEL_DIR/
      model_config.json     the TransformerConfig (and the run's other settings)
      tokenizer/            the subword tokenizer(s), written by pipelines/
      checkpoints/          tf.train.CheckpointManager: ckpt-<step>.*, "checkpoint"; a damaged
                            checkpoint that resumed training skipped, renamed ckpt-<step>.damaged.*
                            by its next save
      averaged/             the average of the last (or the best) checkpoints (section 6.1), if made
      best/                 the best checkpoints by a dev metric and best.json, their list
                            (`--keep_best_checkpoints`, `keras_transformer.run_dir.best_checkpoints`)
      train/                TensorBoard scalars of training
      eval/                 TensorBoard scalars of the dev evaluations, history.json (every
                            evaluation of the run) and the translations of --evaluate_only
      workers/worker-<i>/   a non-chief worker's copy of each checkpoint (multi-worker runs)
      cache/                the training pairs' tf.data disk cache (with --cache=disk)

A checkpoint holds `model` (the Transformer's variables) and, for training,
`optimizer` and `step`; `restore_model` reads only the model part, so
translation and export work from either kind. A damaged checkpoint (see
`keras_transformer.run_dir.readable_checkpoints`) is skipped with a warning for the one before it.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Optional

import tensorflow as tf

from keras_transformer.run_dir import atomic_files, best_checkpoints, readable_checkpoints
from keras_transformer.config import TransformerConfig
from keras_transformer.model import Transformer

CONFIG_FILE = "model_config.json"
TOKENIZER_DIR = "tokenizer"
CHECKPOINT_DIR = "checkpoints"
AVERAGED_DIR = "averaged"
BEST_DIR = "best"
TRAIN_DIR = "train"
EVAL_DIR = "eval"
HISTORY_FILE = "history.json"  # in EVAL_DIR
WORKERS_DIR = "workers"
CACHE_DIR = "cache"


def write_json_atomically(path: str, values: dict[str, Any]) -> None:
    """Writes `values` as indented, sorted JSON with `atomic_files.write_atomically`: never a
    half-written file, and the mode the umask allows (0o644 under 022, not mkstemp's 0o600)."""
    atomic_files.write_atomically(path, (json.dumps(values, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def write_config(model_dir: str, config: TransformerConfig, **extra: Any) -> str:
    """Saves the model config (and any JSON-able `extra` sections) as MODEL_DIR/model_config.json."""
    path = os.path.join(model_dir, CONFIG_FILE)
    write_json_atomically(path, {"model": config.to_dict(), **extra})
    return path


def read_settings(model_dir: str) -> dict[str, Any]:
    """The whole model_config.json of a model directory."""
    path = os.path.join(model_dir, CONFIG_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: not found; is {model_dir!r} a training directory?")
    with open(path, encoding="utf-8") as file:
        try:
            return json.load(file)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from None


def read_config(model_dir: str) -> TransformerConfig:
    """The TransformerConfig saved in a model directory."""
    return TransformerConfig.from_dict(read_settings(model_dir)["model"])


def latest_checkpoint(model_dir: str, prefer_averaged: bool = True,
                      warn: Callable[[str], None] = readable_checkpoints.warn_on_stderr) -> Optional[str]:
    """The checkpoint to translate with: the averaged one if readable (and preferred), else the
    best readable one of MODEL_DIR/best (a run that kept its best checkpoints by a dev metric),
    else the newest readable one of MODEL_DIR/checkpoints; None if there is none. `warn` gets one
    line for each damaged checkpoint skipped.

    Raises:
        ValueError: checkpoints exist but none of them is readable.
    """
    best = [BEST_DIR] if os.path.isdir(os.path.join(model_dir, BEST_DIR)) else []
    folders = ([AVERAGED_DIR] + best if prefer_averaged else []) + [CHECKPOINT_DIR]
    damaged = []
    for folder in folders:
        directory = os.path.join(model_dir, folder)
        if folder == BEST_DIR:  # best first; newest_readable takes the last readable one
            listed = best_checkpoints.listed_prefixes(directory)[::-1]
        else:
            listed = readable_checkpoints.listed_checkpoints(directory, warn)
        readable, skipped = readable_checkpoints.newest_readable(listed, warn)
        if readable:
            return readable
        damaged += skipped
    if damaged:
        raise ValueError(f"{model_dir}: no readable checkpoint in {' or '.join(f + '/' for f in folders)} "
                         f"({len(damaged)} damaged, see the warnings above)")
    return None


def restore_model(model_dir: str, checkpoint: Optional[str] = None,
                  warn: Callable[[str], None] = readable_checkpoints.warn_on_stderr) -> tuple[Transformer, str]:
    """Builds the model of a training directory and loads its weights.

    Args:
        model_dir: a training directory.
        checkpoint: a checkpoint prefix; default `latest_checkpoint(model_dir)`, which skips
            damaged checkpoints with a warning (`warn`).

    Returns:
        `(model, checkpoint_path)`.

    Raises:
        FileNotFoundError: no checkpoint, or no checkpoint `checkpoint`.
        ValueError: `checkpoint` is damaged, or every checkpoint of the directory is.
    """
    config = read_config(model_dir)
    if checkpoint:
        if not os.path.isfile(checkpoint + ".index"):
            raise FileNotFoundError(f"{checkpoint}: no such checkpoint ({os.path.basename(checkpoint)}.index not "
                                    "found; expected a prefix such as MODEL_DIR/checkpoints/ckpt-1000)")
        readable_checkpoints.check_readable(checkpoint)
    else:
        checkpoint = latest_checkpoint(model_dir, warn=warn)
    if not checkpoint:
        raise FileNotFoundError(f"{model_dir}: no checkpoint in {CHECKPOINT_DIR}/, {BEST_DIR}/ or {AVERAGED_DIR}/")
    model = Transformer(config)
    model.build()
    tf.train.Checkpoint(model=model).read(checkpoint).expect_partial().assert_existing_objects_matched()
    return model, checkpoint
