"""The end of a training run (`keras_transformer.tasks.training.average_once`): the last or the best checkpoints
averaged once, and what a run that made fewer checkpoints than asked gets. Its start: a new run
whose start fails leaves nothing behind."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import TransformerConfig
from keras_transformer.run_dir import layout
from keras_transformer.training import trainer as trainer_lib
from keras_transformer.tasks.training import _missing_folders, _undone_if_first_start_fails, average_once
from keras_transformer.training_directory import TrainingDirectory

CONFIG = TransformerConfig.tiny(vocab_size=30, max_length=16, dropout_rate=0.0)


def batches(count=4, seed=0):
    rng = np.random.default_rng(seed)
    rows = [(rng.integers(4, 30, size=(4, 6)).astype(np.int32), rng.integers(4, 30, size=(4, 6)).astype(np.int32))
            for _ in range(count)]

    def input_fn(_context):
        return tf.data.Dataset.from_generator(
            lambda: iter(rows), output_signature=(tf.TensorSpec([None, None], tf.int32),) * 2).repeat()

    return input_fn


def trained_run(model_dir, **overrides):
    values = dict(train_steps=3, warmup_steps=2, checkpoint_every_steps=1, eval_every_steps=0, log_every_steps=100,
                  keep_checkpoints=5, seed=1)
    values.update(overrides)
    layout.write_config(model_dir, CONFIG)
    trainer = trainer_lib.build_trainer(CONFIG, trainer_lib.TrainingConfig(**values), model_dir, log=lambda _: None)
    trainer.restore()
    return trainer


def weights_of(prefix):
    model, _ = layout.restore_model(prefix.rsplit("/", 2)[0], prefix)
    return [v.numpy() for v in model.trainable_variables]


def test_a_run_with_fewer_checkpoints_than_asked_averages_those_it_has_and_says_so(tmp_path):
    model_dir = str(tmp_path)
    trainer = trained_run(model_dir)
    trainer.train(batches(), None)
    lines = []
    average_once(model_dir, 6, 3, log=lines.append)
    averaged = str(tmp_path / layout.AVERAGED_DIR / "ckpt-3")
    assert lines == [f"averaged the last 3 checkpoints (the run has 3, fewer than the 6 asked for), steps 1, 2, 3, "
                     f"into {averaged}"]
    parts = [weights_of(str(tmp_path / layout.CHECKPOINT_DIR / f"ckpt-{s}")) for s in (1, 2, 3)]
    for got, *each in zip(weights_of(averaged), *parts):
        np.testing.assert_allclose(got, np.mean(each, axis=0), rtol=1e-5, atol=1e-7)
    average_once(model_dir, 6, 3, log=lines.append)  # started again: done before, not redone
    assert lines[-1] == f"the last 6 checkpoints were averaged before: {averaged}"


def test_with_best_checkpoints_the_best_are_averaged_not_the_last(tmp_path):
    model_dir = str(tmp_path)
    bleus = iter([30.0, 10.0, 20.0, 5.0])
    trainer = trained_run(model_dir, train_steps=4, eval_every_steps=1, checkpoint_every_steps=0,
                          keep_best_checkpoints=2)
    trainer.train(batches(), lambda _model: {"loss": 1.0, "nll": 1.0, "perplexity": 2.7, "bleu": next(bleus),
                                                 "signature": "sig"})
    lines = []
    average_once(model_dir, 2, 4, best=True, log=lines.append)
    averaged = str(tmp_path / layout.AVERAGED_DIR / "ckpt-4")
    assert lines == [f"averaged the best 2 checkpoints, steps 1, 3, into {averaged}"]
    best = [weights_of(str(tmp_path / layout.BEST_DIR / f"ckpt-{s}")) for s in (1, 3)]
    for got, first, third in zip(weights_of(averaged), *best):
        np.testing.assert_allclose(got, (first + third) / 2, rtol=1e-5, atol=1e-7)
    assert layout.latest_checkpoint(model_dir) == averaged  # what translate and export then use


def test_a_first_start_that_fails_removes_what_it_wrote_and_nothing_else(tmp_path):
    """What a new run's failed start wrote goes (its tokenizer, the lock file, the folders it
    made); what the folder held before stays, and so does everything of a run started before."""
    held = tmp_path / "held"  # a folder the user made, with a file of theirs
    held.mkdir()
    (held / "notes.txt").write_text("mine")
    assert _missing_folders(str(held)) == []
    with pytest.raises(ValueError, match="refused"):
        with _undone_if_first_start_fails(TrainingDirectory(str(held)), [], had_lock=False):
            (held / ".lock").write_text("")
            (held / "tokenizer").mkdir()
            (held / "tokenizer" / "tokenizer.json").write_text("{}")
            raise ValueError("refused")
    assert sorted(os.listdir(held)) == ["notes.txt"]

    deep = tmp_path / "a" / "b" / "run"
    made = _missing_folders(str(deep))
    assert made == [str(deep), str(deep.parent), str(deep.parent.parent)]
    deep.mkdir(parents=True)  # as the run lock makes them
    with pytest.raises(KeyboardInterrupt):
        with _undone_if_first_start_fails(TrainingDirectory(str(deep)), made, had_lock=False):
            (deep / ".lock").write_text("")
            (deep / "tagger.json").write_text("{}")
            raise KeyboardInterrupt
    assert sorted(os.listdir(tmp_path)) == ["held"]

    started = tmp_path / "started"  # a run with a model_config.json: a resume, not a first start
    started.mkdir()
    layout.write_config(str(started), CONFIG)
    with pytest.raises(ValueError):
        with _undone_if_first_start_fails(TrainingDirectory(str(started)), [], had_lock=False):
            (started / "tokenizer").mkdir()
            raise ValueError("refused")
    assert sorted(os.listdir(started)) == ["model_config.json", "tokenizer"]
