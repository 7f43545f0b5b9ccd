"""Decoding under the tree constraint: every output a well-formed tree over the source's words.

A random tiny Transformer writes anything; under the constraint (`search.translate_ids(grammar=)`)
every output, greedy or beam, read back by `linearized_trees.to_tree`, needs no repair and has
exactly the source's words; without it, the same model's outputs are not trees (so the check can
fail). The grammar is read off a sentencepiece-style vocabulary.
"""

import dataclasses
import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer, TransformerConfig
from keras_transformer.config import DecodingConfig
from keras_transformer.decoding import search, tree_constraint
from keras_transformer.training import evaluation
from keras_transformer.special_ids import EOS_ID, PAD_ID
from keras_transformer.pipelines import linearized_trees
# log P(Y | X) by teacher forcing, over the vocabulary less PAD and BOS (what a search may write)
from tests.keras_transformer.decoding.test_sampling import sequence_log_probs

S = linearized_trees.SENTENCEPIECE_SPACE
PIECES = ["<pad>", "<unk>", "<s>", "</s>",
          S + "(S", S + ")S", S + "(NP", S + ")NP", S + "(VP", S + ")VP",
          S + "(X",  # no ")X" piece: never opened
          S + ")",  # a bare closing bracket: closes nothing
          S + "the", S + "dog", "s", S + "bark", S + ".", S, "ing", S + "cat"]
VOCAB = 24  # the model's output vocabulary; ids past the pieces are never allowed
ID = {piece: i for i, piece in enumerate(PIECES)}
SOURCES = [
    [S + "the", S + "dog", "s", S + "bark", S + "."],  # the dogs bark .
    [S + "cat", "s", "ing"],  # cats-ing: one word of three pieces
    [S, "s", S + "dog"],  # a word after a bare space piece
    [S + "bark"],
]


def source_ids():
    width = max(len(s) for s in SOURCES) + 1
    rows = [[ID[p] for p in s] + [EOS_ID] + [0] * (width - len(s) - 1) for s in SOURCES]
    return np.array(rows, np.int32)


def words_of(pieces):
    return "".join(pieces).replace(S, " ").split()


def text_of(ids):
    """Decoded ids as text; an id past the pieces (only an unconstrained model writes one) as "<unused>"."""
    pieces = [PIECES[i] if i < len(PIECES) else S + "<unused>" for i in ids if i != 0]
    return "".join(p for p in pieces if p != "</s>").replace(S, " ").strip()


def make_model(seed):
    keras.utils.set_random_seed(seed)
    model = Transformer(TransformerConfig.tiny(vocab_size=VOCAB, max_length=128))
    model.build()
    for variable in model.variables:  # sharper distributions than the initial weights give
        if "embedding" in variable.path:
            variable.assign(variable * 3.0)
    return model


@pytest.fixture(scope="module")
def grammar():
    # A small max_depth bounds how long a random model's trees can get.
    return dataclasses.replace(linearized_trees.tree_grammar(PIECES, VOCAB), max_depth=3)


def test_the_grammar_of_a_sentencepiece_vocabulary():
    grammar = linearized_trees.tree_grammar(PIECES, VOCAB)
    assert grammar.vocab_size == VOCAB and grammar.max_depth == linearized_trees.MAX_DEPTH
    expected = {ID[S + "(S"]: ID[S + ")S"], ID[S + "(NP"]: ID[S + ")NP"], ID[S + "(VP"]: ID[S + ")VP"]}
    assert {i: int(c) for i, c in enumerate(grammar.closing) if c >= 0} == expected
    starts = {PIECES[i] for i in np.flatnonzero(grammar.word_starts)}
    assert starts == {S + "the", S + "dog", S + "bark", S + ".", S, S + "cat"}


