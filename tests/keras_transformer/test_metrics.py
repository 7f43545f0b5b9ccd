"""Corpus scores: sacreBLEU's BLEU (section 6.1), chrF and chrF++ (Popović 2015, 2017), with signatures."""

import dataclasses

import pytest
import sacrebleu

from keras_transformer import metrics

HYPOTHESES = ["Der Hund läuft über die Wiese.", "Ein Mann fährt ein rotes Fahrrad.", "Zwei Kinder spielen."]
REFERENCES = ["Der Hund rennt über die grüne Wiese.", "Ein Mann fährt Fahrrad.", "Zwei Kinder spielen im Park."]


def test_corpus_bleu_is_sacrebleu_with_its_signature():
    result = metrics.corpus_bleu(REFERENCES, REFERENCES)
    assert result.score == pytest.approx(100.0) and isinstance(result, metrics.CorpusBleu)
    assert "case:mixed" in result.signature and "tok:13a" in result.signature and "nrefs:1" in result.signature
    assert str(result).startswith("BLEU = 100.00") and str(result).endswith(result.signature)
    assert metrics.corpus_bleu([r.lower() for r in REFERENCES], REFERENCES).score < 100.0  # cased
    assert metrics.corpus_bleu(HYPOTHESES, REFERENCES).score == pytest.approx(
        sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score)


def test_chrf_of_a_tiny_example_by_hand():
    # Whitespace is removed: "ab c" is the characters "abc"; the reference is "abcd".
    #   n=1: {a, b, c} vs {a, b, c, d}:     P 3/3, R 3/4
    #   n=2: {ab, bc} vs {ab, bc, cd}:      P 2/2, R 2/3
    #   n=3: {abc} vs {abc, bcd}:           P 1/1, R 1/2
    #   n=4..6: no hypothesis n-gram: left out of the averages (sacreBLEU's effective order).
    # P = 1, R = (3/4 + 2/3 + 1/2) / 3 = 23/36, and chrF = F_beta(P, R) with beta = 2:
    # (1 + 4) P R / (4 P + R) = (115/36) / (167/36) = 115/167.
    chrf = metrics.corpus_chrf(["ab c"], ["abcd"])
    assert chrf.score == pytest.approx(100 * 115 / 167)
    assert chrf.score == pytest.approx(sacrebleu.corpus_chrf(["ab c"], [["abcd"]]).score)
    # chrF++ adds word 1- and 2-grams: unigrams {ab, c} vs {abcd}: P 0, R 0; the reference has
    # no bigram, so that order is left out. P = (1 + 1 + 1 + 0) / 4 = 3/4,
    # R = (3/4 + 2/3 + 1/2 + 0) / 4 = 23/48: 5 P R / (4 P + R) = (345/192) / (167/48) = 345/668.
    chrf_plus_plus = metrics.corpus_chrf(["ab c"], ["abcd"], word_order=2)
    assert chrf_plus_plus.score == pytest.approx(100 * 345 / 668)
    assert chrf_plus_plus.score == pytest.approx(sacrebleu.corpus_chrf(["ab c"], [["abcd"]], word_order=2).score)
    # Not the F1 of the averages (77.97), nor the average of each order's F2 (68.64).
    f2 = lambda p, r: 5 * p * r / (4 * p + r)  # noqa: E731
    assert chrf.score != pytest.approx(100 * 2 * (23 / 36) / (1 + 23 / 36))
    assert chrf.score != pytest.approx(100 * (f2(1, 3 / 4) + f2(1, 2 / 3) + f2(1, 1 / 2)) / 3)


