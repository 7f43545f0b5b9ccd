"""A training directory (MODEL_DIR) as every command sees it: the one owner of a run on disk.

    run = TrainingDirectory(model_dir)
    run.check_exists()                  # before TensorFlow: a folder holding model_config.json
    opened = run.open()                 # its settings, model config and tokenizers, checked
    model, checkpoint = opened.restore()  # averaged, else best, else newest readable checkpoint

Training (a new run, a resume, `--init_from`), the dev evaluation (`--evaluate_only`),
`translate`, `score`, `parse`, `average_checkpoints` and `export` (SavedModel and CTranslate2,
ensembles too) read a run here, so each refuses a damaged or mismatched run the same way, with
one `ValueError` / `FileNotFoundError` line (the commands' `error:` line, exit 2), before a model
is built or a checkpoint read:

* MODEL_DIR is a folder laid out as `keras_transformer.run_dir.layout` says (no file where a
  folder belongs) whose model_config.json holds a run's settings;
* MODEL_DIR/tokenizer loads and is the tokenizer the run was trained with: the fingerprint
  model_config.json recorded (`keras_transformer.pipelines.tokenizers.fingerprint`, written by training) and no
  more ids than the model has embedding rows. A tokenizer swapped for another run's would make
  an export that fails at serving ("Invalid id: 322") or translations of other subwords;
* the checkpoint (`restore`, `keras_transformer.run_dir.layout.restore_model`): a damaged one is
  skipped with a warning, one that a training run's rotation removes before it is read is chosen
  again, one that does not fit the config is refused before anything is restored, and no path is
  read as a glob pattern;
* a run to resume (`check_resumable`, `check_resume`) keeps its tokenizer (the embedding rows
  index its subwords) and its model_config.json, and the command's model, tokenizer, tokenizer
  flags, data set and moving average of the weights are the saved ones;
* every checkpoint the run's own files name (best/best.json, the state files of checkpoints/ and
  averaged/) lies inside its folder, and a `--checkpoint` of another run is read only when that run
  recorded this run's tokenizer fingerprint: nothing outside the run is read as its own or deleted.

The model's files (layout, settings, checkpoints) are the model core's
(`keras_transformer.run_dir`); the tokenizers are `keras_transformer.pipelines.tokenizers`'; a run is both, so its
owner sits on both layers, below the export and the tasks that use it. Importing this module
loads no TensorFlow: the commands check a --model_dir before TensorFlow starts.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, Callable, Optional

from keras_transformer.config import TransformerConfig
from keras_transformer.run_dir import layout
from keras_transformer.training_directory import vocabulary

if TYPE_CHECKING:
    from keras_transformer.pipelines.data_config import DataConfig


class TrainingDirectory:
    """The training directory `path` (it need not exist yet: training creates it).

    Reading methods raise one-line `ValueError` / `FileNotFoundError`s that name the file.
    """

    def __init__(self, path: str):
        self.path = path

    def __repr__(self) -> str:
        return f"TrainingDirectory({self.path!r})"

    def join(self, *names: str) -> str:
        """A path inside the directory (`layout`'s names: `run.join(layout.EVAL_DIR)`)."""
        return os.path.join(self.path, *names)

    @property
    def tokenizer_dir(self) -> str:
        return self.join(layout.TOKENIZER_DIR)

    @property
    def settings_file(self) -> str:
        return self.join(layout.CONFIG_FILE)

    # Before TensorFlow starts ------------------------------------------------------

    def check_exists(self, flag: str = "model_dir") -> None:
        """A one-line error unless the directory (the value of --`flag`) is a folder holding a
        run's model_config.json: a command that reads a run refuses a mistyped path before
        TensorFlow starts (what the run holds is `open`'s check)."""
        if os.path.isfile(self.path):
            raise ValueError(f"--{flag}={self.path}: is a file, not a training directory")
        if not os.path.isdir(self.path):
            raise FileNotFoundError(f"--{flag}={self.path}: no such training directory")
        if not os.path.lexists(self.settings_file):
            raise FileNotFoundError(f"--{flag}={self.path}: not a training directory (no {layout.CONFIG_FILE} "
                                    "in it)")

    def has_settings(self) -> bool:
        """Whether model_config.json is there (a run that was started)."""
        return os.path.isfile(self.settings_file)

    def settings(self) -> dict[str, Any]:
        """The whole model_config.json (`layout.read_settings`: a JSON object whose sections are
        objects); a folder that does not exist is a one-line FileNotFoundError."""
        if not os.path.isdir(self.path):
            raise FileNotFoundError(f"{self.path}: no such training directory")
        return layout.read_settings(self.path)

    def config(self) -> TransformerConfig:
        """The model's `TransformerConfig` saved in model_config.json."""
        return layout.read_config(self.path)

    def recorded_fingerprint(self) -> Optional[str]:
        """The tokenizer fingerprint the run recorded (None if it recorded none)."""
        return layout.recorded_fingerprint(self.path)

    def write_settings(self, config: TransformerConfig, **sections: Any) -> str:
        """Saves the model config and the run's other `sections` as model_config.json, atomically."""
        return layout.write_config(self.path, config, **sections)

    # Checkpoints -------------------------------------------------------------------

    def checkpoint_files(self) -> list[str]:
        """The checkpoint prefixes of MODEL_DIR/checkpoints, readable or not (no TensorFlow)."""
        from keras_transformer.run_dir import readable_checkpoints  # pylint: disable=g-import-not-at-top

        return readable_checkpoints.indexed_checkpoints(self.join(layout.CHECKPOINT_DIR))

    def has_checkpoints(self) -> bool:
        """Whether MODEL_DIR/checkpoints holds any checkpoint (readable or not): the run resumes."""
        return bool(self.checkpoint_files())

    def latest_checkpoint(self, prefer_averaged: bool = True) -> Optional[str]:
        """The checkpoint a command reads by default (`layout.latest_checkpoint`): averaged, else the
        best, else the newest readable one; None if there is none. A list of the run's that names a
        checkpoint outside its folder is a one-line ValueError naming the list."""
        return layout.latest_checkpoint(self.path, prefer_averaged=prefer_averaged)

    def restore(self, checkpoint: Optional[str] = None, warn: Optional[Callable[[str], None]] = None,
                fingerprint: Optional[str] = None):
        """`(model, checkpoint_path)`: the run's model with the weights of `checkpoint`, default the
        averaged, else best, else newest readable one (`layout.restore_model`). A `checkpoint` of
        another run is read only when that run was trained with this run's tokenizer
        (`check_checkpoint`; `fingerprint`: this run's tokenizer's, default the one it recorded)."""
        if checkpoint:
            self.check_checkpoint(checkpoint, fingerprint)
        return layout.restore_model(self.path, checkpoint, warn=warn)

    def check_checkpoint(self, checkpoint: str, fingerprint: Optional[str] = None) -> None:
        """A one-line error unless the checkpoint prefix `checkpoint` (a command's --checkpoint) may be
        read into this run's model: it is the run's own (its files are below MODEL_DIR, compared by
        real paths, so no `..` or symbolic link leads elsewhere), or it is another run's (that run's
        folder: the one holding its checkpoints/, best/ or averaged/) whose model_config.json
        records the tokenizer fingerprint `fingerprint` (default: the one this run recorded). The
        model's shapes tell another vocabulary size, not another tokenizer of the same size, whose
        weights would read this run's ids as other subwords. Reads no checkpoint.

        Raises:
            FileNotFoundError: no such checkpoint (`layout.check_checkpoint_prefix`).
            ValueError: a checkpoint outside any training directory, or of a run trained with
                another tokenizer (or one that recorded none), naming both runs.
        """
        layout.check_checkpoint_prefix(checkpoint)
        index, home = os.path.realpath(checkpoint + ".index"), os.path.realpath(self.path)
        if os.path.commonpath([index, home]) == home:
            return
        other = os.path.dirname(os.path.dirname(index))
        if not os.path.isfile(os.path.join(other, layout.CONFIG_FILE)):
            raise ValueError(f"--checkpoint={checkpoint}: neither in --model_dir={self.path} nor in another training "
                             f"directory (no {layout.CONFIG_FILE} in {other}), so nothing shows it was trained with "
                             f"this run's tokenizer; give a checkpoint of {self.path}")
        theirs, ours = layout.recorded_fingerprint(other), fingerprint or self.recorded_fingerprint()
        if theirs is None or ours is None or theirs != ours:
            recorded = (f"{other} records no tokenizer fingerprint" if theirs is None else
                        f"{self.path} records no tokenizer fingerprint" if ours is None else
                        f"sha256 {theirs[:12]} there, {ours[:12]} here")
            raise ValueError(f"--checkpoint={checkpoint}: a checkpoint of the run {other}, not trained with the "
                             f"tokenizer of --model_dir={self.path} ({recorded}): its weights would read this run's "
                             f"subwords as others; give a checkpoint of {self.path}, or --model_dir={other}")

    # Tokenizers --------------------------------------------------------------------

    def load_tokenizers(self):
        """`(source, target)` saved in MODEL_DIR/tokenizer (one object when shared); a damaged one
        is a one-line ValueError naming the folder. Does not check the fingerprint (`open` does)."""
        return vocabulary.load_saved(self.tokenizer_dir)

    def load_or_train_tokenizers(self, data: "DataConfig", save: bool = True,
                                 log: Optional[Callable[[str], None]] = None):
        """MODEL_DIR/tokenizer if saved (ids stay stable across resumes), else trained on the
        training split (section 5.1) and saved there when `save`. Returns (source, target)."""
        return vocabulary.load_or_train(self.tokenizer_dir, data, save=save, **({"log": log} if log else {}))

    def check_fingerprint(self, fingerprint: str) -> None:
        """A one-line ValueError unless `fingerprint` (of the tokenizer in MODEL_DIR/tokenizer) is
        the one model_config.json recorded; a run that recorded none passes."""
        recorded = self.recorded_fingerprint()
        if recorded and recorded != fingerprint:
            raise ValueError(f"{self.tokenizer_dir}: not the tokenizer the run was trained with (sha256 "
                             f"{fingerprint[:12]}, recorded {recorded[:12]}); restore the original folder, or "
                             "use another --model_dir")

    def check_tokenizer_flags(self, data: "DataConfig", run: str, advice: str = "",
                              names: tuple = vocabulary.TOKENIZER_FLAGS) -> None:
        """A one-line `ValueError` naming the first of `names` (default
        `vocabulary.TOKENIZER_FLAGS`) whose value in `data` differs from the one the run was
        trained with (its model_config.json "data" section; a run that recorded none passes), and
        that run's value. `run` names the run in the message."""
        vocabulary.check_flags(self.settings().get("data", {}), data, run, advice, names)

    # The commands' checks ----------------------------------------------------------

    def open(self, need_tokenizer: bool = True) -> "OpenedRun":
        """Reads and checks the run for a command that reads it (module docstring). With
        `need_tokenizer=False` (averaging, which reads only checkpoints) a run without a saved
        tokenizer opens too; one that has a tokenizer gets it checked all the same.

        Raises:
            FileNotFoundError: no such folder, no model_config.json, no saved tokenizer (when needed).
            ValueError: a damaged layout or model_config.json, a list of checkpoints naming one
                outside its folder (`layout.check_checkpoint_lists`), a tokenizer that does not
                load or is not the one the run was trained with.
        """
        from keras_transformer.pipelines import tokenizers  # pylint: disable=g-import-not-at-top

        if not os.path.isdir(self.path):
            raise FileNotFoundError(f"{self.path}: no such training directory")
        layout.check_layout(self.path)
        settings = self.settings()
        config = self.config()
        layout.check_checkpoint_lists(self.path)  # each names only checkpoints of its own folder
        if not need_tokenizer and not os.path.lexists(self.tokenizer_dir):
            return OpenedRun(self, settings, config, None, None, None)
        if not tokenizers.is_saved(self.tokenizer_dir):
            raise FileNotFoundError(f"{self.tokenizer_dir}: no saved tokenizer (no file {tokenizers.CONFIG_FILE} in "
                                    "it); a run cannot be read without the tokenizer it was trained with")
        source, target = self.load_tokenizers()
        fingerprint = tokenizers.fingerprint(source, target)
        self.check_fingerprint(fingerprint)
        for side, tokenizer, rows in (("source", source, config.vocab_size),
                                      ("target", target, config.target_vocab_size or config.vocab_size)):
            if tokenizer.vocab_size > rows:
                raise ValueError(f"{self.tokenizer_dir}: its {side} tokenizer has {tokenizer.vocab_size} ids but the "
                                 f"model of {self.settings_file} only {rows} embedding rows: not the run's tokenizer; "
                                 "restore the original folder")
        return OpenedRun(self, settings, config, source, target, fingerprint)

    def check_resumable(self) -> bool:
        """Whether the directory holds a run to resume; a one-line `ValueError` if that run has lost
        a file it cannot go on without. Checked before any tokenizer is trained.

        A run with checkpoints must keep its tokenizer (the embedding rows index its subwords: a
        new tokenizer would silently give them other meanings) and its model_config.json, and its
        lists of checkpoints name only checkpoints of their own folders
        (`layout.check_checkpoint_lists`).
        """
        from keras_transformer.pipelines import tokenizers  # pylint: disable=g-import-not-at-top

        layout.check_checkpoint_lists(self.path)
        checkpoints = self.checkpoint_files()
        has_config = self.has_settings()
        if checkpoints and not has_config:
            raise ValueError(f"{self.path} has checkpoints ({os.path.basename(checkpoints[-1])}) but no "
                             f"{layout.CONFIG_FILE}: restore it from a backup, or use another --model_dir")
        if (checkpoints or has_config) and not tokenizers.is_saved(self.tokenizer_dir):
            raise ValueError(f"{self.tokenizer_dir}: missing or incomplete (no file {tokenizers.CONFIG_FILE} in it), "
                             f"but the run in {self.path} was trained with it (a new tokenizer would give its "
                             "embeddings other subwords): restore the folder, or use another --model_dir")
        return bool(checkpoints or has_config)

    def check_resume(self, config: TransformerConfig, tokenizer_fingerprint: Optional[str] = None,
                     starts_from_another_run: bool = False, data: Optional["DataConfig"] = None,
                     training: Optional[dict[str, Any]] = None, log: Optional[Callable[[str], None]] = None) -> None:
        """The command's model (and tokenizer, and with `data` its data set and tokenizer flags) must
        be the saved one: a mismatch is a one-line `ValueError`. A run started from another model
        and not yet saved (`starts_from_another_run`) may change its training settings
        (`keras_transformer.tasks.fine_tuning.InitSource.check` compares it with that model).

        A resume goes on with the run's data set: another --dataset is refused (training on it is
        fine-tuning, a new run with --init_from); other --train_files corpora are accepted with one
        line to `log`. With `training` (`TrainingConfig.to_dict()`), a run trained with a moving
        average of its weights (--ema_decay) keeps one: --ema_decay=0 is refused (its checkpoints,
        translation and export use the average), another decay is accepted with one line."""
        if not self.has_settings():
            return
        saved = self.config().resolved_dict()  # each stack's depth, however the flags spelled it
        if starts_from_another_run:
            return
        settings = self.settings()
        say = log or (lambda line: None)
        if data is not None:
            recorded = settings.get("data", {})
            dataset = recorded.get("dataset")
            if isinstance(dataset, str) and dataset != data.dataset:
                raise ValueError(f"--dataset={data.dataset}: {self.path} was trained on --dataset={dataset}, and a "
                                 f"resume goes on with its data: give --dataset={dataset}, or train on "
                                 f"{data.dataset} in another --model_dir with --init_from={self.path}")
            corpora = [dataclasses.asdict(corpus) for corpus in data.train_files]
            if isinstance(recorded.get("train_files"), list) and recorded["train_files"] != corpora:
                names = [("the corpora " + ", ".join(str(c.get("name")) if isinstance(c, dict) else "?" for c in runs))
                         if runs else f"the train split of --dataset={data.dataset}"
                         for runs in (recorded["train_files"], corpora)]
                say(f"--train_files: {self.path} was trained on {names[0]}; it goes on with {names[1]}")
            self.check_tokenizer_flags(data, self.path)
        wanted = config.resolved_dict()
        diff = [f"{k}={saved[k]!r} (saved) vs {wanted[k]!r} (flags)" for k in sorted(saved)
                if saved[k] != wanted.get(k)]
        if diff:
            raise ValueError(f"{self.path} holds a different model: {'; '.join(diff)}; use another --model_dir")
        if tokenizer_fingerprint:
            self.check_fingerprint(tokenizer_fingerprint)
        if training is not None:
            was = settings.get("training", {}).get("ema_decay")
            was = was if isinstance(was, (int, float)) and not isinstance(was, bool) and 0 < was < 1 else 0.0
            now = training["ema_decay"]
            if was and not now:
                raise ValueError(f"--ema_decay=0: {self.path} keeps a moving average of its weights (--ema_decay="
                                 f"{was:g}), which its checkpoints, translation and export use; give --ema_decay="
                                 f"{was:g} or leave the flag out to go on with it, or start a run without one in "
                                 f"another --model_dir with --init_from={self.path}")
            if was and now != was:
                say(f"--ema_decay={now:g}: the run's moving average (decay {was:g} so far) goes on with decay {now:g}")


@dataclasses.dataclass(frozen=True)
class OpenedRun:
    """What `TrainingDirectory.open` read and checked.

    Attributes:
        directory: the `TrainingDirectory`.
        settings: its whole model_config.json.
        config: the model's `TransformerConfig`.
        source_tokenizer, target_tokenizer: its tokenizers (one object when shared; None for
            a run without one opened with `need_tokenizer=False`).
        fingerprint: their `keras_transformer.pipelines.tokenizers.fingerprint`, the one the run recorded.
    """

    directory: TrainingDirectory
    settings: dict[str, Any]
    config: TransformerConfig
    source_tokenizer: Any
    target_tokenizer: Any
    fingerprint: Optional[str]

    @property
    def model_dir(self) -> str:
        return self.directory.path

    def restore(self, checkpoint: Optional[str] = None, warn: Optional[Callable[[str], None]] = None):
        """`(model, checkpoint_path)` (`TrainingDirectory.restore`): a `checkpoint` of another run is
        read only when that run was trained with the tokenizer opened here (`fingerprint`)."""
        return self.directory.restore(checkpoint, warn=warn, fingerprint=self.fingerprint)
