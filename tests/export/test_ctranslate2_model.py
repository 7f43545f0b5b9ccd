"""The CTranslate2 export: the same network as the TensorFlow model, checked by scoring and decoding.

One tiny trained training directory (`export_models.shared_model_dir`) exported with
`python -m keras_transformer.export --format=ctranslate2` (float32) and with `convert(quantization="int8")`, and
one whose encoder and decoder differ in depth (3 and 1 layers) converted in process.
The teacher-forced log-probabilities of CTranslate2 equal the model's (this catches any wrong
weight, transposition, scale, position table or layer-norm epsilon), greedy search gives the
same outputs, beam search's re-ranked scores are the project's scores of the same outputs, and
the folder is a standalone CTranslate2 model in a fresh process without TensorFlow.
"""

import json
import os
import textwrap

import numpy as np
import pytest
import tensorflow as tf

ctranslate2 = pytest.importorskip("ctranslate2")

from keras_transformer.export import client, ctranslate2_model, versions  # noqa: E402
from keras_transformer.decoding import beam_search, search, sequence_scores  # noqa: E402
from keras_transformer.run_dir import layout
from keras_transformer.config import DecodingConfig, SamplingConfig  # noqa: E402
from keras_transformer.losses import decoder_inputs  # noqa: E402
from keras_transformer.special_ids import BOS_ID, EOS_ID, PAD_ID  # noqa: E402
from keras_transformer.pipelines import grammar_corpus, tokenizers  # noqa: E402
from tests.helpers.commands import assert_one_error_line, run_command  # noqa: E402
from tests.helpers.export_models import DEEP_ENCODER, MAX_LENGTH, shared_model_dir  # noqa: E402

SENTENCES = 40


def _model_and_pairs(path):
    """The restored model of the training directory `path`, its tokenizer, and SENTENCES of the
    pairs it was trained on whose sources the export does not truncate (the in-process references
    below do not): (model, tokenizer, sources, targets)."""
    model, _ = layout.restore_model(str(path))
    tokenizer = tokenizers.load(os.path.join(path, layout.TOKENIZER_DIR))
    pairs = grammar_corpus.generate_pairs(400, seed=0)  # what make_model_dir trained on
    lengths = tokenizer.tokenize([s for s, _ in pairs], add_eos=True).row_lengths().numpy()
    pairs = [pair for pair, length in zip(pairs, lengths) if length <= MAX_LENGTH][-SENTENCES:]
    return model, tokenizer, [s for s, _ in pairs], [t for _, t in pairs]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(training directory, exports folder, source sentences, reference targets, model, tokenizer)."""
    path = tmp_path_factory.mktemp("run")
    shared_model_dir(tmp_path_factory, path)
    out = tmp_path_factory.mktemp("ct2") / "transformer"
    result = run_command("-m", "keras_transformer.export", f"--model_dir={path}", f"--export_dir={out}", "--format=ctranslate2",
                         "--beam_size=4", "--alpha=0.6", timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"to {out / '1'} (CTranslate2, float32)" in result.stdout
    model, tokenizer, sources, targets = _model_and_pairs(path)
    return path, out, sources, targets, model, tokenizer


def pieces_of(tokenizer, ids):
    vocabulary = tokenizer.pieces()
    return [[vocabulary[i] for i in row if i > 0] for row in ids]


def project_search(model, tokenizer, sentences, beam_size, alpha=0.6):
    """The model's own search: per sentence its pieces (no EOS), text and score."""
    source = tokenizer.tokenize(sentences, add_eos=True).to_tensor()
    sequences, scores = search.translate_ids(model, source, beam_size=beam_size, alpha=alpha)
    outputs = pieces_of(tokenizer, sequences[:, 0].numpy())
    texts = [t.decode("utf-8") for t in tokenizer.detokenize(sequences[:, 0]).numpy()]
    return [[p for p in row if p != "</s>"] for row in outputs], texts, scores[:, 0].numpy()


def project_log_probs(model, tokenizer, sources, outputs):
    """log P(output + EOS | source) by teacher forcing, as the search scores it: PAD and BOS,
    which it never outputs, masked before the softmax (`search.step_fn`); and |Y| with EOS."""
    vocabulary = {p: i for i, p in enumerate(tokenizer.pieces())}
    source = tokenizer.tokenize(sources, add_eos=True).to_tensor()
    target = tf.ragged.constant([[vocabulary[p] for p in row] + [EOS_ID] for row in outputs]).to_tensor()
    logits = model((source, decoder_inputs(target)), training=False)  # (B, T, V)
    never = tf.one_hot(PAD_ID, logits.shape[-1]) + tf.one_hot(BOS_ID, logits.shape[-1])
    log_probs = tf.nn.log_softmax(tf.where(never > 0, -1e9, logits))
    token_log_probs = tf.gather(log_probs, target, batch_dims=2)  # (B, T)
    scored = tf.not_equal(target, PAD_ID)
    return (tf.reduce_sum(tf.where(scored, token_log_probs, 0.0), axis=1).numpy(),
            tf.reduce_sum(tf.cast(scored, tf.int32), axis=1).numpy())


