"""Is one parser's EVALB F1 above another's, or within a split's noise? A paired bootstrap.

    python bench/parse_significance.py --data_dir=../shared/data/ptb_sample --treebank_split=test \
        --baseline=runs/ptb_rerank100.test.trees --system=runs/ptb_ens2_rerank100.test.trees

Both files hold one tree per line for the sentences of --treebank_split, in order, as
`python -m keras_transformer.parse --output=...` writes them (no tag level; the gold tags are
the treebank's). Each sentence's labelled brackets are counted once against its gold tree
(`keras_transformer.tasks.parsing.evalb.sentence_scores`, COLLINS.prm); then --samples times the sentences are
drawn with replacement, the same draw for both parsers, and each draw's corpus F1 is computed from
its summed counts (as EVALB sums over a file, not a mean of sentence F1s). Printed: both parsers' F1,
the difference (system - baseline), the 95% interval of the drawn differences, and the share of
draws where the system is not above the baseline: the one-sided p-value of the paired bootstrap
(Koehn 2004; Berg-Kirkpatrick et al. 2012 for its reading), e.g. 0.3 means that in 3 draws of 10
of the same size from the same population the system's gain vanished. Bad input (a missing
file, a tree count or words that are not the split's) is one `error:` line and exit status 2.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402  pylint: disable=wrong-import-position
from absl import flags  # noqa: E402  pylint: disable=wrong-import-position

from keras_transformer import cli  # noqa: E402  pylint: disable=wrong-import-position
from keras_transformer.pipelines import text_files  # noqa: E402  pylint: disable=wrong-import-position
from keras_transformer.pipelines.errors import DataError  # noqa: E402  pylint: disable=wrong-import-position

FLAGS = flags.FLAGS


def define_flags() -> None:
    """The command's flags: defined when it runs, not when a test imports its functions beside
    another bench script's (absl refuses a flag defined twice)."""
    flags.DEFINE_string("data_dir", None, "The treebank of the gold trees (the folder `parse --data_dir` reads).")
    flags.DEFINE_enum("treebank_split", "test", ["validation", "test"], "The split both files parse.")
    flags.DEFINE_string("baseline", None, "The baseline parser's trees, one per line.")
    flags.DEFINE_string("system", None, "The other parser's trees, one per line, the same sentences.")
    flags.DEFINE_integer("samples", 10000, "Bootstrap draws.", lower_bound=100)
    flags.DEFINE_integer("seed", 1, "The draws' random seed.")
    flags.mark_flags_as_required(["data_dir", "baseline", "system"])


@dataclasses.dataclass(frozen=True)
class Comparison:
    """A paired bootstrap of corpus F1 over sentences: system - baseline."""
    baseline_f1: float
    system_f1: float
    low: float  # the 2.5th percentile of the drawn differences
    high: float  # the 97.5th
    p_value: float  # the share of draws where the system's F1 is not above the baseline's

    @property
    def difference(self) -> float:
        return self.system_f1 - self.baseline_f1

    def __str__(self) -> str:
        return (f"baseline F1 {self.baseline_f1:.2f}, system F1 {self.system_f1:.2f}: difference "
                f"{self.difference:+.2f}, 95% interval [{self.low:+.2f}, {self.high:+.2f}], "
                f"p = {self.p_value:.4f} (share of draws where the system is not above)")


def corpus_f1(matched: np.ndarray, gold: np.ndarray, test: np.ndarray) -> np.ndarray:
    """EVALB's F-measure of summed counts (the last axis is the sentences): 200 m / (g + t)."""
    matched, total = matched.sum(axis=-1), gold.sum(axis=-1) + test.sum(axis=-1)
    return np.where(total > 0, 200.0 * matched / np.maximum(total, 1), 0.0)


def paired_bootstrap(baseline: np.ndarray, system: np.ndarray, samples: int = 10000,
                     seed: int = 1) -> Comparison:
    """`baseline`, `system`: [sentences, 3] counts (matched, gold, test brackets) of the same
    sentences, the gold column the same in both."""
    baseline, system = np.asarray(baseline, np.int64), np.asarray(system, np.int64)
    if baseline.shape != system.shape or baseline.ndim != 2 or baseline.shape[1] != 3 or not len(baseline):
        raise ValueError(f"counts of shapes {baseline.shape} and {system.shape}; give [sentences, 3] for both")
    if not np.array_equal(baseline[:, 1], system[:, 1]):
        raise ValueError("the two parsers' gold bracket counts differ: not the same sentences")
    draws = np.random.default_rng(seed).integers(0, len(baseline), size=(samples, len(baseline)))
    drawn = [corpus_f1(*(counts[draws][..., column] for column in range(3))) for counts in (baseline, system)]
    differences = drawn[1] - drawn[0]
    low, high = np.percentile(differences, [2.5, 97.5])
    return Comparison(baseline_f1=float(corpus_f1(*baseline.T)), system_f1=float(corpus_f1(*system.T)),
                      low=float(low), high=float(high), p_value=float(np.mean(differences <= 0)))


def sentence_counts(gold_sentences: Sequence, trees: Sequence) -> np.ndarray:
    """[sentences, 3]: matched, gold and test labelled brackets of each tree against its gold
    `keras_transformer.pipelines.treebank.ParsedSentence` (EVALB's skipped sentences count 0, as EVALB does)."""
    from keras_transformer.tasks.parsing import evalb  # pylint: disable=import-outside-toplevel

    rows = []
    for gold, tree in zip(gold_sentences, trees):
        scores = evalb.sentence_scores(gold.tree, tree, gold.tags)
        rows.append((scores.matched, scores.gold, scores.test))
    return np.array(rows, np.int64).reshape(-1, 3)


def read_trees(path: str, words: Sequence[Sequence[str]]) -> list:
    """The trees of `path`, one per line, over the gold sentences' `words`; `DataError` naming
    the first line that is not."""
    import nltk  # pylint: disable=import-outside-toplevel

    lines = [line for line in text_files.read_lines(path) if line]  # a missing file, not UTF-8: DataError
    if len(lines) != len(words):
        raise DataError(f"{path} holds {len(lines)} trees but the split has {len(words)} sentences")
    trees = []
    for number, (line, gold_words) in enumerate(zip(lines, words), 1):
        try:
            tree = nltk.Tree.fromstring(line)
        except ValueError:
            raise DataError(f"{path} line {number}: not a bracketed tree") from None
        if tuple(tree.leaves()) != tuple(gold_words):
            raise DataError(f"{path} line {number}: its words are not the gold sentence's")
        trees.append(tree)
    return trees


def main(argv):
    del argv
    from keras_transformer.pipelines import treebank  # pylint: disable=import-outside-toplevel

    gold = treebank.read_split(FLAGS.data_dir, FLAGS.treebank_split)
    words = [sentence.words for sentence in gold]
    counts = [sentence_counts(gold, read_trees(path, words)) for path in (FLAGS.baseline, FLAGS.system)]
    print(f"{len(gold)} sentences of {FLAGS.data_dir} [{FLAGS.treebank_split}], {FLAGS.samples} paired draws")
    print(f"baseline: {FLAGS.baseline}\nsystem:   {FLAGS.system}")
    print(paired_bootstrap(*counts, samples=FLAGS.samples, seed=FLAGS.seed))


if __name__ == "__main__":
    define_flags()
    cli.run(main)