def test_a_vocabulary_without_whole_brackets_is_refused():
    with pytest.raises(ValueError, match="not a parsing model"):
        linearized_trees.tree_grammar(["[PAD]", "[UNK]", "[BOS]", "[EOS]", "(", "NP", ")", "the"], 8)
    with pytest.raises(ValueError, match="pieces for a vocabulary"):
        linearized_trees.tree_grammar(PIECES, 10)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("beam_size", [1, 4])
def test_every_output_is_a_tree_over_the_source_words(grammar, seed, beam_size):
    model = make_model(seed)
    sequences, scores = search.translate_ids(model, source_ids(), beam_size=beam_size, alpha=0.6,
                                               max_extra_length=100, n_best=beam_size, grammar=grammar)
    assert np.all(scores.numpy() > -1e6)  # every slot holds a finished hypothesis
    for row, pieces in zip(sequences.numpy(), SOURCES):
        for hypothesis in row:
            text = text_of(hypothesis)
            tree, repairs = linearized_trees.to_tree(text, words_of(pieces))
            assert repairs == (), (text, repairs)
            assert " ".join(text.split()).count("(") >= 1
            assert [t for t in text.split() if not t.startswith(("(", ")"))] == words_of(pieces)
            assert tree.leaves() == words_of(pieces)


def test_without_the_constraint_the_same_models_write_no_trees():
    repaired = 0
    for seed in (1, 2, 3):
        sequences, _ = search.translate_ids(make_model(seed), source_ids(), beam_size=4, alpha=0.6,
                                              max_extra_length=30)
        for row, pieces in zip(sequences.numpy(), SOURCES):
            _, repairs = linearized_trees.to_tree(text_of(row[0]), words_of(pieces))
            repaired += bool(repairs)
    assert repaired >= 6  # of 12: the constraint, not the models, makes the trees above


def test_under_tf_function_and_an_empty_source(grammar):
    model = make_model(1)
    ids = np.concatenate([source_ids(), np.zeros((1, source_ids().shape[1]), np.int32)])  # + an empty row
    traced = tf.function(lambda x: search.translate_ids(model, x, beam_size=4, alpha=0.6, max_extra_length=100,
                                                          grammar=grammar))
    sequences, scores = traced(tf.constant(ids))
    eager, _ = search.translate_ids(model, ids[:-1], beam_size=4, alpha=0.6, max_extra_length=100, grammar=grammar)
    np.testing.assert_array_equal(sequences[:-1, :, : eager.shape[2]], eager)
    assert not np.any(sequences[-1].numpy()) and scores[-1, 0] == 0.0


def test_dev_evaluation_decodes_under_the_constraint_as_translate_and_the_export_do(grammar):
    """One decoding entry point: the dev translations of training (`evaluation.make_translate_fn`,
    i.e. `--eval_tree_constraint`) are the constrained search's, trees with no repair, while the
    same evaluation without the constraint writes sequences that need repairs."""
    config = DecodingConfig(beam_size=4, alpha=0.6, max_extra_length=30, tree_constraint=True)
    repaired = 0
    for seed in (1, 2, 3):
        model = make_model(seed)
        ids, scores = evaluation.make_translate_fn(model, config, grammar)(tf.constant(source_ids()))
        expected, expected_scores = search.translate_ids(model, source_ids(), config, grammar=grammar)
        np.testing.assert_array_equal(ids.numpy(), expected[:, 0].numpy())
        np.testing.assert_allclose(scores.numpy(), expected_scores[:, 0].numpy(), rtol=1e-6)  # float32 rounding
        for row, pieces in zip(ids.numpy(), SOURCES):
            assert linearized_trees.to_tree(text_of(row), words_of(pieces))[1] == ()
        free = evaluation.make_translate_fn(model, dataclasses.replace(config, tree_constraint=False))
        for row, pieces in zip(free(tf.constant(source_ids()))[0].numpy(), SOURCES):
            repaired += bool(linearized_trees.to_tree(text_of(row), words_of(pieces))[1])
    assert repaired >= 6  # of 12: without the grammar the setting would be a silent no-op


