"""A treebank PCFG and its CKY parser: the classical baseline of the parsing task (section 6.3).

Section 6.3 compares the Transformer with parsers trained on the same WSJ trees. The first thing a
parsing user compares a new parser with is the grammar read off those trees: this module induces a
probabilistic context-free grammar from the training split and finds each sentence's most probable
tree with CKY, scored by the same EVALB code (`tasks.evalb`) as the model:

    grammar = Grammar.induce(treebank.read_split("../shared/data/ptb_sample", "train"))
    tree = grammar.parse(["The", "dog", "barks", "."])       # (S (NP The dog) (VP barks) .)

The grammar is the unlexicalized one of Klein & Manning (2003), "Accurate Unlexicalized Parsing":
the gold trees with their part-of-speech tags, unary chains collapsed (`S+VP`), binarized to the
right with horizontal markovization (an intermediate symbol remembers the next `horizontal` siblings)
and, with `vertical=1`, each phrase annotated with its parent's label (`NP^<S>`); nltk's
`collapse_unary` / `chomsky_normal_form` do both, and `un_chomsky_normal_form` undoes them on the
parses. Rule probabilities are relative frequencies (nltk's `induce_pcfg` estimator). A start symbol
(`START`) above every tree gives the root its own rules.

Words: P(word | tag) is obtained from P(tag | word) by Bayes' rule (P(word) is the same for every
tree of a sentence, so it drops out), as the Berkeley parser does. A word seen more than
`RARE_COUNT` times keeps its relative frequencies; a rarer one is smoothed toward the tags of its
signature, and an unknown word gets its signature's: the shape classes of words seen once in
training (capitalised at the start of a sentence or inside it, digits, hyphens, a known suffix).
Tags under `MIN_TAG_PROBABILITY` for a word are dropped.

CKY runs in NumPy over the binary rules of each span, all split points at once, keeping in each cell
the symbols within `beam` (natural log) of the cell's best; unary chains of up to two rules (what is
left after collapsing: START -> phrase -> tag) are closed once per cell. A sentence the grammar cannot
derive (or that the beam loses: none of the NLTK sample's validation split with the defaults) gets
the right-branching tree, and is counted. The defaults (horizontal 1, vertical 1, beam 20) were
chosen on that validation split (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import re
from typing import Callable, Optional, Sequence

import numpy as np

START = "START"
RARE_COUNT = 10
MIN_TAG_PROBABILITY = 1e-4
_SUFFIXES = ("ing", "ed", "ly", "ion", "ions", "er", "ers", "est", "al", "ity", "ive", "ic", "able", "ment",
             "ness", "ous", "es", "s", "y")
_NEG_INF = -np.inf


def signature(word: str, first: bool) -> str:
    """The shape class of a rare or unknown word: capitalisation (at a sentence's start or inside
    it), digits, hyphen, and the longest known suffix of its lowercase form."""
    parts = ["UNK"]
    if word[:1].isupper():
        parts.append("INITC" if first else "CAPS")
    elif any(c.isupper() for c in word):
        parts.append("MIXC")
    if any(c.isdigit() for c in word):
        parts.append("NUM")
    if "-" in word:
        parts.append("DASH")
    lower = word.lower()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix) and len(lower) > len(suffix) + 2:
            parts.append(suffix)
            break
    return "-".join(parts)


def binarized(tagged_tree, horizontal: int, vertical: int):
    """The grammar's form of a gold tree (tags included): under START, unary chains collapsed,
    right-binarized with markovization (module docstring). A copy; the input is unchanged."""
    import nltk  # pylint: disable=g-import-not-at-top

    tree = nltk.Tree(START, [tagged_tree.copy(deep=True)])
    tree.collapse_unary(collapsePOS=False, collapseRoot=False)
    tree.chomsky_normal_form(horzMarkov=horizontal, vertMarkov=vertical)
    return tree


def debinarized(tree):
    """Undoes `binarized` and drops the tag level: a tree of phrase labels over the words, as the
    parsing model outputs them."""
    import nltk  # pylint: disable=g-import-not-at-top

    tree = tree.copy(deep=True)
    tree.un_chomsky_normal_form(expandUnary=True)

    def untag(node):
        if len(node) == 1 and not isinstance(node[0], nltk.Tree):  # (TAG word)
            return node[0]
        return nltk.Tree(node.label(), [untag(child) for child in node])

    root = tree[0] if tree.label() == START and len(tree) == 1 else tree
    result = untag(root)
    return result if isinstance(result, nltk.Tree) else nltk.Tree(START, [result])


@dataclasses.dataclass
class _Lexicon:
    """log P(word | tag) up to a per-word constant (module docstring)."""
    tag_ids: dict
    word_tags: dict        # word -> Counter(tag)
    signature_tags: dict   # signature -> Counter(tag), over words seen once
    tag_prior: np.ndarray  # P(tag)
    hapax_prior: np.ndarray  # P(tag | a word seen once)

    def _distribution(self, counts: collections.Counter, prior: np.ndarray, weight: float) -> np.ndarray:
        total = sum(counts.values())
        dist = weight * prior
        for tag, count in counts.items():
            dist[self.tag_ids[tag]] += count
        return dist / (total + weight)

    def log_scores(self, word: str, first: bool) -> np.ndarray:
        """(tags,) log P(tag | word) / P(tag), -inf where the tag is too unlikely."""
        sig_counts = self.signature_tags.get(signature(word, first), collections.Counter())
        by_signature = self._distribution(sig_counts, self.hapax_prior, 1.0)
        counts = self.word_tags.get(word)
        if counts is None and first:
            counts = self.word_tags.get(word.lower())
        if counts is None:
            posterior = by_signature
        elif sum(counts.values()) > RARE_COUNT:
            posterior = self._distribution(counts, by_signature, 0.0)
        else:
            posterior = self._distribution(counts, by_signature, 1.0)
        scores = np.full(len(self.tag_prior), _NEG_INF)
        keep = posterior >= MIN_TAG_PROBABILITY
        scores[keep] = np.log(posterior[keep]) - np.log(self.tag_prior[keep])
        return scores


class Grammar:
    """A PCFG read off gold trees, and its Viterbi CKY parser (module docstring).

    Args:
        rules: {(parent, children tuple): count} of the binarized trees' phrasal rules (one or two
            children, each a symbol).
        lexicon: the `_Lexicon` of the tags.
        beam: natural-log width of the symbols kept per cell.
    """

    def __init__(self, rules: dict, lexicon: _Lexicon, beam: float = 20.0):
        self.lexicon = lexicon
        self.beam = beam
        symbols = set(lexicon.tag_ids)
        for parent, children in rules:
            symbols.add(parent)
            symbols.update(children)
        # Tags first, in the lexicon's order, so a tag's id is its lexicon column.
        tags = sorted(lexicon.tag_ids, key=lexicon.tag_ids.get)
        self.symbols = tags + sorted(symbols - set(tags))
        self.ids = {s: i for i, s in enumerate(self.symbols)}
        totals = collections.Counter()
        for (parent, _), count in rules.items():
            totals[parent] += count
        binary = [(self.ids[p], self.ids[c[0]], self.ids[c[1]], math.log(n / totals[p]))
                  for (p, c), n in rules.items() if len(c) == 2]
        binary.sort()
        self.binary = np.array([r[:3] for r in binary], np.int32).reshape(-1, 3)
        self.binary_log_p = np.array([r[3] for r in binary], np.float32)
        self.unary = {(self.ids[p], self.ids[c[0]]): math.log(n / totals[p])
                      for (p, c), n in rules.items() if len(c) == 1}
        self.chains = self._unary_chains(self.unary)
        self.start = self.ids[START]

    @classmethod
    def induce(cls, sentences: Sequence, horizontal: int = 1, vertical: int = 1, beam: float = 20.0) -> "Grammar":
        """The grammar of `pipelines.treebank.ParsedSentence`s (their tagged trees)."""
        rules = collections.Counter()
        word_tags = collections.defaultdict(collections.Counter)
        tag_counts = collections.Counter()
        for sentence in sentences:
            tree = binarized(sentence.tagged_tree(), horizontal, vertical)
            for production in tree.productions():
                if production.is_lexical():
                    continue
                rules[(production.lhs().symbol(), tuple(c.symbol() for c in production.rhs()))] += 1
            for word, tag in zip(sentence.words, sentence.tags):
                word_tags[word][tag] += 1
                tag_counts[tag] += 1
        tag_ids = {tag: i for i, tag in enumerate(sorted(tag_counts))}
        tag_prior = np.array([tag_counts[t] for t in sorted(tag_counts)], np.float64)
        signature_tags = collections.defaultdict(collections.Counter)
        hapax = np.zeros(len(tag_ids))
        for sentence in sentences:
            for position, (word, tag) in enumerate(zip(sentence.words, sentence.tags)):
                if sum(word_tags[word].values()) == 1:
                    signature_tags[signature(word, position == 0)][tag] += 1
                    hapax[tag_ids[tag]] += 1
        lexicon = _Lexicon(tag_ids, dict(word_tags), dict(signature_tags), tag_prior / tag_prior.sum(),
                           (hapax + 1e-3) / (hapax + 1e-3).sum())
        return cls(rules, lexicon, beam)

    @staticmethod
    def _unary_chains(unary: dict) -> tuple:
        """Every unary rule and every chain of two, as arrays: parent, child, log p, middle (-1 for
        a single rule), sorted by parent."""
        chains = [(p, c, lp, -1) for (p, c), lp in unary.items()]
        by_parent = collections.defaultdict(list)
        for (p, c), lp in unary.items():
            by_parent[p].append((c, lp))
        for (p, m), lp in unary.items():
            for c, lp2 in by_parent.get(m, ()):
                if c != p:
                    chains.append((p, c, lp + lp2, m))
        chains.sort()
        columns = list(zip(*chains)) if chains else [(), (), (), ()]
        return (np.array(columns[0], np.int64), np.array(columns[1], np.int64),
                np.array(columns[2], np.float32), np.array(columns[3], np.int64))

    def _close(self, cell: np.ndarray) -> np.ndarray:
        """Applies the unary chains to a cell in place; returns (size,) the winning chain of each
        symbol, -1 where none beat the symbol's own score."""
        parents, children, log_p, _ = self.chains
        won = np.full(cell.shape[0], -1, np.int32)
        symbols, scores, index = _best_per_parent(parents, cell[children] + log_p)
        better = scores > cell[symbols]
        won[symbols[better]] = index[better]
        cell[symbols[better]] = scores[better]
        return won

    def _prune(self, cell: np.ndarray) -> None:
        best = cell.max()
        if np.isfinite(best):
            cell[cell < best - self.beam] = _NEG_INF

    def parse(self, words: Sequence[str]):
        """The most probable tree over `words` (phrase labels over the words, no tags); None if
        the grammar derives none (or `words` is empty)."""
        tree, _ = self.viterbi(words)  # no words: no tree (the chart's only span is empty)
        return None if tree is None else debinarized(tree)

    def viterbi(self, words: Sequence[str]) -> tuple:
        """(the most probable tree in the grammar's binarized form, its log score), or (None, -inf):
        CKY (module docstring). The score is the sum of the tree's rule log-probabilities and of its
        words' lexicon scores."""
        n = len(words)
        size = len(self.symbols)
        tags = len(self.lexicon.tag_ids)
        chart = np.full((n + 1, n + 1, size), _NEG_INF, np.float32)  # [i, j]: span i..j after unary chains
        won = np.full((n + 1, n + 1, size), -1, np.int32)   # its winning chain per symbol
        rule_of = np.empty((n + 1, n + 1, size), np.int32)   # the best binary rule per symbol (where derived)
        split_of = np.empty((n + 1, n + 1, size), np.int16)  # and its split point
        for i, word in enumerate(words):
            chart[i, i + 1, :tags] = self.lexicon.log_scores(word, i == 0)
            won[i, i + 1] = self._close(chart[i, i + 1])
            self._prune(chart[i, i + 1])
        parents, lefts, rights = self.binary[:, 0], self.binary[:, 1], self.binary[:, 2]
        for length in range(2, n + 1):
            for i in range(0, n - length + 1):
                j = i + length
                left = chart[i, i + 1:j]       # (K, size): span i..k for k = i+1 .. j-1
                right = chart[i + 1:j, j]      # (K, size): span k..j
                live = np.isfinite(left).any(0)[lefts] & np.isfinite(right).any(0)[rights]
                rule_ids = np.nonzero(live)[0]
                if rule_ids.size:
                    scores = left[:, lefts[rule_ids]] + right[:, rights[rule_ids]] + self.binary_log_p[rule_ids]
                    best_split = scores.argmax(0)                                        # (R,)
                    best = scores[best_split, np.arange(rule_ids.size)]
                    symbols, values, index = _best_per_parent(parents[rule_ids], best)
                    finite = np.isfinite(values)
                    symbols, index = symbols[finite], index[finite]
                    chart[i, j, symbols] = values[finite]
                    rule_of[i, j, symbols] = rule_ids[index]
                    split_of[i, j, symbols] = i + 1 + best_split[index]
                won[i, j] = self._close(chart[i, j])
                self._prune(chart[i, j])
        if not np.isfinite(chart[0, n, self.start]):
            return None, _NEG_INF
        return self._build(won, rule_of, split_of, words, 0, n, self.start), float(chart[0, n, self.start])

    @functools.cached_property
    def _binary_rules(self) -> dict:
        """{(parent, left, right) ids: log-probability} of the binary rules."""
        return {tuple(r): float(lp) for r, lp in zip(self.binary.tolist(), self.binary_log_p)}

    def log_score(self, tree, words: Sequence[str]) -> float:
        """The score `viterbi` gives a tree in the grammar's binarized form (-inf if it uses a rule
        the grammar lacks)."""
        import nltk  # pylint: disable=g-import-not-at-top

        binary = self._binary_rules
        total = 0.0
        for position, leaf in enumerate(tree.treepositions("leaves")):
            tag = self.ids[tree[leaf[:-1]].label()]
            total += float(self.lexicon.log_scores(words[position], position == 0)[tag])
        for node in tree.subtrees(lambda t: isinstance(t[0], nltk.Tree)):
            ids = tuple(self.ids.get(x.label(), -1) for x in [node, *node])
            total += binary.get(ids, _NEG_INF) if len(ids) == 3 else self.unary.get(ids, _NEG_INF)
        return total

    def _build(self, won, rule_of, split_of, words: Sequence[str], i: int, j: int, symbol: int, closed: bool = True):
        import nltk  # pylint: disable=g-import-not-at-top

        if closed and won[i, j, symbol] >= 0:
            chain = won[i, j, symbol]
            child, middle = self.chains[1][chain], self.chains[3][chain]
            below = self._build(won, rule_of, split_of, words, i, j, int(child), closed=False)
            if middle >= 0:
                below = nltk.Tree(self.symbols[middle], [below])
            return nltk.Tree(self.symbols[symbol], [below])
        if j == i + 1:
            return nltk.Tree(self.symbols[symbol], [words[i]])
        rule, split = rule_of[i, j, symbol], int(split_of[i, j, symbol])
        _, left, right = self.binary[rule]
        return nltk.Tree(self.symbols[symbol], [self._build(won, rule_of, split_of, words, i, split, int(left)),
                                                self._build(won, rule_of, split_of, words, split, j, int(right))])


def _best_per_parent(parents: np.ndarray, scores: np.ndarray) -> tuple:
    """(symbols, best score, index into `scores`) of each distinct parent: the rule of highest
    score among those with that parent."""
    if not parents.size:
        return parents, scores, parents
    order = np.lexsort((-scores, parents))        # by parent, best first
    firsts = np.unique(parents[order], return_index=True)[1]
    index = order[firsts]
    return parents[index], scores[index], index


def parse_all(grammar: Grammar, sentences: Sequence[Sequence[str]], fallback: Callable,
              max_words: Optional[int] = None) -> tuple:
    """(trees, number not derived): each non-empty sentence's parse, `fallback(words)` where the
    grammar derives none or the sentence has more than `max_words` words (if given)."""
    trees, failed = [], 0
    for words in sentences:
        tree = None
        if words and (max_words is None or len(words) <= max_words):
            tree = grammar.parse(words)
        if tree is None and words:
            tree = fallback(list(words))
            failed += 1
        trees.append(tree)
    return tuple(trees), failed
