"""A treebank PCFG and its CKY parser: the classical baseline of the parsing task (section 6.3).

Section 6.3 compares the Transformer with parsers trained on the same WSJ trees. The first thing a
parsing user compares a new parser with is the grammar read off those trees: this module induces a
probabilistic context-free grammar from the training split and finds each sentence's most probable
tree with CKY, scored by the same EVALB code (`keras_transformer.tasks.parsing.evalb`) as the model:

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
chosen on that validation split (docs/experiments.md#parsing).

A reranker (Charniak & Johnson 2005, "Coarse-to-fine n-best parsing and MaxEnt discriminative
reranking") needs the parser's k best trees, not only its best. `Grammar.kbest_derivations` takes
them from the same pruned chart with the lazy algorithm of Huang & Chiang (2005), "Better k-best
Parsing" (Algorithm 3): each chart item keeps its derivations found so far and a heap of
candidates, built the first time the item is asked for, so finding the k best costs little more
than CKY. Many derivations differ only in their tags or binarization and give the same tree;
`Grammar.parse_kbest` takes derivations until k trees are distinct:

    candidates = grammar.parse_kbest(words, 50)              # [(tree, log score)], best first
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import heapq
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


@dataclasses.dataclass
class _Chart:
    """One sentence's CKY chart (`Grammar._chart`); index [i, j, symbol] is span i..j.

    `unclosed` holds each symbol's best score by a binary rule (by the lexicon for a one-word span)
    before the unary chains, `closed` the best after them, pruned to the beam (-inf outside it).
    `won`, `rule_of` and `split_of` are the Viterbi back-pointers: the winning unary chain (-1: the
    symbol itself), and the best binary rule and its split point of an unclosed item.
    """
    closed: np.ndarray    # (n + 1, n + 1, symbols) float32
    unclosed: np.ndarray  # (n + 1, n + 1, symbols) float32
    won: np.ndarray       # (n + 1, n + 1, symbols) int32
    rule_of: np.ndarray   # (n + 1, n + 1, symbols) int32, where unclosed is finite
    split_of: np.ndarray  # (n + 1, n + 1, symbols) int16, where unclosed is finite


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
        """The grammar of `keras_transformer.pipelines.treebank.ParsedSentence`s (their tagged trees)."""
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
        chart = self._chart(words)
        if not np.isfinite(chart.closed[0, n, self.start]):
            return None, _NEG_INF
        return self._build(chart, words, 0, n, self.start), float(chart.closed[0, n, self.start])

    def kbest_derivations(self, words: Sequence[str], k: int) -> list:
        """The `k` best derivations of START over `words` in the chart `viterbi` reads, best first:
        [(tree in the grammar's binarized form, log score)]; fewer if the chart holds fewer, [] if it
        holds none. The first is `viterbi(words)`, tree and score; each score is the tree's
        `log_score` (summed in float32, as CKY sums); no two trees are equal.

        The lazy algorithm of Huang & Chiang (2005), "Better k-best Parsing", Algorithm 3
        (`_LazyKBest`), over the same beam-pruned chart: the list is exact for that chart (with an
        infinite beam, for the grammar with one unary chain per span, as CKY applies them).

        Raises:
            ValueError: `k` is below 1.
        """
        if k < 1:
            raise ValueError(f"k is {k}; ask for at least 1 derivation")
        return list(self._derivations(words, k))

    def parse_kbest(self, words: Sequence[str], k: int, max_derivations: Optional[int] = None) -> list:
        """Up to `k` distinct trees over `words` in `parse`'s form (phrase labels over the words, no
        tags), best first, each with the score of its best derivation; [] if the grammar derives
        none. The first is `parse(words)`. The candidates of a reranker: Charniak & Johnson (2005),
        "Coarse-to-fine n-best parsing and MaxEnt discriminative reranking", rerank a parser's 50 best.

        Derivations that differ only in their tags, their binarization or where a unary chain sits
        give the same tree, so the derivations are taken lazily, best first (`kbest_derivations`),
        until `k` trees are distinct, `max_derivations` (default 20 k) were taken, or the chart has
        no more.

        Raises:
            ValueError: `k` or `max_derivations` is below 1.
        """
        max_derivations = 20 * k if max_derivations is None else max_derivations
        if k < 1 or max_derivations < 1:
            raise ValueError(f"k is {k} and max_derivations {max_derivations}; both must be at least 1")
        trees, seen = [], set()
        for derivation, score in self._derivations(words, max_derivations):
            tree = debinarized(derivation)
            key = _frozen(tree)
            if key not in seen:
                seen.add(key)
                trees.append((tree, score))
                if len(trees) == k:
                    break
        return trees

    def _derivations(self, words: Sequence[str], cap: int):
        """Yields the derivations of START over `words`, best first, at most `cap`, lazily:
        (tree in the binarized form, log score)."""
        n = len(words)
        if not n:
            return  # no words: no tree (the chart's only span is empty)
        chart = self._chart(words)
        if not np.isfinite(chart.closed[0, n, self.start]):
            return
        kbest = _LazyKBest(self, chart, words, cap)
        root = (0, n, self.start, True)
        for rank in range(cap):
            found = kbest.derivation(root, rank)
            if found is None:
                return
            yield kbest.tree(root, rank), found[0]

    @functools.cached_property
    def _by_parent(self) -> tuple:
        """(binary rule starts, unary chain starts): the rules, and the chains, of parent p are
        [starts[p], starts[p + 1]) (both are sorted by parent)."""
        parents = np.arange(len(self.symbols) + 1)
        return (np.searchsorted(self.binary[:, 0], parents),
                np.searchsorted(self.chains[0], parents))

    def _chart(self, words: Sequence[str]) -> _Chart:
        """The beam-pruned CKY chart of `words` that `viterbi` and `kbest_derivations` read (module
        docstring): per span, the lexicon or the binary rules over the split points, all at once,
        then the unary chains once, then the beam."""
        n = len(words)
        size = len(self.symbols)
        tags = len(self.lexicon.tag_ids)
        closed = np.full((n + 1, n + 1, size), _NEG_INF, np.float32)  # [i, j]: span i..j after unary chains
        unclosed = np.full((n + 1, n + 1, size), _NEG_INF, np.float32)  # before them
        won = np.full((n + 1, n + 1, size), -1, np.int32)   # the winning chain per symbol
        rule_of = np.empty((n + 1, n + 1, size), np.int32)   # the best binary rule per symbol (where derived)
        split_of = np.empty((n + 1, n + 1, size), np.int16)  # and its split point
        for i, word in enumerate(words):
            closed[i, i + 1, :tags] = unclosed[i, i + 1, :tags] = self.lexicon.log_scores(word, i == 0)
            won[i, i + 1] = self._close(closed[i, i + 1])
            self._prune(closed[i, i + 1])
        parents, lefts, rights = self.binary[:, 0], self.binary[:, 1], self.binary[:, 2]
        for length in range(2, n + 1):
            for i in range(0, n - length + 1):
                j = i + length
                left = closed[i, i + 1:j]       # (K, size): span i..k for k = i+1 .. j-1
                right = closed[i + 1:j, j]      # (K, size): span k..j
                live = np.isfinite(left).any(0)[lefts] & np.isfinite(right).any(0)[rights]
                rule_ids = np.nonzero(live)[0]
                if rule_ids.size:
                    scores = left[:, lefts[rule_ids]] + right[:, rights[rule_ids]] + self.binary_log_p[rule_ids]
                    best_split = scores.argmax(0)                                        # (R,)
                    best = scores[best_split, np.arange(rule_ids.size)]
                    symbols, values, index = _best_per_parent(parents[rule_ids], best)
                    finite = np.isfinite(values)
                    symbols, index = symbols[finite], index[finite]
                    closed[i, j, symbols] = unclosed[i, j, symbols] = values[finite]
                    rule_of[i, j, symbols] = rule_ids[index]
                    split_of[i, j, symbols] = i + 1 + best_split[index]
                won[i, j] = self._close(closed[i, j])
                self._prune(closed[i, j])
        return _Chart(closed, unclosed, won, rule_of, split_of)

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

    def _build(self, chart: _Chart, words: Sequence[str], i: int, j: int, symbol: int, closed: bool = True):
        """The Viterbi tree of a chart item, from its back-pointers (`won`, `rule_of`, `split_of`)."""
        import nltk  # pylint: disable=g-import-not-at-top

        if closed and chart.won[i, j, symbol] >= 0:
            chain = chart.won[i, j, symbol]
            child, middle = self.chains[1][chain], self.chains[3][chain]
            below = self._build(chart, words, i, j, int(child), closed=False)
            if middle >= 0:
                below = nltk.Tree(self.symbols[middle], [below])
            return nltk.Tree(self.symbols[symbol], [below])
        if j == i + 1:
            return nltk.Tree(self.symbols[symbol], [words[i]])
        rule, split = chart.rule_of[i, j, symbol], int(chart.split_of[i, j, symbol])
        _, left, right = self.binary[rule]
        return nltk.Tree(self.symbols[symbol], [self._build(chart, words, i, split, int(left)),
                                                self._build(chart, words, split, j, int(right))])


def _best_per_parent(parents: np.ndarray, scores: np.ndarray) -> tuple:
    """(symbols, best score, index into `scores`) of each distinct parent: the rule of highest
    score among those with that parent."""
    if not parents.size:
        return parents, scores, parents
    order = np.lexsort((-scores, parents))        # by parent, best first
    firsts = np.unique(parents[order], return_index=True)[1]
    index = order[firsts]
    return parents[index], scores[index], index


@dataclasses.dataclass
class _Item:
    """The k-best state of one chart item (`_LazyKBest`).

    `edges`: the best `cap` of the item's hyperedges, best first, each (tails: the items below,
    weight: the log-probability of its rule or unary chain, labels: the nodes it adds, top first);
    `firsts`: the score of each edge's best derivation; `derivations`: those found so far, best
    first, each (score, edge, rank of each tail's derivation); `heap`: the candidates, (-score,
    edge, ranks); `pushed`: every (edge, ranks) ever pushed; `next_edge`: the first edge not yet in
    the heap; `pending`: the last derivation taken, whose successors are pushed when the next one
    is asked for.
    """
    edges: list
    firsts: list
    heap: list
    derivations: list = dataclasses.field(default_factory=list)
    pushed: set = dataclasses.field(default_factory=set)
    next_edge: int = 1
    pending: Optional[tuple] = None


class _LazyKBest:
    """The lazy k-best algorithm of Huang & Chiang (2005), "Better k-best Parsing", Algorithm 3,
    over one sentence's chart (`Grammar.kbest_derivations`).

    The chart is read as a hypergraph whose items are (i, j, symbol, closed). A closed item (span
    i..j after the unary chains: one the beam keeps) has an edge from the unclosed item of its own
    symbol (no unary rule, weight 0) and one per unary chain into it (`Grammar._unary_chains`: one
    rule, or two through a middle symbol) from an unclosed item of the same span. An unclosed item
    of a longer span has one edge per binary rule and split point, from two closed items; one of a
    one-word span is a tag, whose one edge has no tails and the lexicon's score. A derivation is an
    edge and a rank in each tail's list; its score is the tails' scores plus the edge's weight,
    summed in float32 in CKY's order.

    An item is built when first asked for: all its edges' best derivations are scored at once in
    NumPy and the best `cap` kept, sorted (`_best_first`), as Huang & Chiang's GetCandidates keeps
    the top k. Its candidate heap starts with the best edge's best derivation and gets the next
    edge's when that one is taken: the edges are sorted, so no later edge can beat it. Asked for
    derivation r, the item pushes the successors of derivation r - 1 (one tail's rank + 1:
    LazyNext, asking that tail recursively) and pops the best candidate; `pushed` keeps a
    candidate reached from two predecessors from entering twice. No item is asked for rank `cap` or
    more: a derivation using it would have `cap` better ones in its own item.

    Ties break as CKY's (lowest binary rule id, then split point; the symbol itself before a unary
    chain, then the lowest chain), so derivation 0 of every item is its Viterbi derivation, with
    the same float32 score.

    Args:
        grammar: the `Grammar`.
        chart: its `_Chart` of `words`.
        words: the sentence.
        cap: the most derivations any item is asked for (the k of the k best).
    """

    def __init__(self, grammar: Grammar, chart: _Chart, words: Sequence[str], cap: int):
        self.grammar = grammar
        self.chart = chart
        self.words = words
        self.cap = cap
        self._items = {}

    def derivation(self, key: tuple, rank: int) -> Optional[tuple]:
        """Derivation `rank` (0: the best) of item `key`, (score, edge, tail ranks); None if the
        item has no more, or `rank` >= cap (Huang & Chiang's LazyKthBest)."""
        if rank >= self.cap:
            return None
        item = self._items.get(key)
        if item is None:
            item = self._items[key] = self._open(key)
        found = item.derivations
        while len(found) <= rank:
            if item.pending is not None:
                self._push_successors(item, *item.pending)
                item.pending = None
            if not item.heap:
                return None
            negative, edge, ranks = heapq.heappop(item.heap)
            found.append((-negative, edge, ranks))
            item.pending = edge, ranks
            if not any(ranks) and item.next_edge < len(item.edges):  # an edge's best: the next edge's in
                tails = item.edges[item.next_edge][0]
                heapq.heappush(item.heap, (-item.firsts[item.next_edge], item.next_edge, (0,) * len(tails)))
                item.next_edge += 1
        return found[rank]

    def tree(self, key: tuple, rank: int):
        """The tree (binarized form) of derivation `rank` of item `key`, which exists (the tails of
        an edge's best derivation are only opened here)."""
        import nltk  # pylint: disable=g-import-not-at-top

        _, edge, ranks = self.derivation(key, rank)
        tails, _, labels = self._items[key].edges[edge]
        children = [self.tree(tail, r) for tail, r in zip(tails, ranks)] if tails else [self.words[key[0]]]
        for label in reversed(labels):
            children = [nltk.Tree(label, children)]
        return children[0]

    def _push_successors(self, item: _Item, edge: int, ranks: tuple) -> None:
        """Pushes each successor of a derivation taken from `item` (Huang & Chiang's LazyNext)."""
        tails, weight, _ = item.edges[edge]
        for t in range(len(tails)):
            successor = ranks[:t] + (ranks[t] + 1,) + ranks[t + 1:]
            if (edge, successor) in item.pushed:
                continue
            item.pushed.add((edge, successor))
            below = [self.derivation(tail, r) for tail, r in zip(tails, successor)]
            if None in below:
                continue
            score = below[0][0]
            for other in below[1:]:
                score = _float32(score + other[0])
            heapq.heappush(item.heap, (-_float32(score + weight), edge, successor))

    def _open(self, key: tuple) -> _Item:
        """The item's best `cap` edges, sorted, and its heap holding the best one's best derivation."""
        i, j, symbol, closed = key
        grammar, chart = self.grammar, self.chart
        label = grammar.symbols[symbol]
        if closed:
            starts = grammar._by_parent[1]  # pylint: disable=protected-access
            lo, hi = starts[symbol], starts[symbol + 1]
            _, children, log_p, middles = (column[lo:hi] for column in grammar.chains)
            cell = chart.unclosed[i, j]
            scores = np.concatenate([cell[symbol:symbol + 1], cell[children] + log_p])  # itself first: CKY's ties
            best = _best_first(scores, self.cap)
            edges = []
            for b in best.tolist():
                if b == 0:
                    edges.append((((i, j, symbol, False),), 0.0, ()))
                else:
                    c = b - 1
                    middle = int(middles[c])
                    labels = (label,) if middle < 0 else (label, grammar.symbols[middle])
                    edges.append((((i, j, int(children[c]), False),), float(log_p[c]), labels))
        elif j == i + 1:  # a tag over the word: one derivation
            scores = chart.unclosed[i, j, symbol:symbol + 1]
            best = _best_first(scores, self.cap)
            edges = [((), 0.0, (label,))] * best.size
        else:
            starts = grammar._by_parent[0]  # pylint: disable=protected-access
            lo, hi = starts[symbol], starts[symbol + 1]
            lefts, rights, log_p = grammar.binary[lo:hi, 1], grammar.binary[lo:hi, 2], grammar.binary_log_p[lo:hi]
            left = chart.closed[i, i + 1:j]    # (K, size): span i..k for k = i+1 .. j-1
            right = chart.closed[i + 1:j, j]   # (K, size): span k..j
            scores = (left[:, lefts] + right[:, rights] + log_p).T.ravel()  # (R * K,): rule-major, CKY's ties
            best = _best_first(scores, self.cap)
            rules, splits = np.divmod(best, j - i - 1)
            edges = []
            for r, split in zip(rules.tolist(), (splits + i + 1).tolist()):
                tails = ((i, split, int(lefts[r]), True), (split, j, int(rights[r]), True))
                edges.append((tails, float(log_p[r]), (label,)))
        firsts = scores[best].tolist()
        return _Item(edges, firsts, [(-firsts[0], 0, (0,) * len(edges[0][0]))] if edges else [])


def _best_first(scores: np.ndarray, cap: int) -> np.ndarray:
    """The indices of the best `cap` finite `scores`, best first, ties by index: `np.argpartition`
    finds the cap-th best, then only those at least as good are sorted."""
    index = np.flatnonzero(scores > _NEG_INF)
    if index.size > cap:
        kept = scores[index]
        threshold = kept[np.argpartition(-kept, cap - 1)[cap - 1]]
        index = index[kept >= threshold]
    return index[np.lexsort((index, -scores[index]))][:cap]


def _float32(value: float) -> float:
    """`value` rounded to float32: a sum of two float32 numbers computed in float64 and rounded is
    their float32 sum, so derivations are scored exactly as CKY scores them."""
    return float(np.float32(value))


def _frozen(tree) -> tuple:
    """A hashable form of an nltk tree (label, children...), words as they are."""
    if isinstance(tree, str):
        return tree
    return (tree.label(), *(_frozen(child) for child in tree))


def parse_all(grammar: Grammar, sentences: Sequence[Sequence[str]], fallback: Callable,
              max_words: Optional[int] = None) -> tuple:
    """(trees, number not derived): each non-empty sentence's parse, `fallback(words)` where the
    grammar derives none or the sentence has more than `max_words` words (if given)."""
    return _each_sentence(sentences, grammar.parse, fallback, max_words, empty=None)


def parse_all_kbest(grammar: Grammar, sentences: Sequence[Sequence[str]], k: int, fallback: Callable,
                    max_words: Optional[int] = None, max_derivations: Optional[int] = None) -> tuple:
    """(each sentence's `Grammar.parse_kbest` list, number not derived), as `parse_all`: a
    non-empty sentence the grammar derives none of (or of more than `max_words` words, if given)
    gets [(fallback(words), -inf)]; an empty one, []."""
    return _each_sentence(sentences, lambda words: grammar.parse_kbest(words, k, max_derivations) or None,
                          lambda words: [(fallback(words), _NEG_INF)], max_words, empty=[])


def _each_sentence(sentences: Sequence[Sequence[str]], parse: Callable, fallback: Callable,
                   max_words: Optional[int], empty) -> tuple:
    """(each sentence's `parse(words)`, number not derived): `fallback(words)` where that is None
    (nothing derived) or the sentence is longer than `max_words`; `empty` for an empty sentence."""
    results, failed = [], 0
    for words in sentences:
        if not words:
            results.append(empty)
            continue
        result = parse(words) if max_words is None or len(words) <= max_words else None
        if result is None:
            result = fallback(list(words))
            failed += 1
        results.append(result)
    return tuple(results), failed