@pytest.mark.parametrize("beam_size, alpha", [(1, 0.0), (4, 0.0), (4, 0.6)])
def test_a_constrained_search_scores_its_trees_by_the_model_s_own_log_probability(grammar, beam_size, alpha):
    """The rules mask tokens after the model's softmax: a tree's score is log P(Y | X) under the
    model (over the length penalty), as teacher forcing computes it, not the larger probability
    of a distribution renormalized over the tokens the rules allow at each step."""
    for seed in (1, 2, 3):
        model = make_model(seed)
        sequences, scores = search.translate_ids(model, source_ids(), beam_size=beam_size, alpha=alpha,
                                                   max_extra_length=100, n_best=beam_size, grammar=grammar)
        for slot in range(beam_size):
            best = sequences.numpy()[:, slot]
            lengths = np.count_nonzero(best, axis=1)
            expected = sequence_log_probs(model, source_ids(), best) / ((5.0 + lengths) / 6.0) ** alpha
            np.testing.assert_allclose(scores.numpy()[:, slot], expected, rtol=1e-4, atol=1e-4)


def chains(labels, depth):
    """Every tree over one word "bark" that a grammar of `labels` and `depth` allows: a chain of
    1 to `depth` constituents, as linearized ids (then EOS)."""
    found = []
    for size in range(1, depth + 1):
        for chain in itertools.product(labels, repeat=size):
            opened = [ID[S + "(" + label] for label in chain]
            closed = [ID[S + ")" + label] for label in reversed(chain)]
            found.append(opened + [ID[S + "bark"]] + closed + [EOS_ID])
    return found


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_beam_as_wide_as_the_trees_finds_the_tree_the_model_rates_highest(grammar, seed):
    """With a beam as wide as the number of trees (39 over one word at depth 3), the search is
    exact: its best tree is the one of highest log P(Y | X) among all of them, each scored by
    teacher forcing. (A search over renormalized distributions finds the best tree of those.)"""
    model = make_model(seed)
    trees = chains(["S", "NP", "VP"], grammar.max_depth)
    assert len(trees) == 39
    width = max(len(t) for t in trees)
    candidates = np.array([t + [0] * (width - len(t)) for t in trees], np.int32)
    source = np.array([[ID[S + "bark"], EOS_ID]] * len(trees), np.int32)
    log_probs = sequence_log_probs(model, source, candidates)
    sequences, scores = search.translate_ids(model, source[:1], beam_size=40, alpha=0.0, max_extra_length=100,
                                               grammar=grammar)
    found = sequences.numpy()[0, 0]
    assert list(found[found != 0]) == trees[int(np.argmax(log_probs))]
    np.testing.assert_allclose(scores.numpy()[0, 0], log_probs.max(), rtol=1e-4, atol=1e-4)


def test_the_constraint_without_its_grammar_is_refused_not_ignored():
    with pytest.raises(ValueError, match="tree_constraint needs the grammar"):
        search.translate_ids(make_model(1), source_ids(), DecodingConfig(tree_constraint=True))


def test_the_grammar_must_cover_the_output_vocabulary(grammar):
    small = dataclasses.replace(grammar, closing=grammar.closing[:20], word_starts=grammar.word_starts[:20])
    with pytest.raises(ValueError, match="covers 20 ids"):
        search.translate_ids(make_model(1), source_ids(), beam_size=2, grammar=small)
    with pytest.raises(ValueError, match="max_depth"):
        tree_constraint.TreeGrammar(grammar.closing, grammar.word_starts, max_depth=0)


