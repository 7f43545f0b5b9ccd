"""Tests for keras_transformer/decoding/beam_search.py on hand-made probability tables.

Vocabulary of 6: 0 = pad, 1 = a, 2 = BOS, 3 = EOS, 4 = b, 5 = c. Pad and BOS have probability 0
(logits -inf), so a returned token is never 0 and a sequence's length is its count of non-zeros.
Expected results come from brute-force enumeration in NumPy of every sequence up to the length
limit, scored with the same rule (ended by EOS or truncated at the limit, log P / lp).
"""

import functools
import itertools

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import beam_search as bs

PAD, A, BOS, EOS, B, C = 0, 1, 2, 3, 4, 5
# The search takes the end id from its caller; these tests use the toy vocabulary's.
beam_search = functools.partial(bs.beam_search, eos_id=EOS)
greedy_search = functools.partial(bs.greedy_search, eos_id=EOS)
V = 6


def _table(rows):
    """{prev: {next: prob}} -> (V, V) probabilities; unlisted rows uniform over a, EOS, b, c."""
    table = np.zeros([V, V])
    table[:, [A, EOS, B, C]] = 0.25
    for prev, row in rows.items():
        table[prev] = 0.0
        for token, p in row.items():
            table[prev, token] = p
    np.testing.assert_allclose(table.sum(1), 1.0)
    return table


# Greedy takes `a` (0.5) and then wanders; the best sentence is "b EOS" (0.4 * 0.9).
MAIN = _table({
    BOS: {A: 0.5, B: 0.4, C: 0.1},
    A: {A: 0.35, B: 0.3, C: 0.25, EOS: 0.1},
    B: {EOS: 0.9, A: 0.05, C: 0.05},
    C: {EOS: 0.6, A: 0.4},
})
# Greedy ends early with EOS: "b EOS".
SHORT = _table({BOS: {B: 0.6, A: 0.4}, B: {EOS: 0.9, A: 0.05, C: 0.05}, A: {A: 0.5, EOS: 0.5}})
# EOS is very likely everywhere: decoding should stop long before the limit.
EOS_LIKELY = _table({t: {EOS: 0.97, A: 0.01, B: 0.01, C: 0.01} for t in (BOS, A, B, C)})
# EOS never: every hypothesis is truncated at its limit.
NO_EOS = _table({t: {A: 0.5, B: 0.3, C: 0.2} for t in (BOS, A, B, C)})
# The first step's EOS (0.45) beats anything greedy can reach.
EARLY_EOS = _table({BOS: {A: 0.55, EOS: 0.45}, A: {A: 0.6, B: 0.4}, B: {B: 0.6, A: 0.4}})


def _log(p):
    with np.errstate(divide="ignore"):
        return np.log(p)


def markov_fn(tables):
    """A model whose next-token distribution is tables[cache['table'], ids]."""
    log_tables = tf.constant(_log(np.stack(tables)), tf.float32)  # (N, V, V)

    def fn(ids, step, cache):
        del step
        logits = tf.gather_nd(log_tables, tf.stack([cache["table"], ids], axis=1))  # (B*beam, V)
        return logits, cache

    return fn


def markov_inputs(table_ids):
    """initial_ids and initial cache for a batch where example i uses table table_ids[i]."""
    table_ids = tf.constant(table_ids, tf.int32)
    return tf.fill(tf.shape(table_ids), BOS), {"table": table_ids}


def brute_force(next_log_probs, max_len, alpha, n):
    """The n best (score, sequence) over every sequence, by enumeration.

    next_log_probs(prefix) -> (V,) log-probs of the token after prefix (prefix starts with BOS).
    """
    results = []

    def expand(prefix, log_prob):
        dist = next_log_probs(prefix)
        for token in range(V):
            if not np.isfinite(dist[token]):
                continue
            seq = prefix[1:] + (token,)
            total = log_prob + dist[token]
            if token == EOS or len(seq) == max_len:
                results.append((total / ((5.0 + len(seq)) / 6.0) ** alpha, seq))
            else:
                expand(prefix + (token,), total)

    expand((BOS,), 0.0)
    results.sort(key=lambda r: -r[0])
    return results[:n]


def markov_log_probs(table):
    return lambda prefix: _log(table[prefix[-1]])


