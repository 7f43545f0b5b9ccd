"""`tasks.pcfg`: the treebank PCFG baseline of the parsing task.

Checked: word signatures; the grammar's binarized form undone gives back every gold tree of the
sample; CKY finds the same best tree and score as nltk's `ViterbiParser` on the same grammar (a
hand-made treebank, a sentence with an unknown word); on the sample's grammar the parse of a
training sentence scores at least its gold tree; the parse command with --baseline=pcfg writes
trees over the input's words and scores them. The sample (../shared/data) is skipped without it.
"""

import math

import nltk
import numpy as np
import pytest
from nltk import Tree
from nltk.grammar import Nonterminal, ProbabilisticProduction

from pipelines import treebank
from tasks import parsing, pcfg
from tests.helpers.commands import run_command

HAND_TREES = [  # a small treebank: tags, unary chains, a flat NP to binarize, a one-word sentence
    "(S (NP (DT the) (NN dog)) (VP (VBZ barks)) (. .))",
    "(S (NP (DT the) (JJ big) (JJ red) (NN dog)) (VP (VBZ sees) (NP (DT a) (NN cat))) (. .))",
    "(S (NP (NNP Fido)) (VP (VBD saw) (NP (DT the) (NN cat)) (PP (IN with) (NP (DT a) (NN telescope)))) (. .))",
    "(S (NP (DT a) (NN cat)) (VP (VBZ sleeps) (ADVP (RB quietly))) (. .))",
    "(S (NP (PRP it)) (VP (VBD ran) (PP (IN into) (NP (DT the) (JJ old) (NN house)))) (. .))",
    "(S (VP (VB Go)) (. !))",
]


def hand_sentences():
    return [treebank.clean(Tree.fromstring(t)) for t in HAND_TREES]


@pytest.mark.parametrize("word, first, expected", [
    ("Running", False, "UNK-CAPS-ing"), ("Running", True, "UNK-INITC-ing"), ("quickly", False, "UNK-ly"),
    ("1,234", False, "UNK-NUM"), ("well-known", False, "UNK-DASH"), ("iPod", False, "UNK-MIXC"),
    ("cats", False, "UNK-s"), ("ox", False, "UNK")])
def test_signature(word, first, expected):
    assert pcfg.signature(word, first) == expected


def test_binarized_trees_come_back(sample):
    for sentence in sample["train"][:400]:
        tagged = sentence.tagged_tree()
        form = pcfg.binarized(tagged, horizontal=2, vertical=1)
        assert all(len(node) <= 2 for node in form.subtrees())
        assert pcfg.debinarized(form) == sentence.tree
        assert tagged == sentence.tagged_tree()  # the input is not changed


def viterbi_by_nltk(grammar: pcfg.Grammar, words):
    """nltk's ViterbiParser on the same grammar: the phrase rules as they are; a tag's word rules
    get exp(lexicon score) x a constant small enough that each tag's rules sum to at most 1 (the
    rest goes to a word outside the sentence), so the best tree is the same and its log-probability
    is the score plus len(words) x log(constant)."""
    scores = {w: np.exp(grammar.lexicon.log_scores(w, i == 0)) for i, w in enumerate(words)}
    scale = 0.5 / max(sum(s[t] for s in scores.values()) for t in range(len(grammar.lexicon.tag_ids)))
    productions = []
    for (parent, left, right), log_p in zip(grammar.binary.tolist(), grammar.binary_log_p):
        productions.append(ProbabilisticProduction(
            Nonterminal(grammar.symbols[parent]),
            [Nonterminal(grammar.symbols[left]), Nonterminal(grammar.symbols[right])], prob=math.exp(log_p)))
    for (parent, child), log_p in grammar.unary.items():
        productions.append(ProbabilisticProduction(Nonterminal(grammar.symbols[parent]),
                                                   [Nonterminal(grammar.symbols[child])], prob=math.exp(log_p)))
    for tag, column in grammar.lexicon.tag_ids.items():
        mass = 0.0
        for word, score in scores.items():
            if score[column] > 0:
                productions.append(ProbabilisticProduction(Nonterminal(tag), [word], prob=score[column] * scale))
                mass += score[column] * scale
        productions.append(ProbabilisticProduction(Nonterminal(tag), [f"<other {tag}>"], prob=1 - mass))
    parser = nltk.ViterbiParser(nltk.PCFG(Nonterminal(pcfg.START), productions))
    best = next(parser.parse(words), None)
    if best is None:
        return None, -math.inf
    return Tree.convert(best), math.log(best.prob()) - len(words) * math.log(scale)


