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
`optimizer`, `step`, `dropout_seeds` (the dropout layers' random state) and, in a run with
`--ema_decay`, `ema` (the moving average of the weights); `restore_model` reads only the model
part (with the moving average in place of the trainable weights when there is one:
`readable_checkpoints.read_model`), so translation and export work from either kind. An average of such checkpoints (`averaging`) averages their
moving averages and holds them as its `model`. A damaged checkpoint (see
`keras_transformer.run_dir.readable_checkpoints`) is skipped with a warning for the one before it;
one that a training run's rotation removed while it was being read is chosen again
(`restore_model`). A damaged directory (model_config.json that is not a run's settings, a file
where a folder belongs: `check_layout`; a list of checkpoints, best.json or a `checkpoint`
state file, naming one outside its own folder: `check_checkpoint_lists`) is a one-line
ValueError naming the path: a run reads, and training removes, only its own checkpoints. Reading a
run as the commands see it, its tokenizer as well (its fingerprint checked), is
`keras_transformer.training_directory.TrainingDirectory`'s: it reads the model's part here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Optional

from keras_transformer.config import TransformerConfig
from keras_transformer.files import json_files

if TYPE_CHECKING:
    from keras_transformer.model import Transformer

CONFIG_FILE = "model_config.json"  # a run's settings: what makes a folder a training directory
TOKENIZER_DIR = "tokenizer"
CHECKPOINT_DIR = "checkpoints"
AVERAGED_DIR = "averaged"
BEST_DIR = "best"
TRAIN_DIR = "train"
EVAL_DIR = "eval"
HISTORY_FILE = "history.json"  # in EVAL_DIR
WORKERS_DIR = "workers"
CACHE_DIR = "cache"
LOCK_FILE = ".lock"  # keras_transformer.training.run_lock
FOLDERS = (TOKENIZER_DIR, CHECKPOINT_DIR, AVERAGED_DIR, BEST_DIR, TRAIN_DIR, EVAL_DIR, WORKERS_DIR, CACHE_DIR)
FILES = (CONFIG_FILE, LOCK_FILE)
# The sections of model_config.json besides "model": each, when there, a JSON object.
SECTIONS = ("tokenizer", "training", "data", "decoding", "init_from")
# Rotation can remove the checkpoint chosen before it is read: choose again this many times.
READ_ATTEMPTS = 3


def write_config(model_dir: str, config: TransformerConfig, **extra: Any) -> str:
    """Saves the model config (and any JSON-able `extra` sections) as MODEL_DIR/model_config.json."""
    path = os.path.join(model_dir, CONFIG_FILE)
    json_files.write_json_atomically(path, {"model": config.to_dict(), **extra})
    return path


def check_layout(model_dir: str) -> None:
    """A one-line ValueError naming the path if `model_dir` is not a folder, or holds a file
    where the layout has a folder (checkpoints/, eval/, ...) or a folder where it has a file
    (model_config.json, .lock). Reads nothing but the names; a missing entry passes."""
    if os.path.exists(model_dir) and not os.path.isdir(model_dir):
        raise ValueError(f"{model_dir}: is a file, not a training directory")
    for names, is_kind, kind in ((FOLDERS, os.path.isdir, "a folder"), (FILES, os.path.isfile, "a file")):
        for name in names:
            path = os.path.join(model_dir, name)
            if os.path.lexists(path) and not is_kind(path):
                raise ValueError(f"{path}: is not {kind}, but a training directory keeps its {name} there: "
                                 "move it away")


def read_settings(model_dir: str) -> dict[str, Any]:
    """The whole model_config.json of a model directory: a JSON object whose "model" section
    (and each of `SECTIONS` there) is an object; else a one-line ValueError naming the file."""
    path = os.path.join(model_dir, CONFIG_FILE)
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{path}: not found; is {model_dir!r} a training directory?")
    settings = json_files.read_json(path, "the run's settings file")
    if not isinstance(settings, dict) or not isinstance(settings.get("model"), dict):
        found = type(settings).__name__ if not isinstance(settings, dict) else "no \"model\" object"
        raise ValueError(f"{path}: not a run's settings (a JSON object with a \"model\" object; found {found}): "
                         "restore it from a backup, or use another --model_dir")
    for name in SECTIONS:
        if name in settings and not isinstance(settings[name], dict):
            raise ValueError(f"{path}: its \"{name}\" section is not a JSON object: restore the file from a backup")
    return settings


def read_config(model_dir: str) -> TransformerConfig:
    """The TransformerConfig saved in a model directory; an unknown or invalid field is a
    one-line ValueError naming the file."""
    settings = read_settings(model_dir)
    try:
        return TransformerConfig.from_dict(settings["model"])
    except (ValueError, TypeError) as error:
        raise ValueError(f"{os.path.join(model_dir, CONFIG_FILE)}: {error}") from None


def recorded_fingerprint(model_dir: str) -> Optional[str]:
    """The tokenizer fingerprint (`keras_transformer.pipelines.tokenizers.fingerprint`) the run recorded in its
    model_config.json, None if it recorded none."""
    value = read_settings(model_dir).get("tokenizer", {}).get("sha256")
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{os.path.join(model_dir, CONFIG_FILE)}: its tokenizer.sha256 is not a string")
    return value


def check_checkpoint_lists(model_dir: str) -> None:
    """A one-line ValueError naming the file when one of the run's lists of checkpoints (the state
    files of checkpoints/ and averaged/, best/best.json) names a checkpoint outside its own
    folder (`readable_checkpoints.check_state_file`, `best_checkpoints.read_list`). Reads the
    lists, no checkpoint."""
    from keras_transformer.run_dir import best_checkpoints, readable_checkpoints  # pylint: disable=g-import-not-at-top

    for folder in (CHECKPOINT_DIR, AVERAGED_DIR):
        readable_checkpoints.check_state_file(os.path.join(model_dir, folder))
    best_checkpoints.read_list(os.path.join(model_dir, BEST_DIR))


def latest_checkpoint(model_dir: str, prefer_averaged: bool = True,
                      warn: Optional[Callable[[str], None]] = None) -> Optional[str]:
    """The checkpoint to translate with: the averaged one if readable (and preferred), else the
    best readable one of MODEL_DIR/best (a run that kept its best checkpoints by a dev metric),
    else the newest readable one of MODEL_DIR/checkpoints; None if there is none. `warn` gets one
    line for each damaged checkpoint skipped.

    Raises:
        ValueError: checkpoints exist but none of them is readable, or a list names a checkpoint
            outside its folder (`check_checkpoint_lists`).
    """
    from keras_transformer.run_dir import best_checkpoints, readable_checkpoints  # pylint: disable=g-import-not-at-top

    warn = warn or readable_checkpoints.warn_on_stderr
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
                  warn: Optional[Callable[[str], None]] = None) -> tuple["Transformer", str]:
    """Builds the model of a training directory and loads its weights.

    Args:
        model_dir: a training directory.
        checkpoint: a checkpoint prefix; default `latest_checkpoint(model_dir)`, which skips
            damaged checkpoints with a warning (`warn`). A default checkpoint that a training
            run's rotation removes before it is read is chosen again (`READ_ATTEMPTS` times).

    Returns:
        `(model, checkpoint_path)`.

    Raises:
        FileNotFoundError: no checkpoint, or no checkpoint `checkpoint`, or (`CheckpointRemoved`)
            it was removed while read.
        ValueError: `checkpoint` is damaged, or every checkpoint of the directory is, or the
            checkpoint does not fit model_config.json (told before anything is restored).
    """
    from keras_transformer.model import Transformer  # pylint: disable=g-import-not-at-top
    from keras_transformer.run_dir import readable_checkpoints  # pylint: disable=g-import-not-at-top

    warn = warn or readable_checkpoints.warn_on_stderr
    config = read_config(model_dir)
    if checkpoint:
        check_checkpoint_prefix(checkpoint)
        readable_checkpoints.check_readable(checkpoint)
    model = Transformer(config)
    model.build()
    source = os.path.join(model_dir, CONFIG_FILE)
    attempt = 1
    while True:
        chosen = checkpoint or latest_checkpoint(model_dir, warn=warn)
        if not chosen:
            raise FileNotFoundError(f"{model_dir}: no checkpoint in {CHECKPOINT_DIR}/, {BEST_DIR}/ or {AVERAGED_DIR}/")
        try:
            readable_checkpoints.read_model(model, chosen, source)
            return model, chosen
        except readable_checkpoints.CheckpointRemoved as error:
            if checkpoint:
                raise
            if attempt == READ_ATTEMPTS:
                raise readable_checkpoints.CheckpointRemoved(
                    f"{error}; the newest checkpoint was removed before it was read {READ_ATTEMPTS} times: "
                    "try again, or give --checkpoint") from None
        attempt += 1


