"""What a training directory must hold before a command resumes or reads it.

A run with checkpoints keeps its tokenizer (its embedding rows index those subwords) and its
model_config.json; the command's model and tokenizer must be the saved ones, and its tokenizer
flags those the run was trained with (`vocabulary.check_tokenizer_flags`: a saved tokenizer is reused, so
another --vocab_size would be silently ignored and recorded as if used). Each check is a
one-line `ValueError` raised before any work is written. Commands that only read a run open it
with `export.opened_run`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional

from export import opened_run
from keras_transformer.config import TransformerConfig
from keras_transformer.run_dir import layout, readable_checkpoints
from pipelines.data_config import DataConfig
from tasks.vocabulary import check_tokenizer_flags

if TYPE_CHECKING:
    from tasks.fine_tuning import InitSource



def _checkpoint_files(model_dir: str) -> list[str]:
    return readable_checkpoints.indexed_checkpoints(os.path.join(model_dir, layout.CHECKPOINT_DIR))


def has_checkpoints(model_dir: str) -> bool:
    """Whether MODEL_DIR/checkpoints holds any checkpoint (readable or not): the run resumes."""
    return bool(_checkpoint_files(model_dir))


def check_run_files(model_dir: str) -> bool:
    """Whether `model_dir` holds a run to resume; a one-line `ValueError` if that run has lost a
    file it cannot go on without. Checked before any tokenizer is trained.

    A run with checkpoints must keep its tokenizer (the embedding rows index its subwords: a new
    tokenizer would silently give them other meanings) and its model_config.json.
    """
    from pipelines import tokenizers  # pylint: disable=g-import-not-at-top

    checkpoints = _checkpoint_files(model_dir)
    has_config = os.path.isfile(os.path.join(model_dir, layout.CONFIG_FILE))
    tokenizer_dir = os.path.join(model_dir, layout.TOKENIZER_DIR)
    if checkpoints and not has_config:
        raise ValueError(f"{model_dir} has checkpoints ({os.path.basename(checkpoints[-1])}) but no "
                         f"{layout.CONFIG_FILE}: restore it from a backup, or use another --model_dir")
    if (checkpoints or has_config) and not tokenizers.is_saved(tokenizer_dir):
        raise ValueError(f"{tokenizer_dir}: missing or incomplete, but the run in {model_dir} was trained with "
                         "it (a new tokenizer would give its embeddings other subwords): restore the folder, "
                         "or use another --model_dir")
    return bool(checkpoints or has_config)


def check_resume(model_dir: str, config: TransformerConfig, tokenizer_fingerprint: Optional[str] = None,
                 init: Optional["InitSource"] = None, data: Optional[DataConfig] = None) -> None:
    """The command's model (and tokenizer, and with `data` its tokenizer flags) must be the saved
    one: a mismatch is a one-line `ValueError`. A run started from another model (`init`) and not
    yet saved may change its training settings (`InitSource.check` compares it with that model)."""
    if not os.path.isfile(os.path.join(model_dir, layout.CONFIG_FILE)):
        return
    saved = layout.read_config(model_dir).to_dict()
    if init is not None:
        return
    if data is not None:
        check_tokenizer_flags(model_dir, data, model_dir)
    wanted = config.to_dict()
    diff = [f"{k}={saved[k]!r} (saved) vs {wanted[k]!r} (flags)" for k in sorted(saved) if saved[k] != wanted.get(k)]
    if diff:
        raise ValueError(f"{model_dir} holds a different model: {'; '.join(diff)}; use another --model_dir")
    if tokenizer_fingerprint:
        opened_run.check_fingerprint(model_dir, tokenizer_fingerprint)
