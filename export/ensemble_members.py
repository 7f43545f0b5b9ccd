"""The training directories of an ensemble (`--ensemble_model_dirs`), checked before TensorFlow starts.

    others = parse_dirs("runs/b,runs/c")            # ["runs/b", "runs/c"]
    check_same_vocabulary("runs/a", others)         # one-line ValueError, else nothing

An ensemble (`keras_transformer.decoding.ensemble`) averages its members' next-token
probabilities id by id: its members must mean the same token by each id. Each run's
model_config.json is read as JSON (no TensorFlow) and compared with --model_dir's:

* the tokenizer: the fingerprint the runs recorded (`pipelines.tokenizers.fingerprint`, in
  model_config.json's "tokenizer" section), or, for a run that recorded none, the bytes of
  its tokenizer/ folder;
* the vocabulary of the model: `config.VOCABULARY_FIELDS` (sizes, shared embeddings, PAD id;
  BOS and EOS are the project's constants, `keras_transformer.special_ids`).

Shapes (layers, d_model, heads, positions) may differ. Opening each run afterwards
(`export.opened_run`) checks its tokenizer against its own record, as for a single model.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Optional

from keras_transformer.config import VOCABULARY_FIELDS

CONFIG_FILE = "model_config.json"  # keras_transformer.run_dir.layout's names, without importing TensorFlow
TOKENIZER_DIR = "tokenizer"


def parse_dirs(value: Optional[str]) -> list[str]:
    """The comma-separated folders of `--ensemble_model_dirs` ([] for None or ""); an empty
    entry ("a,,b", a trailing comma) is a one-line ValueError."""
    if not value:
        return []
    dirs = [part.strip() for part in value.split(",")]
    if not all(dirs):
        raise ValueError(f"--ensemble_model_dirs={value}: an empty entry; give training directories "
                         "separated by commas")
    return dirs


def _settings(model_dir: str) -> dict:
    path = os.path.join(model_dir, CONFIG_FILE)
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"{model_dir}: no such training directory")
    try:
        with open(path, encoding="utf-8") as file:
            settings = json.load(file)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: not found; is {model_dir!r} a training directory?") from None
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a run's settings ({type(error).__name__})") from None
    if not isinstance(settings, dict) or not isinstance(settings.get("model"), dict):
        raise ValueError(f"{path}: not a run's settings (no \"model\" object)")
    return settings


def _tokenizer(model_dir: str, settings: dict) -> tuple[str, str]:
    """(how the tokenizer is identified, its identity): the recorded fingerprint, else the
    SHA-256 of the tokenizer folder's files (names and bytes)."""
    recorded = (settings.get("tokenizer") or {}).get("sha256") if isinstance(settings.get("tokenizer"), dict) else None
    if recorded:
        return "fingerprint", recorded
    digest = hashlib.sha256()
    folder = os.path.join(model_dir, TOKENIZER_DIR)
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, folder).encode("utf-8") + b"\0")
            with open(path, "rb") as file:
                digest.update(file.read())
    return "files", digest.hexdigest()


def check_same_vocabulary(model_dir: str, others: list[str]) -> None:
    """A one-line ValueError (FileNotFoundError for a missing run) unless every run of `others`
    has the vocabulary of `model_dir` (module docstring); reads only JSON and tokenizer files."""
    first = _settings(model_dir)
    first_tokenizer = _tokenizer(model_dir, first)
    for other in others:
        settings = _settings(other)
        for name in VOCABULARY_FIELDS:
            ours, theirs = first["model"].get(name), settings["model"].get(name)
            if ours != theirs:
                raise ValueError(f"--ensemble_model_dirs: {other} has {name}={theirs!r}, --model_dir={model_dir} "
                                 f"{ours!r}: an ensemble's models must share one vocabulary")
        (kind, ours), (their_kind, theirs) = first_tokenizer, _tokenizer(other, settings)
        if kind != their_kind:  # one run recorded its fingerprint, the other not: compare the files
            ours, theirs = _tokenizer(model_dir, {})[1], _tokenizer(other, {})[1]
        if ours != theirs:
            raise ValueError(f"--ensemble_model_dirs: {other} was trained with another tokenizer than "
                             f"--model_dir={model_dir} (sha256 {theirs[:12]}, {ours[:12]}): an ensemble's "
                             "models must share one vocabulary")