@pytest.mark.parametrize("sentence, derived", [  # derived by the (1, 0) and by the (2, 1) grammar
    ("the cat barks .", (True, True)), ("Fido saw a red cat .", (True, True)),
    ("the gorilla sleeps quietly .", (True, True)),  # gorilla: an unknown word
    ("a big dog saw the old cat with Fido .", (True, False)),
    ("it ran into the big red house .", (True, False))])
@pytest.mark.parametrize("horizontal, vertical", [(1, 0), (2, 1)])
def test_cky_equals_nltk_viterbi(sentence, derived, horizontal, vertical):
    grammar = pcfg.Grammar.induce(hand_sentences(), horizontal, vertical, beam=math.inf)
    words = sentence.split()
    tree, score = grammar.viterbi(words)
    expected_tree, expected_score = viterbi_by_nltk(grammar, words)
    assert (tree is not None) == derived[vertical]
    assert tree == expected_tree
    if tree is None:
        assert score == expected_score == -math.inf and grammar.parse(words) is None
        return
    assert score == pytest.approx(expected_score, abs=1e-4)
    assert grammar.log_score(tree, words) == pytest.approx(score, abs=1e-4)
    parsed = grammar.parse(words)
    assert parsed.leaves() == words and parsed == pcfg.debinarized(tree)


def test_a_sentence_the_grammar_cannot_derive_gets_the_fallback():
    grammar = pcfg.Grammar.induce(hand_sentences()[:1], 2, 1)  # one tree: the dog barks .
    assert grammar.parse("barks the dog".split()) is None
    trees, failed = pcfg.parse_all(grammar, [["the", "dog", "barks", "."], ["barks", "the", "dog"], []],
                                   parsing.right_branching)
    assert failed == 1
    assert parsing.format_tree(trees[0]) == "(S (NP the dog) (VP barks) .)"
    assert trees[1] == parsing.right_branching(["barks", "the", "dog"]) and trees[2] is None


def test_the_parse_scores_at_least_the_gold_tree(sample):
    grammar = pcfg.Grammar.induce(sample["train"], 2, 1, beam=math.inf)
    short = [s for s in sample["train"] if 6 <= len(s.words) <= 12][:5]
    assert len(short) == 5
    for sentence in short:
        tree, score = grammar.viterbi(sentence.words)
        gold = grammar.log_score(pcfg.binarized(sentence.tagged_tree(), 2, 1), sentence.words)
        assert np.isfinite(gold)
        assert score >= gold - 1e-3
        assert grammar.log_score(tree, sentence.words) == pytest.approx(score, abs=1e-3)


def test_parse_command_with_the_pcfg_baseline(ptb, sample, tmp_path):
    gold = sample["test"][:3]
    (tmp_path / "sentences.txt").write_text("".join(s.sentence + "\n" for s in gold), encoding="utf-8")
    (tmp_path / "gold.trees").write_text("".join(parsing.format_tree(s.tagged_tree()) + "\n" for s in gold),
                                         encoding="utf-8")
    result = run_command("-m", "keras_transformer.parse", "--baseline=pcfg", f"--data_dir={ptb}",
                         f"--input={tmp_path / 'sentences.txt'}", f"--reference={tmp_path / 'gold.trees'}",
                         f"--output={tmp_path / 'trees.txt'}", "--pcfg_horizontal=1", "--pcfg_vertical=0")
    assert result.returncode == 0, result.stderr[-3000:]
    trees = [Tree.fromstring(line) for line in (tmp_path / "trees.txt").read_text(encoding="utf-8").splitlines()]
    assert [t.leaves() for t in trees] == [list(s.words) for s in gold]
    expected = parsing.Gold(tuple(gold)).report(trees)
    assert result.stdout.startswith(f"pcfg (the {ptb} training split, horizontal 1, vertical 0: ")
    assert expected in result.stdout