def checkpoint_prefix_problem(prefix: str) -> Optional[str]:
    """None if `prefix` names a checkpoint (its PREFIX.index is a file), else why not, in words.
    Only the name is looked at, no TensorFlow: a command refuses a mistyped --checkpoint before
    TensorFlow starts (whether its files read completely is
    `keras_transformer.run_dir.readable_checkpoints`')."""
    if os.path.isfile(prefix + ".index"):
        return None
    return (f"no such checkpoint ({os.path.basename(prefix)}.index not found; expected a prefix such as "
            "MODEL_DIR/checkpoints/ckpt-1000)")


def check_checkpoint_prefix(prefix: str) -> None:
    """Raises a one-line `FileNotFoundError` "PREFIX: no such checkpoint ..." unless `prefix` names
    a checkpoint (`checkpoint_prefix_problem`)."""
    problem = checkpoint_prefix_problem(prefix)
    if problem:
        raise FileNotFoundError(f"{prefix}: {problem}")


def init_from_problem(path: str) -> Optional[str]:
    """None if `path` can name the model a new run starts from (`--init_from`): a folder, or a
    checkpoint prefix (its PATH.index is a file); else why not, in words. Only the name is looked
    at, no TensorFlow (what that run holds is `keras_transformer.tasks.fine_tuning.InitSource.resolve`'s check)."""
    if os.path.isdir(path) or os.path.isfile(path + ".index"):
        return None
    return "no such training directory or checkpoint prefix (e.g. RUN/checkpoints/ckpt-1000)"
