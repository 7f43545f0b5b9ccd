"""The lexical shortlist: a search over every id equals the unrestricted search; a restricted
one produces only candidates and scores them as a softmax over the candidates, teacher-forced;
the vocabulary-map file round-trips and refuses what it cannot read."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import ensemble as ensemble_lib
from keras_transformer.decoding import search
from keras_transformer.decoding import shortlist as shortlist_lib
from keras_transformer.special_ids import BOS_ID, EOS_ID, SPECIAL_IDS
from tests.keras_transformer.decoding.test_search import SOURCE, VOCAB, make_model

EVERY_ID = shortlist_lib.Shortlist(frequent=np.arange(4, VOCAB), table=np.zeros((VOCAB, 0)))
# Source ids 5-13 (SOURCE's) bring a few candidates each; 20 and 21 are always candidates.
TABLE = np.zeros((VOCAB, 2), np.int32)
TABLE[5:14] = [[5 + (i * 7) % 30, 6 + (i * 11) % 30] for i in range(9)]
SOME_IDS = shortlist_lib.Shortlist(frequent=[20, 21], table=TABLE)


@pytest.mark.parametrize("beam_size", [1, 4])
@pytest.mark.parametrize("use_cache", [True, False])
def test_a_shortlist_of_every_id_changes_nothing(beam_size, use_cache):
    model = make_model()
    args = dict(beam_size=beam_size, alpha=0.6, max_extra_length=6, n_best=beam_size, use_cache=use_cache)
    full = search.translate_ids(model, SOURCE, **args)
    short = search.translate_ids(model, SOURCE, shortlist=EVERY_ID, **args)
    np.testing.assert_array_equal(full[0], short[0])
    np.testing.assert_allclose(full[1], short[1], rtol=1e-5, atol=1e-6)


def test_a_restricted_greedy_search_scores_its_output_as_a_softmax_over_the_candidates():
    model = make_model()
    sequences, scores = search.translate_ids(model, SOURCE, beam_size=1, alpha=0.6, max_extra_length=6,
                                             shortlist=SOME_IDS)
    candidates = shortlist_lib.candidates(SOME_IDS, SOURCE).numpy()
    expected = sorted(set(SPECIAL_IDS) | {20, 21} | set(TABLE[SOURCE.reshape(-1)].reshape(-1).tolist()))
    assert candidates.tolist() == expected
    outputs = sequences.numpy()[:, 0]
    assert set(outputs.reshape(-1).tolist()) <= set(expected) - {BOS_ID}
    # Independent path: the full decoder, teacher-forced on each output, softmax over the candidates.
    full = search.translate_ids(model, SOURCE, beam_size=1, alpha=0.6, max_extra_length=6)[0].numpy()[:, 0]
    assert not np.array_equal(outputs, full)  # the shortlist did restrict this search
    encoder_outputs, source_mask = model.encode(SOURCE)
    inputs = np.concatenate([np.full([len(outputs), 1], BOS_ID), outputs[:, :-1]], axis=1)
    logits = model.decode(inputs, encoder_outputs, source_mask).numpy()  # (B, T, V)
    allowed = [i for i in candidates if i not in (0, BOS_ID)]
    for row in (0, 1, 3):  # row 2's source is empty: no output, score 0
        length = int(np.argmax(outputs[row] == EOS_ID)) + 1 if EOS_ID in outputs[row] else int(np.sum(outputs[row] > 0))
        log_p = 0.0
        for t in range(length):
            kept = logits[row, t, allowed]
            log_p += logits[row, t, outputs[row, t]] - (kept.max() + np.log(np.exp(kept - kept.max()).sum()))
        np.testing.assert_allclose(scores.numpy()[row, 0], log_p, rtol=1e-4)
    assert scores.numpy()[2, 0] == 0.0 and not outputs[2].any()


def test_a_restricted_beam_search_agrees_cached_and_uncached_and_keeps_a_forced_prefix():
    model = make_model()
    prefix = np.array([[37, 38], [-1, -1], [-1, -1], [39, -1]], np.int32)  # ids no table row names
    args = dict(beam_size=4, alpha=0.6, max_extra_length=6, n_best=2, shortlist=SOME_IDS, target_prefix=prefix)
    cached = search.translate_ids(model, SOURCE, **args)
    uncached = search.translate_ids(model, SOURCE, use_cache=False, **args)
    np.testing.assert_array_equal(cached[0], uncached[0])
    np.testing.assert_allclose(cached[1], uncached[1], rtol=1e-5)
    best = cached[0].numpy()[:, 0]
    assert best[0, :2].tolist() == [37, 38] and best[3, 0] == 39
    assert set(best.reshape(-1).tolist()) <= set(shortlist_lib.candidates(SOME_IDS, SOURCE, prefix).numpy().tolist())


def test_an_ensemble_with_a_shortlist_of_every_id_changes_nothing():
    ensemble = ensemble_lib.Ensemble([make_model(), make_model(dropout_rate=0.0)])
    args = dict(beam_size=3, alpha=0.6, max_extra_length=5, n_best=1)
    full = search.translate_ids(ensemble, SOURCE, **args)
    short = search.translate_ids(ensemble, SOURCE, shortlist=EVERY_ID, **args)
    np.testing.assert_array_equal(full[0], short[0])
    np.testing.assert_allclose(full[1], short[1], rtol=1e-5, atol=1e-6)


def test_candidates_under_tf_function_and_ids_past_the_table():
    small = shortlist_lib.Shortlist(frequent=[9], table=np.array([[0, 0]] * 6 + [[7, 8]], np.int32))
    fn = tf.function(lambda ids: shortlist_lib.candidates(small, ids))
    assert fn(tf.constant([[6, 30, 3]])).numpy().tolist() == [0, 1, 2, 3, 7, 8, 9]
    assert fn(tf.constant([[30, 3]])).numpy().tolist() == [0, 1, 2, 3, 9]


def test_the_vocabulary_map_round_trips(tmp_path):
    source = ["<pad>", "<unk>", "<s>", "</s>", "▁a", "▁b", "c", "\t"]
    target = ["<pad>", "<unk>", "<s>", "</s>", "▁x", "▁y", "z", "▁w", "\xa0", "\t"]
    table = [[0, 0], [0, 0], [0, 0], [0, 0], [5, 6], [0, 0], [4, 8], [4, 0]]
    shortlist = shortlist_lib.Shortlist(frequent=[7, 4, 9], table=table)
    path = str(tmp_path / "shortlist.vmap")
    shortlist_lib.write(shortlist, path, source, target)
    with open(path, encoding="utf-8") as file:  # a tab is no piece the format holds; "\xa0" is
        assert file.read() == "\t▁w ▁x\n▁a\t▁y z\nc\t▁x \xa0\n"
    again = shortlist_lib.read(path, source, target)
    assert again.frequent.tolist() == [7, 4]
    assert again.table.tolist() == table[:7] + [[0, 0]]
    source, target = source[:7], target[:8]
    again = shortlist_lib.Shortlist(frequent=again.frequent, table=[[0, 0]] * 4 + [[5, 6], [0, 0], [4, 0]])
    with pytest.raises(ValueError, match="output vocabulary has 6"):
        again.check_vocabularies(7, 6)
    with pytest.raises(ValueError, match="rows for 7 source ids"):
        again.check_vocabularies(5, 8)


@pytest.mark.parametrize("text, message", [
    ("\t▁x\n▁a\t▁q\n", "line 2: '▁q' is not in the target vocabulary"),
    ("\t▁x\n▁q\t▁x\n", "line 2: '▁q' is not in the source vocabulary"),
    ("\t▁x\n▁a ▁b\t▁x\n", "line 2: '▁a ▁b' is an n-gram"),
    ("▁x\n", "line 1: no tab"),
    ("", "is empty"),
])
def test_a_bad_vocabulary_map_is_one_line_naming_the_line(tmp_path, text, message):
    path = tmp_path / "bad.vmap"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        shortlist_lib.read(str(path), ["<pad>", "<unk>", "<s>", "</s>", "▁a", "▁b"], ["<pad>", "<unk>", "<s>", "</s>", "▁x"])
    path.write_bytes(b"\t\xff\n")
    with pytest.raises(ValueError, match="not a UTF-8"):
        shortlist_lib.read(str(path), ["<pad>"], ["<pad>"])


def test_a_tree_constrained_search_refuses_a_shortlist():
    class Grammar:  # only what translate_ids reads before it refuses
        vocab_size = VOCAB

    with pytest.raises(ValueError, match="tree-constrained"):
        search.translate_ids(make_model(), SOURCE, beam_size=2, grammar=Grammar(), shortlist=EVERY_ID)
