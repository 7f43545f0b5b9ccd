"""EVALB's labelled bracketing F1: the constituency parsing score of section 6.3 (Table 4).

"Attention Is All You Need", section 6.3, reports English constituency parsing on WSJ section 23
as F1, the number every parser since Collins (1997) reports: EVALB (Sekine & Collins 1997) with
its `COLLINS.prm` parameters. This module computes the same numbers in Python, on the trees the
rest of the code uses: an `nltk.Tree` of phrase labels whose leaves are the words (no
part-of-speech level, labels already cleaned by `keras_transformer.pipelines.treebank.clean`), with the gold tags
of the words given beside it.

    >>> result = score(gold_trees, test_trees, tags)            # COLLINS.prm, labelled
    >>> result.f1, result.precision, result.recall, result.exact_match   # percent, as EVALB prints
    >>> print(result)    # "F1 91.30 (P 91.00, R 91.60) over 2,416 sentences, exact match 40.10%"
    >>> score(gold_trees, test_trees, tags, max_words=COLLINS.cutoff_length)   # "-- len<=40 --"

A bracket is (label, start, end) over the words that remain once the words whose gold tag is a
deleted label (punctuation `, : `` '' .`, traces `-NONE-`) are taken out. Precision is the
matched brackets over the test brackets and recall over the gold brackets, each summed over the
corpus before dividing (micro-averaged); F1 = 2PR / (P + R). Complete match is the share of
sentences whose test and gold brackets are the same multiset.

EVALB's semantics, as read in its source (`EVALB/evalb.c` of nikitakit/self-attentive-parser at
commit 24435a156a64d7433829e9a500a81f46b7e58030, the 2006 version with David Ellis's fixes):

* Deleted words. A preterminal whose tag is in DELETE_LABEL (exact string comparison) is
  skipped while reading, without taking a word index (`read_line`, lines 709-720), so every
  span is counted in the remaining words. Each file is read with its own tags; here the test
  tree has none, so both sides use the gold tags (what EVALB computes when the parser's output
  carries the gold tags, and then the length-mismatch repair `fix_quote`, lines 977-1015, never
  runs).
* Empty brackets. A bracket whose start equals its end, i.e. that covers only deleted words (a
  constituent of punctuation, or of traces), is dropped on both sides (`massage_data`, lines
  1082-1086 and 1105-1109). So are brackets whose label is a DELETE_LABEL (lines 1091-1096):
  TOP, and here also ROOT and the empty label nltk gives an unnamed root. The sentence's own
  bracket under TOP (the S) counts.
* Preterminals are never brackets (`read_line` continues before a bracket is opened, lines
  715-720); the trees here have no tag level anyway.
* Matching (lines 856-897). Each gold bracket, in order, takes the first test bracket of the
  same span not yet taken whose label is equal or EQ_LABEL-equivalent (ADVP = PRT), so each
  bracket is matched at most once: for k gold and m test copies of a bracket (a unary chain
  NP -> NP is two copies), min(k, m) match. That is the size of the multiset intersection,
  which is what `score` counts. With LABELED 0 (`labelled=False`) labels are ignored (line 869),
  but deleted labels are still dropped.
* Totals (`individual_result`, lines 1162-1218; `print_total`, lines 1236-1319): recall =
  100 matched / gold, precision = 100 matched / test (0 when the denominator is 0), F =
  2PR / (P + R). A sentence is a complete match when gold, test and matched counts are equal
  (line 1178). A sentence with no word left after deletion is a "skip" sentence (lines
  824-828): counted among the sentences, but not in the brackets nor in complete match's
  denominator.
* Length (lines 690-694, 1195): the number of gold words whose tag is not in
  DELETE_LABEL_FOR_LENGTH (only -NONE-): punctuation counts, so a sentence is in the
  "len<=40" summary when it has at most 40 words including punctuation.

Differences, all outside what the cleaned trees exercise: EVALB also cuts labels at their first
"-" or "=" (`modify_label`, lines 1144-1156), which cleaned labels do not have; it prints F "nan"
when nothing matches, where `Scores.f1` is 0; it compares EQ_LABEL pairs without closing them
transitively (the same for COLLINS.prm's single pair); words mismatches and length mismatches
are "error" sentences there, a `ValueError` here (the caller guarantees the words). Crossing
brackets and tagging accuracy are not computed.

Pure Python (nltk trees), no TensorFlow.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Mapping, Optional, Sequence

# The punctuation tags COLLINS.prm deletes as words (with their brackets, if then empty).
PUNCTUATION_TAGS = (",", ":", "``", "''", ".")
# Roots that are no constituent: EVALB's TOP, and ROOT and "" (nltk's unnamed root) beside it.
ROOT_LABELS = ("TOP", "ROOT", "")


@dataclasses.dataclass(frozen=True)
class EvalbParams:
    """The parameters of an EVALB `.prm` file that bracketing scores depend on.

    Attributes:
        delete_labels: DELETE_LABEL: words with such a gold tag are removed before spans are
            counted; brackets with such a label are not counted.
        delete_labels_for_length: DELETE_LABEL_FOR_LENGTH: words with such a gold tag are not
            counted in a sentence's length (`sentence_length`).
        equivalent_labels: EQ_LABEL pairs, counted as the same label.
        cutoff_length: CUTOFF_LEN: the length of EVALB's second summary ("-- len<=40 --"), for
            `score(..., max_words=params.cutoff_length)`.
    """

    delete_labels: frozenset[str] = frozenset()
    delete_labels_for_length: frozenset[str] = frozenset()
    equivalent_labels: tuple[tuple[str, str], ...] = ()
    cutoff_length: int = 40


COLLINS = EvalbParams(
    delete_labels=frozenset(ROOT_LABELS + ("-NONE-",) + PUNCTUATION_TAGS),
    delete_labels_for_length=frozenset({"-NONE-"}),
    equivalent_labels=(("ADVP", "PRT"),),
    cutoff_length=40,
)


@dataclasses.dataclass(frozen=True)
class Scores:
    """Bracket counts of one sentence or a corpus; `+` (and `sum`) adds them up.

    Attributes:
        sentences: sentences scored, skipped ones included (EVALB's "Number of sentence").
        matched: test brackets matched to a gold bracket.
        gold: gold brackets.
        test: test brackets.
        exact: sentences whose test brackets are their gold brackets (complete matches).
        skipped: sentences with no word left once punctuation is deleted (EVALB's "Skip").
    """

    sentences: int = 0
    matched: int = 0
    gold: int = 0
    test: int = 0
    exact: int = 0
    skipped: int = 0

    def __add__(self, other: Scores) -> Scores:
        if not isinstance(other, Scores):
            return NotImplemented
        return Scores(**{field.name: getattr(self, field.name) + getattr(other, field.name)
                         for field in dataclasses.fields(self)})

    def __radd__(self, other) -> Scores:
        return self if isinstance(other, int) and other == 0 else NotImplemented  # sum() starts at 0

    @property
    def valid(self) -> int:
        """Sentences that count in complete match (EVALB's "Number of Valid sentence")."""
        return self.sentences - self.skipped

    @property
    def precision(self) -> float:
        """Bracketing precision in percent: 100 matched / test (0 without test brackets)."""
        return 100.0 * self.matched / self.test if self.test else 0.0

    @property
    def recall(self) -> float:
        """Bracketing recall in percent: 100 matched / gold (0 without gold brackets)."""
        return 100.0 * self.matched / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        """Bracketing F-measure in percent, 2PR / (P + R) = 200 matched / (gold + test); 0 when
        nothing matches (EVALB prints nan when both P and R are 0)."""
        return 200.0 * self.matched / (self.gold + self.test) if self.matched else 0.0

    @property
    def exact_match(self) -> float:
        """Complete match in percent of the valid sentences."""
        return 100.0 * self.exact / self.valid if self.valid else 0.0

    def __str__(self) -> str:
        return (f"F1 {self.f1:.2f} (P {self.precision:.2f}, R {self.recall:.2f}) over {self.sentences:,} sentences, "
                f"exact match {self.exact_match:.2f}%")


@functools.lru_cache(maxsize=None)
def _canonical_labels(pairs: tuple) -> Mapping[str, str]:
    """Each label of an EQ_LABEL class -> the class's first label in sorted order (ADVP, PRT -> ADVP)."""
    classes: list[set] = []
    for pair in pairs:
        touching = [group for group in classes if group & set(pair)]
        classes = [group for group in classes if not group & set(pair)] + [set(pair).union(*touching)]
    return {label: min(group) for group in classes for label in group}


def _check_tags(words: Sequence[str], tags: Sequence[str]) -> None:
    if len(tags) != len(words):
        raise ValueError(f"{len(tags)} tags for {len(words)} words; give one gold tag per word")


def brackets(tree, tags: Sequence[str], params: EvalbParams = COLLINS, labelled: bool = True) -> collections.Counter:
    """The multiset of EVALB brackets of `tree`: (label, start, end) -> count.

    Args:
        tree: an `nltk.Tree` whose leaves are the words (no part-of-speech level).
        tags: the gold part-of-speech tag of each word.
        params: what to delete (`EvalbParams`).
        labelled: False: the label of every bracket is None (only spans count).

    `start` and `end` index the words left once those tagged with a `params.delete_labels`
    label are removed (end exclusive). A bracket covering no such word, or labelled with a
    deleted label (TOP), is not counted; equivalent labels are given as one (PRT as ADVP).

    Raises:
        ValueError: not one tag per word.
    """
    from nltk import Tree  # pylint: disable=g-import-not-at-top

    words = tree.leaves()
    _check_tags(words, tags)
    kept_before = [0]  # kept_before[i]: the words before word i that are not deleted
    for tag in tags:
        kept_before.append(kept_before[-1] + (tag not in params.delete_labels))
    canonical = _canonical_labels(params.equivalent_labels)
    deleted = {canonical.get(label, label) for label in params.delete_labels}
    counts = collections.Counter()

    def walk(node, first: int) -> int:  # node's words are first..end-1 (before deletion); returns end
        end = first
        for child in node:
            end = walk(child, end) if isinstance(child, Tree) else end + 1
        label = canonical.get(node.label(), node.label())
        start, stop = kept_before[first], kept_before[end]
        if start < stop and label not in deleted:
            counts[(label if labelled else None, start, stop)] += 1
        return end

    walk(tree, 0)
    return counts


def sentence_length(tags: Sequence[str], params: EvalbParams = COLLINS) -> int:
    """EVALB's length of a sentence: its words whose gold tag is not in
    `params.delete_labels_for_length` (punctuation counts; traces do not)."""
    return sum(tag not in params.delete_labels_for_length for tag in tags)


def _check_words(gold_words: Sequence[str], test_words: Sequence[str]) -> None:
    if len(gold_words) != len(test_words):
        raise ValueError(f"the gold tree has {len(gold_words)} words, the test tree {len(test_words)}")
    for i, (gold_word, test_word) in enumerate(zip(gold_words, test_words)):
        if gold_word != test_word:
            raise ValueError(f"word {i} is {gold_word!r} in the gold tree but {test_word!r} in the test tree")


def sentence_scores(gold_tree, test_tree, tags: Sequence[str], params: EvalbParams = COLLINS,
                    labelled: bool = True) -> Scores:
    """The `Scores` of one sentence (`sentences` = 1).

    Raises:
        ValueError: the trees' words differ, or not one tag per word.
    """
    _check_words(gold_tree.leaves(), test_tree.leaves())
    _check_tags(gold_tree.leaves(), tags)
    if all(tag in params.delete_labels for tag in tags):
        return Scores(sentences=1, skipped=1)
    gold = brackets(gold_tree, tags, params, labelled)
    test = brackets(test_tree, tags, params, labelled)
    matched, gold_count, test_count = sum((gold & test).values()), sum(gold.values()), sum(test.values())
    return Scores(sentences=1, matched=matched, gold=gold_count, test=test_count,
                  exact=int(matched == gold_count == test_count))


def score(gold_trees: Sequence, test_trees: Sequence, tags: Sequence[Sequence[str]], params: EvalbParams = COLLINS,
          labelled: bool = True, max_words: Optional[int] = None) -> Scores:
    """EVALB's corpus scores of `test_trees` against `gold_trees`.

    Args:
        gold_trees, test_trees: aligned `nltk.Tree`s without a tag level; the trees of one
            sentence have the same words.
        tags: the gold part-of-speech tags of each sentence's words.
        params: `COLLINS` (COLLINS.prm) by default.
        labelled: False: unlabelled brackets (spans only; EVALB's LABELED 0).
        max_words: only the sentences of at most this many words (`sentence_length`): with
            `params.cutoff_length`, EVALB's "-- len<=40 --" summary. None: all.

    Raises:
        ValueError: the three lists differ in length; or a sentence's trees have different words,
            or not one tag per word (naming the sentence's index).
    """
    if not len(gold_trees) == len(test_trees) == len(tags):
        raise ValueError(f"{len(gold_trees)} gold trees, {len(test_trees)} test trees and {len(tags)} tag "
                         "sequences; give one of each per sentence")
    total = Scores()
    for index, (gold_tree, test_tree, sentence_tags) in enumerate(zip(gold_trees, test_trees, tags)):
        if max_words is not None and sentence_length(sentence_tags, params) > max_words:
            continue
        try:
            total += sentence_scores(gold_tree, test_tree, sentence_tags, params, labelled)
        except ValueError as error:
            raise ValueError(f"sentence {index}: {error}") from None
    return total