def unpad(sequences):
    """[..., T] int array -> nested lists of tuples without the trailing 0s."""
    sequences = np.asarray(sequences)
    if sequences.ndim == 1:
        return tuple(int(t) for t in sequences if t != PAD)
    return [unpad(s) for s in sequences]


def test_length_penalty_formula():
    for length, alpha in [(1, 0.6), (4, 0.6), (54, 0.6), (7, 1.0), (3, 0.2)]:
        expected = ((5.0 + length) / 6.0) ** alpha
        np.testing.assert_allclose(bs.length_penalty(length, alpha).numpy(), expected, rtol=1e-6)
    lengths = tf.constant([1, 2, 10])
    np.testing.assert_allclose(bs.length_penalty(lengths, 0.0).numpy(), [1.0, 1.0, 1.0])
    # With alpha = 0 the score is the raw log-probability.
    seqs, scores = beam_search(
        markov_fn([MAIN]), *markov_inputs([0]), V, alpha=0.0, max_decode_length=4
    )
    assert unpad(seqs[0, 0]) == (B, EOS)
    np.testing.assert_allclose(scores[0, 0], np.log(0.4 * 0.9), rtol=1e-6)


def test_known_best_beams_match_brute_force_with_per_example_limits():
    # Same table, limits 2 and 4: the limit changes the ranking (truncated "a a" enters at 2).
    seqs, scores = beam_search(
        markov_fn([MAIN]), *markov_inputs([0, 0]), V, beam_size=4, alpha=0.6,
        max_decode_length=tf.constant([2, 4]),
    )
    assert seqs.dtype == tf.int32 and scores.dtype == tf.float32
    assert seqs.shape == (2, 4, 4) and scores.shape == (2, 4)
    assert unpad(seqs[0]) == [(B, EOS), (A, A), (A, B), (A, C)]
    assert unpad(seqs[1]) == [(B, EOS), (A, B, EOS), (A, C, EOS), (A, A, B, EOS)]
    for example, limit in [(0, 2), (1, 4)]:
        expected = brute_force(markov_log_probs(MAIN), limit, 0.6, 4)
        assert unpad(seqs[example]) == [s for _, s in expected]
        np.testing.assert_allclose(scores[example], [s for s, _ in expected], rtol=1e-5)
    # The best is not what greedy finds.
    greedy_seqs, _ = greedy_search(markov_fn([MAIN]), *markov_inputs([0]), max_decode_length=4)
    assert unpad(greedy_seqs[0]) == (A, A, A, A)


def test_beam_one_equals_greedy():
    tables = [MAIN, SHORT]
    for alpha in (0.0, 0.6):
        seqs, scores = beam_search(
            markov_fn(tables), *markov_inputs([0, 1]), V, beam_size=1, alpha=alpha,
            max_decode_length=4,
        )
        greedy_seqs, log_probs = greedy_search(
            markov_fn(tables), *markov_inputs([0, 1]), max_decode_length=4
        )
        np.testing.assert_array_equal(seqs[:, 0], greedy_seqs)
        assert unpad(greedy_seqs) == [(A, A, A, A), (B, EOS)]
        lengths = np.count_nonzero(greedy_seqs.numpy(), axis=1)
        np.testing.assert_allclose(log_probs, [np.log(0.5 * 0.35**3), np.log(0.6 * 0.9)], rtol=1e-6)
        expected = log_probs.numpy() / bs.length_penalty(lengths, alpha).numpy()
        np.testing.assert_allclose(scores[:, 0], expected, rtol=1e-6)


def test_beam_one_keeps_an_ended_hypothesis_greedy_drops():
    # beam_size=1 is not greedy in general: it keeps the best ended candidate among the top 2
    # of every step (tensor2tensor semantics). Here that is "EOS" at step 0.
    fn, (ids, cache) = markov_fn([EARLY_EOS]), markov_inputs([0])
    seqs, _ = beam_search(fn, ids, cache, V, beam_size=1, max_decode_length=4)
    greedy_seqs, _ = greedy_search(fn, ids, cache, max_decode_length=4)
    assert unpad(seqs[0, 0]) == (EOS,)
    assert unpad(greedy_seqs[0]) == (A, A, A, A)


