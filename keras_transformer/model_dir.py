"""The layout of a training directory, shared by training, translation and export.

    MODEL_DIR/
      model_config.json     the TransformerConfig (and the run's other settings)
      tokenizer/            the subword tokenizer(s), written by pipelines/
      checkpoints/          tf.train.CheckpointManager: ckpt-<step>.*, "checkpoint"
      averaged/             the average of the last checkpoints (section 6.1), if made
      train/                TensorBoard scalars of training
      eval/                 TensorBoard scalars of the dev evaluations, history.json (every
                            evaluation of the run) and the translations of --evaluate_only
      workers/worker-<i>/   a non-chief worker's copy of each checkpoint (multi-worker runs)

A checkpoint holds `model` (the Transformer's variables) and, for training,
`optimizer` and `step`; `restore_model` reads only the model part, so
translation and export work from either kind.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Optional

import tensorflow as tf

from keras_transformer.config import TransformerConfig
from keras_transformer.model import Transformer

CONFIG_FILE = "model_config.json"
TOKENIZER_DIR = "tokenizer"
CHECKPOINT_DIR = "checkpoints"
AVERAGED_DIR = "averaged"
TRAIN_DIR = "train"
EVAL_DIR = "eval"
HISTORY_FILE = "history.json"  # in EVAL_DIR
WORKERS_DIR = "workers"


def write_json_atomically(path: str, values: dict[str, Any]) -> None:
    """Writes JSON to a temporary file beside `path`, then renames it: never a half-written file."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(values, file, indent=2, sort_keys=True)
            file.write("\n")
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


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


def latest_checkpoint(model_dir: str, prefer_averaged: bool = True) -> Optional[str]:
    """The checkpoint to translate with: the averaged one if present (and preferred), else the latest."""
    if prefer_averaged:
        averaged = tf.train.latest_checkpoint(os.path.join(model_dir, AVERAGED_DIR))
        if averaged:
            return averaged
    return tf.train.latest_checkpoint(os.path.join(model_dir, CHECKPOINT_DIR))


def restore_model(model_dir: str, checkpoint: Optional[str] = None) -> tuple[Transformer, str]:
    """Builds the model of a training directory and loads its weights.

    Args:
        model_dir: a training directory.
        checkpoint: a checkpoint prefix; default `latest_checkpoint(model_dir)`.

    Returns:
        `(model, checkpoint_path)`.
    """
    config = read_config(model_dir)
    checkpoint = checkpoint or latest_checkpoint(model_dir)
    if not checkpoint:
        raise FileNotFoundError(f"{model_dir}: no checkpoint in {CHECKPOINT_DIR}/ or {AVERAGED_DIR}/")
    model = Transformer(config)
    model.build()
    tf.train.Checkpoint(model=model).read(checkpoint).expect_partial().assert_existing_objects_matched()
    return model, checkpoint
