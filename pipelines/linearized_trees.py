"""A constituency tree as a target sentence, and back: the linearization of section 6.3.

Vinyals et al. (2015), whose setup "Attention Is All You Need" follows for parsing (section
6.3), write a tree depth-first as a sequence of tokens: an opening bracket with its label, the
words, a closing bracket repeating the label; part-of-speech tags are left out:

    (S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))
    -> (S (NP The dog )NP (VP barks )VP . )S

Vinyals et al. replaced each word by a placeholder, "XX" (the input has the words). By default
the words are kept: the decoder copies the word it has reached, and so knows where it is in the
sentence instead of counting placeholders (the targets grow by about a tenth: words are a piece
or two each, as "XX" is one). `TREE_TARGETS` names the two (`DataConfig.tree_targets`,
`--tree_targets`): "words", or "placeholders", Vinyals et al.'s, `(S (NP XX XX )NP (VP XX )VP XX )S`
(`linearize(placeholders=True)`), whose "XX" the tokenizer keeps one piece (`PLACEHOLDER_PIECE`).
A tree is made of the decoded brackets and the input's words in
order (`to_tree`): a decoded word only marks a word's place (a placeholder "XX" is read the same
way), so a miscopied word never changes the input. Repeating the label on the closing bracket costs no extra tokens
over a bare ")" and tells the decoder which constituent it closes.

A decoder can emit a sequence that is not a tree over the input (an unclosed or extra bracket,
one placeholder too many or too few). `to_tree` always returns a well-formed tree over exactly
the input's words, and names the repairs it made (`REPAIRS`), so their share can be reported:

  unclosed       brackets still open at the end are closed
  extra_close    a closing bracket with nothing open is dropped
  label_mismatch a closing label differs from the open one (the open one is kept)
  extra_word     a placeholder after the last input word is dropped
  missing_word   input words left at the end join the outermost constituent (the root added
                 by "root" if there are several)
  not_a_word     a decoded word that is not the input's next word (nor "XX") stands for it (a
                 label holds no bracket or space: "(NP)NP" is such a token, not a bracket)
  empty          a constituent over no word is dropped
  root           words or constituents outside one root are wrapped in one (label S)
  too_deep       a bracket opened inside MAX_DEPTH open ones is dropped, with its closing one
                 (a decoder that only opens brackets would otherwise nest past any recursion)
"""

from __future__ import annotations

import re
from typing import Sequence

WORD = "XX"
TREE_TARGETS = ("words", "placeholders")  # what stands for a word in a target tree (module docstring)
FALLBACK_ROOT = "S"  # the label of a root added by repair (the most frequent root label of the WSJ)
_OPEN = re.compile(r"\(([^()\s]+)")  # "(NP"
_CLOSE = re.compile(r"\)([^()\s]*)")  # ")NP", or a bare ")"
MAX_DEPTH = 100  # constituents open at once; the WSJ's deepest trees nest about 40
# Constituents opened in a row, before a word (`tree_constraint`'s `max_opening_run`): at most 6 in
# the 3,396 training trees of NLTK's sample (5 in 25 of them), with room for a larger treebank's.
MAX_OPENING_RUN = 8
REPAIRS = ("unclosed", "extra_close", "label_mismatch", "extra_word", "missing_word", "not_a_word",
           "empty", "root", "too_deep")


def linearize(tree, placeholders: bool = False) -> str:
    """The target sentence of a tree without part-of-speech level (leaves are words): words kept,
    or with `placeholders` each word written as `WORD`, "XX" (Vinyals et al. 2015)."""
    import nltk  # pylint: disable=g-import-not-at-top

    tokens = []

    def walk(node):
        if not isinstance(node, nltk.Tree):
            tokens.append(WORD if placeholders else node)
            return
        tokens.append("(" + node.label())
        for child in node:
            walk(child)
        tokens.append(")" + node.label())

    walk(tree)
    return " ".join(tokens)