# A model that conditions on the whole prefix, read only from its cache (not from `ids`).
HISTORY_LEN = 5  # the decode limit
KEYS = 11
HISTORY_TABLE = np.random.default_rng(0).normal(scale=2.0, size=[KEYS, V])
HISTORY_TABLE[:, EOS] -= 1.0  # long enough hypotheses for the beams to swap parents
HISTORY_TABLE[:, [PAD, BOS]] = -np.inf


OFFSETS = [0, 3]  # per example, so that the two examples differ


def history_log_probs(prefix, offset):
    key = (offset + sum((j + 1) * t for j, t in enumerate(prefix))) % KEYS
    row = HISTORY_TABLE[key]
    return row - np.log(np.sum(np.exp(row[np.isfinite(row)])))


def history_fn(record):
    table = tf.constant(HISTORY_TABLE, tf.float32)
    weights = tf.range(1, HISTORY_LEN + 2)  # (L + 1,)

    def fn(ids, step, cache):
        write = tf.one_hot(step, HISTORY_LEN + 1, dtype=tf.int32)  # (L + 1,)
        history = cache["history"] * (1 - write) + ids[:, None] * write  # (B*beam, L + 1)
        if record is not None:  # eager only: what the cache holds after writing position step
            record.append(history.numpy())
        key = (cache["offset"] + tf.reduce_sum(history * weights, axis=1)) % KEYS  # (B*beam,)
        return tf.gather(table, key), {"history": history, "offset": cache["offset"]}

    return fn


def run_history_model(record=None):
    cache = {"history": tf.zeros([2, HISTORY_LEN + 1], tf.int32), "offset": tf.constant(OFFSETS)}
    return beam_search(
        history_fn(record), tf.fill([2], BOS), cache, V, max_decode_length=HISTORY_LEN
    )


def scores_of(sequences, offset, alpha=0.6):
    out = []
    for seq in sequences:
        prefix, total = (BOS,), 0.0
        for token in seq:
            total += history_log_probs(prefix, offset)[token]
            prefix += (token,)
        out.append(total / ((5.0 + len(seq)) / 6.0) ** alpha)
    return out


def test_cache_is_reordered_with_the_beams():
    record = []
    seqs, scores = run_history_model(record)
    for example, offset in enumerate(OFFSETS):
        hyps = unpad(seqs[example])
        expected = brute_force(lambda p: history_log_probs(p, offset), HISTORY_LEN, 0.6, 4)
        # Every returned score is that of its own sequence under the prefix-conditioned model:
        # a wrong cache gather would have fed some hypothesis another one's history.
        np.testing.assert_allclose(scores[example], scores_of(hyps, offset), rtol=1e-5)
        # ... and here beam 4 finds the 4 best, a mix of EOS-ended and truncated.
        assert hyps == [seq for _, seq in expected]
        np.testing.assert_allclose(scores[example], [s for s, _ in expected], rtol=1e-5)
        # The hypothesis of length L was scored from a cache row (of its own example) whose
        # history is exactly BOS followed by its first L - 1 tokens.
        for hyp in hyps:
            rows = record[len(hyp) - 1][example * 4 : (example + 1) * 4, : len(hyp)]
            assert any(tuple(row) == (BOS,) + hyp[:-1] for row in rows), hyp


def test_cache_check_detects_a_wrong_gather(monkeypatch):
    # Guard for the test above: without reordering the cache, the scores no longer match.
    monkeypatch.setattr(bs, "_gather_beams", lambda tensor, *args: tensor)
    seqs, scores = run_history_model()
    for example, offset in enumerate(OFFSETS):
        actual = scores_of(unpad(seqs[example]), offset)
        assert not np.allclose(scores[example], actual, rtol=1e-5)


def test_per_example_limits_truncate():
    seqs, scores = beam_search(
        markov_fn([NO_EOS]), *markov_inputs([0, 0, 0]), V, max_decode_length=[1, 3, 6]
    )
    assert seqs.shape == (3, 4, 6)
    lengths = np.count_nonzero(seqs.numpy(), axis=2)
    # Limit 1 leaves only 3 possible hypotheses (a, b, c): the 4th slot stays empty.
    np.testing.assert_array_equal(lengths, [[1, 1, 1, 0], [3] * 4, [6] * 4])
    assert scores[0, 3] == bs.NEG_INF
    assert unpad(seqs[1, 0]) == (A, A, A)
    np.testing.assert_allclose(scores[1, 0], np.log(0.125) / ((5 + 3) / 6) ** 0.6, rtol=1e-6)
    greedy_seqs, _ = greedy_search(markov_fn([NO_EOS]), *markov_inputs([0, 0]), [2, 5])
    assert unpad(greedy_seqs) == [(A, A), (A,) * 5]