def test_layout(run):
    _, out, *_ = run
    path = out / "1"
    assert sorted(os.listdir(out)) == ["1"]  # no temporary folder left
    assert {"model.bin", "config.json", "shared_vocabulary.json", "tokenizer", versions.SETTINGS_FILE} <= set(
        os.listdir(path))
    settings = json.loads((path / versions.SETTINGS_FILE).read_text())
    assert settings["format"] == "ctranslate2" and settings["quantization"] is None
    assert settings["decoding"]["beam_size"] == 4 and settings["checkpoint"].endswith("ckpt-150")
    assert settings["special_tokens"] == {"pad": "<pad>", "unk": "<unk>", "bos": "<s>", "eos": "</s>"}
    config = json.loads((path / "config.json").read_text())
    assert config["add_source_eos"] is True and config["add_source_bos"] is False
    assert config["decoder_start_token"] == "<s>" and config["layer_norm_epsilon"] == 1e-6


def test_teacher_forced_scores_equal_the_models(run):
    """CTranslate2's score_batch of the reference pairs equals `sequence_scores.sequence_log_probs`."""
    _, out, sources, targets, model, tokenizer = run
    translator = ctranslate2.Translator(str(out / "1"))
    source_pieces = pieces_of(tokenizer, tokenizer.tokenize(sources).to_list())
    target_pieces = pieces_of(tokenizer, tokenizer.tokenize(targets).to_list())
    results = translator.score_batch(source_pieces, target_pieces)
    ct2 = np.array([sum(r.log_probs) for r in results])
    assert [len(r.tokens) for r in results] == [len(t) + 1 for t in target_pieces]  # EOS scored too
    source_ids = tokenizer.tokenize(sources, add_eos=True).to_tensor()
    target_ids = tokenizer.tokenize(targets, add_eos=True).to_tensor()
    log_probs, _ = sequence_scores.sequence_log_probs(model, source_ids, target_ids)
    log_probs = log_probs.numpy()
    np.testing.assert_allclose(ct2, log_probs, atol=1e-4, rtol=1e-5)
    assert log_probs.min() < -1.0  # not trivially certain outputs


def test_greedy_search_equals_the_models(run):
    _, out, sources, _, model, tokenizer = run
    ct2 = ctranslate2_model.Ctranslate2Translator(str(out / "1"))
    got = ct2.translate(sources, DecodingConfig(beam_size=1))
    _, texts, scores = project_search(model, tokenizer, sources, beam_size=1)
    assert [hypotheses[0][0] for hypotheses in got] == texts
    np.testing.assert_allclose([hypotheses[0][1] for hypotheses in got], scores, atol=1e-4)
    assert len(set(texts)) > SENTENCES // 4  # outputs depend on the input: not one constant string


def test_beam_search_scores_are_the_projects_scores_of_the_same_outputs(run):
    """Re-ranked beam-4 hypotheses carry log P(Y) / lp(|Y|) as the project computes it; the best
    ones are the project's own beam output on most sentences (the searches collect finished
    hypotheses by different rules; `translation_options`)."""
    _, out, sources, _, model, tokenizer = run
    ct2 = ctranslate2_model.Ctranslate2Translator(str(out / "1"))
    nbest = ctranslate2_model.translate_pieces(ct2.translator, ct2.tokenize(sources),
                                               DecodingConfig(beam_size=4, alpha=0.6, n_best=4), ct2.config)
    flat = [(source, pieces, score) for source, hypotheses in zip(sources, nbest) for pieces, score in hypotheses]
    assert all(len(hypotheses) == 4 for hypotheses in nbest)
    assert all([s for _, s in hypotheses] == sorted([s for _, s in hypotheses], reverse=True) for hypotheses in nbest)
    log_probs, lengths = project_log_probs(model, tokenizer, [f[0] for f in flat], [f[1] for f in flat])
    expected = log_probs / beam_search.length_penalty(lengths, 0.6).numpy()
    np.testing.assert_allclose([f[2] for f in flat], expected, atol=2e-4, rtol=1e-5)
    outputs, _, _ = project_search(model, tokenizer, sources, beam_size=4)
    same = sum(hypotheses[0][0] == output for hypotheses, output in zip(nbest, outputs))
    assert same >= SENTENCES // 2, same


