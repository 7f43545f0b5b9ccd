"""Corpus BLEU of detokenized translations, as the paper reports it (section 6.1, Table 2).

sacreBLEU with its defaults (13a tokenization, exponential smoothing, cased) on detokenized
text, so scores are comparable across toolkits and carry their signature:

    >>> result = corpus_bleu(["Ein Mann läuft."], ["Ein Mann rennt."])
    >>> result.score, result.signature     # 0-100, "nrefs:1|case:mixed|eff:no|tok:13a|..."
    >>> print(result)                      # "BLEU = ... (BP = ...)" and the signature line

The one place that scores translations: dev evaluation during training, `--evaluate_only`
and `python -m keras_transformer.translate --reference` all call it.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence


@dataclasses.dataclass(frozen=True)
class CorpusBleu:
    """A corpus BLEU score.

    Attributes:
        score: BLEU, 0-100.
        signature: sacreBLEU's signature, e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0".
        summary: sacreBLEU's one-line report: score, n-gram precisions, brevity penalty, lengths.
    """

    score: float
    signature: str
    summary: str

    def __str__(self) -> str:
        return f"{self.summary}\nsacreBLEU signature: {self.signature}"


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> CorpusBleu:
    """sacreBLEU corpus BLEU of `hypotheses` against one reference each.

    Raises:
        ValueError: the two lists differ in length.
    """
    import sacrebleu  # pylint: disable=g-import-not-at-top

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    metric = sacrebleu.metrics.BLEU()
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return CorpusBleu(float(result.score), str(metric.get_signature()), str(result))
