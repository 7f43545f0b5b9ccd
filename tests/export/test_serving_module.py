"""The SavedModel: moved, loaded in a fresh process by both loaders, servable ops, bad input.

The tests of `exported` run on a float32 and on a bfloat16 export (`--precision`), each made
once per module. In-process references of the bfloat16 export are traced (`tf.function`), as
the export is: grappler fuses MatMul and BiasAdd there, which round to bfloat16 once where
eager ops round twice.
"""

import contextlib
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

from keras_transformer.export import ops, serving_module, versions, warmup
from keras_transformer.decoding import precision as precision_lib
from keras_transformer.decoding import search, sequence_scores
from keras_transformer.run_dir import layout
from keras_transformer.config import DecodingConfig, SamplingConfig
from keras_transformer.pipelines import tokenizers
from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.export_models import DEEP_ENCODER, FRESH_PROCESS, MAX_LENGTH, shared_model_dir

DECODING = DecodingConfig(beam_size=4, alpha=0.6, max_extra_length=50)
SIGNATURES = ["score", "serving_default", "translate_n_best", "translate_sampled", "translate_with_attention",
              "translate_with_prefix"]

LONG = " ".join(["Der große Hund sieht die kleine Katze."] * 130)  # about 5,000 characters
BAD_INPUTS = {
    "empty": b"",
    "whitespace": b" \t  \n ",
    "long": LONG.encode(),
    "invalid_utf8": b"Der Hund \xff\xfe bellt \xc3",
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("run")
    pairs = shared_model_dir(tmp_path_factory, path)
    return path, pairs


@pytest.fixture(scope="module")
def exports(model_dir, tmp_path_factory):
    """`export(precision)`: an export in OUT/1 and the loaded SavedModel, made once per precision.
    Made with umask 022 from a tokenizer file only its owner can read (as `tempfile.mkstemp`
    writes them): TensorFlow's asset copy keeps that mode, the exporter must widen it."""
    made = {}

    def export(precision):
        if precision not in made:
            out = tmp_path_factory.mktemp(f"serving_{precision}") / "transformer"
            translator, _ = serving_module.from_model_dir(str(model_dir[0]), DECODING, precision=precision)
            for tokenizer in (translator.source_tokenizer, translator.target_tokenizer):
                os.chmod(tokenizer.asset_path, 0o600)
            umask = os.umask(0o022)
            try:
                path = serving_module.export_saved_model(translator, str(out))
            finally:
                os.umask(umask)
            made[precision] = pathlib.Path(path), tf.saved_model.load(path)
        return made[precision]

    return export


@pytest.fixture(scope="module", params=precision_lib.PRECISIONS)
def precision(request):
    return request.param


@pytest.fixture(scope="module")
def exported(exports, precision):
    """The export of `precision` in OUT/1, and the loaded SavedModel."""
    return exports(precision)


def reference_model(model_dir, precision):
    """The training directory's model in `precision`, and how to run a search on it in process:
    eagerly (float32), or traced as the export is (bfloat16, see the module docstring)."""
    model, _ = layout.restore_model(str(model_dir))
    return precision_lib.decoding_model(model, precision), (tf.function if precision == "bfloat16" else
                                                            lambda fn: fn)


def in_process_translations(model_dir, sentences):
    """Eager beam search in this process: the reference the export must reproduce."""
    model, _ = layout.restore_model(str(model_dir))
    tokenizer = tokenizers.load(os.path.join(model_dir, layout.TOKENIZER_DIR))
    source = tokenizer.tokenize(sentences, add_eos=True).to_tensor()
    assert source.shape[1] <= MAX_LENGTH  # no truncation: that is tested on its own
    sequences, scores = search.translate_ids(
        model, source, beam_size=DECODING.beam_size, alpha=DECODING.alpha,
        max_extra_length=DECODING.max_extra_length,
    )
    texts = [t.decode("utf-8") for t in tokenizer.detokenize(sequences[:, 0]).numpy()]
    return texts, scores[:, 0].numpy()


@pytest.mark.slow
def test_layout_and_assets(exported, precision):
    path, _ = exported
    assert path.name == "1"
    assert sorted(os.listdir(path.parent)) == ["1"]  # no temporary folder left
    assert (path / "saved_model.pb").is_file() and (path / "variables").is_dir()
    assert (path / "assets" / "tokenizer.model").is_file()
    assert (path / "assets.extra" / "tf_serving_warmup_requests").is_file()
    settings = versions.read_settings(str(path))
    assert settings["decoding"] == DECODING.to_dict()
    assert settings["signatures"] == SIGNATURES
    assert settings["precision"] == precision
    # The weights as the SavedModel stores them: bfloat16 matrices (layer normalization's float32).
    stored = tf.train.load_checkpoint(str(path / "variables" / "variables")).get_variable_to_dtype_map()
    floats = sorted(dtype.name for dtype in stored.values() if dtype.is_floating)
    assert set(floats) == ({"bfloat16", "float32"} if precision == "bfloat16" else {"float32"})
    assert floats.count(precision) > len(floats) / 2


def test_version_folder_and_files_have_the_modes_the_umask_allows(exported):
    """TF Serving often runs as another user: with umask 022 every folder is 0755, every file 0644."""
    path, _ = exported
    modes = {str(p.relative_to(path)): p.stat().st_mode & 0o777 for p in path.rglob("*")}
    assert path.stat().st_mode & 0o777 == 0o755
    assert {name for name, mode in modes.items() if mode != (0o755 if (path / name).is_dir() else 0o644)} == set()
    assert modes["assets/tokenizer.model"] == 0o644 and modes["variables"] == 0o755


@pytest.mark.slow
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

    result = run_command("-c", FRESH_PROCESS, moved, json.dumps(sentences), env={"PYTHONPATH": None}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    assert results["modules"] == []
    assert results["signatures"] == SIGNATURES
    for loader in ("load", "session"):
        assert results[loader]["translations"] == expected, loader
        np.testing.assert_allclose(results[loader]["scores"], expected_scores, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_model_whose_stacks_differ_in_depth_exports_and_translates_as_in_process(tmp_path_factory, tmp_path):
    """3 encoder layers, 1 decoder layer: the export's search runs (and caches) one decoder layer,
    its translations, scores and teacher-forced log-probabilities are the in-process model's, and
    its attention has one layer."""
    run = tmp_path_factory.mktemp("deep_encoder")
    pairs = shared_model_dir(tmp_path_factory, run, **DEEP_ENCODER)
    sentences = [source for source, _ in pairs[:6]] + ["Der Mann sieht den Hund."]
    expected, expected_scores = in_process_translations(run, sentences)
    assert len(set(expected)) >= 3  # varied outputs, not one repeated string
    translator, _ = serving_module.from_model_dir(str(run), DECODING)
    written = serving_module.export_saved_model(translator, str(tmp_path / "out"))
    moved = tmp_path / "elsewhere"
    shutil.move(written, moved)
    loaded = tf.saved_model.load(str(moved))
    out = loaded.signatures["serving_default"](sentences=tf.constant(sentences))
    assert [t.decode("utf-8") for t in out["translations"].numpy()] == expected
    np.testing.assert_allclose(out["scores"], expected_scores, rtol=1e-5, atol=1e-5)
    attention = loaded.signatures[serving_module.ATTENTION_SIGNATURE](sentences=tf.constant(sentences[:2]))
    assert attention["attention"].shape[1:3] == (1, 2)  # (N, decoder layers, heads, T, S)
    scored = pairs[30:34]
    log_probs = loaded.signatures["score"](sources=tf.constant([s for s, _ in scored]),
                                           targets=tf.constant([t for _, t in scored]))["log_probs"]
    model, _ = layout.restore_model(str(run))
    tokenizer = tokenizers.load(os.path.join(run, layout.TOKENIZER_DIR))
    source, target = (tokenizer.tokenize(side, add_eos=True).to_tensor() for side in zip(*scored))
    reference, _ = sequence_scores.sequence_log_probs(model, source, target)
    np.testing.assert_allclose(log_probs, reference, rtol=1e-5, atol=1e-4)


def test_only_core_tensorflow_and_tensorflow_text_ops(exported):
    report = ops.check(str(exported[0]))
    assert report["offenders"] == {}
    assert "SentencepieceTokenizeOp" in report["tensorflow_text"]
    assert {"While", "TopKV2", "UnicodeTranscode", "StatelessMultinomial"} <= set(report["core"])
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


def saved_functions(path) -> int:
    """How many functions the SavedModel in the folder `path` holds (its graph's library)."""
    from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=import-outside-toplevel

    saved_model = saved_model_pb2.SavedModel.FromString((pathlib.Path(path) / versions.SAVED_MODEL_FILE).read_bytes())
    return len(saved_model.meta_graphs[0].graph_def.library.function)


def test_an_export_of_serving_default_alone_holds_it_alone_and_translates_as_the_whole_export(
        exports, model_dir, tmp_path):
    """`signatures=["serving_default"]` (`python -m keras_transformer.export --signatures=serving_default`):
    export.json, the warm-up file and TF Serving's loader see that signature alone, the
    SavedModel holds under half the whole export's functions, and a fresh process translates
    and scores as the whole export does."""
    whole, whole_loaded = exports("float32")
    translator, _ = serving_module.from_model_dir(str(model_dir[0]), DECODING, signatures=["serving_default"])
    assert list(translator.signatures()) == ["serving_default"]
    assert translator.translate_n_best is None and translator.score is None
    lean = serving_module.export_saved_model(translator, str(tmp_path / "lean"))
    assert versions.read_settings(lean)["signatures"] == ["serving_default"]
    assert {name for name, _ in warmup.read(lean)} == {"serving_default"}
    assert 2 * saved_functions(lean) < saved_functions(whole)

    sentences = [source for source, _ in model_dir[1][:6]]
    result = run_command("-c", FRESH_PROCESS, lean, json.dumps(sentences), env={"PYTHONPATH": None}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    assert results["signatures"] == ["serving_default"]
    expected = whole_loaded.signatures["serving_default"](sentences=tf.constant(sentences))
    for loader in ("load", "session"):
        assert results[loader]["translations"] == [t.decode() for t in expected["translations"].numpy()], loader
        np.testing.assert_allclose(results[loader]["scores"], expected["scores"].numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
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
    result = run_command("-m", "keras_transformer.export", f"--model_dir={tmp_path / 'missing'}", f"--export_dir={tmp_path / 'out'}",
                         timeout=120)
    assert_one_error_line(result, "missing")
    assert not (tmp_path / "out").exists()
    result = run_command("-m", "keras_transformer.export", f"--model_dir={tmp_path}", f"--export_dir={tmp_path / 'out'}",
                         "--format=ctranslate2", "--precision=bfloat16", timeout=120)
    assert_one_error_line(result, "--precision applies to --format=saved_model only")
    assert not (tmp_path / "out").exists()
    for flag, message in (("--signatures=translate_n_best", "--signatures: serving_default is required"),
                          ("--signatures=serving_default,attention", "--signatures: unknown attention; choose from")):
        result = run_command("-m", "keras_transformer.export", f"--model_dir={tmp_path}", f"--export_dir={tmp_path / 'out'}", flag,
                             timeout=120)
        assert_one_error_line(result, message)
        assert not (tmp_path / "out").exists()


# Precision -----------------------------------------------------------------------------------

SLOW_BFLOAT16_EXPORT = textwrap.dedent(
    """
    import runpy, sys
    from keras_transformer import cpu_precision
    cpu_precision._cpu_flags = lambda: frozenset({"avx2", "avx512f", "avx512_bf16"})  # host C's CPU flags
    cpu_precision._bfloat16_speedup = lambda: 0.55  # and its timing: bfloat16 products at 0.55x float32's speed
    sys.argv = ["keras_transformer.export", *sys.argv[1:]]
    runpy.run_module("keras_transformer.export", run_name="__main__", alter_sys=True)
    """
)


def share_identical(reference, other):
    """Two `serving_default` outputs: (the share of identical translations, the largest score
    difference over those)."""
    same = [a == b for a, b in zip(reference["translations"], other["translations"])]
    differences = np.abs(np.asarray(reference["scores"]) - np.asarray(other["scores"]))[same]
    return np.mean(same), differences.max(initial=0.0)


@pytest.mark.slow
def test_cli_auto_precision_follows_the_timing_not_the_cpu_flag(model_dir, tmp_path):
    """A CPU with AVX512_BF16 whose bfloat16 products are timed slower than float32's: `auto`
    exports float32 and prints why (the flag alone chose bfloat16 before)."""
    out = tmp_path / "out"
    result = run_command("-c", SLOW_BFLOAT16_EXPORT, f"--model_dir={model_dir[0]}", f"--export_dir={out}",
                         "--precision=auto", "--beam_size=2", "--max_extra_length=4", "--nocheck_ops")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "precision auto: float32 (bfloat16 matrix products 0.55x float32's speed on this CPU" in result.stdout
    assert f"to {out / '1'} (float32, auto)" in result.stdout
    settings = versions.read_settings(str(out / "1"))
    assert settings["precision"] == "float32"
    assert settings["task"] == "translation"  # recorded for parse, which refuses a translation export


def test_bfloat16_export_translates_mostly_as_the_float32_export(exports, model_dir):
    """A barely trained tiny model ranks many hypotheses within the bfloat16 rounding of their
    logits (8 significant bits) of each other: 48 of these 60 translations were identical when
    this test was written. Scores of identical translations differ by that rounding only."""
    sentences = tf.constant([source for source, _ in model_dir[1][:60]])
    outputs = {precision: {k: v.numpy().tolist() for k, v in
                           exports(precision)[1].signatures["serving_default"](sentences=sentences).items()}
               for precision in precision_lib.PRECISIONS}
    share, largest = share_identical(outputs["float32"], outputs["bfloat16"])
    assert share >= 0.7
    assert largest < 0.1


@pytest.mark.slow
def test_bfloat16_export_runs_without_bfloat16_kernels_of_onednn(exports, model_dir, tmp_path):
    """A CPU without AVX-512 takes TensorFlow's own (Eigen) bfloat16 kernels, not oneDNN's:
    TF_ENABLE_ONEDNN_OPTS=0 takes them here. The moved export, in a fresh process with tensorflow
    and tensorflow_text only, through both loaders: the same computation, rounded to bfloat16 at
    other places (no fused MatMul and BiasAdd), so most translations are identical, not all, and
    their scores differ a little more than those of two runs on oneDNN would."""
    path, loaded = exports("bfloat16")
    moved = tmp_path / "elsewhere" / "transformer" / "1"
    shutil.copytree(path, moved)
    sentences = [source for source, _ in model_dir[1][:20]]
    with_onednn = {k: v.numpy().tolist() for k, v in
                   loaded.signatures["serving_default"](sentences=tf.constant(sentences)).items()}
    with_onednn["translations"] = [t.decode("utf-8") for t in with_onednn["translations"]]
    result = run_command("-c", FRESH_PROCESS, moved, json.dumps(sentences),
                         env={"PYTHONPATH": None, "TF_ENABLE_ONEDNN_OPTS": "0"}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    assert results["modules"] == [] and results["signatures"] == SIGNATURES
    assert results["load"] == results["session"]
    share, largest = share_identical(with_onednn, results["session"])
    assert share >= 0.7 and largest < 0.2


# translate_n_best and score ------------------------------------------------------------------

@contextlib.contextmanager
def session_loader(path):
    """The export loaded once through the TF1 Session loader (TF Serving's, which loads a version
    once and serves every request from it); yields `run(name, feeds)`, a signature fed only `feeds`."""
    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph)  # not `with session`: that would make `graph` the default
    try:
        with graph.as_default():
            signatures = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(path)).signature_def

        def run(name, feeds):
            signature = signatures[name]
            fetches = {k: v.name for k, v in signature.outputs.items()}
            return session.run(fetches, {signature.inputs[k].name: v for k, v in feeds.items()})

        yield run
    finally:
        session.close()


def session_run(path, name, feeds):
    """One signature through the TF1 Session loader, feeding only `feeds`."""
    with session_loader(path) as run:
        return run(name, feeds)


def in_process_n_best(model_dir, sentences, beam_size, alpha, n_best, precision="float32"):
    model, run = reference_model(model_dir, precision)
    tokenizer = tokenizers.load(os.path.join(model_dir, layout.TOKENIZER_DIR))
    source = tokenizer.tokenize(sentences, add_eos=True).to_tensor()
    sequences, scores = run(lambda s: search.translate_ids(model, s, beam_size=beam_size, alpha=alpha,
                                                           n_best=n_best))(source)
    texts = tokenizer.detokenize(tf.reshape(sequences, [len(sentences) * n_best, -1])).numpy()
    return np.reshape(texts, [len(sentences), n_best]).tolist(), scores.numpy()


def test_n_best_equals_the_in_process_search_and_its_first_is_serving_default(exported, model_dir, precision):
    path, loaded = exported
    sentences = [source for source, _ in model_dir[1][4:9]]
    expected, expected_scores = in_process_n_best(model_dir[0], sentences, beam_size=5, alpha=0.6, n_best=3,
                                                  precision=precision)
    out = loaded.signatures["translate_n_best"](
        sentences=tf.constant(sentences), n_best=tf.constant([3]), beam_size=tf.constant([5]),
        alpha=tf.constant([0.6]))
    assert out["translations"].numpy().tolist() == expected
    np.testing.assert_allclose(out["scores"], expected_scores, rtol=1e-5, atol=1e-5)
    assert (np.diff(out["scores"].numpy(), axis=1) <= 1e-6).all()  # best first
    # Without options (TF Serving fills the SignatureDef's defaults): the export's settings,
    # hence serving_default's result in the only slot.
    with session_loader(path) as run:
        default = run("serving_default", {"sentences": sentences})
        n_best = run("translate_n_best", {"sentences": sentences})
    assert n_best["translations"].shape == (5, 1)
    assert n_best["translations"][:, 0].tolist() == default["translations"].tolist()
    np.testing.assert_allclose(n_best["scores"][:, 0], default["scores"], rtol=1e-5, atol=1e-5)
    # In Python (TF2 loader) the loaded function takes the options as optional, as the README says;
    # an empty batch without options too.
    loaded_default = loaded.translate_n_best(tf.constant(sentences))
    assert loaded_default["translations"].numpy().tolist() == n_best["translations"].tolist()
    assert loaded.translate_n_best(tf.zeros([0], tf.string))["translations"].shape[0] == 0


def test_n_best_options_per_sentence_equal_each_sentence_alone(exported, model_dir):
    signature = exported[1].signatures["translate_n_best"]
    sentences = [source for source, _ in model_dir[1][10:14]]
    beams, alphas, n_bests = [1, 4, 2, 6], [0.6, 0.0, 1.5, 0.6], [1, 4, 2, 3]
    together = signature(sentences=tf.constant(sentences), n_best=tf.constant(n_bests),
                         beam_size=tf.constant(beams), alpha=tf.constant(alphas))
    assert together["translations"].shape == (4, 4)
    for i, sentence in enumerate(sentences):
        alone = signature(sentences=tf.constant([sentence]), n_best=tf.constant([n_bests[i]]),
                          beam_size=tf.constant([beams[i]]), alpha=tf.constant([alphas[i]]))
        k = n_bests[i]
        assert together["translations"].numpy()[i, :k].tolist() == alone["translations"].numpy()[0].tolist()
        np.testing.assert_allclose(together["scores"][i, :k], alone["scores"][0], rtol=1e-5, atol=1e-5)
        assert together["translations"].numpy()[i, k:].tolist() == [b""] * (4 - k)
        np.testing.assert_array_equal(together["scores"][i, k:], serving_module.NO_HYPOTHESIS_SCORE)


def test_n_best_options_out_of_range_are_clamped_or_refused(exported, model_dir):
    signature = exported[1].signatures["translate_n_best"]
    sentences = tf.constant([model_dir[1][20][0], model_dir[1][21][0]])

    def run(n_best, beam_size, alpha):
        return signature(sentences=sentences, n_best=tf.constant(n_best, tf.int32),
                         beam_size=tf.constant(beam_size, tf.int32), alpha=tf.constant(alpha, tf.float32))

    def same(a, b):
        assert a["translations"].numpy().tolist() == b["translations"].numpy().tolist()
        np.testing.assert_allclose(a["scores"], b["scores"], rtol=1e-6)

    limit = serving_module.MAX_BEAM_SIZE
    same(run([40], [1000], [0.6]), run([limit], [limit], [0.6]))  # beam <= 16, n_best <= beam
    same(run([0], [-3], [-1.0]), run([1], [1], [0.0]))  # each at least its lower bound
    same(run([2], [3], [1e9]), run([2], [3], [serving_module.MAX_ALPHA]))
    for bad, message in [(([1], [4], [float("nan")]), "alpha must be a finite"),
                         (([1, 2, 3], [4], [0.6]), "n_best must hold one value per sentence"),
                         (([1], [4, 4, 4], [0.6]), "beam_size must hold one value per sentence")]:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            run(*bad)


def test_score_equals_the_teacher_forced_log_probability(exported, model_dir, precision):
    pairs = model_dir[1][30:36] + [("", model_dir[1][36][1]), (model_dir[1][37][0], "")]
    out = exported[1].signatures["score"](sources=tf.constant([s for s, _ in pairs]),
                                          targets=tf.constant([t for _, t in pairs]))
    model, run = reference_model(model_dir[0], precision)
    tokenizer = tokenizers.load(os.path.join(model_dir[0], layout.TOKENIZER_DIR))
    source = tokenizer.tokenize([s for s, _ in pairs], add_eos=True).to_tensor()
    target = tokenizer.tokenize([t for _, t in pairs], add_eos=True).to_tensor()
    expected, tokens = run(lambda s, t: sequence_scores.sequence_log_probs(model, s, t))(source, target)
    np.testing.assert_allclose(out["log_probs"], expected, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(out["tokens"], tokens)
    assert (out["log_probs"].numpy() < 0).all()
    with pytest.raises(tf.errors.InvalidArgumentError, match="as many sentences"):
        exported[1].signatures["score"](sources=tf.constant(["a", "b"]), targets=tf.constant(["a"]))


@pytest.mark.parametrize("loader", ["load", "session"])
def test_new_signatures_take_bad_input_through_both_loaders(exported, loader):
    path, loaded = exported
    batch = [BAD_INPUTS[case] for case in sorted(BAD_INPUTS)] + [b"Der Hund bellt."]

    with session_loader(path) if loader == "session" else contextlib.nullcontext() as session:

        def call(name, **feeds):
            if loader == "load":
                out = loaded.signatures[name](**{k: tf.constant(v) for k, v in feeds.items()})
                return {k: v.numpy() for k, v in out.items()}
            return session(name, feeds)

        options = {"n_best": np.array([2], np.int32), "beam_size": np.array([3], np.int32),
                   "alpha": np.array([0.6], np.float32)}
        n_best = call("translate_n_best", sentences=np.array(batch, object), **options)
        assert n_best["translations"].shape == (len(batch), 2)
        for row in n_best["translations"].tolist():
            for text in row:
                text.decode("utf-8")  # always valid UTF-8
        empty_rows = [i for i, case in enumerate(sorted(BAD_INPUTS)) if case in ("empty", "whitespace")]
        for i in empty_rows:
            assert n_best["translations"][i].tolist() == [b"", b""]
            assert n_best["scores"][i].tolist() == [0.0, serving_module.NO_HYPOTHESIS_SCORE]
        scored = call("score", sources=np.array(batch, object), targets=np.array(batch[::-1], object))
        assert np.isfinite(scored["log_probs"]).all() and scored["log_probs"].shape == (len(batch),)
        for i in empty_rows:  # an empty source is EOS alone, as in the score command: a finite score
            assert scored["log_probs"][i] < 0 and scored["tokens"][i] > 0
        long = sorted(BAD_INPUTS).index("long")
        assert scored["tokens"][len(batch) - 1 - long] == MAX_LENGTH  # the long target is truncated
        sampling = {"topk": np.array([5], np.int32), "topp": np.array([0.9], np.float32),
                    "temperature": np.array([0.0], np.float32), "seed": np.array([3], np.int64)}
        sampled = call("translate_sampled", sentences=np.array(batch, object), **sampling)
        prefixed = call("translate_with_prefix", sentences=np.array(batch, object),
                        target_prefixes=np.array([b"", b"\xff Der", LONG.encode(), b"  ", b"Der"], object))
        for out in (sampled, prefixed):
            assert out["translations"].shape == (len(batch),)
            for text in out["translations"].tolist():
                text.decode("utf-8")
            for i in empty_rows:  # an empty source gives "", prefix or not
                assert (out["translations"][i], out["scores"][i]) == (b"", 0.0)
        if loader == "session":  # TF Serving fills the SignatureDef's defaults of the absent options
            defaults = call("translate_sampled", sentences=np.array(batch, object))
            assert defaults["translations"].shape == (len(batch),)
        none = np.zeros([0], object)
        assert call("translate_n_best", sentences=none, **options)["translations"].shape[0] == 0
        assert call("translate_sampled", sentences=none, **sampling)["translations"].shape == (0,)
        assert call("translate_with_prefix", sentences=none, target_prefixes=none)["translations"].shape == (0,)
        out = call("score", sources=none, targets=none)
        assert out["log_probs"].shape == (0,) and out["tokens"].shape == (0,)


# translate_sampled and translate_with_prefix ------------------------------------------------

def in_process_search(model_dir, sentences, precision="float32", prefixes=None, **options):
    """The export's best translations and scores, by `search.translate_ids` in this process."""
    model, run = reference_model(model_dir, precision)
    tokenizer = tokenizers.load(os.path.join(model_dir, layout.TOKENIZER_DIR))
    source = tokenizer.tokenize(sentences, add_eos=True).to_tensor()
    args = [source]
    if prefixes is not None:
        args.append(tokenizer.tokenize([p.strip() for p in prefixes]).to_tensor(default_value=-1))
    sequences, scores = run(lambda s, *p: search.translate_ids(model, s, DECODING, n_best=1,
                                                               target_prefix=p[0] if p else None, **options))(*args)
    texts = [t.decode("utf-8") for t in tokenizer.detokenize(sequences[:, 0]).numpy()]
    return texts, scores[:, 0].numpy()


def test_sampled_signature_equals_in_process_sampling_and_seeds_reproduce(exported, model_dir, precision):
    path, loaded = exported
    sentences = [source for source, _ in model_dir[1][40:48]] * 2
    options = dict(topk=tf.constant([0]), topp=tf.constant([0.95]), temperature=tf.constant([1.5]))
    signature = loaded.signatures["translate_sampled"]
    out = signature(sentences=tf.constant(sentences), seed=tf.constant([7], tf.int64), **options)
    texts = [t.decode("utf-8") for t in out["translations"].numpy()]
    expected, expected_scores = in_process_search(
        model_dir[0], sentences, precision, sampling=SamplingConfig(topk=0, topp=0.95, temperature=1.5, seed=7))
    assert texts == expected
    np.testing.assert_allclose(out["scores"], expected_scores, rtol=1e-5, atol=1e-4)
    session = session_run(path, "translate_sampled", {"sentences": sentences, "topk": [0], "topp": [0.95],
                                                      "temperature": [1.5], "seed": [7]})
    assert [t.decode("utf-8") for t in session["translations"]] == texts
    other = signature(sentences=tf.constant(sentences), seed=tf.constant([8], tf.int64), **options)
    assert other["translations"].numpy().tolist() != out["translations"].numpy().tolist()
    assert len(set(texts)) > len(set(sentences))  # the two copies of a sentence are sampled apart
    # Temperature 0 is greedy search, whatever topk and topp.
    greedy = signature(sentences=tf.constant(sentences), topk=tf.constant([3]), topp=tf.constant([0.5]),
                       temperature=tf.constant([0.0]), seed=tf.constant([7] * len(sentences), tf.int64))
    expected, _ = in_process_search(model_dir[0], sentences, precision, beam_size=1)
    assert [t.decode("utf-8") for t in greedy["translations"].numpy()] == expected


@pytest.mark.parametrize("bad, message", [
    (dict(topk=[-1]), "topk must be >= 0"), (dict(topp=[0.0]), "topp must be in"), (dict(topp=[1.5]), "topp must be in"),
    (dict(topp=[float("nan")]), "topp must be in"), (dict(temperature=[-0.1]), "temperature must be a finite"),
    (dict(temperature=[float("inf")]), "temperature must be a finite"), (dict(topk=[1, 2, 3]), "one value per sentence"),
])
def test_sampled_signature_refuses_options_out_of_range(exported, bad, message):
    dtypes = {"topk": tf.int32, "topp": tf.float32, "temperature": tf.float32}
    feeds = {name: tf.constant(bad.get(name, [1]), dtype) for name, dtype in dtypes.items()}
    feeds["seed"] = tf.constant([0], tf.int64)
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        exported[1].signatures["translate_sampled"](sentences=tf.constant(["Der Hund bellt.", "Ein Mann."]), **feeds)


def test_prefix_signature_continues_each_prefix_as_the_in_process_search(exported, model_dir, precision):
    path, loaded = exported
    pairs = model_dir[1][50:56]
    sentences = [source for source, _ in pairs]
    words = [target.split() for _, target in pairs]
    prefixes = ["", " ".join(words[1][:2]), words[2][0], "  ", " ".join(words[4][:3]), "Haus"]
    out = loaded.signatures["translate_with_prefix"](sentences=tf.constant(sentences),
                                                     target_prefixes=tf.constant(prefixes))
    texts = [t.decode("utf-8") for t in out["translations"].numpy()]
    expected, expected_scores = in_process_search(model_dir[0], sentences, precision, prefixes=prefixes)
    assert texts == expected
    np.testing.assert_allclose(out["scores"], expected_scores, rtol=1e-5, atol=1e-4)
    for text, prefix in zip(texts, prefixes):
        assert text.startswith(prefix.strip())
    default = loaded.signatures["serving_default"](sentences=tf.constant(sentences))
    for i in (0, 3):  # no prefix: serving_default's translation
        assert out["translations"].numpy()[i] == default["translations"].numpy()[i]
    session = session_run(path, "translate_with_prefix", {"sentences": sentences, "target_prefixes": prefixes})
    assert [t.decode("utf-8") for t in session["translations"]] == texts
    with pytest.raises(tf.errors.InvalidArgumentError, match="as many sentences"):
        loaded.signatures["translate_with_prefix"](sentences=tf.constant(["a", "b"]), target_prefixes=tf.constant(["a"]))


def test_a_prefix_longer_than_the_limit_is_cut_there(exported):
    signature = exported[1].signatures["translate_with_prefix"]
    out = signature(sentences=tf.constant(["Hund."]), target_prefixes=tf.constant([LONG]))
    text = out["translations"].numpy()[0].decode("utf-8")
    assert LONG.startswith(text) and len(text.split()) >= 10  # the prefix, cut at source + 50 tokens
    assert np.isfinite(out["scores"].numpy()[0])
