"""The training directories of an ensemble (`--ensemble_model_dirs`), checked before TensorFlow starts.

    others = parse_dirs("runs/b,runs/c")            # ["runs/b", "runs/c"]
    check_members("runs/a", others)                 # one-line ValueError, else nothing

An ensemble (`keras_transformer.decoding.ensemble`) reads one source and averages its members'
next-token probabilities id by id: its members must read the same ids and mean the same token
by each id. Each run's model_config.json is read as JSON (`TrainingDirectory.settings`, no TensorFlow) and compared with
--model_dir's (`check_members`):

* the tokenizer: the fingerprint the runs recorded (`keras_transformer.pipelines.tokenizers.fingerprint`, in
  model_config.json's "tokenizer" section), or, for a run that recorded none, the bytes of
  its tokenizer/ folder (`check_same_vocabulary`);
* the vocabulary of the model: `config.VOCABULARY_FIELDS` (sizes, shared embeddings, PAD id;
  BOS and EOS are the project's constants, `keras_transformer.special_ids`);
* what a parsing run reads and writes (`check_same_data`): its source tags and tree targets
  (`DATA_SETTINGS`, the "data" section; a run without them, e.g. a translation run, has the
  defaults) and, with predicted tags, its tagger (MODEL_DIR/tagger.json). The input is tagged
  once, by --model_dir's tagger, and every member reads it. A tagger is trained
  deterministically on the treebank's training split (`keras_transformer.pipelines.pos_tags.train_tagger`), so
  runs of one treebank that differ in their seed hold the same one; another tagger means a
  member trained on other tags (another split or treebank), which would read tags unlike those
  it learned from, so it is refused rather than accepted in silence.

Shapes (layers, d_model, heads, positions) may differ. Opening each run afterwards
(`keras_transformer.training_directory.TrainingDirectory.open`) checks its tokenizer against its own record, as for a single model.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Optional

from keras_transformer.config import VOCABULARY_FIELDS
from keras_transformer.pipelines import pos_tags
from keras_transformer.training_directory import TrainingDirectory

# The data settings that change what a model reads or writes, and their value in a run that
# recorded none (`keras_transformer.pipelines.data_config.DataConfig`'s defaults: words alone, trees of words).
DATA_SETTINGS = {"source_tags": "none", "tree_targets": "words"}


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
    return TrainingDirectory(model_dir).settings()


def _tokenizer(model_dir: str, settings: dict) -> tuple[str, str]:
    """(how the tokenizer is identified, its identity): the recorded fingerprint, else the
    SHA-256 of the tokenizer folder's files (names and bytes)."""
    recorded = (settings.get("tokenizer") or {}).get("sha256") if isinstance(settings.get("tokenizer"), dict) else None
    if recorded:
        return "fingerprint", recorded
    digest = hashlib.sha256()
    folder = TrainingDirectory(model_dir).tokenizer_dir
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, folder).encode("utf-8") + b"\0")
            with open(path, "rb") as file:
                digest.update(file.read())
    return "files", digest.hexdigest()


def check_members(model_dir: str, others: list[str]) -> None:
    """A one-line ValueError (FileNotFoundError for a missing run or tagger) unless every run of
    `others` reads and writes as `model_dir` does: `check_same_vocabulary`, then
    `check_same_data` (module docstring). Reads only JSON and tokenizer files."""
    check_same_vocabulary(model_dir, others)
    check_same_data(model_dir, others)


def _data(settings: dict) -> dict:
    data = settings.get("data") if isinstance(settings.get("data"), dict) else {}
    return {name: data.get(name, default) for name, default in DATA_SETTINGS.items()}


def _tagger(model_dir: str):
    """The saved tagger of a run (`keras_transformer.pipelines.pos_tags.save`'s JSON), as read."""
    path = os.path.join(model_dir, pos_tags.TAGGER_FILE)
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: not found; a run trained with --source_tags=predicted keeps its "
                                "tagger there") from None
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a saved part-of-speech tagger ({type(error).__name__})") from None


def check_same_data(model_dir: str, others: list[str]) -> None:
    """A one-line ValueError unless every run of `others` has the source tags and tree targets
    of `model_dir` (`DATA_SETTINGS`) and, with predicted tags, its tagger (module docstring)."""
    first = _data(_settings(model_dir))
    first_tagger = _tagger(model_dir) if first["source_tags"] == "predicted" else None
    for other in others:
        data = _data(_settings(other))
        for name in DATA_SETTINGS:
            if data[name] != first[name]:
                raise ValueError(f"--ensemble_model_dirs: {other} was trained with --{name}={data[name]}, "
                                 f"--model_dir={model_dir} with --{name}={first[name]}: an ensemble's models must "
                                 "read and write alike")
        if first_tagger is not None and _tagger(other) != first_tagger:
            raise ValueError(f"--ensemble_model_dirs: {other} has another part-of-speech tagger than --model_dir="
                             f"{model_dir} (one of another treebank): --model_dir's tagger tags the input of every "
                             "model, so each must have been trained with its tags")


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
