"""Token-budget batches grouped by length: text pairs in, padded id batches out.

Vaswani et al. (2017), section 5.1: "Sentence pairs were batched together by
approximate sequence length. Each training batch contained a set of sentence
pairs containing approximately 25000 source tokens and 25000 target tokens."

The pipeline (`make_dataset`), all inside `tf.data`:

  (source, target) strings -> [shard] -> tokenize in batches of 1,024 with the
  tensorflow-text tokenizer, EOS appended -> drop pairs longer than
  `max_length` -> [cache in memory or on disk] -> [shuffle with a seed] -> [repeat]
  -> [sample from several corpora by weight] -> `bucket_by_sequence_length` -> prefetch.

With BPE-dropout (`bpe_dropout`, training only) the text is cached instead, and each epoch
tokenizes it anew: strings -> [shard] -> [cache] -> tokenize with merges dropped -> drop
pairs longer than `max_length` -> [shuffle] -> ...

A pair's length is max(source length, target length), EOS included. Bucket
boundaries grow geometrically (8, 9, 10, ..., x -> max(x + 1, int(1.1 x)), as in
tensor2tensor) up to `max_length`; a bucket whose longest member has L tokens
gets batch size `batch_tokens // L`, so neither the source nor the target tensor
of any batch holds more than `batch_tokens` positions, padding included.

Elements are `(source_ids, target_ids)`, int32 [batch, length], each row the
subword ids then EOS (no BOS), right-padded with PAD = 0. The training loop
builds the decoder input by shifting the targets right with BOS.
"""

import dataclasses
import functools
from typing import Callable, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from keras_transformer.special_ids import PAD_ID
from keras_transformer.pipelines import corpora
from keras_transformer.pipelines import tokenizers as tokenizers_lib
from keras_transformer.pipelines.data_config import check_batch_tokens
from keras_transformer.pipelines.errors import DataError

PairsLike = Union[Sequence[tuple[str, str]], tf.data.Dataset]
TOKENIZE_BATCH = 1024

# tf.data converts every function it is handed (map, filter, reduce) with AutoGraph unless told not
# to. These are plain TF (no Python control flow on tensors), so the conversion only lengthened
# start-up, as it did for the packages' tf.functions (all `autograph=False`): each is traced as written.
_plain = tf.autograph.experimental.do_not_convert


def bucket_boundaries(max_length: int, min_length: int = 8, step: float = 1.1) -> list[int]:
    """Geometric bucket boundaries below `max_length`: 8, 9, ..., 20, 22, 24, 26, 28, 30, 33, ...

    Bucket i of `tf.data.Dataset.bucket_by_sequence_length` holds lengths in
    [boundaries[i-1], boundaries[i]); the last one holds [boundaries[-1], max_length].
    """
    if step <= 1.0:
        raise ValueError(f"bucket step must exceed 1.0, got {step}")
    boundaries, x = [], min_length
    while x <= max_length:
        boundaries.append(x)
        x = max(x + 1, int(x * step))
    return boundaries