def test_the_rules_step_by_step_on_a_tree():
    """The allowed next tokens along `(S (NP the dogs )NP (VP bark )VP . )S`, by hand."""
    grammar = linearized_trees.tree_grammar(PIECES, VOCAB)

    def model(ids, step, cache, memory):  # every token equally likely: the mask is all there is
        return tf.zeros([tf.shape(ids)[0], VOCAB]), cache

    fn, cache, memory = tree_constraint.constrain(grammar, model, {}, {}, source_ids()[:1], EOS_ID, PAD_ID)
    opens = {S + "(S", S + "(NP", S + "(VP"}
    tokens = ["<s>", S + "(S", S + "(NP", S + "the", S + "dog", "s", S + ")NP", S + "(VP", S + "bark",
              S + ")VP", S + ".", S + ")S", "</s>"]
    expected = {
        "<s>": opens,  # a tree starts with a bracket
        S + "(S": opens | {S + "the"},  # no word outside a bracket, no empty constituent
        S + "(NP": opens | {S + "the"},
        S + "the": opens | {S + "dog", S + ")NP"},  # between words: the innermost bracket's own close
        S + "dog": {"s"},  # inside a word: only its next piece
        "s": opens | {S + "bark", S + ")NP"},
        S + ")NP": opens | {S + "bark"},  # the root does not close while words remain
        S + "(VP": opens | {S + "bark"},
        S + "bark": opens | {S + ".", S + ")VP"},
        S + ")VP": opens | {S + "."},
        S + ".": {S + ")S"},  # every word copied: close what is open
        S + ")S": {"</s>"},
    }
    for token, following in zip(tokens[:-1], tokens[1:]):
        logits, cache = fn(tf.constant([ID[token]]), 0, cache, memory)
        allowed = {PIECES[i] for i in np.flatnonzero(logits.numpy()[0] > -1e6)}
        assert allowed == expected[token], token
        assert following in allowed


def test_an_opening_bracket_only_while_the_tree_can_still_end_within_the_limit():
    """`(S (NP the dogs )NP bark . )S` under limits 8 and 10: the fewest tokens that end a tree over
    the 5 pieces are 8, (S + 5 pieces + )S + EOS; each extra constituent costs 2."""
    grammar = linearized_trees.tree_grammar(PIECES, VOCAB)

    def model(ids, step, cache, memory):
        return tf.zeros([tf.shape(ids)[0], VOCAB]), cache

    def allowed_along(tokens, limit):
        fn, cache, memory = tree_constraint.constrain(grammar, model, {}, {}, source_ids()[:1], EOS_ID, PAD_ID,
                                                      limits=tf.constant([limit]))
        allowed = []
        for position, token in enumerate(tokens):
            logits, cache = fn(tf.constant([ID[token]]), tf.constant(position), cache, memory)
            allowed.append({PIECES[i] for i in np.flatnonzero(logits.numpy()[0] > -1e6)})
        return allowed

    opens = {S + "(S", S + "(NP", S + "(VP"}
    tight = allowed_along(["<s>", S + "(S", S + "the"], limit=8)
    assert tight == [opens, {S + "the"}, {S + "dog"}]  # the root always; then no room for another
    roomy = allowed_along(["<s>", S + "(S", S + "(NP", S + "the", S + "dog", "s"], limit=10)
    assert roomy[1] == opens | {S + "the"}  # room for one constituent: 2 + 5 + 2 + 1 = 10
    assert roomy[2] == {S + "the"}  # (S (NP: none for a second
    assert roomy[5] == {S + "bark", S + ")NP"}  # still none after its words: they are copied too


@pytest.mark.slow
def test_every_output_ends_as_a_tree_within_a_tight_limit(grammar, monkeypatch):
    def repairs_of(beam_size):
        outputs = []
        for seed in (1, 2, 3):
            sequences, _ = search.translate_ids(make_model(seed), source_ids(), beam_size=beam_size, alpha=0.6,
                                                  max_extra_length=4, n_best=beam_size, grammar=grammar)
            outputs += [(text_of(hypothesis), pieces) for row, pieces in zip(sequences.numpy(), SOURCES)
                        for hypothesis in row]
        return [linearized_trees.to_tree(text, words_of(pieces))[1] for text, pieces in outputs]

    for beam_size in (1, 4):
        assert all(repairs == () for repairs in repairs_of(beam_size)), beam_size
    # The same searches with the bracket rules but without the limit's: trees cut by the limit.
    constrain = tree_constraint.constrain
    monkeypatch.setattr(tree_constraint, "constrain",
                        lambda *args, limits=None: constrain(*args))
    assert sum(repairs != () for repairs in repairs_of(4)) >= 24  # of 48 (43 when written)


