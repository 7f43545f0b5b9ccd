"""Small text files for the data and command tests."""

from __future__ import annotations

import gzip
import json
import pathlib


def write_lines(path: pathlib.Path, lines, gz: bool = False) -> str:
    """Writes each of `lines` plus "\\n" as UTF-8 (gzipped if `gz`); returns the path as a string."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return str(path)


def write_run_settings(path: pathlib.Path, vocab_size=500, sha256="a" * 64, tokenizer_bytes=None, data=None,
                       tagger=None, **model) -> str:
    """A training directory without a model: its model_config.json ("model" vocabulary fields and
    `model`, the tokenizer's `sha256`, the `data` section if given) and, when given, tokenizer
    files (`tokenizer_bytes`) and a tagger.json (`tagger`, JSON): what `keras_transformer.export.ensemble_members`
    and the commands read before TensorFlow starts. Returns the path as a string."""
    from keras_transformer.run_dir import layout  # pylint: disable=import-outside-toplevel  (no TensorFlow)
    from keras_transformer.pipelines import pos_tags  # pylint: disable=import-outside-toplevel

    path.mkdir(parents=True)
    settings = {"model": {"vocab_size": vocab_size, "target_vocab_size": None, "share_embeddings": True,
                          "pad_id": 0, **model}}
    if sha256:
        settings["tokenizer"] = {"sha256": sha256}
    if data is not None:
        settings["data"] = data
    (path / layout.CONFIG_FILE).write_text(json.dumps(settings))
    if tokenizer_bytes is not None:
        (path / layout.TOKENIZER_DIR).mkdir()
        (path / layout.TOKENIZER_DIR / "tokenizer.model").write_bytes(tokenizer_bytes)
    if tagger is not None:
        (path / pos_tags.TAGGER_FILE).write_text(json.dumps(tagger))
    return str(path)
