"""The command lines each toolkit runs: train, translate, export (SavedModel, CTranslate2); the
project's package versions.

    commands = Commands(repo, python, peer_venv, recipe, data_dir, tfds_dir)
    commands.ours_train(run_dir, training, seed)     # python -m keras_transformer.train --flagfile=...
    commands.peer_train(files, seed)                 # onmt-main --config config.yml --model model.py ... train

Ours are the project's commands as a user types them, from the repository root, in the project's
venv: `keras_transformer.train` with the recipe as --flagfile and the run's differences after it
(absl: a later flag wins), `keras_transformer.translate`, `export` (SavedModel and
`--format=ctranslate2`). The peer's are OpenNMT-tf's `onmt-main` from its venv, with the files
`peer_config.write` made (a second config file carries the decoding settings for `infer` and
`export`); its `export --format ctranslate2` runs CTranslate2's own OpenNMT-tf converter
(ctranslate2 3.x, the major version OpenNMT-tf 2.32 pins, in the peer's venv).

`project_versions()` names what runs the project's commands (its Python and the packages of
`PROJECT_PACKAGES`, read from their installed metadata, nothing imported); the peer's are
`peer_venv.check`'s.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import platform
from typing import Optional, Sequence

from keras_transformer.config import DecodingConfig, TrainingConfig

from opennmt_tf import peer_config, peer_venv
from opennmt_tf.recipe import Recipe

PROJECT_PACKAGES = ("tensorflow", "keras", "tensorflow-text", "ctranslate2", "sacrebleu")
AVERAGED = "avg"  # OpenNMT-tf's folder of the averaged checkpoint in its model_dir (average_last_checkpoints)
TRAINING_FLAGS = {  # TrainingConfig field -> the training command's flag
    "train_steps": "train_steps", "cooldown_steps": "cooldown_steps", "warmup_steps": "warmup_steps",
    "checkpoint_every_steps": "checkpoint_every_steps", "keep_checkpoints": "keep_checkpoints",
    "eval_every_steps": "eval_every_steps", "early_stopping_patience": "early_stopping_patience",
    "keep_best_checkpoints": "keep_best_checkpoints", "average_last": "average_checkpoints",
    "log_every_steps": "log_every_steps", "precision": "precision", "seed": "seed",
}


def project_versions() -> dict[str, Optional[str]]:
    """{"python": this interpreter's version, each of `PROJECT_PACKAGES`: its installed version
    (None: not installed)}."""
    versions: dict[str, Optional[str]] = {"python": platform.python_version()}
    for name in PROJECT_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def decoding_flags(decoding: DecodingConfig) -> list[str]:
    return [f"--beam_size={decoding.beam_size}", f"--alpha={decoding.alpha:g}",
            f"--max_extra_length={decoding.max_extra_length}"]


@dataclasses.dataclass(frozen=True)
class Commands:
    """Args:
        repo: the project's repository root (the working directory of its commands).
        python: the project venv's interpreter.
        peer_venv: the peer's venv folder.
        recipe: the recipe at its shape.
        data_dir: Multi30k's release files (the project's --data_dir).
        tfds_dir: where tensorflow-datasets prepares them for the project (inside the work folder).
    """

    repo: str
    python: str
    peer_venv: str
    recipe: Recipe
    data_dir: str
    tfds_dir: str

    # Ours ---------------------------------------------------------------------------------------

    def _data_flags(self) -> list[str]:
        shape = [f"--{name}={value}" for name, value in self.recipe.shape_flags().items()]
        return [*shape, f"--data_dir={os.path.abspath(self.data_dir)}", f"--tfds_dir={os.path.abspath(self.tfds_dir)}"]

    def ours_tokenizer(self, folder: str) -> list[str]:
        """`python -m keras_transformer.pipelines train_tokenizer` with the recipe's tokenizer flags (the one
        tokenizer every run of both toolkits uses)."""
        flags = [f"--{name}={value}" for name, value in self.recipe.tokenizer_flags().items()]
        return [self.python, "-m", "keras_transformer.pipelines", "train_tokenizer", *flags,
                f"--data_dir={os.path.abspath(self.data_dir)}", f"--tfds_dir={os.path.abspath(self.tfds_dir)}",
                f"--tokenizer_dir={folder}"]

    def ours_train(self, run_dir: str, training: TrainingConfig, extra: Sequence[str] = ()) -> list[str]:
        """The recipe, then the run's `training` (every field the training command has a flag for)."""
        run = [f"--{flag}={getattr(training, field)}" for field, flag in TRAINING_FLAGS.items()]
        return [self.python, "-m", "keras_transformer.train", f"--flagfile={os.path.abspath(self.recipe.path)}",
                *self._data_flags(), f"--model_dir={run_dir}", *run, *extra]

    def ours_translate(self, run_dir: str, source: str, output: str, decoding: DecodingConfig,
                       checkpoint: Optional[str] = None) -> list[str]:
        """The run's own model (its averaged checkpoint, else its latest; or the checkpoint prefix
        `checkpoint`) with beam search."""
        return [self.python, "-m", "keras_transformer.translate", f"--model_dir={run_dir}", f"--input={source}",
                f"--output={output}", *decoding_flags(decoding), "--batch_size=32",
                *([f"--checkpoint={checkpoint}"] if checkpoint else [])]

    def ours_export(self, run_dir: str, export_dir: str, decoding: DecodingConfig, format_: str) -> list[str]:
        """`python -m keras_transformer.export`: a SavedModel (`format_` "saved_model") of `serving_default` alone, as
        OpenNMT-tf's export holds its one signature (strings in, strings out), or a CTranslate2
        folder."""
        lean = ["--signatures=serving_default"] if format_ == "saved_model" else []
        return [self.python, "-m", "keras_transformer.export", f"--model_dir={run_dir}", f"--export_dir={export_dir}",
                *decoding_flags(decoding), f"--format={format_}", *lean]

    # The peer -----------------------------------------------------------------------------------

    def _onmt(self, files: peer_config.PeerFiles, overlay: Optional[str] = None,
              checkpoint: Optional[str] = None) -> list[str]:
        configs = [files.config] + ([overlay] if overlay else [])
        return [peer_venv.script_of(self.peer_venv, "onmt-main"), "--config", *configs, "--model", files.model,
                *(["--checkpoint_path", checkpoint] if checkpoint else [])]

    def peer_train(self, files: peer_config.PeerFiles, seed: int, with_eval: bool = False) -> list[str]:
        """float32, as OpenNMT-tf's documentation recommends on a CPU (its --mixed_precision is
        float16 for Volta GPUs and later)."""
        return [*self._onmt(files), "--seed", str(seed), "train", *(["--with_eval"] if with_eval else [])]

    def peer_checkpoint(self, files: peer_config.PeerFiles) -> Optional[str]:
        """The run's averaged checkpoint folder if it made one, else None (its latest checkpoint)."""
        averaged = os.path.join(files.model_dir, AVERAGED)
        return averaged if os.path.isdir(averaged) else None

    def peer_infer(self, files: peer_config.PeerFiles, overlay: str, source: str, output: str,
                   checkpoint: Optional[str] = None) -> list[str]:
        """`onmt-main infer` with the run's averaged checkpoint (else its latest), or the checkpoint
        prefix `checkpoint` (`--checkpoint_path`)."""
        return [*self._onmt(files, overlay, checkpoint or self.peer_checkpoint(files)), "infer", "--features_file",
                source, "--predictions_file", output]

    def peer_export(self, files: peer_config.PeerFiles, overlay: str, export_dir: str, format_: str) -> list[str]:
        """`onmt-main export`: "saved_model" (with the in-graph SentencePiece, strings in and out)
        or "ctranslate2"."""
        return [*self._onmt(files, overlay, self.peer_checkpoint(files)), "export", "--output_dir", export_dir,
                "--format", format_]

    def peer_environment(self) -> dict[str, str]:
        """This process's environment for the peer's commands: TensorFlow's C++ INFO lines off."""
        return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