# Sources with a part-of-speech tag after each word (`keras_transformer.pipelines.pos_tags`): a tag is a token of
# its own, here of one piece ("<NN>") or two ("<V" "B>"), and the tree is over the words only.
TAGGED_PIECES = PIECES + [S + "<NN>", S + "<V", "B>"]
TAGGED_ID = {piece: i for i, piece in enumerate(TAGGED_PIECES)}
NN, VB = [S + "<NN>"], [S + "<V", "B>"]
TAGGED_SOURCES = [  # (tagged source pieces, the words' pieces)
    ([S + "the"] + NN + [S + "dog", "s"] + NN + [S + "bark"] + VB + [S + "."] + NN,
     [S + "the", S + "dog", "s", S + "bark", S + "."]),
    ([S + "cat", "s", "ing"] + VB, [S + "cat", "s", "ing"]),
    ([S, "s"] + NN + [S + "dog"] + VB, [S, "s", S + "dog"]),
    ([S + "bark"] + NN, [S + "bark"]),
]


def tagged_source_ids():
    width = max(len(s) for s, _ in TAGGED_SOURCES) + 1
    return np.array([[TAGGED_ID[p] for p in s] + [EOS_ID] + [PAD_ID] * (width - len(s) - 1)
                     for s, _ in TAGGED_SOURCES], np.int32)


def test_the_tags_of_a_tagged_source_are_taken_out_in_order():
    grammar = linearized_trees.tree_grammar(TAGGED_PIECES, VOCAB, source_tags=True)
    compact = tree_constraint.without_tags(tf.constant(tagged_source_ids()), tf.constant(grammar.word_starts),
                                           EOS_ID, PAD_ID).numpy()
    width = compact.shape[1]
    for row, (_, words) in zip(compact, TAGGED_SOURCES):
        assert list(row) == [TAGGED_ID[p] for p in words] + [EOS_ID] + [PAD_ID] * (width - len(words) - 1)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_with_source_tags_every_output_is_a_tree_over_the_words_alone(beam_size):
    grammar = dataclasses.replace(linearized_trees.tree_grammar(TAGGED_PIECES, VOCAB, source_tags=True), max_depth=3)
    sequences, scores = search.translate_ids(make_model(1), tagged_source_ids(), beam_size=beam_size, alpha=0.6,
                                               max_extra_length=100, n_best=beam_size, grammar=grammar)
    assert np.all(scores.numpy() > -1e6)
    for row, (_, pieces) in zip(sequences.numpy(), TAGGED_SOURCES):
        for hypothesis in row:
            assert not set(hypothesis) & {TAGGED_ID[p] for p in NN + VB}  # no tag piece is ever written
            text = "".join(TAGGED_PIECES[i] for i in hypothesis if i not in (PAD_ID, EOS_ID)).replace(S, " ")
            tree, repairs = linearized_trees.to_tree(text, words_of(pieces))
            assert repairs == () and tree.leaves() == words_of(pieces), (text, repairs)
    # The same grammar read as untagged copies the tags: its trees are over other "words".
    untagged = dataclasses.replace(grammar, source_tags=False)
    sequences, _ = search.translate_ids(make_model(1), tagged_source_ids(), beam_size=beam_size, alpha=0.6,
                                        max_extra_length=100, n_best=1, grammar=untagged)
    assert all(set(row[0]) & {TAGGED_ID[p] for p in NN + VB} for row in sequences.numpy())


