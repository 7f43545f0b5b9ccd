"""Reranking a treebank PCFG's k best trees with the parsing model (section 6.3).

The parsing model is a better judge of a tree than a searcher for one. Scored with teacher forcing
(`keras_transformer.decoding.sequence_scores`: log P(tree | sentence), no length penalty), a model
trained on the treebank sample ranks a validation sentence's gold tree above both the tree its own
tree-constrained beam search finds and the PCFG's in nearly half of the sentences (docs/results.md#parsing):
on a few thousand training trees its search, more than its judgement, is what fails. (A search that
renormalizes the model's distribution over the tokens the tree rules allow finds trees the model
rates far below the PCFG's; the search scores by the model's own probabilities,
`keras_transformer.decoding.tree_constraint`, which gains 4-5 F1, still well under reranking.)
A classical way to combine a grammar that proposes well
with a model that judges well is reranking (Collins 2000; Charniak & Johnson 2005, "Coarse-to-fine
n-best parsing and MaxEnt discriminative reranking"); with a sequence-to-sequence model as the
judge, Choe & Charniak 2016 ("Parsing as Language Modeling") and Fried, Stern & Klein 2017
("Improving Neural Parsing by Disentangling Model Combination and Reranking Effects"), who found
that scoring with both the proposer's and the neural model's probabilities pays most. Here:

1. the treebank PCFG of `keras_transformer.tasks.parsing.pcfg` (the classical baseline) proposes each sentence's `k` most
   probable distinct trees (`Grammar.parse_kbest`);
2. the parsing model scores each candidate as it scores any pair (the `score` command's path for a
   training directory, the export's `score` signature for a SavedModel, so TF Serving can do the
   same): its source is what the model reads (the words, with their predicted tags for a tagged
   model), its target the tree linearized as in training (`keras_transformer.pipelines.linearized_trees.linearize`);
3. each sentence gets the candidate of highest

       log P_model(tree | sentence) + pcfg_weight * log P_pcfg(tree, sentence),

   Fried et al.'s score combination with one weight, chosen on the validation split
   (docs/experiments.md#parsing). Weight 0 is the model alone choosing among the PCFG's trees; a large weight
   gives the PCFG's own best tree back.

    grammar = pcfg.Grammar.induce(treebank.read_split(data_dir, "train"))
    candidates = pcfg_candidates(grammar, sentences, k=50, fallback=parse_files.right_branching)
    scores = model_scores(score_fn, sources, candidates, placeholders=False)
    trees = choose(candidates, scores, pcfg_weight=PCFG_WEIGHT)

The output is always one of the PCFG's trees (or the fallback tree of a sentence the grammar cannot
derive), so it is a tree over exactly the input's words, with the grammar's labels.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

from keras_transformer.pipelines import linearized_trees

# Chosen on the treebank sample's validation split, 50 candidates (docs/experiments.md#parsing: F1 hardly
# moves between 0.25 and 2; the model's score does most of the choosing).
PCFG_WEIGHT = 0.75


@dataclasses.dataclass(frozen=True)
class Candidates:
    """The PCFG's candidate trees of many sentences.

    Attributes:
        trees: per sentence, a tuple of distinct `nltk.Tree`s (phrase labels over the words), best
            first by the PCFG; empty for an empty sentence.
        pcfg_scores: per sentence, the log-probability of each tree's best derivation (-inf for a
            fallback tree the grammar does not derive).
        not_derived: sentences the grammar derives no tree for (each has its fallback tree alone).
    """
    trees: tuple
    pcfg_scores: tuple
    not_derived: int

    @property
    def count(self) -> int:
        """Candidate trees over all sentences."""
        return sum(len(t) for t in self.trees)


def pcfg_candidates(grammar, sentences: Sequence[Sequence[str]], k: int, fallback: Callable) -> Candidates:
    """Each sentence's `k` most probable distinct trees under `grammar` (a `keras_transformer.tasks.parsing.pcfg.Grammar`),
    or `fallback(words)` alone (score -inf) where it derives none; no tree for an empty sentence."""
    from keras_transformer.tasks.parsing import pcfg  # pylint: disable=g-import-not-at-top

    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    lists, not_derived = pcfg.parse_all_kbest(grammar, [list(words) for words in sentences], k, fallback)
    return Candidates(tuple(tuple(t for t, _ in found) for found in lists),
                      tuple(tuple(float(s) for _, s in found) for found in lists), not_derived)


def model_scores(score_fn: Callable, sources: Sequence[str], candidates: Candidates,
                 placeholders: bool = False) -> tuple:
    """Per sentence, log P(tree | source) of each candidate under the model.

    Args:
        score_fn: (sources, targets) lists of strings -> log-probabilities, one per pair
            (`run_score_fn`, `export_score_fn`).
        sources: what the model reads for each sentence (`keras_transformer.tasks.parsing.parse_files.source_sentences`).
        candidates: from `pcfg_candidates`.
        placeholders: the model writes each word as "XX" (`--tree_targets=placeholders`).
    """
    pair_sources, targets = [], []
    for source, trees in zip(sources, candidates.trees, strict=True):
        for tree in trees:
            pair_sources.append(source)
            targets.append(linearized_trees.linearize(tree, placeholders))
    flat = list(score_fn(pair_sources, targets)) if targets else []
    if len(flat) != len(targets):
        raise AssertionError(f"the model scored {len(flat)} of {len(targets)} candidates")
    result, start = [], 0
    for trees in candidates.trees:
        result.append(tuple(float(x) for x in flat[start:start + len(trees)]))
        start += len(trees)
    return tuple(result)


def mean_scores(per_model: Sequence[Sequence[Sequence[float]]]) -> tuple:
    """The models' mean log-probability of each candidate (an ensemble as a scorer: `model_scores`
    of each member, averaged per candidate, so that `pcfg_weight` means the same whatever the
    number of members)."""
    if not per_model:
        raise ValueError("no model's scores to average")
    return tuple(tuple(sum(values) / len(values) for values in zip(*sentence, strict=True))
                 for sentence in zip(*per_model, strict=True))


def choose(candidates: Candidates, scores: Sequence[Sequence[float]], pcfg_weight: float) -> tuple:
    """Each sentence's candidate of highest model score + `pcfg_weight` * PCFG score (module
    docstring); the PCFG's order breaks ties, and a lone (fallback) candidate is taken as it is.
    None for an empty sentence."""
    if pcfg_weight < 0:
        raise ValueError(f"pcfg_weight must be non-negative, got {pcfg_weight}")
    chosen = []
    for trees, pcfg, model in zip(candidates.trees, candidates.pcfg_scores, scores, strict=True):
        if not trees:
            chosen.append(None)
            continue
        combined = [m + (pcfg_weight * p if pcfg_weight else 0.0) for m, p in zip(model, pcfg)]
        best = max(range(len(trees)), key=lambda i: (combined[i], -i))
        chosen.append(trees[best])
    return tuple(chosen)


def run_score_fn(model_dir: str, checkpoint: Optional[str] = None, batch_tokens: int = 4096) -> tuple:
    """(score_fn, the checkpoint) of a training directory: its model and tokenizers scoring pairs
    as the `score` command does (`keras_transformer.tasks.scoring.score_lines`)."""
    from keras_transformer.tasks import scoring  # pylint: disable=g-import-not-at-top  (TensorFlow)

    model, checkpoint, source_tokenizer, target_tokenizer = scoring.load_run(model_dir, checkpoint)

    def score_fn(sources: Sequence[str], targets: Sequence[str]) -> list[float]:
        return [log_prob for log_prob, _ in scoring.score_lines(model, source_tokenizer, target_tokenizer, sources,
                                                                  targets, batch_tokens, progress=False)]
    return score_fn, checkpoint


def export_score_fn(export_dir: str, batch_size: int = 256) -> tuple:
    """(score_fn, the SavedModel's path) of an export: its `score` signature (what a TF Serving
    client of the parser calls to rerank), `batch_size` pairs a call."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from keras_transformer.export import client, serving_module, versions  # pylint: disable=g-import-not-at-top

    source = versions.saved_model_path(export_dir)
    client.check_export_signature(export_dir, serving_module.SCORE_SIGNATURE)
    loaded = client.load_saved_model(source)
    signature = loaded.signatures[serving_module.SCORE_SIGNATURE]

    def score_fn(sources: Sequence[str], targets: Sequence[str]) -> list[float]:
        out = []
        for start in range(0, len(sources), batch_size):
            result = signature(sources=tf.constant(list(sources[start:start + batch_size])),
                               targets=tf.constant(list(targets[start:start + batch_size])))
            out.extend(result["log_probs"].numpy().tolist())
        return out
    score_fn.saved_model = loaded  # a signature keeps only a weak reference to its SavedModel
    return score_fn, source


def oracle(candidates: Candidates, gold) -> tuple:
    """Each sentence's candidate of highest labelled EVALB F1 against `gold` (a
    `keras_transformer.tasks.parsing.parse_files.Gold`): the best that any reranker of these candidates can do."""
    from keras_transformer.tasks.parsing import evalb  # pylint: disable=g-import-not-at-top

    chosen = []
    for trees, sentence in zip(candidates.trees, gold.sentences, strict=True):
        def f1(tree):
            s = evalb.sentence_scores(sentence.tree, tree, sentence.tags)
            return 2 * s.matched / max(s.gold + s.test, 1)
        chosen.append(max(trees, key=f1) if trees else None)
    return tuple(chosen)