def bucket_batch_sizes(boundaries: Sequence[int], batch_tokens: int, max_length: int) -> list[int]:
    """Sequences per batch in each bucket: `batch_tokens // longest length in the bucket`."""
    check_batch_tokens(batch_tokens, max_length)
    longest = [b - 1 for b in boundaries] + [max_length]
    return [max(1, batch_tokens // length) for length in longest]


def _as_dataset(pairs: PairsLike) -> tf.data.Dataset:
    if isinstance(pairs, tf.data.Dataset):
        return pairs
    from keras_transformer.pipelines.sources import pairs_dataset  # pylint: disable=g-import-not-at-top
    return pairs_dataset(list(pairs))


def _sharded(pairs: PairsLike, num_shards: int, shard_index: int) -> tf.data.Dataset:
    ds = _as_dataset(pairs)
    return ds.shard(num_shards, shard_index) if num_shards > 1 else ds


def tokenize_pairs(pairs: PairsLike, tokenizer: tokenizers_lib.Tokenizer,
                   target_tokenizer: Optional[tokenizers_lib.Tokenizer] = None,
                   num_shards: int = 1, shard_index: int = 0, bpe_dropout: float = 0.0) -> tf.data.Dataset:
    """(source, target) strings -> (source_ids + EOS, target_ids + EOS) int32 vectors; with
    `bpe_dropout`, a new BPE-dropout segmentation of both sides each time the stream is read."""
    target_tokenizer = target_tokenizer or tokenizer
    ds = _sharded(pairs, num_shards, shard_index)

    def tokenize(source, target):  # (n,) strings -> (n, None) ragged ids
        return (tokenizer.tokenize(source, add_eos=True, bpe_dropout=bpe_dropout),
                target_tokenizer.tokenize(target, add_eos=True, bpe_dropout=bpe_dropout))

    # Unbatching ragged rows gives ragged_rank-0 specs; identity makes them plain
    # tensors, which `bucket_by_sequence_length`'s padded batching requires.
    return (ds.batch(TOKENIZE_BATCH)
            .map(_plain(tokenize), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
            .unbatch()
            .map(_plain(lambda s, t: (tf.identity(s), tf.identity(t)))))


def pair_length(source_ids, target_ids):
    """A pair's bucketing length: max(source length, target length), EOS included."""
    return tf.maximum(tf.shape(source_ids)[0], tf.shape(target_ids)[0])


CACHE_MODES = ("memory", "disk", "none")


def _cached(ds: tf.data.Dataset, cache: str, cache_path: Optional[str], suffix: str) -> tf.data.Dataset:
    if cache == "memory":
        return ds.cache()
    if cache == "disk":
        if not cache_path:
            raise ValueError("cache='disk' needs cache_path, a file prefix for tf.data's cache files")
        return ds.cache(cache_path + suffix)
    if cache != "none":
        raise ValueError(f"cache must be one of {CACHE_MODES}, got {cache!r}")
    return ds


def _tokenized(pairs, tokenizer, target_tokenizer, max_length: int, num_shards: int, shard_index: int,
               cache: str, cache_path: Optional[str], bpe_dropout: float = 0.0) -> tf.data.Dataset:
    """Tokenized pairs of at most `max_length` tokens a side, kept between epochs as `cache` says:
    the ids, or with `bpe_dropout` the text, which each epoch then segments anew."""
    suffix = f"-shard{shard_index}of{num_shards}" if num_shards > 1 else ""

    def fits(source_ids, target_ids):
        return pair_length(source_ids, target_ids) <= max_length

    if bpe_dropout:
        text = _cached(_sharded(pairs, num_shards, shard_index), cache, cache_path, suffix + "-text")
        return tokenize_pairs(text, tokenizer, target_tokenizer, bpe_dropout=bpe_dropout).filter(_plain(fits))
    ds = tokenize_pairs(pairs, tokenizer, target_tokenizer, num_shards, shard_index).filter(_plain(fits))
    return _cached(ds, cache, cache_path, suffix)


def make_dataset(pairs: Union[PairsLike, corpora.Mixture], tokenizer: tokenizers_lib.Tokenizer,
                 batch_tokens: int = 25000, max_length: int = 256, *,
                 target_tokenizer: Optional[tokenizers_lib.Tokenizer] = None,
                 shuffle: bool = True, seed: int = 0, repeat: bool = False,
                 shuffle_buffer: int = 200_000, cache: str = "memory", cache_path: Optional[str] = None,
                 min_bucket_length: int = 8, bucket_step: float = 1.1,
                 num_shards: int = 1, shard_index: int = 0, bpe_dropout: float = 0.0) -> tf.data.Dataset:
    """Length-bucketed batches of token ids within a token budget (section 5.1).

    Args:
        pairs: (source, target) str pairs, a `tf.data.Dataset` of string pairs, or a
            `keras_transformer.pipelines.corpora.Mixture` of several corpora: each is tokenized, cached,
            shuffled and repeated on its own, then every pair is drawn from corpus i with
            probability `weights[i]` (`tf.data.Dataset.sample_from_datasets`), and the
            mixture's `counter` counts the pairs batched from each.
        tokenizer: the source tokenizer (and target one, when shared).
        batch_tokens: most positions, padding included, in each batch's source
            tensor and, separately, its target tensor (paper: about 25,000).
        max_length: pairs with more tokens (EOS included) on either side are dropped;
            `count_too_long` counts them.
        target_tokenizer: a separate target-side tokenizer, if not shared.
        shuffle: shuffle pairs (a buffer of `shuffle_buffer`, per corpus) before bucketing.
        seed: the shuffle (and mixture) seed; the same seed gives the same batches in the same order.
        repeat: repeat forever (each epoch reshuffled, still deterministic). A mixture without
            `repeat` ends when its first corpus does.
        shuffle_buffer: pairs held for shuffling (in memory whatever `cache` is).
        cache: where the tokenized, filtered pairs are kept after the first epoch: "memory"
            (fastest; grows with the corpus, about 0.85 GB per million pairs of 34 + 34 ids),
            "disk" (`tf.data`'s file cache at `cache_path`; flat memory), "none" (read and
            tokenize the text again each epoch; flat memory). docs/speed.md#corpora-larger-than-ram
            measures them.
        cache_path: the file prefix of the "disk" cache (a shard or corpus suffix is added).
        min_bucket_length, bucket_step: the geometric bucket boundaries.
        num_shards, shard_index: read only this shard of the pairs (per input pipeline).
        bpe_dropout: segment the pairs anew each epoch, every BPE merge skipped with this
            probability (Provilkov et al., 2020); `cache` then keeps the text, and a pair
            segmented longer than `max_length` in one epoch is dropped from that epoch only.

    Returns:
        `tf.data.Dataset` of `(source_ids, target_ids)`, int32 [batch, length],
        ids then EOS, right-padded with PAD = 0.
    """
    boundaries = bucket_boundaries(max_length, min_bucket_length, bucket_step)
    batch_sizes = bucket_batch_sizes(boundaries, batch_tokens, max_length)
    mixture = pairs if isinstance(pairs, corpora.Mixture) else None
    streams = []
    for i, load in enumerate(mixture.loaders if mixture else [lambda: pairs]):
        path = cache_path and (f"{cache_path}-{mixture.names[i]}" if mixture else cache_path)
        ds = _tokenized(load(), tokenizer, target_tokenizer, max_length, num_shards, shard_index, cache, path,
                        bpe_dropout)
        if shuffle:
            ds = ds.shuffle(shuffle_buffer, seed=seed + i, reshuffle_each_iteration=True)
        if repeat:
            ds = ds.repeat()
        streams.append(ds.map(_plain(lambda s, t, i=i: (s, t, tf.constant(i, tf.int32)))) if mixture else ds)
    if mixture:
        ds = tf.data.Dataset.sample_from_datasets(streams, list(mixture.weights), seed=seed,
                                                  stop_on_empty_dataset=True)
    else:
        ds = streams[0]
    ds = ds.bucket_by_sequence_length(
        element_length_func=_plain(lambda s, t, *_: pair_length(s, t)),
        bucket_boundaries=boundaries,
        bucket_batch_sizes=batch_sizes,
        padded_shapes=([None], [None], []) if mixture else ([None], [None]),
        padding_values=(PAD_ID, PAD_ID, 0) if mixture else (PAD_ID, PAD_ID),
        drop_remainder=False)
    if mixture:
        ds = ds.map(_plain(functools.partial(_count, mixture.counter)))
    return ds.prefetch(tf.data.AUTOTUNE)


def _count(counter: corpora.ShareCounter, source_ids, target_ids, corpus_ids):
    """A mixture's batch without its corpus column, which `counter` counts on the way."""
    counted = tf.numpy_function(lambda ids: (counter.add(ids), np.int32(0))[1], [corpus_ids], tf.int32,
                                stateful=True)
    with tf.control_dependencies([counted]):
        return tf.identity(source_ids), tf.identity(target_ids)


def make_input_fn(pairs: Union[PairsLike, Callable[[], PairsLike]],
                  tokenizer: tokenizers_lib.Tokenizer, batch_tokens: int = 25000,
                  **kwargs) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
    """An input function for `strategy.distribute_datasets_from_function`.

    Each input pipeline reads its shard (`input_context.input_pipeline_id` of
    `num_input_pipelines`) and batches to `batch_tokens // num_replicas_in_sync`,
    so the replicas together consume about `batch_tokens` per step.

    Args:
        pairs: the pairs, or a function returning them (called once per pipeline,
            e.g. `lambda: sources.load_pairs("wmt14_en_de", "train")`).
        tokenizer: as for `make_dataset`.
        batch_tokens: the global token budget per step (per side).
        **kwargs: the other `make_dataset` arguments.
    """

    def input_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        # A Mixture's loaders, like `pairs()`, make the datasets inside each pipeline.
        per_replica = batch_tokens // input_context.num_replicas_in_sync
        return make_dataset(pairs() if callable(pairs) else pairs, tokenizer, per_replica,
                            num_shards=input_context.num_input_pipelines,
                            shard_index=input_context.input_pipeline_id, **kwargs)

    return input_fn


def count_too_long(pairs: PairsLike, tokenizer: tokenizers_lib.Tokenizer, max_length: int,
                   target_tokenizer: Optional[tokenizers_lib.Tokenizer] = None
                   ) -> tuple[int, int]:
    """(pairs read, pairs longer than `max_length`) - what `make_dataset` drops."""
    ds = tokenize_pairs(pairs, tokenizer, target_tokenizer)
    counts = ds.map(_plain(lambda s, t: tf.stack([1, tf.cast(pair_length(s, t) > max_length, tf.int32)])))
    total = counts.reduce(tf.zeros([2], tf.int32), _plain(lambda acc, x: acc + x)).numpy()
    return int(total[0]), int(total[1])


def check_can_batch(pairs: PairsLike, tokenizer: tokenizers_lib.Tokenizer, max_length: int,
                    target_tokenizer: Optional[tokenizers_lib.Tokenizer] = None, what: str = "the pairs") -> None:
    """A one-line `DataError` unless some pair of `pairs` has at most `max_length` tokens a side,
    EOS included: else `make_dataset` drops them all and makes no batch. Tokenizes up to the first
    batch of `TOKENIZE_BATCH` pairs that holds one that fits (all of them only when none does).

    Each batch is tokenized eagerly, one call a side, into the ids `tokenize_pairs` gives: the
    check, which usually ends with its first batch, traces no `tf.data` function (tracing one
    cost more than the tokenizing)."""
    target_tokenizer = target_tokenizer or tokenizer
    for sources, targets in _as_dataset(pairs).batch(TOKENIZE_BATCH):
        lengths = tf.maximum(tokenizer.tokenize(sources, add_eos=True).row_lengths(),
                             target_tokenizer.tokenize(targets, add_eos=True).row_lengths())  # (n,) with EOS
        if bool(tf.reduce_any(lengths <= max_length)):
            return
    raise DataError(f"{what}: every pair has more than max_length={max_length} tokens on a side (EOS "
                    "included), so no batch can be made; raise --max_length or give shorter pairs")


@dataclasses.dataclass(frozen=True)
class BatchStats:
    """What one pass over a batched dataset held.

    Attributes:
        batches, pairs: counts.
        source_tokens, target_tokens: non-padding ids (EOS included).
        source_positions, target_positions: ids plus padding.
        max_source_positions, max_target_positions: the largest batch of each side.
    """
    batches: int
    pairs: int
    source_tokens: int
    target_tokens: int
    source_positions: int
    target_positions: int
    max_source_positions: int
    max_target_positions: int

    @property
    def padding_share(self) -> float:
        """Padding positions / all positions, source and target together."""
        positions = self.source_positions + self.target_positions
        return 1.0 - (self.source_tokens + self.target_tokens) / positions if positions else 0.0

    @property
    def source_padding_share(self) -> float:
        return 1.0 - self.source_tokens / self.source_positions if self.source_positions else 0.0

    @property
    def target_padding_share(self) -> float:
        return 1.0 - self.target_tokens / self.target_positions if self.target_positions else 0.0


def batch_stats(batches: tf.data.Dataset, max_batches: Optional[int] = None) -> BatchStats:
    """Counts tokens and padding over (at most `max_batches` of) a batched dataset."""
    if max_batches is not None:
        batches = batches.take(max_batches)

    def summarize(source, target):
        s = tf.shape(source, out_type=tf.int64)
        t = tf.shape(target, out_type=tf.int64)
        real_s = tf.math.count_nonzero(source, dtype=tf.int64)
        real_t = tf.math.count_nonzero(target, dtype=tf.int64)
        return tf.stack([s[0], real_s, real_t, s[0] * s[1], t[0] * t[1]])

    rows = np.array(list(batches.map(_plain(summarize)).as_numpy_iterator()), dtype=np.int64)
    if rows.size == 0:
        return BatchStats(0, 0, 0, 0, 0, 0, 0, 0)
    total = rows.sum(axis=0)
    return BatchStats(batches=len(rows), pairs=int(total[0]), source_tokens=int(total[1]),
                      target_tokens=int(total[2]), source_positions=int(total[3]),
                      target_positions=int(total[4]), max_source_positions=int(rows[:, 3].max()),
                      max_target_positions=int(rows[:, 4].max()))