# Placeholder targets (`TreeGrammar.placeholder`, Vinyals et al. 2015): each word written as "XX",
# one token whatever the word's pieces; the tree is over the input's words, put back by `to_tree`.
XX = linearized_trees.PLACEHOLDER_PIECE
PLACEHOLDER_PIECES = TAGGED_PIECES + [XX]  # 24 pieces: the whole output vocabulary
PLACEHOLDER_ID = {piece: i for i, piece in enumerate(PLACEHOLDER_PIECES)}
BRACKETS = {PLACEHOLDER_ID[p] for p in PLACEHOLDER_PIECES if p[1:2] in ("(", ")")}
WORD_STARTS = [S + "the", S + "dog", S + "bark", S + ".", S, S + "cat", XX]  # a literal "XX" is a word too
WORD_ENDS = ["s", "ing"]


def placeholder_grammar(source_tags=False, max_depth=3):
    return dataclasses.replace(linearized_trees.tree_grammar(PLACEHOLDER_PIECES, VOCAB, source_tags=source_tags,
                                                             placeholders=True), max_depth=max_depth)


def random_sources(rng, count, tagged=False):
    """(source pieces, the words' pieces) of `count` random sentences of 1 to 8 words of 1 to 3
    pieces (with a one- or two-piece tag after each word when `tagged`)."""
    sources = []
    for _ in range(count):
        source, words = [], []
        for _ in range(rng.integers(1, 9)):
            start = WORD_STARTS[rng.integers(len(WORD_STARTS))]  # a bare space piece is never a word alone
            word = [start] + [WORD_ENDS[rng.integers(2)] for _ in range(rng.integers(start == S, 3))]
            words += word
            source += word + ((NN, VB)[rng.integers(2)] if tagged else [])
        sources.append((source, words))
    return sources


def ids_of(sources):
    width = max(len(s) for s, _ in sources) + 1
    return np.array([[PLACEHOLDER_ID[p] for p in s] + [EOS_ID] + [PAD_ID] * (width - len(s) - 1)
                     for s, _ in sources], np.int32)


def check_placeholder_trees(sequences, scores, sources):
    """Every hypothesis (the best always; slots a beam found nothing allowed for have score
    NEG_INF): brackets and exactly one XX per word, and a tree over the words needing no repair."""
    assert np.all(scores[:, 0] > -1e6)
    for row, row_scores, (_, pieces) in zip(sequences, scores, sources):
        words = words_of(pieces)
        for hypothesis in row[row_scores > -1e6]:
            tokens = [i for i in hypothesis if i not in (PAD_ID, EOS_ID)]
            assert set(tokens) <= BRACKETS | {PLACEHOLDER_ID[XX]}, tokens  # never a source piece
            assert tokens.count(PLACEHOLDER_ID[XX]) == len(words)
            text = "".join(PLACEHOLDER_PIECES[i] for i in tokens).replace(S, " ")
            tree, repairs = linearized_trees.to_tree(text, words)
            assert repairs == () and tree.leaves() == words, (text, repairs)


def test_the_grammar_of_placeholder_targets_needs_the_placeholder_piece():
    grammar = linearized_trees.tree_grammar(PLACEHOLDER_PIECES, VOCAB, placeholders=True)
    assert grammar.placeholder == 23 and grammar.word_starts[23]
    assert linearized_trees.tree_grammar(PLACEHOLDER_PIECES, VOCAB).placeholder == -1
    with pytest.raises(ValueError, match="no piece '\u2581XX'.*--tree_targets=placeholders"):
        linearized_trees.tree_grammar(TAGGED_PIECES, VOCAB, placeholders=True)
    with pytest.raises(ValueError, match="placeholder id 14 must be one of the vocabulary's word starts"):
        dataclasses.replace(grammar, placeholder=ID["s"])  # inside a word


