"""A training directory from before the encoder and the decoder had their own depths.

`OLD_MODEL_CONFIG` is the model_config.json that `python -m keras_transformer.train
--flagfile=configs/tiny.flags --train_steps=20` wrote then, verbatim: its model has `num_layers`
alone. `make_old_run(path)` turns a finished run of the tiny recipe (`train_runs.shared_tiny_run`,
the same model) into such a run: that file written over its own, so what reads it reads the old form.
"""

from __future__ import annotations

import json

OLD_MODEL_CONFIG = r"""{
  "data": {
    "batch_tokens": 512,
    "bpe_dropout": 0.0,
    "cache": "auto",
    "data_dir": null,
    "dataset": "embedded",
    "dev_split": "validation",
    "lowercase": false,
    "max_length": 32,
    "seed": 0,
    "shared_vocab": true,
    "shuffle_buffer": 200000,
    "source_file": null,
    "source_tags": "none",
    "split_by_script": true,
    "tagger_file": null,
    "target_file": null,
    "tfds_dir": null,
    "tokenizer": "bpe",
    "train_files": [],
    "tree_targets": "words",
    "vocab_size": 500
  },
  "decoding": {
    "alpha": 0.6,
    "beam_size": 1,
    "max_extra_length": 50,
    "n_best": 1,
    "tree_constraint": false
  },
  "model": {
    "attention_dropout_rate": 0.0,
    "d_ff": 64,
    "d_k": null,
    "d_model": 32,
    "d_v": null,
    "dropout_rate": 0.0,
    "label_smoothing": 0.1,
    "layer_norm": "post",
    "layer_norm_epsilon": 1e-06,
    "max_length": 32,
    "num_heads": 2,
    "num_layers": 2,
    "pad_id": 0,
    "positional_encoding": "sinusoidal",
    "relu_dropout_rate": 0.0,
    "share_embeddings": true,
    "source_word_dropout_rate": 0.0,
    "target_vocab_size": null,
    "vocab_size": 500
  },
  "tokenizer": {
    "sha256": "c101910f2926943118d2c9e88171f8211bb174f0626f3b67607bacf95f4a7f51"
  },
  "training": {
    "accumulation_steps": 1,
    "average_last": 0,
    "best_checkpoint_metric": "bleu",
    "checkpoint_every_minutes": 0.0,
    "checkpoint_every_steps": 10,
    "clip_norm": 0.0,
    "cooldown_steps": 0,
    "early_stopping_patience": 0,
    "ema_decay": 0.0,
    "eval_every_steps": 1000,
    "keep_best_checkpoints": 0,
    "keep_checkpoints": 5,
    "learning_rate_scale": 2.0,
    "log_every_steps": 10,
    "max_train_minutes": 0.0,
    "precision": "float32",
    "rdrop_alpha": 0.0,
    "seed": 0,
    "train_steps": 20,
    "warmup_steps": 30,
    "xla": false
  }
}
"""


def make_old_run(path) -> None:
    """Writes `OLD_MODEL_CONFIG` over the model_config.json of the tiny run in `path` (a
    `pathlib.Path`), its tokenizer fingerprint replaced by the run's own (the same recipe trains
    the same tokenizer; a sentencepiece release might not)."""
    own = json.loads((path / "model_config.json").read_text(encoding="utf-8"))["tokenizer"]["sha256"]
    old = json.loads(OLD_MODEL_CONFIG)["tokenizer"]["sha256"]
    (path / "model_config.json").write_text(OLD_MODEL_CONFIG.replace(old, own), encoding="utf-8")