def test_early_stop():
    calls = []
    fn = markov_fn([EOS_LIKELY])

    def counting_fn(ids, step, cache):
        calls.append(int(step))  # eager: one call per loop iteration
        return fn(ids, step, cache)

    seqs, scores = beam_search(counting_fn, *markov_inputs([0, 0]), V, max_decode_length=50)
    # 4 hypotheses have ended after step 1 (worst: "a EOS", log(0.01 * 0.97) / lp(2) = -4.23).
    # The best alive one has log-prob k * log(0.01) after k steps, and at best can score that
    # over lp(50) = 3.78: -3.65 after 3 steps, -4.87 after 4, so the loop stops after 4 of 50.
    assert calls == [0, 1, 2, 3]
    assert seqs.shape[2] <= 2 and unpad(seqs[0, 0]) == (EOS,)
    np.testing.assert_allclose(scores[0, 0], np.log(0.97), atol=1e-6)
    # With one answer wanted, the first finished "EOS" cannot be beaten: one step is enough.
    calls.clear()
    seqs1, scores1 = beam_search(
        counting_fn, *markov_inputs([0, 0]), V, max_decode_length=50, n_best=1
    )
    assert calls == [0]
    np.testing.assert_array_equal(seqs1[:, 0, :1], seqs[:, 0, :1])
    np.testing.assert_allclose(scores1[:, 0], scores[:, 0])
    calls.clear()
    greedy_search(counting_fn, *markov_inputs([0, 0]), 50)
    assert calls == [0]


class TableDecoder(tf.Module):
    """What the export does, in miniature: ids in, beam search over a model with variables."""

    def __init__(self, tables):
        super().__init__()
        self.log_tables = tf.Variable(_log(np.stack(tables)).astype(np.float32), trainable=False)

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int32)]
    )
    def __call__(self, table_ids, max_len):
        def fn(ids, step, cache):
            return tf.gather_nd(self.log_tables, tf.stack([cache["table"], ids], axis=1)), cache

        seqs, scores = beam_search(
            fn, tf.fill(tf.shape(table_ids), BOS), {"table": table_ids}, V,
            max_decode_length=max_len,
        )
        return {"sequences": seqs, "scores": scores}


def test_eager_tf_function_and_saved_model_agree(tmp_path):
    tables = [MAIN, SHORT, EOS_LIKELY]
    args = (tf.constant([0, 1, 2, 0]), tf.constant([4, 4, 6, 2]))
    eager = beam_search(
        markov_fn(tables), *markov_inputs(args[0]), V, max_decode_length=args[1]
    )
    module = TableDecoder(tables)
    traced = module(*args)
    tf.saved_model.save(module, str(tmp_path / "decoder"))
    loaded = tf.saved_model.load(str(tmp_path / "decoder"))
    serving = loaded.signatures["serving_default"](table_ids=args[0], max_len=args[1])
    for outputs in (traced, loaded(*args), serving):
        np.testing.assert_array_equal(outputs["sequences"], eager[0])
        np.testing.assert_allclose(outputs["scores"], eager[1], rtol=1e-6)
    empty = loaded(tf.zeros([0], tf.int32), tf.zeros([0], tf.int32))
    assert empty["sequences"].shape == (0, 4, 0) and empty["scores"].shape == (0, 4)

    greedy = tf.function(bs.greedy_search, reduce_retracing=True)
    for table_ids in ([0, 1], [1, 0, 1]):
        eager_greedy = greedy_search(markov_fn(tables), *markov_inputs(table_ids), 4)
        traced_greedy = greedy(markov_fn(tables), *markov_inputs(table_ids), tf.constant(4), eos_id=EOS)
        for x, y in zip(eager_greedy, traced_greedy):
            np.testing.assert_array_equal(x, y)


