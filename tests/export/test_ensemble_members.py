"""Ensembles of training directories: the vocabulary check before TensorFlow (library and the
three commands) and a parser's source tags, tagger and tree targets checked with it, and the
ensemble SavedModel (equal to the in-process ensemble through both loaders, servable ops only)
and `translate --ensemble_model_dirs`."""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.export import ensemble_members, ops, serving_module, versions
from keras_transformer.config import DecodingConfig
from keras_transformer.decoding import search
from keras_transformer.decoding.ensemble import Ensemble
from keras_transformer.run_dir import layout
from keras_transformer.pipelines import tokenizers
from tests.export.test_serving_module import FRESH_PROCESS, SIGNATURES
from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.export_models import make_model_dir, shared_model_dir
from tests.helpers.files import write_run_settings as write_run

DECODING = DecodingConfig(beam_size=3, alpha=0.6, max_extra_length=20)


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


PARSED_RUN = {"data": {"dataset": "ptb", "source_tags": "predicted", "tree_targets": "placeholders"},
              "tagger": {"weights": {"bias": {"NN": 1.0}}, "tagdict": {"the": "DT"}, "classes": ["DT", "NN"]}}


def test_parsing_members_must_read_and_write_alike(tmp_path):
    """Source tags, tree targets and (predicted tags) the tagger, as --model_dir's; a run that
    recorded none of them (translation) has the defaults."""
    a = write_run(tmp_path / "a", **PARSED_RUN)
    ensemble_members.check_members(a, [write_run(tmp_path / "b", num_layers=2, **PARSED_RUN)])  # shapes may differ
    for name, change in [("none", {"source_tags": "none"}), ("gold", {"source_tags": "gold"}),
                         ("words", {"tree_targets": "words"})]:
        other = write_run(tmp_path / name, data=dict(PARSED_RUN["data"], **change), tagger=PARSED_RUN["tagger"])
        [(setting, value)] = change.items()
        with pytest.raises(ValueError, match=re.escape(f"{other} was trained with --{setting}={value}, --model_dir={a} "
                                                       f"with --{setting}={PARSED_RUN['data'][setting]}")):
            ensemble_members.check_members(a, [other])
    retrained = dict(PARSED_RUN["tagger"], tagdict={"the": "NN"})
    with pytest.raises(ValueError, match="has another part-of-speech tagger than --model_dir"):
        ensemble_members.check_members(a, [write_run(tmp_path / "tagger", data=PARSED_RUN["data"], tagger=retrained)])
    with pytest.raises(FileNotFoundError, match="no_tagger/tagger.json: not found"):
        ensemble_members.check_members(a, [write_run(tmp_path / "no_tagger", data=PARSED_RUN["data"])])
    with pytest.raises(ValueError, match="vocab_size=501"):  # the vocabulary first
        ensemble_members.check_members(a, [write_run(tmp_path / "vocabulary", vocab_size=501, data={})])
    translation = write_run(tmp_path / "translation")  # no "data" section: words alone, trees of words
    ensemble_members.check_members(translation, [write_run(tmp_path / "plain", data={"source_tags": "none",
                                                                                    "tree_targets": "words"})])
    with pytest.raises(ValueError, match="was trained with --source_tags=predicted"):
        ensemble_members.check_members(translation, [a])


@pytest.mark.parametrize("command", [["-m", "keras_transformer.export", "--export_dir={out}"],
                                     ["-m", "keras_transformer.translate", "--input={input}", "--output={out}"],
                                     ["-m", "keras_transformer.parse", "--input={input}", "--output={out}"]])
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
    pairs = shared_model_dir(tmp_path_factory, a)
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


@pytest.mark.slow
def test_the_ensemble_saved_model_equals_the_in_process_ensemble_on_both_loaders(runs, tmp_path):
    a, b, pairs = runs
    sentences = [source for source, _ in pairs[:5]] + ["Der Mann sieht den Hund."]
    expected, expected_scores = in_process(runs, sentences)
    single = serving_module.from_model_dir(a, DECODING)[0]  # held: its tf.functions keep only a weak reference
    alone = single.serving_default(tf.constant(sentences))
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
