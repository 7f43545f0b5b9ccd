"""Starting a new run from another run's model (`--init_from`): its weights and its tokenizer,
a fresh optimizer and step 0.

The weights are those the other run translates with (`readable_checkpoints.read_model`): a run
trained with `--ema_decay` gives its moving average (as Marian's model.npz holds the smoothed
weights), the model its dev scores were measured on. With `--ema_decay` the new run's average
starts from those weights, at step 0 (its decay ramps up again).

The same command started again resumes the new run from its own checkpoints: `--init_from` is
then not read again, and naming another run than the one it started from is refused
(`ignored_on_resume`)."""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from keras_transformer.config import TransformerConfig
from keras_transformer.run_dir import layout
from keras_transformer.pipelines.data_config import DataConfig
from keras_transformer.training_directory import TrainingDirectory
from keras_transformer.training_directory.vocabulary import check_placeholder, sized_model


# What may differ between a run and the model it starts from: training settings, not shapes.
TRAINING_ONLY_FIELDS = ("dropout_rate", "attention_dropout_rate", "relu_dropout_rate", "source_word_dropout_rate",
                        "label_smoothing")


@dataclasses.dataclass(frozen=True)
class InitSource:
    """The model a new run starts from (`--init_from`): a training directory's averaged (else
    newest readable) checkpoint, or a given checkpoint prefix in one.

    Attributes:
        run_dir: the training directory the weights and the tokenizer come from.
        checkpoint: the checkpoint prefix read.
    """

    run_dir: str
    checkpoint: str

    @classmethod
    def resolve(cls, path: str, model_dir: str) -> "InitSource":
        """The run and checkpoint `path` names; a one-line error if it is neither a training
        directory with a readable checkpoint nor a readable checkpoint prefix in one."""
        from keras_transformer.run_dir import readable_checkpoints  # pylint: disable=g-import-not-at-top

        if os.path.isfile(path + ".index"):
            readable_checkpoints.check_readable(path)
            run_dir, checkpoint = os.path.dirname(os.path.dirname(os.path.abspath(path))), path
        elif os.path.isdir(path):
            run_dir, checkpoint = path, TrainingDirectory(path).latest_checkpoint()
            if checkpoint is None:
                raise ValueError(f"--init_from={path}: no checkpoint in {layout.CHECKPOINT_DIR}/ or "
                                 f"{layout.AVERAGED_DIR}/")
        else:
            raise FileNotFoundError(f"--init_from={path}: {layout.init_from_problem(path)}")
        if os.path.abspath(run_dir) == os.path.abspath(model_dir):
            raise ValueError(f"--init_from={path} is in --model_dir itself; to go on with that run, leave "
                             "out --init_from (the same command resumes it)")
        for name, test in ((layout.CONFIG_FILE, os.path.isfile), (layout.TOKENIZER_DIR, os.path.isdir)):
            if not test(os.path.join(run_dir, name)):
                raise FileNotFoundError(f"--init_from={path}: {os.path.join(run_dir, name)} not found (a model "
                                        "is started from together with its run's config and tokenizer)")
        return cls(run_dir=run_dir, checkpoint=checkpoint)

    def record(self) -> dict:
        return {"run_dir": os.path.abspath(self.run_dir), "checkpoint": os.path.abspath(self.checkpoint)}

    def check(self, model_dir: str, model: TransformerConfig, data: DataConfig) -> None:
        """A one-line `ValueError` unless this run's flags ask for the architecture and vocabulary
        (every tokenizer flag, `TrainingDirectory.check_tokenizer_flags`) of the model it starts
        from, whose run must be whole (`TrainingDirectory.open`: its tokenizer the one it recorded).
        Reads only; writes nothing in either directory."""
        from keras_transformer.pipelines import tokenizers  # pylint: disable=g-import-not-at-top

        there_dir = TrainingDirectory(self.run_dir)
        run = there_dir.open()
        source, target = run.source_tokenizer, run.target_tokenizer
        there_dir.check_tokenizer_flags(data, f"the run of --init_from={self.run_dir}",
                                        advice=", or start from another run")
        settings = source.settings()
        wanted = {"type": data.tokenizer, "lowercase": data.lowercase, "shared": data.shared_vocab}
        have = {"type": settings["type"], "lowercase": settings["lowercase"], "shared": source is target}
        diff = [f"{k}={have[k]!r} (there) vs {wanted[k]!r} (flags)" for k in wanted if have[k] != wanted[k]]
        if diff:
            raise ValueError(f"--init_from={self.run_dir}: its vocabulary differs: {'; '.join(diff)}")
        if data.tree_targets == "placeholders":  # a run from before the flag recorded no tree_targets
            check_placeholder(target)
        ours = TrainingDirectory(model_dir)
        if tokenizers.is_saved(ours.tokenizer_dir) and \
                tokenizers.fingerprint(*ours.load_tokenizers()) != tokenizers.fingerprint(source, target):
            raise ValueError(f"{ours.tokenizer_dir} is not the tokenizer of --init_from={self.run_dir}; use another "
                             "--model_dir")
        there = run.config.resolved_dict()  # each stack's depth, however either run spelled it
        ours_model = sized_model(model, source, target).resolved_dict()
        skip = set(TRAINING_ONLY_FIELDS) | (set() if run.config.positions.fixed_max_length else {"max_length"})
        diff = [f"{k}={there[k]!r} (there) vs {ours_model[k]!r} (flags)" for k in sorted(there)
                if k not in skip and there[k] != ours_model.get(k)]
        if diff:
            raise ValueError(f"--init_from={self.run_dir}: a different architecture: {'; '.join(diff)}")

    def load_weights(self, model) -> None:
        """Reads the model's weights (not the optimizer's state, not the step) from the checkpoint:
        its moving average of the weights when it has one."""
        from keras_transformer.run_dir import readable_checkpoints  # pylint: disable=g-import-not-at-top

        readable_checkpoints.read_model(model, self.checkpoint, f"--init_from={self.run_dir}")


def recorded_init(model_dir: str) -> Optional[InitSource]:
    """The `InitSource` model_config.json records for a run that has no checkpoint yet (a run
    started with --init_from and stopped before its first save starts from it again)."""
    run = TrainingDirectory(model_dir)
    if not run.has_settings():
        return None
    record = run.settings().get("init_from")
    return InitSource(record["run_dir"], record["checkpoint"]) if record else None


def ignored_on_resume(init_from: str, model_dir: str) -> str:
    """The line a run that has checkpoints logs for `--init_from`: it resumes from its own
    checkpoints and reads no other model. The same command started again (the run it started
    from named again) resumes; any other `init_from` asks for a new run in a directory that holds
    one: a one-line `ValueError`, before anything is read or written."""
    run = TrainingDirectory(model_dir)
    record = run.settings().get("init_from") if run.has_settings() else None
    started = record.get("run_dir") if isinstance(record, dict) and isinstance(record.get("run_dir"), str) else None
    named = os.path.abspath(init_from)
    if os.path.isfile(named + ".index"):  # a checkpoint prefix: RUN/checkpoints/ckpt-N
        named = os.path.dirname(os.path.dirname(named))
    if started and os.path.realpath(started) == os.path.realpath(named):
        return (f"--init_from={init_from} is not read again: {model_dir} has checkpoints and resumes from them "
                f"(it started from {record.get('checkpoint') or started})")
    origin = f"a run started from {started}" if started else "a run not started from another one"
    raise ValueError(f"--init_from={init_from}: {model_dir} already holds {origin}, with checkpoints; leave out "
                     f"--init_from to resume it, or start from {init_from} in another --model_dir")