def test_empty_batch():
    ids, cache = markov_inputs(np.zeros([0], np.int32))
    seqs, scores = beam_search(markov_fn([MAIN]), ids, cache, V, max_decode_length=4, n_best=2)
    assert seqs.shape == (0, 2, 0) and scores.shape == (0, 2)
    greedy_seqs, log_probs = greedy_search(markov_fn([MAIN]), ids, cache, 4)
    assert greedy_seqs.shape == (0, 0) and log_probs.shape == (0,)


@pytest.mark.parametrize("dtype", [tf.bfloat16, tf.float16])
def test_low_precision_and_masked_logits(dtype):
    fn = markov_fn([MAIN])

    def low_precision_fn(ids, step, cache):
        logits, cache = fn(ids, step, cache)  # pad and BOS logits are -inf
        return tf.cast(logits, dtype), cache

    seqs, scores = beam_search(low_precision_fn, *markov_inputs([0]), V, max_decode_length=4)
    ref_seqs, ref_scores = beam_search(fn, *markov_inputs([0]), V, max_decode_length=4)
    assert scores.dtype == tf.float32 and np.all(np.isfinite(scores))
    np.testing.assert_array_equal(seqs, ref_seqs)
    np.testing.assert_allclose(scores, ref_scores, atol=0.05)


def random_history_fn(vocab, keys, seed):
    """A model that conditions on the whole prefix through its cache, with a larger vocabulary."""
    rng = np.random.default_rng(seed)
    table = rng.normal(scale=2.0, size=[keys, vocab])
    table[:, EOS] -= 1.5
    table[:, [PAD, BOS]] = -np.inf
    table = tf.constant(table, tf.float32)

    def fn(ids, step, cache):
        del step
        state = (cache["state"] * 31 + ids + 7) % keys  # (B*beam,)
        return tf.gather(table, state), {"state": state}

    return fn


def test_per_example_settings_equal_each_example_searched_alone():
    # Per request options (the served translate_n_best): one batch, each example its own beam,
    # alpha and n_best, must give what a search with those Python settings gives it alone.
    vocab, keys = 13, 97
    fn = random_history_fn(vocab, keys, seed=1)
    beams, alphas, n_bests = [1, 3, 6, 2, 4], [0.6, 0.0, 1.0, 0.3, 2.0], [1, 2, 6, 1, 3]
    limits = [7, 9, 5, 8, 6]
    ids = tf.fill([5], BOS)
    cache = {"state": tf.constant([0, 11, 23, 41, 5], tf.int32)}
    seqs, scores = beam_search(
        fn, ids, cache, vocab, beam_size=tf.constant(beams), alpha=tf.constant(alphas),
        n_best=tf.constant(n_bests), max_decode_length=tf.constant(limits))
    assert seqs.shape[:2] == (5, 6) and scores.shape == (5, 6)
    for b in range(5):
        alone_seqs, alone_scores = beam_search(
            fn, ids[b : b + 1], {"state": cache["state"][b : b + 1]}, vocab, beam_size=beams[b],
            alpha=alphas[b], n_best=n_bests[b], max_decode_length=limits[b])
        k = n_bests[b]
        assert unpad(seqs[b, :k]) == unpad(alone_seqs[0])
        np.testing.assert_allclose(scores[b, :k], alone_scores[0], rtol=1e-6)
        assert unpad(seqs[b, k:]) == [()] * (6 - k)  # past its own n_best: empty
        np.testing.assert_array_equal(scores[b, k:], bs.NEG_INF)


def test_per_example_settings_in_a_saved_model_and_an_empty_batch(tmp_path):
    vocab, keys = 13, 97
    fn = random_history_fn(vocab, keys, seed=2)

    class Decoder(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)] * 3 + [tf.TensorSpec([None], tf.float32)])
        def __call__(self, state, beam, n_best, alpha):
            return beam_search(fn, tf.fill(tf.shape(state), BOS), {"state": state}, vocab, beam_size=beam,
                               alpha=alpha, n_best=n_best, max_decode_length=6)

    tf.saved_model.save(Decoder(), str(tmp_path / "decoder"))
    loaded = tf.saved_model.load(str(tmp_path / "decoder"))
    args = [tf.constant([3, 8]), tf.constant([2, 5]), tf.constant([2, 4]), tf.constant([0.6, 0.6])]
    seqs, scores = loaded(*args)
    eager = beam_search(fn, tf.fill([2], BOS), {"state": args[0]}, vocab, beam_size=args[1], alpha=args[3],
                        n_best=args[2], max_decode_length=6)
    np.testing.assert_array_equal(seqs, eager[0])
    np.testing.assert_allclose(scores, eager[1], rtol=1e-6)
    empty = loaded(*[tf.zeros([0], a.dtype) for a in args])
    assert empty[0].shape == (0, 1, 0) and empty[1].shape == (0, 1)


