"""The training-directory layout: config and checkpoint round trips, damaged checkpoints, file modes."""

import os
import stat

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer, TransformerConfig, create_optimizer
from keras_transformer.run_dir import layout


def test_checkpoint_round_trip_restores_equal_weights(tmp_path):
    config = TransformerConfig.tiny(layer_norm="pre")
    model = Transformer(config)
    model.build()
    optimizer = create_optimizer(config.d_model, warmup_steps=10)
    optimizer.build(model.trainable_variables)
    layout.write_config(str(tmp_path), config, training={"train_steps": 5})
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model, optimizer=optimizer, step=tf.Variable(7, dtype=tf.int64)),
        str(tmp_path / layout.CHECKPOINT_DIR),
        max_to_keep=2,
    )
    manager.save(checkpoint_number=7)
    restored, path = layout.restore_model(str(tmp_path))
    assert path.endswith("ckpt-7")
    assert restored.config == config
    for a, b in zip(model.weights, restored.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert layout.read_settings(str(tmp_path))["training"] == {"train_steps": 5}


@pytest.mark.slow
def test_a_run_from_before_the_stacks_had_their_own_depths_reads_translates_and_exports(tmp_path_factory, tmp_path):
    """A finished tiny run whose model_config.json is the one the training command wrote before the
    encoder and the decoder had their own depths (`old_runs.OLD_MODEL_CONFIG`: num_layers alone):
    its config reads as 2 + 2 layers, its checkpoints restore, `translate` translates, `export`
    makes a SavedModel that translates as the training directory does, and the CTranslate2
    conversion builds 2 + 2 layers."""
    from keras_transformer.export import ctranslate2_model  # pylint: disable=import-outside-toplevel
    from keras_transformer.decoding import sequence_scores  # pylint: disable=import-outside-toplevel
    from keras_transformer.pipelines import tokenizers  # pylint: disable=import-outside-toplevel
    from tests.helpers.commands import run_command  # pylint: disable=import-outside-toplevel
    from tests.helpers.old_runs import make_old_run  # pylint: disable=import-outside-toplevel
    from tests.helpers.train_runs import FINISHED, shared_tiny_run  # pylint: disable=import-outside-toplevel

    run = tmp_path / "run"
    shared_tiny_run(tmp_path_factory, run, *FINISHED)
    make_old_run(run)
    saved = layout.read_settings(str(run))["model"]
    assert "num_encoder_layers" not in saved and "num_decoder_layers" not in saved and saved["num_layers"] == 2
    config = layout.read_config(str(run))
    assert (config.encoder_depth, config.decoder_depth) == (2, 2)
    model, checkpoint = layout.restore_model(str(run))
    assert checkpoint.endswith("averaged/ckpt-12") and (len(model.encoder_layers), len(model.decoder_layers)) == (2, 2)

    (tmp_path / "source.txt").write_text("Der Hund sieht die Katze .\nEin Mann läuft .\n", encoding="utf-8")
    translated = run_command("-m", "keras_transformer.translate", f"--model_dir={run}", "--input=source.txt",
                             "--output=from_run.txt", cwd=tmp_path)
    assert translated.returncode == 0, translated.stderr[-2000:]
    exported = run_command("-m", "keras_transformer.export", f"--model_dir={run}", "--export_dir=serving", cwd=tmp_path, timeout=600)
    assert exported.returncode == 0, exported.stderr[-2000:]
    served = run_command("-m", "keras_transformer.translate", "--export_dir=serving", "--input=source.txt",
                         "--output=from_export.txt", cwd=tmp_path)
    assert served.returncode == 0, served.stderr[-2000:]
    lines = (tmp_path / "from_run.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and (tmp_path / "from_export.txt").read_text(encoding="utf-8").splitlines() == lines

    import ctranslate2  # pylint: disable=import-outside-toplevel  (the test extra's; a broken install fails here)
    folder, _ = ctranslate2_model.convert(str(run), str(tmp_path / "ct2"))  # the same (averaged) checkpoint
    tokenizer, _ = tokenizers.load_pair(str(run / layout.TOKENIZER_DIR))
    sources = (tmp_path / "source.txt").read_text(encoding="utf-8").splitlines()
    vocabulary = tokenizer.pieces()
    pieces = [[[vocabulary[i] for i in row] for row in tokenizer.tokenize(side).to_list()] for side in (sources, lines)]
    scores = ctranslate2.Translator(folder).score_batch(*pieces)
    log_probs, _ = sequence_scores.sequence_log_probs(model, tokenizer.tokenize(sources, add_eos=True).to_tensor(),
                                                      tokenizer.tokenize(lines, add_eos=True).to_tensor())
    np.testing.assert_allclose([sum(r.log_probs) for r in scores], log_probs.numpy(), atol=1e-4, rtol=1e-5)


def test_missing_pieces_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="model_config.json: not found"):
        layout.read_config(str(tmp_path))
    layout.write_config(str(tmp_path), TransformerConfig.tiny())
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        layout.restore_model(str(tmp_path))


def saved_model_dir(tmp_path, steps=(2, 4), average=True):
    """A model directory with one checkpoint per step (different weights) and, with `average`, an
    averaged/ checkpoint; returns {prefix: weights}."""
    config = TransformerConfig.tiny(vocab_size=20, max_length=8)
    layout.write_config(str(tmp_path), config)
    model = Transformer(config)
    model.build()
    rng = np.random.default_rng(0)
    saved = {}
    folders = [(layout.CHECKPOINT_DIR, s) for s in steps]
    if average:
        folders.append((layout.AVERAGED_DIR, steps[-1]))
    for folder, step in folders:
        for v in model.variables:
            if v.dtype == "float32":
                v.assign(rng.normal(size=v.shape).astype(np.float32))
        manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(tmp_path / folder), max_to_keep=5)
        saved[manager.save(checkpoint_number=step)] = [v.numpy() for v in model.variables]
    return saved


