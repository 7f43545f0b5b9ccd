"""`keras_transformer.tasks.parsing.reranking`: a treebank PCFG's k best trees reranked by a model's score.

Checked without a model (a stand-in scorer that records what it is asked): the candidates are the
grammar's distinct k best trees, its Viterbi tree first, the fallback tree alone (and counted) for
a sentence it cannot derive, none for an empty sentence; each candidate is scored once with its
sentence's source and the tree linearized as the model was trained (words kept, or "XX"); the
choice is the argmax of model + weight x PCFG worked out by hand (weight 0: the model alone; a
large weight: the PCFG's best; ties to the PCFG's order; a lone candidate of score -inf taken
without a NaN); an ensemble scores by its members' mean (two equal members rerank as one); the
oracle takes each sentence's candidate of best EVALB F1 and reaches 100 when a gold tree is among
them. The command with a trained model, from the run and from its export, is
in tests/keras_transformer/test_parse.py.
"""

import math

import pytest
from nltk import Tree

from keras_transformer.pipelines import linearized_trees
from keras_transformer.tasks.parsing import parse_files, pcfg, reranking
from tests.tasks.parsing.test_pcfg import hand_sentences


def tree(text):
    return Tree.fromstring(text)


def candidates_of(*sentences):
    """`Candidates` of (trees, pcfg scores) per sentence."""
    return reranking.Candidates(tuple(tuple(tree(t) for t in trees) for trees, _ in sentences),
                                tuple(tuple(scores) for _, scores in sentences), 0)


A, B, C = "(S (NP a b) c)", "(S a (VP b c))", "(S (NP a) (VP b c))"


@pytest.mark.parametrize("weight, expected", [
    # model: A -3, B -1, C -2; pcfg: A -1, B -5, C -2.
    # weight 0: B (-1); 0.5: A -3.5, B -3.5, C -3 -> C; 1: A -4, B -6, C -4 -> A (the PCFG's order breaks the tie);
    # 10: A -13, B -51, C -22 -> A.
    (0.0, B), (0.5, C), (1.0, A), (10.0, A)])
def test_choose_is_the_argmax_of_model_plus_weighted_pcfg(weight, expected):
    candidates = candidates_of(([A, B, C], [-1.0, -5.0, -2.0]))
    assert reranking.choose(candidates, [(-3.0, -1.0, -2.0)], weight) == (tree(expected),)


def test_choose_takes_a_lone_fallback_and_skips_empty_sentences():
    candidates = candidates_of(([A], [-math.inf]), ([], []))
    for weight in (0.0, 1.0):
        assert reranking.choose(candidates, [(-4.0,), ()], weight) == (tree(A), None)
    with pytest.raises(ValueError, match="non-negative"):
        reranking.choose(candidates, [(-4.0,), ()], -1.0)


@pytest.mark.parametrize("placeholders", [False, True])
def test_model_scores_pairs_each_candidate_with_its_source(placeholders):
    candidates = candidates_of(([A, B], [-1.0, -2.0]), ([], []), ([C], [-3.0]))
    asked = []

    def score_fn(sources, targets):
        asked.append((list(sources), list(targets)))
        return [-float(i + 1) for i in range(len(targets))]

    scores = reranking.model_scores(score_fn, ["a b c", "", "A <DT> b <NN> c <VB>"], candidates, placeholders)
    assert scores == ((-1.0, -2.0), (), (-3.0,))
    ((sources, targets),) = asked  # one call for all
    assert sources == ["a b c", "a b c", "A <DT> b <NN> c <VB>"]
    assert targets == [linearized_trees.linearize(tree(t), placeholders) for t in (A, B, C)]
    assert targets[0] == ("(S (NP XX XX )NP XX )S" if placeholders else "(S (NP a b )NP c )S")


def test_model_scores_refuses_a_scorer_that_drops_pairs():
    with pytest.raises(AssertionError, match="scored 1 of 2"):
        reranking.model_scores(lambda s, t: [0.0], ["a b c"], candidates_of(([A, B], [-1.0, -2.0])))


def test_pcfg_candidates_are_the_grammars_distinct_k_best():
    grammar = pcfg.Grammar.induce(hand_sentences())
    sentences = [["the", "dog", "sees", "a", "cat", "."], ["the", "dog", "barks", "quietly", "."], [], ["the"]]
    candidates = reranking.pcfg_candidates(grammar, sentences, 4, parse_files.right_branching)
    assert candidates.not_derived == 1 and candidates.trees[2] == () and candidates.pcfg_scores[2] == ()
    assert candidates.trees[3] == (parse_files.right_branching(["the"]),)
    assert candidates.pcfg_scores[3] == (-math.inf,)
    for words, trees, scores in zip(sentences[:2], candidates.trees, candidates.pcfg_scores):
        expected = grammar.parse_kbest(words, 4)
        assert [t for t, _ in expected] == list(trees) and [s for _, s in expected] == pytest.approx(scores)
        assert trees[0] == grammar.parse(words)
        assert len(set(map(str, trees))) == len(trees) and all(t.leaves() == words for t in trees)
    assert [len(t) for t in candidates.trees] == [4, 2, 0, 1]  # all the grammar derives: fewer than 4 for the second
    assert candidates.count == sum(len(t) for t in candidates.trees)
    with pytest.raises(ValueError, match="at least 1"):
        reranking.pcfg_candidates(grammar, sentences, 0, parse_files.right_branching)


def test_the_oracle_picks_each_sentences_best_candidate():
    gold = parse_files.Gold(tuple(hand_sentences()[:2]))
    words = [list(s.words) for s in gold.sentences]
    wrong = [parse_files.right_branching(w) for w in words]
    with_gold = reranking.Candidates(((wrong[0], gold.sentences[0].tree), (wrong[1],)), ((-1.0, -2.0), (-1.0,)), 0)
    chosen = reranking.oracle(with_gold, gold)
    assert chosen == (gold.sentences[0].tree, wrong[1])
    assert gold.scores(chosen).f1 > gold.scores(wrong).f1
    both = reranking.Candidates(tuple((w, s.tree) for w, s in zip(wrong, gold.sentences)), ((-1.0, -2.0),) * 2, 0)
    assert gold.scores(reranking.oracle(both, gold)).f1 == 100.0


def test_an_ensembles_score_is_its_members_mean():
    first, second = ((-1.0, -3.0), (-2.0,)), ((-3.0, -1.0), (-4.0,))
    assert reranking.mean_scores([first, second]) == ((-2.0, -2.0), (-3.0,))
    assert reranking.mean_scores([first]) == first
    # Two members that agree change nothing: the ensemble of a run with itself reranks as the run.
    candidates = candidates_of(([A, B], [-1.0, -1.5]), ([C], [-2.0]))
    assert reranking.choose(candidates, reranking.mean_scores([first, first]), 0.75) == \
        reranking.choose(candidates, first, 0.75)
    # Disagreeing members: the mean decides (A: -2 - 0.75, B: -2 - 1.125 -> A; alone, the second picks B).
    assert reranking.choose(candidates, reranking.mean_scores([first, second]), 0.75)[0] == tree(A)
    assert reranking.choose(candidates, second, 0.75)[0] == tree(B)
    with pytest.raises(ValueError, match="no model"):
        reranking.mean_scores([])