def test_sampling_with_temperature_0_or_top_1_is_greedy_and_top_k_holds(run):
    """CTranslate2 samples with the project's settings: temperature 0 and top-1 give the greedy
    outputs; hot top-2 samples keep each token among the model's 2 most probable (the TensorFlow
    model's teacher-forced distribution) and score log P(Y) as the project computes it."""
    _, out, sources, _, model, tokenizer = run
    ct2 = ctranslate2_model.Ctranslate2Translator(str(out / "1"))
    greedy = ct2.translate(sources, DecodingConfig(beam_size=1))
    for sampling in (SamplingConfig(temperature=0.0), SamplingConfig(topk=1, temperature=3.0)):
        assert ct2.translate(sources, sampling=sampling) == greedy
    sampling = SamplingConfig(topk=2, temperature=5.0, seed=4)
    pieces = ctranslate2_model.translate_pieces(ct2.translator, ct2.tokenize(sources), ct2.decoding, ct2.config,
                                                sampling=sampling)
    outputs = [hypotheses[0][0] for hypotheses in pieces]
    log_probs, _ = project_log_probs(model, tokenizer, sources, outputs)
    np.testing.assert_allclose([hypotheses[0][1] for hypotheses in pieces], log_probs, atol=2e-4, rtol=1e-5)
    vocabulary = {p: i for i, p in enumerate(tokenizer.pieces())}
    source = tokenizer.tokenize(sources, add_eos=True).to_tensor()
    target = tf.ragged.constant([[vocabulary[p] for p in row] + [EOS_ID] for row in outputs]).to_tensor()
    logits = model((source, decoder_inputs(target)), training=False).numpy()
    logits[..., [PAD_ID, BOS_ID]] = -np.inf
    ranks = [int(np.sum(logits[b, t] > logits[b, t, target[b, t]]))
             for b in range(len(outputs)) for t in range(len(outputs[b]) + 1)]
    assert max(ranks) <= 1 and ranks.count(1) > 0
    assert [h[0][0] for h in ct2.translate(sources, sampling=sampling)] != [h[0][0] for h in greedy]


@pytest.fixture(scope="module")
def deep_encoder(tmp_path_factory):
    """A model of 3 encoder layers and 1 decoder layer, converted in process:
    (CTranslate2 folder, source sentences, reference targets, model, tokenizer)."""
    path = tmp_path_factory.mktemp("deep_encoder")
    shared_model_dir(tmp_path_factory, path, **DEEP_ENCODER)
    out, _ = ctranslate2_model.convert(str(path), str(tmp_path_factory.mktemp("ct2_deep_encoder") / "transformer"))
    model, tokenizer, sources, targets = _model_and_pairs(path)
    assert (len(model.encoder_layers), len(model.decoder_layers)) == (3, 1)
    return out, sources, targets, model, tokenizer


def test_each_stack_keeps_its_depth_teacher_forced_scores_equal_the_models(deep_encoder):
    """CTranslate2's spec is built with num_layers=(3, 1): its score_batch of the reference pairs
    equals the model's `sequence_log_probs` (a stack of another depth would score otherwise, or
    leave weights unset)."""
    out, sources, targets, model, tokenizer = deep_encoder
    spec = ctranslate2.specs.TransformerSpec.from_config((3, 1), 2)  # what the export builds, unfilled
    assert (len(spec.encoder.layer), len(spec.decoder.layer)) == (3, 1)
    translator = ctranslate2.Translator(out)
    source_pieces = pieces_of(tokenizer, tokenizer.tokenize(sources).to_list())
    target_pieces = pieces_of(tokenizer, tokenizer.tokenize(targets).to_list())
    ct2 = np.array([sum(r.log_probs) for r in translator.score_batch(source_pieces, target_pieces)])
    log_probs, _ = sequence_scores.sequence_log_probs(model, tokenizer.tokenize(sources, add_eos=True).to_tensor(),
                                                      tokenizer.tokenize(targets, add_eos=True).to_tensor())
    np.testing.assert_allclose(ct2, log_probs.numpy(), atol=1e-4, rtol=1e-5)
    assert log_probs.numpy().min() < -1.0  # not trivially certain outputs


def test_each_stack_keeps_its_depth_greedy_search_equals_the_models(deep_encoder):
    out, sources, _, model, tokenizer = deep_encoder
    got = ctranslate2_model.Ctranslate2Translator(out).translate(sources, DecodingConfig(beam_size=1))
    _, texts, scores = project_search(model, tokenizer, sources, beam_size=1)
    assert [hypotheses[0][0] for hypotheses in got] == texts
    np.testing.assert_allclose([hypotheses[0][1] for hypotheses in got], scores, atol=1e-4)
    assert len(set(texts)) > SENTENCES // 4  # outputs depend on the input