def test_a_source_as_placeholders_is_one_per_word_then_its_eos():
    rows = [[S + "the", S + "dog", "s", S + "bark", S + ".", EOS_ID],  # 4 words, 5 pieces
            [S + "cat", "s", "ing", EOS_ID, PAD_ID, PAD_ID],  # one word of three pieces
            ["s", S + "dog", EOS_ID, PAD_ID, PAD_ID, PAD_ID],  # a first piece that begins no word: a word
            [S, "s", S + "dog", S + "cat", "s", "ing"],  # cut before its EOS (a source longer than the limit)
            [EOS_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID]]  # empty
    ids = tf.constant([[p if isinstance(p, int) else ID[p] for p in row] for row in rows])
    x, e, p = 23, EOS_ID, PAD_ID
    expected = [[x, x, x, x, e, p], [x, e, p, p, p, p], [x, x, e, p, p, p], [x, x, x, p, p, p], [e, p, p, p, p, p]]
    grammar = linearized_trees.tree_grammar(PLACEHOLDER_PIECES, VOCAB, placeholders=True)
    got = tree_constraint.as_placeholders(ids, tf.constant(grammar.word_starts), 23, EOS_ID, PAD_ID)
    assert got.numpy().tolist() == expected


def test_the_rules_step_by_step_with_placeholders():
    """`(S (NP XX XX )NP XX XX )S` over "the dogs bark ." (4 words, 5 pieces), by hand: at a word
    slot only XX, between any two of them a bracket, EOS after the 4th XX and the root's close;
    under the limit 9 = (S + 4 XX + )S + EOS + one constituent's 2, exactly one constituent fits
    (counted by words: by pieces, 10 would be needed)."""

    def model(ids, step, cache, memory):
        return tf.zeros([tf.shape(ids)[0], VOCAB]), cache

    grammar = linearized_trees.tree_grammar(PLACEHOLDER_PIECES, VOCAB, placeholders=True)
    source = ids_of([([S + "the", S + "dog", "s", S + "bark", S + "."], None)])
    opens = {S + "(S", S + "(NP", S + "(VP"}

    def allowed_along(tokens, limit=None):
        fn, cache, memory = tree_constraint.constrain(grammar, model, {}, {}, source, EOS_ID, PAD_ID,
                                                      limits=None if limit is None else tf.constant([limit]))
        allowed = []
        for position, token in enumerate(tokens):
            logits, cache = fn(tf.constant([PLACEHOLDER_ID[token]]), tf.constant(position), cache, memory)
            allowed.append({PLACEHOLDER_PIECES[i] for i in np.flatnonzero(logits.numpy()[0] > -1e6)})
        return allowed

    tokens = ["<s>", S + "(S", S + "(NP", XX, XX, S + ")NP", XX, XX, S + ")S"]
    assert allowed_along(tokens) == [
        opens, opens | {XX}, opens | {XX}, opens | {XX, S + ")NP"}, opens | {XX, S + ")NP"}, opens | {XX},
        opens | {XX}, {S + ")S"}, {"</s>"}]
    limited = allowed_along(tokens, limit=9)
    assert limited[1] == opens | {XX} and limited[2] == {XX} and limited[5] == {XX}
    assert allowed_along(tokens[:2], limit=8)[1] == {XX}  # the root alone fits: no room for another


@pytest.mark.parametrize("source_tags", [False, True])
@pytest.mark.parametrize("beam_size", [1, 4])
def test_with_placeholders_every_output_has_one_xx_per_word_and_is_a_tree(source_tags, beam_size):
    rng = np.random.default_rng(32 + 2 * beam_size + source_tags)
    grammar = placeholder_grammar(source_tags)
    for seed in (1, 2, 3):
        sources = random_sources(rng, 12, tagged=source_tags)
        sequences, scores = search.translate_ids(make_model(seed), ids_of(sources), beam_size=beam_size, alpha=0.6,
                                                   max_extra_length=30, n_best=beam_size, grammar=grammar)
        assert np.all(scores.numpy() > -1e6)  # every slot holds a finished hypothesis
        check_placeholder_trees(sequences.numpy(), scores.numpy(), sources)


