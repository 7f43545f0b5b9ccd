"""A run's vocabulary: its tokenizers, loaded from MODEL_DIR/tokenizer or trained and saved there
(section 5.1), the model sized to them (section 3.4), and the tokenizer flags a run that reuses
them must repeat (`check_flags`). `TrainingDirectory` calls these; `sized_model` and
`check_placeholder` are for whoever holds a model config and a tokenizer."""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import TYPE_CHECKING, Callable

from keras_transformer import cli
from keras_transformer.config import TransformerConfig

if TYPE_CHECKING:
    from keras_transformer.pipelines.data_config import DataConfig

_print = functools.partial(print, flush=True)

# The data flags a tokenizer is trained with (`DataConfig.tokenizer_config`; source_tags: on
# tagged sources; tree_targets: on targets with placeholders, "XX" one piece): a run's saved
# tokenizer is reused, so these cannot change on a resume or a run started from it.
TOKENIZER_FLAGS = ("tokenizer", "vocab_size", "shared_vocab", "lowercase", "split_by_script", "source_tags",
                   "tree_targets")


def load_saved(tokenizer_dir: str):
    """`(source, target)` saved in `tokenizer_dir`; a damaged one is a one-line ValueError naming it."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    from keras_transformer.pipelines import tokenizers  # pylint: disable=g-import-not-at-top

    try:
        with cli.silence_native_stderr():  # sentencepiece's C++ INFO lines
            return tokenizers.load_pair(tokenizer_dir)
    except (ValueError, KeyError, TypeError, OSError, RuntimeError, tf.errors.OpError) as error:
        reason = " ".join(str(error).split()) or type(error).__name__
        raise ValueError(f"{tokenizer_dir}: not a readable tokenizer ({type(error).__name__}: {reason}); restore "
                         "the run's tokenizer folder") from None


def load_or_train(tokenizer_dir: str, data: "DataConfig", save: bool = True, log: Callable[[str], None] = _print):
    """`tokenizer_dir`'s tokenizers if saved, else trained on `data`'s training split (section 5.1)
    and saved there when `save`. Returns (source, target)."""
    from keras_transformer.pipelines import tokenizers  # pylint: disable=g-import-not-at-top

    started = time.time()
    with cli.silence_native_stderr():  # sentencepiece's C++ INFO lines
        source, target, trained = tokenizers.load_or_train_pair(
            tokenizer_dir, lambda: data.load_pairs("train"), data.tokenizer_config(), save=save)
    if trained:
        log(f"tokenizer: {data.tokenizer}, {source.vocab_size} ids, trained in {time.time() - started:.1f} s")
    if data.tree_targets == "placeholders":
        check_placeholder(target)
    return source, target


def check_placeholder(tokenizer) -> None:
    """A one-line `ValueError` unless `tokenizer` writes the placeholder of tree targets, "XX"
    (`keras_transformer.pipelines.linearized_trees.WORD`), as one id of its own: else a target word is not one
    token and the tree constraint cannot write it (a tokenizer trained before
    --tree_targets=placeholders existed, or taken from another run by --init_from)."""
    from keras_transformer.special_ids import UNK_ID  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import linearized_trees  # pylint: disable=g-import-not-at-top

    ids = tokenizer.tokenize([linearized_trees.WORD]).to_list()[0]
    if len(ids) != 1 or ids[0] == UNK_ID:
        raise ValueError(f"--tree_targets=placeholders: the run's tokenizer writes the placeholder "
                         f"{linearized_trees.WORD!r} as {len(ids)} ids {ids}, not one piece of its own; train a new "
                         "tokenizer (a new --model_dir, without --init_from) with --tree_targets=placeholders")


def sized_model(model: TransformerConfig, source_tokenizer, target_tokenizer) -> TransformerConfig:
    """`model` with the trained vocabulary's sizes (section 3.4: one matrix when shared)."""
    shared = model.share_embeddings
    return dataclasses.replace(model, vocab_size=source_tokenizer.vocab_size,
                               target_vocab_size=None if shared else target_tokenizer.vocab_size)


def check_flags(recorded: dict, data: "DataConfig", run: str, advice: str = "",
                names: tuple = TOKENIZER_FLAGS) -> None:
    """A one-line `ValueError` naming the first of `names` whose value in `data` differs from the
    one `recorded` (a run's "data" section) holds, and that value. `run` names the run in the
    message; `advice` ends it (default: use another --model_dir)."""
    wanted = dataclasses.asdict(data)
    for name in names:
        if name in recorded and recorded[name] != wanted[name]:
            raise ValueError(f"--{name}={_flag_value(wanted[name])}: {run} was trained with "
                             f"--{name}={_flag_value(recorded[name])}, and its tokenizer is reused: give "
                             f"--{name}={_flag_value(recorded[name])}{advice or ', or use another --model_dir'}")


def _flag_value(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