def test_translate_loads_the_export_by_its_format(run, tmp_path):
    """`python -m keras_transformer.translate --export_dir` on a CTranslate2 export: its n-best
    lines are `Ctranslate2Translator`'s (the format's loader, `exporters.Ctranslate2Exporter`),
    and the in-process client's plain translations their first ones."""
    _, out, sources, *_ = run
    lines = sources[:5] + [""]
    (tmp_path / "source.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    result = run_command("-m", "keras_transformer.translate", f"--export_dir={out}",
                         f"--input={tmp_path / 'source.txt'}", "--n_best=2")
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"with {out / '1'}" in result.stderr
    expected = ctranslate2_model.Ctranslate2Translator(str(out / "1")).translate(lines, DecodingConfig(n_best=2))
    rows = [line.split(" ||| ") for line in result.stdout.splitlines()]
    assert [(int(i), text) for i, text, _ in rows] == [(i, text) for i, hypotheses in enumerate(expected)
                                                        for text, _ in hypotheses]
    assert [float(score) for *_, score in rows] == pytest.approx(
        [score for hypotheses in expected for _, score in hypotheses], abs=1e-5)
    translate_fn, source = client.load_translate_fn(export_dir=str(out))
    translations, _ = client.translate_lines(translate_fn, [line.encode("utf-8") for line in lines], batch_size=4)
    assert source == str(out / "1")
    assert translations == [hypotheses[0][0] for hypotheses in expected]


def test_int8_export_stores_the_weights_to_int8_precision(run, tmp_path):
    """Its int8 weights, computed in float32, score the references within 1% of the float32
    export (the quantization error); int8 compute runs. (On this tiny, barely trained model
    int8 compute changes most greedy outputs; docs/speed.md#serving-speed has the trained model's.)"""
    path, out, sources, targets, _, tokenizer = run
    int8_path, _ = ctranslate2_model.convert(str(path), str(tmp_path / "int8"), quantization="int8")
    # int8 weights; the float32 position tables (1,024 rows) are much of this tiny model.
    assert os.path.getsize(os.path.join(int8_path, "model.bin")) < 0.75 * os.path.getsize(out / "1" / "model.bin")
    source_pieces = pieces_of(tokenizer, tokenizer.tokenize(sources).to_list())
    target_pieces = pieces_of(tokenizer, tokenizer.tokenize(targets).to_list())
    scores = {}
    for name, folder, compute_type in (("float32", out / "1", "float32"), ("int8 weights", int8_path, "float32"),
                                       ("int8", int8_path, "int8")):
        translator = ctranslate2.Translator(str(folder), compute_type=compute_type)
        assert translator.compute_type == (compute_type if compute_type == "float32" else "int8_float32")
        scores[name] = np.array([sum(r.log_probs) for r in translator.score_batch(source_pieces, target_pieces)])
    np.testing.assert_allclose(scores["int8 weights"], scores["float32"], rtol=0.01)
    assert not np.allclose(scores["int8 weights"], scores["float32"], rtol=1e-6)  # quantized indeed
    assert np.all(np.isfinite(scores["int8"]))


FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys
    import ctranslate2
    path, sources = sys.argv[1], json.loads(sys.argv[2])
    results = ctranslate2.Translator(path).translate_batch(sources, beam_size=1, min_decoding_length=0)
    print(json.dumps({"outputs": [r.hypotheses[0] for r in results], "tensorflow": "tensorflow" in sys.modules}))
    """
)


def test_moved_folder_runs_in_a_fresh_process_without_tensorflow(run, tmp_path):
    _, out, sources, _, model, tokenizer = run
    moved = tmp_path / "moved"
    os.rename(out / "1", moved)
    try:
        source_pieces = pieces_of(tokenizer, tokenizer.tokenize(sources[:8]).to_list())
        result = run_command("-c", FRESH_PROCESS, moved, json.dumps(source_pieces), cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
        got = json.loads(result.stdout)
        assert got["tensorflow"] is False
        outputs, _, _ = project_search(model, tokenizer, sources[:8], beam_size=1)
        assert got["outputs"] == outputs
    finally:
        os.rename(moved, out / "1")


@pytest.mark.parametrize("flags,message", [
    (["--format=ctranslate2", "--quantization=int7"], "--quantization=int7: not a CTranslate2 type"),
    (["--quantization=int8"], "--quantization applies to --format=ctranslate2 only"),
    (["--format=ctranslate2", "--version=1"], "already exists"),
    (["--format=onnx"], "--format"),
])
def test_bad_flags_end_in_one_error_line_and_write_nothing(run, flags, message):
    path, out, *_ = run
    before = sorted(os.listdir(out))
    result = run_command("-m", "keras_transformer.export", f"--model_dir={path}", f"--export_dir={out}", *flags)
    assert_one_error_line(result, message)
    assert sorted(os.listdir(out)) == before