def test_with_placeholders_the_length_limit_never_cuts_a_tree_whose_root_fits():
    """Limits from n + 3 (the root alone: (S, n XX, )S, EOS) up: every output a whole tree, also
    for sentences of many-piece words, whose piece count would leave the limit no room."""
    rng = np.random.default_rng(7)
    for seed, extra, source_tags in ((1, 0, False), (2, 1, True), (3, 2, False), (4, 5, True)):
        grammar = placeholder_grammar(source_tags, max_depth=linearized_trees.MAX_DEPTH)
        sources = random_sources(rng, 12, tagged=source_tags)
        limits = np.array([len(words_of(words)) + 3 + extra for _, words in sources], np.int32)
        for beam_size in (1, 4):
            sequences, scores = search.translate_ids(make_model(seed), ids_of(sources), beam_size=beam_size,
                                                     alpha=0.6, n_best=beam_size, grammar=grammar,
                                                     max_decode_length=limits)
            check_placeholder_trees(sequences.numpy(), scores.numpy(), sources)
            lengths = (sequences.numpy() != PAD_ID).sum(axis=2)  # EOS included
            assert np.all(lengths <= limits[:, None])


def test_the_words_grammar_on_a_placeholder_vocabulary_copies_pieces_not_placeholders():
    """The same model and sources under the grammar without `placeholder`: the outputs copy the
    source's pieces (no XX), so the placeholder rules above are what make them XX."""
    sources = random_sources(np.random.default_rng(5), 12)
    grammar = dataclasses.replace(placeholder_grammar(), placeholder=-1)
    sequences, _ = search.translate_ids(make_model(1), ids_of(sources), beam_size=4, alpha=0.6, max_extra_length=30,
                                        grammar=grammar)
    copied = [[i for i in row[0] if i not in BRACKETS | {EOS_ID, PAD_ID}] for row in sequences.numpy()]
    assert copied == [[PLACEHOLDER_ID[p] for p in words] for _, words in sources]


def test_opening_brackets_in_a_row_stop_at_the_grammar_s_run_and_a_word_resets_it():
    """With `max_opening_run=2`, along `(S (NP the (VP (X dog s ...`: after two brackets in a row
    only the word may follow; after a word, two more; the vocabulary's default is the treebank's."""
    grammar = dataclasses.replace(linearized_trees.tree_grammar(PIECES, VOCAB), max_opening_run=2)
    assert linearized_trees.tree_grammar(PIECES, VOCAB).max_opening_run == linearized_trees.MAX_OPENING_RUN

    def model(ids, step, cache, memory):
        return tf.zeros([tf.shape(ids)[0], VOCAB]), cache

    fn, cache, memory = tree_constraint.constrain(grammar, model, {}, {}, source_ids()[:1], EOS_ID, PAD_ID)
    opens = {S + "(S", S + "(NP", S + "(VP"}
    tokens = ["<s>", S + "(S", S + "(NP", S + "the", S + "(VP", S + "(NP", S + "dog"]
    expected = [opens, opens | {S + "the"}, {S + "the"}, opens | {S + "dog", S + ")NP"}, opens | {S + "dog"},
                {S + "dog"}, {"s"}]
    for token, allowed_next in zip(tokens, expected):
        logits, cache = fn(tf.constant([ID[token]]), 0, cache, memory)
        assert {PIECES[i] for i in np.flatnonzero(logits.numpy()[0] > -1e6)} == allowed_next, token
    with pytest.raises(ValueError, match="max_opening_run"):
        tree_constraint.TreeGrammar(grammar.closing, grammar.word_starts, max_opening_run=0)
