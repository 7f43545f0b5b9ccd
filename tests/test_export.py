"""The SavedModel: moved, loaded in a fresh process by both loaders, servable ops, bad input."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from export import ops, serving_module, versions
from export_helpers import MAX_LENGTH, make_model_dir
from keras_transformer import decoding, model_dir as model_dir_lib
from keras_transformer.config import DecodingConfig
from pipelines import tokenizers

REPO = pathlib.Path(__file__).resolve().parents[1]
DECODING = DecodingConfig(beam_size=4, alpha=0.6, max_extra_length=50)

LONG = " ".join(["Der große Hund sieht die kleine Katze."] * 130)  # about 5,000 characters
BAD_INPUTS = {
    "empty": b"",
    "whitespace": b" \t  \n ",
    "long": LONG.encode(),
    "invalid_utf8": b"Der Hund \xff\xfe bellt \xc3",
}

FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # registers the tokenizer ops
    path, sentences = sys.argv[1], json.loads(sys.argv[2])
    results = {}
    loaded = tf.saved_model.load(path)
    out = loaded.signatures["serving_default"](sentences=tf.constant(sentences))
    results["load"] = {k: v.numpy().tolist() for k, v in out.items()}
    with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
        results["signatures"] = sorted(k for k in meta_graph.signature_def if not k.startswith("__"))
        signature = meta_graph.signature_def["serving_default"]
        fetches = {k: v.name for k, v in signature.outputs.items()}
        out = session.run(fetches, {signature.inputs["sentences"].name: sentences})
        results["session"] = {k: v.tolist() for k, v in out.items()}
    results["modules"] = sorted(
        m for m in sys.modules if m.split(".")[0] in ("keras_transformer", "pipelines", "export", "sentencepiece")
    )
    print(json.dumps(results, default=lambda b: b.decode("utf-8")))
    """
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("run")
    pairs = make_model_dir(path)
    return path, pairs


@pytest.fixture(scope="module")
def exported(model_dir, tmp_path_factory):
    """An export in OUT/1, and the loaded SavedModel. Made with umask 022 from a tokenizer file
    only its owner can read (as `tempfile.mkstemp` writes them): TensorFlow's asset copy keeps
    that mode, the exporter must widen it."""
    out = tmp_path_factory.mktemp("serving") / "transformer"
    translator, _ = serving_module.from_model_dir(str(model_dir[0]), DECODING)
    for tokenizer in (translator.source_tokenizer, translator.target_tokenizer):
        os.chmod(tokenizer.asset_path, 0o600)
    umask = os.umask(0o022)
    try:
        path = serving_module.export_saved_model(translator, str(out))
    finally:
        os.umask(umask)
    return pathlib.Path(path), tf.saved_model.load(path)


def in_process_translations(model_dir, sentences):
    """Eager beam search in this process: the reference the export must reproduce."""
    model, _ = model_dir_lib.restore_model(str(model_dir))
    tokenizer = tokenizers.load(os.path.join(model_dir, model_dir_lib.TOKENIZER_DIR))
    source = tokenizer.tokenize(sentences, add_eos=True).to_tensor()
    assert source.shape[1] <= MAX_LENGTH  # no truncation: that is tested on its own
    sequences, scores = decoding.translate_ids(
        model, source, beam_size=DECODING.beam_size, alpha=DECODING.alpha,
        max_extra_length=DECODING.max_extra_length,
    )
    texts = [t.decode("utf-8") for t in tokenizer.detokenize(sequences[:, 0]).numpy()]
    return texts, scores[:, 0].numpy()


def test_layout_and_assets(exported):
    path, _ = exported
    assert path.name == "1"
    assert sorted(os.listdir(path.parent)) == ["1"]  # no temporary folder left
    assert (path / "saved_model.pb").is_file() and (path / "variables").is_dir()
    assert (path / "assets" / "tokenizer.model").is_file()
    settings = json.loads((path / "assets.extra" / serving_module.SETTINGS_FILE).read_text())
    assert settings["decoding"] == DECODING.to_dict()
    assert settings["signatures"] == ["serving_default", "translate_with_attention"]


def test_version_folder_and_files_have_the_modes_the_umask_allows(exported):
    """TF Serving often runs as another user: with umask 022 every folder is 0755, every file 0644."""
    path, _ = exported
    modes = {str(p.relative_to(path)): p.stat().st_mode & 0o777 for p in path.rglob("*")}
    assert path.stat().st_mode & 0o777 == 0o755
    assert {name for name, mode in modes.items() if mode != (0o755 if (path / name).is_dir() else 0o644)} == set()
    assert modes["assets/tokenizer.model"] == 0o644 and modes["variables"] == 0o755


def test_moved_export_in_a_fresh_process_matches_in_process_beam_search(model_dir, tmp_path):
    """Export from a copy of the training directory, move the export, delete the copy, then load
    with tf.saved_model.load and with the TF1 Session loader (TF Serving's) in a process that
    imports only tensorflow and tensorflow_text."""
    run, pairs = model_dir
    sentences = [source for source, _ in pairs[:6]] + ["Der Mann sieht den Hund."]
    expected, expected_scores = in_process_translations(run, sentences)
    assert len(set(expected)) >= 3  # varied outputs, not one repeated string

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    translator, _ = serving_module.from_model_dir(str(copy), DECODING)
    written = serving_module.export_saved_model(translator, str(tmp_path / "out"))
    moved = tmp_path / "elsewhere" / "transformer" / "1"
    moved.parent.mkdir(parents=True)
    shutil.move(written, moved)
    shutil.rmtree(copy)
    shutil.rmtree(tmp_path / "out")

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, str(moved), json.dumps(sentences)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    assert results["modules"] == []
    assert results["signatures"] == ["serving_default", "translate_with_attention"]
    for loader in ("load", "session"):
        assert results[loader]["translations"] == expected, loader
        np.testing.assert_allclose(results[loader]["scores"], expected_scores, rtol=1e-5, atol=1e-5)


