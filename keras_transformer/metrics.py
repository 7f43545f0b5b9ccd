"""Corpus scores of detokenized translations: BLEU as the paper reports it, chrF and chrF++ beside it.

BLEU is the paper's measure (section 6.1, Table 2): sacreBLEU with its defaults (13a
tokenization, exponential smoothing, cased) on detokenized text, so scores are comparable
across toolkits and carry their signature. chrF (Popović 2015, "chrF: character n-gram
F-score for automatic MT evaluation") and chrF++ (Popović 2017, "chrF++: words helping
character n-grams") are not in the paper; they are reported with sacreBLEU's defaults
(`sacrebleu.metrics.CHRF()`, `CHRF(word_order=2)`): character n-grams of orders 1-6 with
whitespace removed, cased, plus word uni- and bigrams for chrF++. The n-gram counts are
summed over the corpus; each order's precision and recall are averaged over the orders found
in both hypotheses and references, and the two averages combined as F-beta with beta = 2
(recall weighs twice as much as precision):

    >>> result = corpus_bleu(["Ein Mann läuft."], ["Ein Mann rennt."])
    >>> result.score, result.signature     # 0-100, "nrefs:1|case:mixed|eff:no|tok:13a|..."
    >>> print(result)                      # "BLEU = ... (BP = ...)" and the signature line
    >>> corpus_chrf(hypotheses, references, word_order=2).score   # chrF++, 0-100
    >>> print(corpus_scores(hypotheses, references))              # BLEU, chrF, chrF++ and signatures

Published Multi30k results (and WMT results before sacreBLEU) use another convention:
both sides lowercased, punctuation-normalized and tokenized by the Moses scripts
(`normalize-punctuation.perl`, `tokenizer.perl -l LANG`) and BLEU counted on those tokens
(`multi-bleu.perl`). `moses_bleu` reproduces it with sacremoses, for comparison only:

    >>> moses_bleu(hypotheses, references, lang="de").score

The one place that scores translations: dev evaluation during training, `--evaluate_only`
and `python -m keras_transformer.translate --reference` all call it.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

CHRF_PLUS_PLUS_WORD_ORDER = 2  # chrF++: chrF with word uni- and bigrams (Popović 2017)


@dataclasses.dataclass(frozen=True)
class CorpusScore:
    """One corpus-level score from sacreBLEU.

    Attributes:
        score: 0-100.
        signature: sacreBLEU's signature, e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
            (BLEU) or "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0" (chrF).
        summary: sacreBLEU's one-line report: "BLEU = ..." (score, n-gram precisions, brevity penalty,
            lengths), "chrF2 = ..." or "chrF2++ = ...".
    """

    score: float
    signature: str
    summary: str

    def __str__(self) -> str:
        return f"{self.summary}\nsacreBLEU signature: {self.signature}"


CorpusBleu = CorpusScore  # corpus_bleu's result type under its earlier name


def _check_lengths(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")


def _score(metric, hypotheses: Sequence[str], references: Sequence[str]) -> CorpusScore:
    """`metric` (a `sacrebleu.metrics` object) on the corpus, one reference per hypothesis."""
    _check_lengths(hypotheses, references)
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return CorpusScore(float(result.score), str(metric.get_signature()), str(result))


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> CorpusScore:
    """sacreBLEU corpus BLEU (`sacrebleu.metrics.BLEU()`) of `hypotheses` against one reference
    each, as in section 6.1 of the paper.

    Raises:
        ValueError: the two lists differ in length.
    """
    import sacrebleu  # pylint: disable=g-import-not-at-top

    return _score(sacrebleu.metrics.BLEU(), hypotheses, references)


def corpus_chrf(hypotheses: Sequence[str], references: Sequence[str], word_order: int = 0) -> CorpusScore:
    """sacreBLEU corpus chrF (`sacrebleu.metrics.CHRF(word_order=word_order)`) of `hypotheses`
    against one reference each. Not in the paper: Popović (2015) defines chrF, Popović (2017)
    chrF++ (`word_order=2`, `CHRF_PLUS_PLUS_WORD_ORDER`).

    Args:
        hypotheses: detokenized translations.
        references: one detokenized reference per hypothesis.
        word_order: 0 for chrF (character 1- to 6-grams), 2 for chrF++ (and word 1- and 2-grams).

    Raises:
        ValueError: the two lists differ in length.
    """
    import sacrebleu  # pylint: disable=g-import-not-at-top

    return _score(sacrebleu.metrics.CHRF(word_order=word_order), hypotheses, references)


def moses_tokens(text: str, lang: str) -> str:
    """`text` as Multi30k's scoring prepares it: lowercased, then Moses' punctuation normalization
    and tokenization for `lang` (sacremoses, with tokenizer.perl's default escaping), tokens joined
    by spaces."""
    from sacremoses import MosesPunctNormalizer, MosesTokenizer  # pylint: disable=g-import-not-at-top

    return MosesTokenizer(lang=lang).tokenize(MosesPunctNormalizer(lang=lang).normalize(text.lower()),
                                              return_str=True)


def moses_bleu(hypotheses: Sequence[str], references: Sequence[str], lang: str) -> CorpusScore:
    """Corpus BLEU in the convention of published Multi30k results: both sides through
    `moses_tokens` (lowercased, Moses-normalized and tokenized for `lang`), n-grams counted on those
    tokens (sacreBLEU with `tokenize="none"`, as `multi-bleu.perl`). Its signature says so.

    Raises:
        ValueError: the two lists differ in length, or `lang` is not a language code.
    """
    import sacrebleu  # pylint: disable=g-import-not-at-top

    if not lang.isalpha():
        raise ValueError(f"--moses_bleu_lang={lang!r}: expected a language code such as de, fr, en")
    _check_lengths(hypotheses, references)
    hypotheses = [moses_tokens(h, lang) for h in hypotheses]
    references = [moses_tokens(r, lang) for r in references]
    score = _score(sacrebleu.metrics.BLEU(tokenize="none", force=True), hypotheses, references)
    return CorpusScore(score.score, f"{score.signature}|pre:lc+moses-norm+moses-tok-{lang}",
                       score.summary.replace("BLEU", f"BLEU (lowercased, Moses-tokenized -l {lang})", 1))


@dataclasses.dataclass(frozen=True)
class CorpusScores:
    """BLEU (the paper's, section 6.1), chrF and chrF++ (Popović 2015, 2017) of one corpus, and
    optionally BLEU in the lowercased Moses-tokenized convention (`moses_bleu`).

    `str()` is the report `translate --reference` prints: each score's sacreBLEU line followed by
    its signature, BLEU first.
    """

    bleu: CorpusScore
    chrf: CorpusScore
    chrf_plus_plus: CorpusScore
    moses_bleu: Optional[CorpusScore] = None

    def __str__(self) -> str:
        scores = (self.bleu, self.chrf, self.chrf_plus_plus) + ((self.moses_bleu,) if self.moses_bleu else ())
        return "\n".join(str(score) for score in scores)


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str],
                  moses_lang: Optional[str] = None) -> CorpusScores:
    """BLEU, chrF and chrF++ of `hypotheses` against one reference each; with `moses_lang`, also
    `moses_bleu` for that target language.

    Raises:
        ValueError: the two lists differ in length.
    """
    _check_lengths(hypotheses, references)
    return CorpusScores(corpus_bleu(hypotheses, references), corpus_chrf(hypotheses, references),
                        corpus_chrf(hypotheses, references, word_order=CHRF_PLUS_PLUS_WORD_ORDER),
                        moses_bleu(hypotheses, references, moses_lang) if moses_lang else None)
