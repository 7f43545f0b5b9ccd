"""Ensembles of training directories: the vocabulary check before TensorFlow (library and both
commands), and the ensemble SavedModel (equal to the in-process ensemble through both loaders,
servable ops only) and `translate --ensemble_model_dirs`."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from export import ensemble_members, ops, serving_module, versions
from keras_transformer.config import DecodingConfig
from keras_transformer.decoding import search
from keras_transformer.decoding.ensemble import Ensemble
from keras_transformer.run_dir import layout
from pipelines import tokenizers
from tests.export.test_serving_module import FRESH_PROCESS, SIGNATURES
from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.export_models import make_model_dir

DECODING = DecodingConfig(beam_size=3, alpha=0.6, max_extra_length=20)


def write_run(path, vocab_size=500, sha256="a" * 64, tokenizer_bytes=None, **model):
    """A run's model_config.json (and tokenizer files when given): what the check reads."""
    path.mkdir(parents=True)
    settings = {"model": {"vocab_size": vocab_size, "target_vocab_size": None, "share_embeddings": True,
                          "pad_id": 0, **model}}
    if sha256:
        settings["tokenizer"] = {"sha256": sha256}
    (path / layout.CONFIG_FILE).write_text(json.dumps(settings))
    if tokenizer_bytes is not None:
        (path / layout.TOKENIZER_DIR).mkdir()
        (path / layout.TOKENIZER_DIR / "tokenizer.model").write_bytes(tokenizer_bytes)
    return str(path)


def test_parse_dirs():
    assert ensemble_members.parse_dirs(None) == [] and ensemble_members.parse_dirs("") == []
    assert ensemble_members.parse_dirs("runs/b, runs/c") == ["runs/b", "runs/c"]
    with pytest.raises(ValueError, match="an empty entry"):
        ensemble_members.parse_dirs("runs/b,,runs/c")


def test_the_vocabulary_check_reads_only_the_runs_files(tmp_path):
    a = write_run(tmp_path / "a", num_layers=6, d_model=512)
    ensemble_members.check_same_vocabulary(a, [write_run(tmp_path / "b", num_layers=2, d_model=64)])  # shapes may differ
    with pytest.raises(ValueError, match="vocab_size=501"):
        ensemble_members.check_same_vocabulary(a, [write_run(tmp_path / "c", vocab_size=501)])
    with pytest.raises(ValueError, match="pad_id=1"):
        ensemble_members.check_same_vocabulary(a, [write_run(tmp_path / "d", pad_id=1)])
    with pytest.raises(ValueError, match="another tokenizer"):
        ensemble_members.check_same_vocabulary(a, [write_run(tmp_path / "e", sha256="b" * 64)])
    with pytest.raises(FileNotFoundError, match="no such training directory"):
        ensemble_members.check_same_vocabulary(a, [str(tmp_path / "missing")])
    # Runs that recorded no fingerprint: their tokenizer files are compared.
    f = write_run(tmp_path / "f", sha256=None, tokenizer_bytes=b"pieces")
    ensemble_members.check_same_vocabulary(f, [write_run(tmp_path / "g", sha256=None, tokenizer_bytes=b"pieces")])
    with pytest.raises(ValueError, match="another tokenizer"):
        ensemble_members.check_same_vocabulary(f, [write_run(tmp_path / "h", sha256=None, tokenizer_bytes=b"other")])


@pytest.mark.parametrize("command", [["-m", "export", "--export_dir={out}"],
                                     ["-m", "keras_transformer.translate", "--input={input}", "--output={out}"]])
def test_mismatched_vocabularies_are_one_error_line_through_the_commands(tmp_path, command):
    a = write_run(tmp_path / "a")
    b = write_run(tmp_path / "b", vocab_size=8000)
    (tmp_path / "in.txt").write_text("Ein Hund.\n")
    args = [part.format(out=tmp_path / "out", input=tmp_path / "in.txt") for part in command]
    result = run_command(*args, f"--model_dir={a}", f"--ensemble_model_dirs={b}", timeout=120)
    assert_one_error_line(result, "--ensemble_model_dirs", "vocab_size=8000")
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two tiny runs of one tokenizer and different shapes (the second: 1 layer, d_model 32)."""
    a = tmp_path_factory.mktemp("a")
    pairs = make_model_dir(a)
    b = tmp_path_factory.mktemp("b")
    make_model_dir(b, steps=100, seed=1, tokenizer_from=a, num_layers=1, d_model=32, d_ff=64, num_heads=4)
    return str(a), str(b), pairs


def in_process(runs, sentences):
    """The in-process ensemble's beam search: the reference of the export and the command."""
    a, b, _ = runs
    ensemble = Ensemble([layout.restore_model(a)[0], layout.restore_model(b)[0]])
    tokenizer = tokenizers.load(os.path.join(a, layout.TOKENIZER_DIR))
    source = tokenizer.tokenize(sentences, add_eos=True).to_tensor()
    sequences, scores = search.translate_ids(ensemble, source, DECODING)
    return [t.decode("utf-8") for t in tokenizer.detokenize(sequences[:, 0]).numpy()], scores[:, 0].numpy()


def test_the_ensemble_saved_model_equals_the_in_process_ensemble_on_both_loaders(runs, tmp_path):
    a, b, pairs = runs
    sentences = [source for source, _ in pairs[:5]] + ["Der Mann sieht den Hund."]
    expected, expected_scores = in_process(runs, sentences)
    alone = serving_module.from_model_dir(a, DECODING)[0].serving_default(tf.constant(sentences))
    assert [t.decode("utf-8") for t in alone["translations"].numpy()] != expected  # the second model counts
    path, checkpoint, translator = serving_module.export_model_dir(a, str(tmp_path / "out"), DECODING,
                                                                   ensemble_model_dirs=[b])
    assert checkpoint.count(",") == 1
    settings = versions.read_settings(path)
    assert [m["d_model"] for m in settings["ensemble"]] == [16, 32]
    assert ops.check(path)["offenders"] == {}
    result = run_command("-c", FRESH_PROCESS, path, json.dumps(sentences), env={"PYTHONPATH": None}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    assert results["signatures"] == SIGNATURES and results["modules"] == []
    for loader in ("load", "session"):
        assert results[loader]["translations"] == expected, loader
        np.testing.assert_allclose(results[loader]["scores"], expected_scores, rtol=1e-5, atol=1e-5)
    scored = translator.score(tf.constant(sentences), tf.constant(expected))
    assert np.all(np.isfinite(scored["log_probs"].numpy()))


def test_translate_with_ensemble_model_dirs_equals_the_in_process_ensemble(runs, tmp_path):
    a, b, pairs = runs
    sentences = [source for source, _ in pairs[5:9]]
    (tmp_path / "in.txt").write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    result = run_command("-m", "keras_transformer.translate", f"--model_dir={a}", f"--ensemble_model_dirs={b}",
                         f"--input={tmp_path / 'in.txt'}", f"--output={tmp_path / 'out.txt'}",
                         f"--beam_size={DECODING.beam_size}", f"--alpha={DECODING.alpha}",
                         f"--max_extra_length={DECODING.max_extra_length}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines() == in_process(runs, sentences)[0]