def to_tree(linearized: str, words: Sequence[str]):
    """(tree, repairs): the tree a decoded target sentence describes, over exactly `words`.

    Args:
        linearized: decoded output, tokens separated by spaces ("(NP", "dog", ")NP", ...).
        words: the input sentence's words, which take the decoded words' places in order.

    Returns:
        An `nltk.Tree` whose leaves are `words` in order (no part-of-speech level), and the
        tuple of repairs made, one entry per repair (empty: the output was a tree over the
        input as it stood).
    """
    import nltk  # pylint: disable=g-import-not-at-top

    repairs = []
    root = nltk.Tree("", [])
    stack = [root]
    remaining = list(words)[::-1]
    skipped = 0  # brackets dropped as too deep and not closed yet
    for token in linearized.split():
        opening, closing = _OPEN.fullmatch(token), _CLOSE.fullmatch(token)
        if opening and len(stack) > MAX_DEPTH:
            repairs.append("too_deep")
            skipped += 1
        elif closing and skipped:
            skipped -= 1
        elif opening:
            node = nltk.Tree(opening.group(1), [])
            stack[-1].append(node)
            stack.append(node)
        elif closing:
            if len(stack) == 1:
                repairs.append("extra_close")
                continue
            if closing.group(1) and closing.group(1) != stack[-1].label():
                repairs.append("label_mismatch")
            stack.pop()
        else:
            if remaining and token not in (WORD, remaining[-1]):
                repairs.append("not_a_word")
            if not remaining:
                repairs.append("extra_word")
                continue
            if len(stack) == 1:
                repairs.append("root")
            stack[-1].append(remaining.pop())
    if len(stack) > 1:
        repairs.append("unclosed")
    if remaining:
        repairs.append("missing_word")
        outermost = root[0] if len(root) == 1 and isinstance(root[0], nltk.Tree) else root
        outermost.extend(remaining[::-1])
    tree = _drop_empty(root, repairs)
    if tree is None or len(tree) != 1 or not isinstance(tree[0], nltk.Tree):
        if "root" not in repairs:
            repairs.append("root")
        tree = nltk.Tree(FALLBACK_ROOT, list(tree) if tree is not None else list(words))
    else:
        tree = tree[0]
    return tree, tuple(repairs)


def _drop_empty(node, repairs):
    """`node` without the constituents that cover no word (None if it covers none)."""
    import nltk  # pylint: disable=g-import-not-at-top

    if not isinstance(node, nltk.Tree):
        return node
    children = [c for c in (_drop_empty(child, repairs) for child in node) if c is not None]
    if not children:
        if node.label():  # the unlabelled holder of the roots is not a constituent
            repairs.append("empty")
        return None
    return nltk.Tree(node.label(), children)


SENTENCEPIECE_SPACE = "\u2581"  # sentencepiece's mark of a piece that follows a space
# The placeholder as one sentencepiece piece, a word of its own: a user-defined symbol of the
# tokenizer of a run with placeholder targets (`DataConfig.tokenizer_config`), so that "XX" is
# never split or merged with what follows ("XXL" in a source is this piece and "L").
PLACEHOLDER_PIECE = SENTENCEPIECE_SPACE + WORD


def tree_grammar(pieces: Sequence[str], vocab_size: int, source_tags: bool = False, placeholders: bool = False):
    """The `keras_transformer.decoding.tree_constraint.TreeGrammar` of a sentencepiece vocabulary.

    Args:
        pieces: the vocabulary in id order (`Tokenizer.pieces()`), pieces after a space marked
            with "\u2581" (sentencepiece's convention).
        vocab_size: the model's output vocabulary, >= len(pieces) (ids past the pieces are
            never allowed).
        source_tags: the sources carry a part-of-speech tag after each word (`keras_transformer.pipelines.pos_tags`),
            which the constraint does not copy.
        placeholders: the targets write each word as "XX" (`linearize(placeholders=True)`): the
            constraint writes the id of `PLACEHOLDER_PIECE` once per source word.

    An opening bracket is a piece "\u2581(LABEL", its closing one "\u2581)LABEL"; a label whose
    brackets are not whole pieces cannot be decoded under the constraint (train the tokenizer
    with `--split_by_script=false`, as configs/ptb_parsing.flags does, so that they are).
    Raises ValueError if the vocabulary has no such pair (e.g. a WordPiece vocabulary, which
    splits "(" from its label), or, with `placeholders`, no piece `PLACEHOLDER_PIECE`.
    """
    import numpy as np  # pylint: disable=g-import-not-at-top

    from keras_transformer.decoding import tree_constraint  # pylint: disable=g-import-not-at-top  (TensorFlow)

    if len(pieces) > vocab_size:
        raise ValueError(f"{len(pieces)} pieces for a vocabulary of {vocab_size} ids")
    ids = {piece: i for i, piece in enumerate(pieces)}
    closing = np.full([vocab_size], -1, np.int32)
    word_starts = np.zeros([vocab_size], bool)
    for i, piece in enumerate(pieces):
        token = piece[len(SENTENCEPIECE_SPACE):] if piece.startswith(SENTENCEPIECE_SPACE) else None
        opening = _OPEN.fullmatch(token) if token else None
        if opening:
            closing[i] = ids.get(SENTENCEPIECE_SPACE + ")" + opening.group(1), -1)
        elif token is not None and not _CLOSE.fullmatch(token):  # also a bare space piece, ""
            word_starts[i] = True
    placeholder = -1
    if placeholders:
        if PLACEHOLDER_PIECE not in ids:
            raise ValueError(f"the vocabulary has no piece {PLACEHOLDER_PIECE!r}, the placeholder of the targets' "
                             "words: not the tokenizer of a run trained with --tree_targets=placeholders")
        placeholder = ids[PLACEHOLDER_PIECE]
    return tree_constraint.TreeGrammar(closing=closing, word_starts=word_starts, max_depth=MAX_DEPTH,
                                       max_opening_run=MAX_OPENING_RUN, source_tags=source_tags, placeholder=placeholder)