def test_only_core_tensorflow_and_tensorflow_text_ops(exported):
    report = ops.check(str(exported[0]))
    assert report["offenders"] == {}
    assert "SentencepieceTokenizeOp" in report["tensorflow_text"]
    assert {"While", "TopKV2", "UnicodeTranscode"} <= set(report["core"])
    assert ops.saved_model_op_types(str(exported[0])) == set(report["core"]) | set(report["tensorflow_text"])


def test_op_check_names_offenders(tmp_path):
    class WithPython(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
        def __call__(self, x):
            return tf.numpy_function(lambda a: a * 2, [x], tf.float32)

    tf.saved_model.save(WithPython(), str(tmp_path))
    offenders = ops.unservable_ops(str(tmp_path))
    assert offenders == {"PyFunc": "runs Python"}
    with pytest.raises(ValueError, match="PyFunc"):
        serving_module.check_servable(str(tmp_path))


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_does_not_crash_and_stays_within_the_length_rule(exported, case):
    out = exported[1].signatures[serving_module.ATTENTION_SIGNATURE](sentences=tf.constant([BAD_INPUTS[case]]))
    translation = out["translations"].numpy()[0]
    translation.decode("utf-8")  # always valid UTF-8
    source_length = int(out["source_lengths"][0])
    target_length = int(out["target_lengths"][0])
    assert source_length <= MAX_LENGTH
    assert target_length <= source_length + DECODING.max_extra_length
    if case in ("empty", "whitespace"):
        assert (translation, source_length, target_length, float(out["scores"][0])) == (b"", 0, 0, 0.0)
    if case == "long":
        assert source_length == MAX_LENGTH  # truncated: MAX_LENGTH - 1 subwords and EOS
        assert out["source_tokens"].numpy()[0, MAX_LENGTH - 1] == b"</s>"
    if case == "invalid_utf8":
        assert "\ufffd" in b"".join(out["source_tokens"].numpy()[0]).decode("utf-8")


def test_mixed_batch_gives_each_sentence_its_own_result(exported, model_dir):
    signature = exported[1].signatures["serving_default"]
    batch = [model_dir[1][0][0], *BAD_INPUTS.values(), model_dir[1][1][0]]
    together = signature(sentences=tf.constant(batch))
    alone = [signature(sentences=tf.constant([s])) for s in batch]
    assert together["translations"].numpy().tolist() == [a["translations"].numpy()[0] for a in alone]
    np.testing.assert_allclose(together["scores"], [a["scores"].numpy()[0] for a in alone], rtol=1e-4, atol=1e-5)


def test_empty_batch(exported):
    for name in ("serving_default", serving_module.ATTENTION_SIGNATURE):
        out = exported[1].signatures[name](sentences=tf.zeros([0], tf.string))
        assert out["translations"].shape == (0,) and out["scores"].shape == (0,)
    assert out["attention"].shape[0] == 0


def test_attention_signature(exported, model_dir):
    sentences = [model_dir[1][2][0], model_dir[1][3][0]]
    out = exported[1].signatures[serving_module.ATTENTION_SIGNATURE](sentences=tf.constant(sentences))
    default = exported[1].signatures["serving_default"](sentences=tf.constant(sentences))
    assert out["translations"].numpy().tolist() == default["translations"].numpy().tolist()
    n, layers, heads, t, s = out["attention"].shape
    assert (n, layers, heads) == (2, 2, 2)
    assert out["target_tokens"].shape == (2, t) and out["source_tokens"].shape == (2, s)
    for i in range(2):
        length, source_length = int(out["target_lengths"][i]), int(out["source_lengths"][i])
        assert out["target_tokens"].numpy()[i, length - 1] == b"</s>"
        weights = out["attention"].numpy()[i, :, :, :length, :source_length]
        np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)


def test_failed_export_leaves_no_version_and_versions_count_up(model_dir, tmp_path):
    translator, _ = serving_module.from_model_dir(str(model_dir[0]), DECODING)

    def refuse(path):
        assert os.path.isfile(os.path.join(path, "saved_model.pb"))
        raise ValueError("refused")

    out = tmp_path / "out"
    (out / "3").mkdir(parents=True)
    killed = subprocess.Popen([sys.executable, "-c", "pass"])  # an export killed while writing version 4
    killed.wait()
    stale = versions.temporary_folder(str(out), 4)
    os.rename(stale, stale.replace(f"-{os.getpid()}-", f"-{killed.pid}-"))
    lines = []
    with pytest.raises(ValueError, match="refused"):
        serving_module.export_saved_model(translator, str(out), check=refuse, log=lines.append)
    assert sorted(os.listdir(out)) == ["3"]  # the stale folder removed, the refused export's too
    assert len(lines) == 1 and f"process {killed.pid}, which no longer runs" in lines[0]
    with pytest.raises(ValueError, match="already exists"):
        serving_module.export_saved_model(translator, str(out), version=3)
    assert versions.next_version(str(out)) == 4


def test_cli_errors_are_one_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-m", "export", f"--model_dir={tmp_path / 'missing'}", f"--export_dir={tmp_path / 'out'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "missing" in lines[0], result.stderr
    assert not (tmp_path / "out").exists()