def test_chrf_and_chrf_plus_plus_are_sacrebleus_corpus_chrf():
    for word_order, name, signature in ((0, "chrF2 = ", "nw:0"), (2, "chrF2++ = ", "nw:2")):
        result = metrics.corpus_chrf(HYPOTHESES, REFERENCES, word_order=word_order)
        expected = sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES], word_order=word_order).score
        assert result.score == pytest.approx(expected) and 0.0 < result.score < 100.0
        assert result.summary == f"{name}{expected:.2f}"
        assert f"nc:6|{signature}|space:no" in result.signature and "case:mixed" in result.signature
        assert str(result) == f"{result.summary}\nsacreBLEU signature: {result.signature}"
    # Corpus statistics are summed before the F-score, not averaged over sentences.
    sentences = [metrics.corpus_chrf([h], [r]).score for h, r in zip(HYPOTHESES, REFERENCES)]
    assert metrics.corpus_chrf(HYPOTHESES, REFERENCES).score != pytest.approx(sum(sentences) / len(sentences))
    assert metrics.corpus_chrf(REFERENCES, REFERENCES).score == pytest.approx(100.0)
    assert metrics.corpus_chrf([r.upper() for r in REFERENCES], REFERENCES).score < 100.0  # cased


def test_corpus_scores_is_the_report_translate_prints():
    scores = metrics.corpus_scores(HYPOTHESES, REFERENCES)
    assert scores.bleu == metrics.corpus_bleu(HYPOTHESES, REFERENCES)
    assert scores.chrf == metrics.corpus_chrf(HYPOTHESES, REFERENCES)
    assert scores.chrf_plus_plus == metrics.corpus_chrf(HYPOTHESES, REFERENCES, word_order=2)
    bleu = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES])
    chrf = sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES])
    chrf_plus_plus = sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES], word_order=2)
    lines = str(scores).splitlines()
    assert lines[0::2] == [str(bleu), f"chrF2 = {chrf.score:.2f}", f"chrF2++ = {chrf_plus_plus.score:.2f}"]
    assert lines[1::2] == [f"sacreBLEU signature: {s.signature}" for s in (scores.bleu, scores.chrf,
                                                                           scores.chrf_plus_plus)]
    assert "tok:13a" in lines[1] and "nw:0" in lines[3] and "nw:2" in lines[5]
    with pytest.raises(dataclasses.FrozenInstanceError):
        scores.bleu.score = 0.0  # type: ignore[misc]


def test_a_length_mismatch_is_a_value_error():
    for score in (metrics.corpus_bleu, metrics.corpus_chrf, metrics.corpus_scores):
        with pytest.raises(ValueError, match="3 hypotheses but 2 references"):
            score(HYPOTHESES, REFERENCES[:2])


def test_moses_tokens_are_multi30ks_preparation():
    """Lowercased, then normalize-punctuation.perl and tokenizer.perl -l de (with its escaping)."""
    assert metrics.moses_tokens("Ein Mann, der „läuft“ – schnell!", "de") == \
        "ein mann , der &quot; läuft &quot; - schnell !"
    assert metrics.moses_tokens("Zwei Hunde spielen im Schnee.", "de") == "zwei hunde spielen im schnee ."


def test_moses_bleu_ignores_case_and_counts_tokens_as_multi_bleu():
    hypotheses = ["EIN MANN LÄUFT.", "Zwei Hunde spielen im Schnee."]
    references = ["Ein Mann läuft .", "Zwei Hunde spielen im Schnee !"]
    lowered = metrics.moses_bleu(hypotheses, references, "de")
    # By hand: the same as plain BLEU of the prepared lines (multi-bleu.perl counts the tokens given).
    prepared = [[metrics.moses_tokens(s, "de") for s in side] for side in (hypotheses, references)]
    expected = sacrebleu.metrics.BLEU(tokenize="none", force=True).corpus_score(prepared[0], [prepared[1]])
    assert lowered.score == pytest.approx(expected.score)
    assert lowered.score > metrics.corpus_bleu(hypotheses, references).score  # case no longer counts
    assert "tok:none" in lowered.signature and lowered.signature.endswith("|pre:lc+moses-norm+moses-tok-de")
    assert lowered.summary.startswith("BLEU (lowercased, Moses-tokenized -l de) = ")
    report = str(metrics.corpus_scores(hypotheses, references, moses_lang="de"))
    assert report.splitlines()[-2].startswith("BLEU (lowercased, Moses-tokenized -l de) = ")
    assert metrics.corpus_scores(hypotheses, references).moses_bleu is None
    with pytest.raises(ValueError, match="a language code"):
        metrics.moses_bleu(hypotheses, references, "d/e")
