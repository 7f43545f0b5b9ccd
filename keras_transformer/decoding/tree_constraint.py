"""Decoding that can only write a linearized tree over its input's words (section 6.3).

A parsing model translates a sentence into its tree written as tokens, the words kept:
`(S (NP The dog )NP (VP barks )VP . )S` (`keras_transformer.pipelines.linearized_trees`). Decoded freely, it may
miscopy a word, skip one, or leave a bracket open, and the output then needs repair (most of a
small model's outputs do, docs/results.md#parsing). With this constraint, beam search only extends
a hypothesis by a token that keeps it the prefix of a well-formed tree over exactly the input's
pieces, so every output is one and needs no repair. Per hypothesis it tracks the source pieces
copied so far and the stack of open brackets, and allows as the next token:

* the next source piece, if words remain and a bracket is open (words are copied in order,
  piece by piece, never dropped, repeated or invented);
* an opening bracket, if words remain, the next piece starts a word (no bracket inside a
  word), fewer than `max_depth` brackets are open, fewer than `max_opening_run` were opened
  since the last piece copied (below), the vocabulary has its closing one, and (but for the
  root) the hypothesis can still end within its length limit after it (below);
* the closing bracket of the innermost open one (same label), if the next piece starts a word
  or none remains, the constituent holds something (the last token is not its opening
  bracket), and it is not the root while words remain (one root);
* EOS, once every piece is copied and every bracket closed.

A source may carry part-of-speech tags (`TreeGrammar.source_tags`; Vinyals et al. 2015 fed
them to their parser): each word followed by one tag token, "The <DT> dog <NN>". The tree is
over the words only, so the pieces of every second source word (counted by the pieces that
begin a word) are taken out of the source before the rules see it: the rules below then copy
and count the words' pieces alone.

Targets may write each word as a placeholder, "XX" (`TreeGrammar.placeholder`, Vinyals et al.
2015; `keras_transformer.pipelines.linearized_trees`): `(S (NP XX XX )NP (VP XX )VP XX )S`. The source (its tags
taken out) is then replaced, before the rules see it, by one placeholder id per word (counted,
as above, by the pieces that begin a word; pieces before the first such piece make one word):
"the dog s bark ." (4 words) -> "XX XX XX XX". The rules below then copy one "XX" per word,
never a source piece; a bracket may go before any of them (each is a whole word); EOS comes
once there are as many as words and every bracket is closed; and the length limit counts one
token per word left.

The search scores a hypothesis by the model's own log P(Y | X): each step takes the log-softmax of
the model's logits over the whole vocabulary and only then masks the tokens the rules forbid
(`beam_search.beam_search(normalize=False)`), so a token the rules force costs what the model
says it costs. Masking first and taking the log-softmax over the allowed tokens (a renormalized
search, docs/experiments.md#parsing) gives a forced token probability 1 and spreads the mass the model
put on forbidden tokens over the allowed ones: a hypothesis where the model wanted to close a
bracket the rules keep open, or to write another word, then loses nothing, and the search, on a
model trained on a few thousand trees, finds trees the model itself rates far below the ones a
treebank PCFG finds. With the model's own probabilities the constrained beam search ranks trees
by the same log P(tree | sentence) as the `score` command and the PCFG reranker
(`keras_transformer.tasks.parsing.reranking`), and its scores are that quantity (divided by the length penalty); on the
treebank sample's validation split it parses more accurately (docs/results.md#parsing).

The run of opening brackets before a word is bounded: a treebank's trees open a few
constituents at once (`keras_transformer.pipelines.linearized_trees.MAX_OPENING_RUN`), but a model lost in a long
sentence could find an opening bracket, renormalized over the few tokens allowed, likelier than
the next word again and again, `(QP (NP (QP (NP ...` up to the length limit (docs/results.md#parsing),
and each such bracket costs precision. After `max_opening_run` in a row, the next token must be
the next word (a bracket just opened cannot close).

Some token is always allowed, so a search never runs dry. The length limit (the search ends
a hypothesis that reaches it wherever it is) is kept by counting: the fewest tokens that finish
a hypothesis are its pieces still to copy, a closing bracket for each open one and EOS. Copying
a piece or closing a bracket lowers that count by one as it writes one token; an opening bracket
raises it by one, so it is allowed only while the tokens written plus those still needed stay
within the limit. A hypothesis whose root fits (the sentence's pieces, the root's two brackets
and EOS within the limit) therefore always ends as a complete tree, never cut by the limit with
brackets open.

The rules are about token ids only: which ids are opening and closing brackets of which label
and which start a word come from the vocabulary (`keras_transformer.pipelines.linearized_trees.tree_grammar`), and
the state rides in the search's cache and memory, so it runs in `tf.function`, the SavedModel
and TF Serving like the unconstrained search (`keras_transformer.decoding.search.translate_ids(grammar=)`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from keras_transformer.decoding.beam_search import NEG_INF


@dataclasses.dataclass(frozen=True)
class TreeGrammar:
    """The token classes of a vocabulary that the tree rules need.

    Attributes:
        closing: int `(V,)`: for the id of a whole opening bracket with its label ("(NP"), the
            id of its closing bracket (")NP"); -1 for every other id.
        word_starts: bool `(V,)`: the ids that begin a word (a piece after a space).
        max_depth: brackets open at once, at most.
        max_opening_run: opening brackets in a row, between two pieces copied, at most
            (module docstring).
        source_tags: every second word of a source is a part-of-speech tag, not a word of
            the tree (`keras_transformer.pipelines.pos_tags`): it is never copied.
        placeholder: -1 (the words are copied), or the id the targets write for every word
            ("XX"), a word start: written once per source word instead of the word's pieces.
    """
    closing: np.ndarray
    word_starts: np.ndarray
    max_depth: int = 100
    max_opening_run: int = 100
    source_tags: bool = False
    placeholder: int = -1

    def __post_init__(self):
        if len(self.closing) != len(self.word_starts):
            raise ValueError(f"closing and word_starts must cover one vocabulary, got {len(self.closing)} and "
                             f"{len(self.word_starts)} ids")
        if not np.any(self.closing >= 0):
            raise ValueError("the vocabulary has no whole opening and closing bracket pair: not a parsing model's")
        if self.max_depth < 1:
            raise ValueError(f"max_depth must be positive, got {self.max_depth}")
        if self.max_opening_run < 1:
            raise ValueError(f"max_opening_run must be positive, got {self.max_opening_run}")
        if self.placeholder >= 0 and not (self.placeholder < len(self.word_starts)
                                          and self.word_starts[self.placeholder]):
            raise ValueError(f"the placeholder id {self.placeholder} must be one of the vocabulary's word starts")

    @property
    def vocab_size(self) -> int:
        return len(self.closing)


def constrain(grammar: TreeGrammar, fn, cache, memory, source_ids, eos_id: int, pad_id: int, limits=None):
    """`(fn, cache, memory)` of `search.step_fn`, with the tree rules applied to `fn`'s logits.

    Args:
        grammar: the output vocabulary's `TreeGrammar`.
        fn, cache, memory: from `search.step_fn`.
        source_ids: int32 `(B, S)`: source pieces, then EOS, then PAD; what the tree's words
            are copied from.
        eos_id, pad_id: the end-of-sequence and padding ids (the caller's `special_ids`).
        limits: None (no length limit), or int32 `(B,)`: each sentence's largest |Y|, EOS
            included, as the search is given it (`max_decode_length`).

    Returns:
        The same triple for `beam_search` / `greedy_search` with `normalize=False`: the step
        returns float32 log-probabilities, the model's, with every token the rules forbid at
        NEG_INF (module docstring). The cache gains each hypothesis'
        state `{"copied": (B,), "depth": (B,), "run": (B,), "stack": (B, max_depth)}`
        (reordered with the beams; "run" counts the brackets opened since the last piece
        copied, the stack holds the open brackets' ids), the memory the source pieces.
    """
    source_ids = tf.cast(source_ids, tf.int32)
    vocab_size, max_depth = grammar.vocab_size, grammar.max_depth
    closing = tf.constant(grammar.closing, tf.int32)  # (V,)
    opens = closing >= 0
    word_starts = tf.constant(grammar.word_starts, tf.bool)
    if grammar.source_tags:
        source_ids = without_tags(source_ids, word_starts, eos_id, pad_id)
    if grammar.placeholder >= 0:
        source_ids = as_placeholders(source_ids, word_starts, grammar.placeholder, eos_id, pad_id)
    vocabulary = tf.range(vocab_size)[None, :]  # (1, V)
    # Pieces to copy: the source's up to (not including) its EOS.
    pieces = tf.reduce_sum(tf.cast(tf.logical_and(source_ids != pad_id, source_ids != eos_id), tf.int32), axis=1)
    rows = tf.shape(source_ids)[0]
    cache = {"model": cache, "tree": {"copied": tf.zeros([rows], tf.int32), "depth": tf.zeros([rows], tf.int32),
                                      "run": tf.zeros([rows], tf.int32), "stack": tf.fill([rows, max_depth], -1)}}
    limits = tf.fill([rows], tf.int32.max) if limits is None else tf.cast(limits, tf.int32)
    memory = {"model": memory, "tree": {"source": source_ids, "pieces": pieces, "limit": limits}}

    def step(ids, position, cache, memory):
        source, total = memory["tree"]["source"], memory["tree"]["pieces"]
        copied, depth, run = cache["tree"]["copied"], cache["tree"]["depth"], cache["tree"]["run"]
        stack = cache["tree"]["stack"]
        last = tf.shape(source)[1] - 1

        def next_piece(copied):  # (rows,): the source piece to copy next (EOS once all are)
            return tf.gather(source, tf.minimum(copied, last), batch_dims=1)

        def innermost_close(stack, depth):  # (rows,): the closing id of the innermost open bracket, or -1
            top = tf.gather(stack, tf.clip_by_value(depth - 1, 0, max_depth - 1), batch_dims=1)  # -1: none open
            return tf.where(depth > 0, tf.gather(closing, tf.maximum(top, 0)), -1)

        # The state after `ids`, the tokens the hypotheses hold last (BOS at the first step).
        opened = tf.gather(opens, ids)
        closed = tf.equal(ids, innermost_close(stack, depth))
        copies = (copied < total) & tf.equal(ids, next_piece(copied)) & ~(opened | closed)
        stack = tf.where(opened[:, None] & (tf.range(max_depth)[None, :] == depth[:, None]), ids[:, None], stack)
        copied = copied + tf.cast(copies, tf.int32)
        run = tf.where(copies, 0, tf.minimum(run + tf.cast(opened, tf.int32), grammar.max_opening_run))
        # (Clipped: a hypothesis that took a forbidden token, which a beam holds only when fewer
        # than beam_size allowed ones exist, has score NEG_INF and must merely not fail.)
        depth = tf.minimum(depth + tf.cast(opened, tf.int32) - tf.cast(closed, tf.int32), max_depth)

        upcoming = next_piece(copied)
        words_left = copied < total
        between_words = ~words_left | tf.equal(copied, 0) | tf.gather(word_starts, upcoming)
        may_copy = words_left & (depth > 0)
        # |Y| after the next token, plus what an opening bracket then leaves to write: the pieces
        # still to copy, a closing bracket for every open one and EOS.
        after_opening = (tf.cast(position, tf.int32) + 1) + (total - copied) + (depth + 1) + 1
        fits = tf.equal(depth, 0) | (after_opening <= memory["tree"]["limit"])  # the root always
        may_open = words_left & between_words & (depth < max_depth) & (run < grammar.max_opening_run) & fits
        may_close = between_words & ~opened & ((depth > 1) | ((depth > 0) & ~words_left))
        may_end = ~words_left & tf.equal(depth, 0)
        close = innermost_close(stack, depth)
        allowed = ((may_open[:, None] & opens[None, :])
                   | (may_close[:, None] & tf.equal(vocabulary, close[:, None]))
                   | (may_copy[:, None] & tf.equal(vocabulary, upcoming[:, None]))
                   | (may_end[:, None] & tf.equal(vocabulary, eos_id)))  # (rows, V)

        logits, model_cache = fn(ids, position, cache["model"], memory["model"])
        # The model's own log-probabilities, masked after its softmax (module docstring).
        log_probs = tf.where(allowed, tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1), NEG_INF)
        return log_probs, {"model": model_cache, "tree": {"copied": copied, "depth": depth, "run": run, "stack": stack}}

    return step, cache, memory


def as_placeholders(source_ids, word_starts, placeholder: int, eos_id: int, pad_id: int):
    """int32 `(B, S)`: each row's words as `placeholder` ids, one a word, then EOS (if the
    row had one), then PAD: what a decoder of placeholder targets copies.

    Args:
        source_ids: int32 `(B, S)`: source pieces, EOS, PAD (right-padded).
        word_starts: bool `(V,)`: the ids that begin a word; pieces before a row's first one
            make a word too.
        placeholder: the id every word becomes.
        eos_id, pad_id: the end-of-sequence and padding ids.
    """
    real = (source_ids != pad_id) & (source_ids != eos_id)  # (B, S)
    starts = tf.gather(word_starts, source_ids) & real
    leading = real[:, 0] & ~starts[:, 0]  # a first piece that begins no word still makes one
    words = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1) + tf.cast(leading, tf.int32)  # (B,)
    ends = tf.reduce_any(tf.equal(source_ids, eos_id), axis=1)  # (B,)
    position = tf.range(tf.shape(source_ids)[1])[None, :]
    return tf.where(position < words[:, None], placeholder,
                    tf.where((position == words[:, None]) & ends[:, None], eos_id, pad_id))


def without_tags(source_ids, word_starts, eos_id: int, pad_id: int):
    """int32 `(B, S)`: each row's pieces of its 1st, 3rd, 5th... word, in order, then its EOS,
    then PAD: a tagged source ("The <DT> dog <NN>") without its tags' pieces.

    Args:
        source_ids: int32 `(B, S)`: source pieces, EOS, PAD.
        word_starts: bool `(V,)`: the ids that begin a word.
        eos_id, pad_id: the end-of-sequence and padding ids.
    """
    real = (source_ids != pad_id) & (source_ids != eos_id)  # (B, S)
    starts = tf.gather(word_starts, source_ids) & real
    word = tf.maximum(tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1, 0)  # (B, S): the piece's word number
    tag = real & tf.equal(word % 2, 1)
    order = tf.argsort(tf.cast(tag, tf.int32), axis=1, stable=True)  # (B, S): the kept pieces first, in order
    kept = tf.gather(source_ids, order, batch_dims=1)
    return tf.where(tf.gather(tag, order, batch_dims=1), pad_id, kept)