def table_memory_fn(tables, rows_seen):
    """markov_fn with its table chosen by the memory (4th argument), recording each call's rows."""
    log_tables = tf.constant(_log(np.stack(tables)), tf.float32)  # (N, V, V)

    def fn(ids, step, cache, memory):
        rows_seen.append(int(tf.shape(ids)[0]))  # eager: one call per loop iteration
        tf.debugging.assert_equal(cache["table"], memory["table"])  # the two stay aligned
        return tf.gather_nd(log_tables, tf.stack([memory["table"], ids], axis=1)), cache

    return fn


def test_done_examples_leave_the_batch_and_their_memory_with_them():
    # No EOS, limits 1, 3, 6: 3 examples at step 0, 2 at steps 1-2, 1 at steps 3-5; each reads
    # its own table through the memory, which must follow it as the others leave.
    no_eos_b = _table({t: {A: 0.2, B: 0.5, C: 0.3} for t in (BOS, A, B, C)})
    tables, table_ids, limits = [NO_EOS, no_eos_b], [1, 0, 1], [1, 3, 6]
    rows_seen = []
    ids, cache = markov_inputs(table_ids)
    seqs, scores = beam_search(
        table_memory_fn(tables, rows_seen), ids, cache, V, max_decode_length=limits, memory=cache)
    assert rows_seen == [12, 8, 8, 4, 4, 4]
    reference = beam_search(markov_fn(tables), ids, cache, V, max_decode_length=limits)
    np.testing.assert_array_equal(seqs, reference[0])
    np.testing.assert_array_equal(scores, reference[1])
    for example, (table, limit) in enumerate(zip(table_ids, limits)):
        expected = brute_force(markov_log_probs(tables[table]), limit, 0.6, 4)
        assert unpad(seqs[example])[: len(expected)] == [s for _, s in expected]
        np.testing.assert_allclose(scores[example, : len(expected)], [s for s, _ in expected], rtol=1e-6)

    rows_seen.clear()
    greedy = greedy_search(table_memory_fn(tables, rows_seen), ids, cache, limits, memory=cache)
    assert rows_seen == [3, 2, 2, 1, 1, 1]
    assert unpad(greedy[0]) == [(B,), (A, A, A), (B,) * 6]
    for x, y in zip(greedy, greedy_search(markov_fn(tables), ids, cache, limits)):
        np.testing.assert_array_equal(x, y)


def test_an_example_that_leaves_keeps_its_result_whatever_the_order():
    # The output of each example is where it was in the batch, however the live set shrinks.
    vocab, keys = 13, 97
    fn = random_history_fn(vocab, keys, seed=3)
    states, limits = [5, 17, 29, 31, 2, 60], [2, 9, 4, 7, 1, 5]
    seqs, scores = beam_search(fn, tf.fill([6], BOS), {"state": tf.constant(states)}, vocab,
                               max_decode_length=tf.constant(limits), n_best=2)
    for b in range(6):
        alone = beam_search(fn, tf.fill([1], BOS), {"state": tf.constant(states[b : b + 1])}, vocab,
                            max_decode_length=limits[b], n_best=2)
        assert unpad(seqs[b]) == unpad(alone[0][0])
        np.testing.assert_allclose(scores[b], alone[1][0], rtol=1e-6)