def truncate(prefix, part=".index"):
    path = prefix + part
    os.truncate(path, os.path.getsize(path) // 2)
    return path


def test_a_damaged_averaged_or_latest_checkpoint_falls_back_with_a_warning(tmp_path):
    saved = saved_model_dir(tmp_path)
    older, newest, averaged = saved
    lines = []
    assert layout.latest_checkpoint(str(tmp_path), warn=lines.append) == averaged and lines == []
    truncate(averaged)
    assert layout.latest_checkpoint(str(tmp_path), warn=lines.append) == newest
    assert lines == [f"warning: skipping damaged checkpoint {averaged}: ckpt-4.index: not an sstable (bad magic number)"]
    damaged = truncate(newest, ".data-00000-of-00001")
    before = open(damaged, "rb").read()
    lines.clear()
    model, path = layout.restore_model(str(tmp_path), warn=lines.append)
    assert path == older and len(lines) == 2 and "ckpt-4.data-00000-of-00001: " in lines[1]
    for variable, expected in zip(model.variables, saved[older]):
        np.testing.assert_array_equal(variable.numpy(), expected)
    assert open(damaged, "rb").read() == before
    truncate(older)
    with pytest.raises(ValueError, match=r"no readable checkpoint in averaged/ or checkpoints/ \(3 damaged"):
        layout.restore_model(str(tmp_path), warn=[].append)


def test_an_explicit_checkpoint_is_used_or_refused_never_replaced(tmp_path):
    older, newest = saved_model_dir(tmp_path, average=False)
    truncate(newest)
    _, path = layout.restore_model(str(tmp_path), older)
    assert path == older
    with pytest.raises(ValueError) as error:
        layout.restore_model(str(tmp_path), newest)
    assert str(error.value) == f"checkpoint {newest} is damaged: ckpt-4.index: not an sstable (bad magic number)"
    with pytest.raises(FileNotFoundError, match=r"ckpt-3: no such checkpoint \(ckpt-3.index not found"):
        layout.restore_model(str(tmp_path), older.replace("ckpt-2", "ckpt-3"))


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_json_files_get_the_mode_the_umask_allows(tmp_path, umask, mode):
    """mkstemp's 0600 would hide model_config.json from another user (the model server)."""
    previous = os.umask(umask)
    try:
        path = layout.write_config(str(tmp_path), TransformerConfig.tiny())
        layout.write_config(str(tmp_path), TransformerConfig.tiny())  # replacing keeps it
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(path).st_mode) == mode
    assert os.listdir(tmp_path) == [layout.CONFIG_FILE]  # no temporary file left
