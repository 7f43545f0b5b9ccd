"""A training directory opened for reading: the one way every command reads a run.

    run = open_run(model_dir)           # its settings, model config and tokenizers, checked
    model, checkpoint = run.restore()   # averaged, else best, else newest readable checkpoint

Export (SavedModel and CTranslate2), `translate --model_dir`, `parse --model_dir`, `score`,
`--evaluate_only`, `average_checkpoints` and `--init_from` open a run here, so each refuses a
damaged or mismatched run the same way, with one `ValueError` / `FileNotFoundError` line (the
commands' `error:` line, exit 2), before a model is built or a checkpoint read:

* MODEL_DIR is a folder laid out as `keras_transformer.run_dir.layout` says (no file where a
  folder belongs, `layout.check_layout`) whose model_config.json holds a run's settings
  (`layout.read_config`);
* MODEL_DIR/tokenizer loads, and is the tokenizer the run was trained with: the fingerprint
  model_config.json recorded (`pipelines.tokenizers.fingerprint`, written by training) and no
  more ids than the model has embedding rows. A tokenizer swapped for another run's would make
  an export that fails at serving ("Invalid id: 322") or translations of other subwords;
* `restore` (`layout.restore_model`): a damaged checkpoint is skipped with a warning, one that a
  training run's rotation removes before it is read is chosen again, one that does not fit the
  config is refused before anything is restored, and no path is read as a glob pattern.

It lives in export/ because it joins the model core (`keras_transformer.run_dir`) with the
tokenizers (`pipelines`): the lowest layer that may import both. `tasks/` and the commands use it;
training uses `check_fingerprint` on every resume.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Optional

from keras_transformer import cli
from keras_transformer.config import TransformerConfig
from keras_transformer.run_dir import layout, readable_checkpoints
from pipelines import tokenizers as tokenizers_lib


@dataclasses.dataclass(frozen=True)
class OpenedRun:
    """A training directory whose settings and tokenizers were read and checked (`open_run`).

    Attributes:
        model_dir: the training directory.
        settings: its whole model_config.json.
        config: the model's `TransformerConfig`.
        source_tokenizer, target_tokenizer: its tokenizers (one object when shared; None for
            a run without one opened with `need_tokenizer=False`).
        fingerprint: their `pipelines.tokenizers.fingerprint`, the one the run recorded.
    """

    model_dir: str
    settings: dict[str, Any]
    config: TransformerConfig
    source_tokenizer: Any
    target_tokenizer: Any
    fingerprint: Optional[str]

    def restore(self, checkpoint: Optional[str] = None,
                warn: Callable[[str], None] = readable_checkpoints.warn_on_stderr):
        """`(model, checkpoint_path)`: the model with the weights of `checkpoint`, default the
        averaged, else best, else newest readable one (`layout.restore_model`)."""
        return layout.restore_model(self.model_dir, checkpoint, warn=warn)


def open_run(model_dir: str, need_tokenizer: bool = True) -> OpenedRun:
    """Reads and checks a training directory for a command that reads it (module docstring).
    With `need_tokenizer=False` (averaging, which reads only checkpoints) a run without a
    saved tokenizer opens too; one that has a tokenizer gets it checked all the same.

    Raises:
        FileNotFoundError: no such folder, no model_config.json, no saved tokenizer (when needed).
        ValueError: a damaged layout or model_config.json, a tokenizer that does not load or is
            not the one the run was trained with.
    """
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"{model_dir}: no such training directory")
    layout.check_layout(model_dir)
    settings = layout.read_settings(model_dir)
    config = layout.read_config(model_dir)
    tokenizer_dir = os.path.join(model_dir, layout.TOKENIZER_DIR)
    if not need_tokenizer and not os.path.lexists(tokenizer_dir):
        return OpenedRun(model_dir, settings, config, None, None, None)
    if not tokenizers_lib.is_saved(tokenizer_dir):
        raise FileNotFoundError(f"{tokenizer_dir}: no saved tokenizer; a run cannot be read without the tokenizer "
                                "it was trained with")
    source, target = load_tokenizers(tokenizer_dir)
    fingerprint = tokenizers_lib.fingerprint(source, target)
    check_fingerprint(model_dir, fingerprint)
    for side, tokenizer, rows in (("source", source, config.vocab_size),
                                  ("target", target, config.target_vocab_size or config.vocab_size)):
        if tokenizer.vocab_size > rows:
            raise ValueError(f"{tokenizer_dir}: its {side} tokenizer has {tokenizer.vocab_size} ids but the model of "
                             f"{os.path.join(model_dir, layout.CONFIG_FILE)} only {rows} embedding rows: not the "
                             "run's tokenizer; restore the original folder")
    return OpenedRun(model_dir, settings, config, source, target, fingerprint)


def load_tokenizers(tokenizer_dir: str):
    """`(source, target)` saved in `tokenizer_dir`; a damaged one is a one-line ValueError naming it."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    try:
        with cli.silence_native_stderr():  # sentencepiece's C++ INFO lines
            return tokenizers_lib.load_pair(tokenizer_dir)
    except (ValueError, KeyError, TypeError, OSError, RuntimeError, tf.errors.OpError) as error:
        reason = " ".join(str(error).split()) or type(error).__name__
        raise ValueError(f"{tokenizer_dir}: not a readable tokenizer ({type(error).__name__}: {reason}); restore "
                         "the run's tokenizer folder") from None


def check_fingerprint(model_dir: str, fingerprint: str) -> None:
    """A one-line ValueError unless `fingerprint` (of the tokenizer in MODEL_DIR/tokenizer) is the
    one MODEL_DIR/model_config.json recorded; a run that recorded none passes."""
    recorded = layout.recorded_fingerprint(model_dir)
    if recorded and recorded != fingerprint:
        raise ValueError(f"{os.path.join(model_dir, layout.TOKENIZER_DIR)}: not the tokenizer the run was "
                         f"trained with (sha256 {fingerprint[:12]}, recorded {recorded[:12]}); restore the "
                         "original folder, or use another --model_dir")
