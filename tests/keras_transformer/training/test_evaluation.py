"""Dev evaluation: teacher-forcing inputs, loss and perplexity, translation, sacreBLEU (BLEU, chrF, chrF++)."""

import math

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer, TransformerConfig, label_smoothed_cross_entropy
from keras_transformer import metrics
from keras_transformer.decoding import search
from keras_transformer.training import evaluation
from keras_transformer.config import DecodingConfig
from keras_transformer.losses import decoder_inputs

CONFIG = TransformerConfig.tiny(vocab_size=20, max_length=32)
SOURCE = np.array([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]], np.int32)
TARGET = np.array([[10, 11, 3, 0], [12, 3, 0, 0]], np.int32)


@pytest.fixture(scope="module")
def model():
    tf.keras.utils.set_random_seed(3)
    model = Transformer(CONFIG)
    model.build()
    return model


def test_decoder_inputs_shift_right_behind_bos():
    np.testing.assert_array_equal(decoder_inputs(TARGET).numpy(), [[2, 10, 11, 3], [2, 12, 3, 0]])


def test_evaluate_loss_matches_a_hand_computation(model):
    loss_fn = evaluation.make_loss_fn(model, label_smoothing=0.1)
    results = evaluation.evaluate_loss(loss_fn, [(SOURCE, TARGET), (SOURCE[:1], TARGET[:1])])
    logits = model((SOURCE, decoder_inputs(TARGET)))
    log_probs = tf.nn.log_softmax(logits).numpy()
    nll, count = [], 0
    for rows in (slice(0, 2), slice(0, 1)):
        for b in range(*rows.indices(2)):
            for t in range(TARGET.shape[1]):
                if TARGET[b, t]:
                    nll.append(-log_probs[b, t, TARGET[b, t]])
    np.testing.assert_allclose(results["nll"], np.mean(nll), rtol=1e-5)
    np.testing.assert_allclose(results["perplexity"], math.exp(np.mean(nll)), rtol=1e-5)
    smoothed, tokens = label_smoothed_cross_entropy(TARGET, logits, 0.1)
    smoothed1, tokens1 = label_smoothed_cross_entropy(TARGET[:1], logits[:1], 0.1)
    np.testing.assert_allclose(results["loss"], float((smoothed + smoothed1) / (tokens + tokens1)), rtol=1e-5)
    assert results["tokens"] == 8


def test_translate_fn_is_decoding_translate_ids_traced_once(model):
    translate = evaluation.make_translate_fn(model, DecodingConfig(beam_size=3, alpha=0.6, max_extra_length=4))
    eager_ids, eager_scores = search.translate_ids(model, SOURCE, beam_size=3, max_extra_length=4)
    ids, scores = translate(tf.constant(SOURCE))
    np.testing.assert_array_equal(ids.numpy(), eager_ids.numpy()[:, 0, : ids.shape[1]])
    np.testing.assert_allclose(scores.numpy(), eager_scores.numpy()[:, 0], rtol=1e-5)
    translate(tf.constant(SOURCE[:1, :4]))
    translate(tf.constant(np.tile(SOURCE, [3, 2])))
    assert translate.experimental_get_tracing_count() == 1  # bucketed dev batches: one trace


def test_translate_corpus_batches_by_length_and_keeps_the_input_order():
    seen = []

    def echo(source_ids):  # "translates" a sentence into its own ids
        seen.append(source_ids.shape)
        return source_ids, tf.zeros([source_ids.shape[0]])

    def detokenize(ids):
        return [" ".join(str(i) for i in row if i).encode() for row in ids.numpy()]

    sources = [[4, 5, 6, 3], [7, 3], [8, 9, 3], [10, 11, 12, 13, 3]]
    out = evaluation.translate_corpus(echo, sources, detokenize, batch_size=2)
    assert out == ["4 5 6 3", "7 3", "8 9 3", "10 11 12 13 3"]
    assert seen == [(2, 3), (2, 5)]  # sorted by length: little padding


def test_evaluator_reports_loss_and_bleu(model):
    evaluator = evaluation.Evaluator(
        [(SOURCE, TARGET)], [list(SOURCE[0][SOURCE[0] != 0])], ["a b c d e"],
        lambda ids: [b"a b c d e"] * int(ids.shape[0]), DecodingConfig(beam_size=1))
    results = evaluator(model)
    assert set(results) >= {"loss", "nll", "perplexity", "bleu", "signature"}
    assert results["hypotheses"] == ["a b c d e"] and results["bleu"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="beam_size"):
        DecodingConfig(beam_size=0)
    with pytest.raises(ValueError, match="2 dev sentences but 1 references"):
        evaluation.Evaluator(None, [[5, 3], [6, 3]], ["a"], lambda ids: [])


def test_evaluator_reports_chrf_and_chrf_plus_plus_of_its_hypotheses(model):
    references = ["Ein Mann fährt Fahrrad.", "Ein Hund läuft über die Wiese."]
    evaluator = evaluation.Evaluator(
        None, [list(SOURCE[0][SOURCE[0] != 0]), list(SOURCE[1][SOURCE[1] != 0])], references,
        lambda ids: ["Ein Mann fährt ein rotes Fahrrad.".encode()] * int(ids.shape[0]), DecodingConfig(beam_size=1))
    results = evaluator(model)
    assert results["hypotheses"] == ["Ein Mann fährt ein rotes Fahrrad."] * 2
    scores = metrics.corpus_scores(results["hypotheses"], references)
    assert results["bleu"] == scores.bleu.score and results["signature"] == scores.bleu.signature
    assert results["chrf"] == scores.chrf.score and results["chrf_signature"] == scores.chrf.signature
    assert results["chrf++"] == scores.chrf_plus_plus.score
    assert results["chrf++_signature"] == scores.chrf_plus_plus.signature
    assert isinstance(results["chrf"], float) and 0.0 < results["chrf"] < 100.0 and 0.0 < results["chrf++"] < 100.0
    assert results["chrf"] != results["chrf++"]  # chrF++ also counts word n-grams
    assert "nw:0" in results["chrf_signature"] and "nw:2" in results["chrf++_signature"]
    assert "loss" not in results  # no dev batches: translations only
