"""A run's vocabulary: its tokenizers, loaded from MODEL_DIR/tokenizer or trained and saved there
(section 5.1), and the model sized to them (section 3.4)."""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from typing import Callable

from keras_transformer import cli
from keras_transformer.config import TransformerConfig
from keras_transformer.run_dir import layout
from pipelines.data_config import DataConfig

_print = functools.partial(print, flush=True)


def load_tokenizers(model_dir: str, data: DataConfig, save: bool = True, log: Callable[[str], None] = _print):
    """MODEL_DIR/tokenizer if saved (ids stay stable across resumes), else trained on the
    training split (section 5.1) and saved there when `save`. Returns (source, target)."""
    from pipelines import tokenizers  # pylint: disable=g-import-not-at-top

    started = time.time()
    with cli.silence_native_stderr():  # sentencepiece's C++ INFO lines
        source, target, trained = tokenizers.load_or_train_pair(
            os.path.join(model_dir, layout.TOKENIZER_DIR), lambda: data.load_pairs("train"),
            data.tokenizer_config(), save=save)
    if trained:
        log(f"tokenizer: {data.tokenizer}, {source.vocab_size} ids, trained in {time.time() - started:.1f} s")
    return source, target


def sized_model(model: TransformerConfig, source_tokenizer, target_tokenizer) -> TransformerConfig:
    """`model` with the trained vocabulary's sizes (section 3.4: one matrix when shared)."""
    shared = model.share_embeddings
    return dataclasses.replace(model, vocab_size=source_tokenizer.vocab_size,
                               target_vocab_size=None if shared else target_tokenizer.vocab_size)