def test_power_of_two_at_least_and_the_rows_kept():
    got = [int(bs._power_of_two_at_least(tf.constant(n))) for n in range(0, 70)]
    assert got == [0, 1, 2, 4, 4] + [8] * 4 + [16] * 8 + [32] * 16 + [64] * 32 + [128] * 5
    assert int(bs._power_of_two_at_least(tf.constant(2**30 - 1))) == 2**30
    done = tf.constant([True, False, True, True, False, True, False])  # 3 stay: 4 rows, the first done rides
    np.testing.assert_array_equal(bs._rounded_rows(done), [True, True, False, False, True, False, True])
    np.testing.assert_array_equal(bs._rounded_rows(tf.constant([True, False, False])), [False, True, True])
    np.testing.assert_array_equal(bs._rounded_rows(tf.constant([True, False, False, False, True])),
                                  [True, True, True, True, False])  # 3 stay: 4 rows
    np.testing.assert_array_equal(bs._rounded_rows(tf.constant([True, False, False, False])), [True] * 4)  # no shrink
    np.testing.assert_array_equal(bs._rounded_rows(tf.constant([True, True])), [False, False])  # all done
    np.testing.assert_array_equal(bs._rounded_rows(tf.constant([False, True, True, True])), [True, False, False, False])


@pytest.mark.parametrize("per_example", [False, True])
def test_rounded_rows_give_the_results_of_exact_rows(per_example):
    # Done examples ride along to keep the row count a power of two: their rows are computed,
    # their results are those they had when done, and nobody else's change.
    vocab, keys, size = 13, 97, 11
    rng = np.random.default_rng(4)
    states = tf.constant(rng.integers(0, keys, size), tf.int32)
    limits = tf.constant(rng.integers(1, 12, size), tf.int32)
    settings = dict(beam_size=4, alpha=0.6, n_best=2)
    if per_example:
        settings = dict(beam_size=tf.constant(rng.integers(1, 6, size), tf.int32),
                        alpha=tf.constant(rng.uniform(0, 1.5, size), tf.float32))
        settings["n_best"] = tf.maximum(settings["beam_size"] - 1, 1)
    results, rows = {}, {}
    for round_rows in (False, True):
        history = random_history_fn(vocab, keys, seed=5)
        seen = rows[round_rows] = []

        def fn(ids, step, cache, history=history, seen=seen):
            seen.append(int(tf.shape(ids)[0]))
            return history(ids, step, cache)

        results[round_rows] = beam_search(fn, tf.fill([size], BOS), {"state": states}, vocab,
                                          max_decode_length=limits, round_rows=round_rows, **settings)
    np.testing.assert_array_equal(results[True][0], results[False][0])
    # The log-softmax of a row may round its last bit differently where the row sits elsewhere
    # in the (rows, V) matrix (vectorized kernels): the scores are equal to float32 rounding.
    np.testing.assert_allclose(results[True][1], results[False][1], rtol=1e-6)
    beam = 4 if not per_example else int(tf.reduce_max(settings["beam_size"]))
    examples = [r // beam for r in rows[True]]
    assert examples[0] == size and all(n == size or n & (n - 1) == 0 for n in examples)  # 11, then powers of two
    assert examples == sorted(examples, reverse=True) and examples[-1] == 1
    assert len(set(examples)) < len(set(r // beam for r in rows[False]))
    assert sum(rows[True]) > sum(rows[False])  # the riders' rows, computed


def test_riders_keep_their_memory_aligned_and_their_results():
    # Limits 1, 2, 3, 4, 5, 7 and no EOS: 6 examples, then 5 live (8 > 6: all 6 kept, one
    # riding), 4, 3 (4 kept), 2, 1, 1; each reads its own table through the memory.
    no_eos_b = _table({t: {A: 0.2, B: 0.5, C: 0.3} for t in (BOS, A, B, C)})
    tables, table_ids, limits = [NO_EOS, no_eos_b], [1, 0, 1, 1, 0, 0], [1, 2, 3, 4, 5, 7]
    ids, cache = markov_inputs(table_ids)
    outputs = {}
    for round_rows, expected_rows in ((True, [24, 24, 16, 16, 8, 4, 4]), (False, [24, 20, 16, 12, 8, 4, 4])):
        rows_seen = []
        outputs[round_rows] = beam_search(table_memory_fn(tables, rows_seen), ids, cache, V, max_decode_length=limits,
                                          memory=cache, round_rows=round_rows)
        assert rows_seen == expected_rows
    for x, y in zip(outputs[True], outputs[False]):
        np.testing.assert_array_equal(x, y)
    for example, (table, limit) in enumerate(zip(table_ids, limits)):
        expected = brute_force(markov_log_probs(tables[table]), limit, 0.6, 4)
        assert unpad(outputs[True][0][example])[: len(expected)] == [s for _, s in expected]
