"""pipelines.batching: token budget with padding, length filter, determinism, per-replica input fn."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.pipelines import batching
from keras_transformer.pipelines import text_files
from keras_transformer import special_ids
from keras_transformer.pipelines import tokenizers as tok_lib


def _pairs(n):
    try:
        from keras_transformer.pipelines import grammar_corpus
    except ImportError:
        words = "der die das Hund Katze läuft schläft groß süß über Straße Café".split()
        return [(" ".join(words[(i + k) % 12] for k in range(3 + i % 9)) + ".",
                 " ".join(words[(i * 5 + k) % 12] for k in range(2 + i % 11)) + "!") for i in range(n)]
    return grammar_corpus.generate_pairs(n, seed=5)


@pytest.fixture(scope="module")
def pairs():
    return _pairs(600)


@pytest.fixture(scope="module")
def tokenizer(pairs):
    return tok_lib.train_pair(pairs, tok_lib.TokenizerConfig(vocab_size=500))[0]


def _batches(ds):
    return [(s.numpy(), t.numpy()) for s, t in ds]


def test_bucket_boundaries_are_geometric():
    assert batching.bucket_boundaries(40) == [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                                              22, 24, 26, 28, 30, 33, 36, 39]
    boundaries = batching.bucket_boundaries(40)
    assert batching.bucket_batch_sizes(boundaries, 100, 40) == (
        [100 // (b - 1) for b in boundaries] + [100 // 40])
    with pytest.raises(ValueError, match="batch_tokens=30 is smaller than one sentence but pairs of up to max_length=40"):
        batching.bucket_batch_sizes(boundaries, 30, 40)


def test_batches_keep_the_budget_and_the_format(pairs, tokenizer):
    budget, max_length = 96, 40
    batches = _batches(batching.make_dataset(pairs, tokenizer, budget, max_length, seed=0))
    assert len(batches) > 10
    for source, target in batches:
        assert source.dtype == np.int32 and target.dtype == np.int32
        assert source.size <= budget and target.size <= budget  # padding included
        assert source.shape[0] == target.shape[0]
        for row in list(source) + list(target):
            length = int(np.count_nonzero(row))
            assert row[length - 1] == special_ids.EOS_ID  # ids then EOS ...
            assert not row[length:].any()  # ... then PAD = 0
            assert special_ids.BOS_ID not in row[:length] and special_ids.EOS_ID not in row[:length - 1]


def test_batches_hold_every_pair_aligned(pairs, tokenizer):
    ds = batching.make_dataset(pairs, tokenizer, 128, 64, seed=0)
    seen = []
    for source, target in ds:
        seen += zip(tokenizer.detokenize(source).numpy(), tokenizer.detokenize(target).numpy())
    expected = [(s.encode(), t.encode()) for s, t in pairs]
    assert sorted(seen) == sorted(expected)


def test_long_pairs_are_filtered_and_counted(pairs, tokenizer):
    max_length = 12
    read, too_long = batching.count_too_long(pairs, tokenizer, max_length)
    assert read == len(pairs) and 0 < too_long < len(pairs)
    lengths = [max(len(s), len(t)) + 1 for s, t in
               zip(tokenizer.tokenize([s for s, _ in pairs]).to_list(),
                   tokenizer.tokenize([t for _, t in pairs]).to_list())]
    assert too_long == sum(length > max_length for length in lengths)
    stats = batching.batch_stats(batching.make_dataset(pairs, tokenizer, 48, max_length))
    assert stats.pairs == read - too_long
    assert stats.max_source_positions <= 48 and stats.max_target_positions <= 48


def test_same_seed_same_batches_other_seed_other_order(pairs, tokenizer):
    def run(seed):
        ds = batching.make_dataset(pairs, tokenizer, 96, 40, seed=seed, repeat=True)
        return _batches(ds.take(15))

    first, again, other = run(3), run(3), run(4)
    for (s1, t1), (s2, t2) in zip(first, again):
        np.testing.assert_array_equal(s1, s2)
        np.testing.assert_array_equal(t1, t2)
    assert any(a[0].shape != b[0].shape or (a[0] != b[0]).any() for a, b in zip(first, other))


def test_dataset_input_gives_the_same_batches_as_a_list(pairs, tokenizer):
    from_list = _batches(batching.make_dataset(pairs, tokenizer, 96, 40, shuffle=False))
    sources, targets = zip(*pairs)
    ds = tf.data.Dataset.from_tensor_slices((list(sources), list(targets)))
    from_ds = _batches(batching.make_dataset(ds, tokenizer, 96, 40, shuffle=False))
    assert len(from_list) == len(from_ds)
    for (s1, t1), (s2, t2) in zip(from_list, from_ds):
        np.testing.assert_array_equal(s1, s2)
        np.testing.assert_array_equal(t1, t2)


def test_input_fn_gives_each_replica_its_share(pairs, tokenizer):
    budget = 192
    input_fn = batching.make_input_fn(lambda: pairs, tokenizer, budget, max_length=40, seed=0)
    per_pipeline = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id,
                                             num_replicas_in_sync=4)
        batches = _batches(input_fn(context))
        assert all(s.size <= budget // 4 and t.size <= budget // 4 for s, t in batches)
        assert max(s.size for s, _ in batches) > budget // 8  # the share is used, not wasted
        per_pipeline.append(sum(s.shape[0] for s, _ in batches))
    read, too_long = batching.count_too_long(pairs, tokenizer, 40)
    assert sum(per_pipeline) == read - too_long  # shards are disjoint and complete
    with pytest.raises(ValueError, match="batch_tokens"):
        input_fn(tf.distribute.InputContext(1, 0, num_replicas_in_sync=8))  # 24 < max_length


def test_padding_share_on_multi30k_train_is_below_20_percent(shared_data):
    folder = shared_data / "multi30k"
    train = text_files.read_parallel_pairs(folder / "train.en.gz", folder / "train.de.gz")
    tokenizer = tok_lib.train_pair(train, tok_lib.TokenizerConfig(vocab_size=8000))[0]
    stats = batching.batch_stats(batching.make_dataset(train, tokenizer, 25000, 256, seed=0))
    print(f"\nMulti30k train, shared BPE 8000, batch_tokens=25000, default buckets: "
          f"{stats.batches} batches, padding share {stats.padding_share:.2%} "
          f"(source {stats.source_padding_share:.2%}, target {stats.target_padding_share:.2%})")
    assert stats.pairs == 29000
    assert stats.max_source_positions <= 25000 and stats.max_target_positions <= 25000
    assert stats.padding_share < 0.20


@pytest.mark.parametrize("cache", ["memory", "disk", "none"])
def test_bpe_dropout_segments_each_epoch_anew_and_keeps_every_pair(pairs, tokenizer, tmp_path, cache):
    """With BPE-dropout the cache keeps the text: every epoch holds every pair (detokenized),
    in a new segmentation; without it, every epoch reads the same cached ids."""
    path = str(tmp_path / "train") if cache == "disk" else None
    ds = batching.make_dataset(pairs, tokenizer, 512, 128, shuffle=False, cache=cache, cache_path=path,
                               bpe_dropout=0.2)
    expected = sorted((s.encode(), t.encode()) for s, t in pairs)
    epochs = []
    for _ in range(2):
        batches = _batches(ds)
        seen = []
        for source, target in batches:
            seen += zip(tokenizer.detokenize(source).numpy(), tokenizer.detokenize(target).numpy())
        assert sorted(seen) == expected
        epochs.append(batches)
    assert str(epochs[0]) != str(epochs[1])
    plain = batching.make_dataset(pairs, tokenizer, 512, 128, shuffle=False, cache=cache,
                                  cache_path=path and path + "-plain")
    assert str(_batches(plain)) == str(_batches(plain))
    lengths = [sum(int(np.count_nonzero(s)) for s, _ in batches) for batches in (epochs[0], _batches(plain))]
    assert lengths[0] > lengths[1]  # merges dropped: more source pieces
