"""`keras_transformer.pipelines.linearized_trees`: `linearize` and `to_tree`, with the repairs `to_tree` makes.

Covered:
* An exact `linearize` -> `to_tree` round trip of every tree of NLTK's sample (../shared/data,
  skipped without it).
* `to_tree`: one hand-made output per repair kind (`REPAIRS`), outputs needing none or several,
  and random token soups (the result is a tree over exactly the input's words, which
  `linearize` -> `to_tree` gives back unrepaired).
"""

import random

import pytest
from nltk import Tree

from keras_transformer.pipelines import linearized_trees
from tests.helpers.treebank import one_line


def test_every_sample_tree_survives_linearization(sample):
    for split, sentences in sample.items():
        for s in sentences:
            assert linearized_trees.to_tree(linearized_trees.linearize(s.tree), s.words) == (s.tree, ()), (
                split, s.sentence)


# pipelines.linearized_trees.to_tree: repairs -----------------------------------------------------

WORDS = ("a", "b", "c")
# kind: (decoded, number of words, the tree expected)
REPAIR_CASES = {
    "unclosed": ("(S (NP XX XX )NP (VP XX )VP", 3, "(S (NP a b) (VP c))"),
    "extra_close": ("(S XX )S )S", 1, "(S a)"),
    "label_mismatch": ("(S (NP XX )VP )S", 1, "(S (NP a))"),  # the open NP is kept
    "extra_word": ("(S XX XX )S", 1, "(S a)"),
    "missing_word": ("(S (NP XX )NP )S", 3, "(S (NP a) b c)"),
    "not_a_word": ("(S foo )S", 1, "(S a)"),
    "empty": ("(S (NP )NP XX )S", 1, "(S a)"),
    "root": ("(NP XX )NP (VP XX )VP", 2, "(S (NP a) (VP b))"),
    # MAX_DEPTH brackets nest, the next one is dropped with its closing one.
    "too_deep": ("(X " * (linearized_trees.MAX_DEPTH + 1) + "XX" + " )X" * (linearized_trees.MAX_DEPTH + 1), 1,
                 "(X " * linearized_trees.MAX_DEPTH + "a" + ")" * linearized_trees.MAX_DEPTH),
}


def test_every_repair_kind_has_a_case():
    assert set(REPAIR_CASES) == set(linearized_trees.REPAIRS)


@pytest.mark.parametrize("kind", sorted(REPAIR_CASES))
def test_to_tree_repairs(kind):
    decoded, count, expected = REPAIR_CASES[kind]
    tree, repairs = linearized_trees.to_tree(decoded, WORDS[:count])
    assert (one_line(tree), repairs) == (expected, (kind,))


def test_to_tree_of_a_tree_needs_no_repair():
    tree, repairs = linearized_trees.to_tree("(S (NP XX XX )NP (VP XX )VP )S", WORDS)
    assert (one_line(tree), repairs) == ("(S (NP a b) (VP c))", ())


def test_to_tree_names_each_repair_it_makes():
    assert linearized_trees.to_tree("XX XX", WORDS[:2]) == (Tree("S", ["a", "b"]), ("root", "root"))
    assert linearized_trees.to_tree("", WORDS[:2]) == (Tree("S", ["a", "b"]), ("missing_word", "root"))
    assert linearized_trees.to_tree(")S (S (NP foo XX )S", WORDS[:2]) == (
        Tree("S", [Tree("NP", ["a", "b"])]), ("extra_close", "not_a_word", "label_mismatch", "unclosed"))


SOUP = ["(NP", ")NP", "(S", ")S", "XX", ")", "foo"]


def soups(count=300, seed=63):
    rng = random.Random(seed)
    for _ in range(count):
        words = [f"w{i}" for i in range(rng.randint(1, 6))]
        yield " ".join(rng.choice(SOUP) for _ in range(rng.randint(0, 14))), words


def test_to_tree_of_token_soups_is_a_tree():
    seen = set()
    for decoded, words in soups():
        tree, repairs = linearized_trees.to_tree(decoded, words)
        assert set(repairs) <= set(linearized_trees.REPAIRS), decoded
        assert linearized_trees.to_tree(linearized_trees.linearize(tree), tree.leaves()) == (tree, ()), decoded
        seen.update(repairs)
    assert seen == set(linearized_trees.REPAIRS) - {"too_deep"}  # short soups nest less than MAX_DEPTH


def test_to_tree_of_token_soups_is_over_exactly_the_words():
    for decoded, words in soups():
        assert linearized_trees.to_tree(decoded, words)[0].leaves() == words, decoded


def test_missing_words_after_several_roots_stay_in_order():
    tree, repairs = linearized_trees.to_tree("(NP XX )NP XX", WORDS)
    assert one_line(tree) == "(S (NP a) b c)" and repairs == ("root", "missing_word")


@pytest.mark.parametrize("token", ["(NP)NP", "()", "(", ")NP(S"])
def test_a_token_with_a_bracket_in_its_label_is_not_a_bracket(token):
    # Such a token would write a tree no reader parses back; it stands for a word instead.
    tree, repairs = linearized_trees.to_tree(f"(S XX {token} XX )S", WORDS)
    assert one_line(tree) == "(S a b c)" and repairs == ("not_a_word",)


def test_linearize_with_placeholders_writes_xx_for_each_word(sample):
    """The first training tree of the sample, golden, words kept and as placeholders; to_tree puts
    the words back, and every tree of the sample survives placeholders as it survives words."""
    first = sample["train"][0]
    assert first.sentence == "Pierre Vinken , 61 years old , will join the board as a nonexecutive director Nov. 29 ."
    assert linearized_trees.linearize(first.tree) == (
        "(S (NP (NP Pierre Vinken )NP , (ADJP (NP 61 years )NP old )ADJP , )NP (VP will (VP join (NP the board )NP "
        "(PP as (NP a nonexecutive director )NP )PP (NP Nov. 29 )NP )VP )VP . )S")
    assert linearized_trees.linearize(first.tree, placeholders=True) == (
        "(S (NP (NP XX XX )NP XX (ADJP (NP XX XX )NP XX )ADJP XX )NP (VP XX (VP XX (NP XX XX )NP "
        "(PP XX (NP XX XX XX )NP )PP (NP XX XX )NP )VP )VP XX )S")
    for sentences in sample.values():
        for s in sentences:
            target = linearized_trees.linearize(s.tree, placeholders=True)
            assert target.split().count(linearized_trees.WORD) == len(s.words)
            assert linearized_trees.to_tree(target, s.words) == (s.tree, ())
