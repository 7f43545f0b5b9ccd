"""Training data at scale: shards by glob, corpora mixed by weight, the three cache modes."""

import collections
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.pipelines import batching, corpora, text_files
from keras_transformer.pipelines import tokenizers as tok_lib
from keras_transformer.pipelines.data_config import DataConfig
from keras_transformer.pipelines.errors import DataError
from tests.helpers.files import write_lines


def _corpus(folder, stem, count, shards=1, gz=False):
    """`count` numbered pairs "stem i" / "STEM i" in `shards` shards; returns the {en,de} pattern."""
    folder.mkdir(parents=True, exist_ok=True)
    per = -(-count // shards)
    for k in range(shards):
        rows = range(k * per, min(count, (k + 1) * per))
        name = f"{stem}-{k:03d}" if shards > 1 else stem
        suffix = ".gz" if gz else ""
        write_lines(folder / f"{name}.en{suffix}", [f"{stem} {i} ." for i in rows], gz)
        write_lines(folder / f"{name}.de{suffix}", [f"{stem.upper()} {i} ." for i in rows], gz)
    return str(folder / (f"{stem}-*" if shards > 1 else stem)) + ".{en,de}" + (".gz" if gz else "")


@pytest.fixture(scope="module")
def tokenizer():
    sentences = [f"web {i} ." for i in range(300)] + [f"news {i} ." for i in range(300)]
    return tok_lib.train(sentences + [s.upper() for s in sentences], tok_lib.TokenizerConfig(vocab_size=400))


# Parsing --train_files --------------------------------------------------------------------------


def test_entries_name_files_or_data_sets_with_weights():
    web, news, emb, plain = corpora.parse_train_files(
        ["web:data/web-*.{en,de}.gz:0.3,news:data/news.{en,de}:0.7", "embedded:2"]
        + ["data/crawl.{de,en}"])
    assert web == corpora.Corpus("web", 0.3, "data/web-*.en.gz", "data/web-*.de.gz")
    assert news == corpora.Corpus("news", 0.7, "data/news.en", "data/news.de")
    assert emb == corpora.Corpus("embedded", 2.0, dataset="embedded")
    assert (plain.name, plain.weight, plain.source, plain.target) == ("crawl", 1.0, "data/crawl.de", "data/crawl.en")
    assert corpora.shares([web, news, emb, plain]) == pytest.approx([0.3 / 4, 0.7 / 4, 0.5, 0.25])


@pytest.mark.parametrize("value, fragment", [
    ("web:data/web.{en,de}:0", "weight 0 must be a positive number"),
    ("web:data/web.{en,de}:-0.5", "weight -0.5 must be a positive number"),
    ("web:data/web.{en,de}:nan", "weight nan must be a positive number"),
    ("web:data/web.en", "unknown corpus 'data/web.en'"),
    ("wikipedia:0.5", "unknown corpus 'wikipedia'"),
    ("a:b:data/x.{en,de}:1", "expected [NAME:]CORPUS[:WEIGHT]"),
    ("web:data/{a,b}.{en,de}", "one {SOURCE,TARGET} brace pair, not 2"),
    ("web:data/a.{en,de},web:data/b.{en,de}", "corpus name 'web' is used twice"),
])
def test_bad_entries_are_one_line_errors(value, fragment):
    with pytest.raises(DataError) as error:
        corpora.parse_train_files([value])
    assert fragment in str(error.value) and "\n" not in str(error.value)


# Shards -----------------------------------------------------------------------------------------


def test_shards_pair_by_their_wildcards_and_stream_every_line_once(tmp_path):
    pattern = _corpus(tmp_path, "web", 10, shards=3, gz=True)
    (entry,) = corpora.parse_train_files([f"w:{pattern}"])
    shards = text_files.parallel_shards(entry.source, entry.target)
    assert [(os.path.basename(s), os.path.basename(t)) for s, t in shards] == [
        (f"web-00{k}.en.gz", f"web-00{k}.de.gz") for k in range(3)]
    assert text_files.check_parallel_files(entry.source, entry.target) == 10
    pairs = [(s.decode(), t.decode()) for s, t in
             text_files.parallel_text_files(entry.source, entry.target).as_numpy_iterator()]
    assert sorted(pairs) == sorted((f"web {i} .", f"WEB {i} .") for i in range(10))
    assert pairs[:3] == [("web 0 .", "WEB 0 ."), ("web 4 .", "WEB 4 ."), ("web 8 .", "WEB 8 .")]  # interleaved
    text = sum(len(f"web {i} .\n") + len(f"WEB {i} .\n") for i in range(10))
    assert text_files.text_bytes(entry.source, entry.target) == text  # from the gzip trailers


@pytest.mark.parametrize("case, fragment", [
    ("missing target shard", "web-001.de: no such file (the target shard of"),
    ("missing source shard", "web-007.en: no such file (the source shard of"),
    ("empty glob", "nothing-*.en: matches no file"),
    ("other wildcards", "must have the same wildcards"),
])
def test_shard_problems_name_the_file(tmp_path, case, fragment):
    pattern = _corpus(tmp_path, "web", 6, shards=3)
    source, target = pattern.replace("{en,de}", "en"), pattern.replace("{en,de}", "de")
    if case == "missing target shard":
        os.remove(tmp_path / "web-001.de")
    elif case == "missing source shard":
        write_lines(tmp_path / "web-007.de", ["x"])
    elif case == "empty glob":
        source, target = str(tmp_path / "nothing-*.en"), str(tmp_path / "nothing-*.de")
    else:
        target = str(tmp_path / "web-00?.de")
    data = DataConfig(train_files=corpora.parse_train_files([f"w:{source.replace('.en', '.{en,de}')}"])
                      if case != "other wildcards" else (corpora.Corpus("w", source=source, target=target),))
    with pytest.raises(DataError) as error:
        data.check_inputs("train")
    assert fragment in str(error.value) and str(error.value).startswith("--train_files corpus w: ")


# Mixing --------------------------------------------------------------------------------------------


def test_mixed_shares_follow_the_weights(tmp_path, tokenizer):
    data = DataConfig(train_files=corpora.parse_train_files([
        f"web:{_corpus(tmp_path, 'web', 300, shards=2)}:0.2", f"news:{_corpus(tmp_path, 'news', 300)}:0.8"]),
        batch_tokens=256, max_length=16, shuffle_buffer=1000)
    mixture = data.training_pairs()
    batches = batching.make_dataset(mixture, tokenizer, 256, 16, repeat=True, seed=5,
                                    shuffle_buffer=data.shuffle_buffer)
    seen = collections.Counter()
    for source, _ in batches.as_numpy_iterator():
        words = tokenizer.detokenize(source).numpy()
        seen.update(w.decode().split()[0] for w in words)
        if sum(seen.values()) >= 5000:
            break
    total = sum(seen.values())
    assert abs(seen["web"] / total - 0.2) < 0.03 and abs(seen["news"] / total - 0.8) < 0.03, seen
    counted = dict(zip(mixture.counter.names, mixture.counter.counts))
    assert counted["web"] >= seen["web"] and counted["news"] >= seen["news"]  # counted as batched (+ prefetch)
    assert "web 2" in mixture.counter.summary() or "web 1" in mixture.counter.summary()


def test_the_tokenizer_reads_every_corpus_once(tmp_path):
    data = DataConfig(train_files=corpora.parse_train_files([
        f"web:{_corpus(tmp_path, 'web', 7)}:0.1", f"news:{_corpus(tmp_path, 'news', 5)}:5"]))
    pairs = list(tok_lib.iter_pairs(data.load_pairs("train")))
    assert len(pairs) == 12 and pairs[0] == ("web 0 .", "WEB 0 .") and pairs[-1] == ("news 4 .", "NEWS 4 .")


def test_reservoir_sample_is_bounded_uniform_and_seeded():
    stream = (str(i) for i in range(10_000))
    sample = tok_lib._sample(stream, 1000, seed=3)  # pylint: disable=protected-access
    assert len(sample) == 1000 and len(set(sample)) == 1000
    assert 4000 < np.mean([int(s) for s in sample]) < 6000  # drawn from the whole stream
    assert sample == tok_lib._sample((str(i) for i in range(10_000)), 1000, seed=3)  # pylint: disable=protected-access
    assert tok_lib._sample(["a", "b"], 1000, seed=0) == ["a", "b"]  # pylint: disable=protected-access


# Cache modes --------------------------------------------------------------------------------------


def test_cache_modes_give_the_same_batches(tmp_path, tokenizer):
    pattern = _corpus(tmp_path / "data", "web", 200, shards=2)
    data = DataConfig(train_files=corpora.parse_train_files([f"web:{pattern}"]), batch_tokens=128, max_length=16)

    def epochs(cache, path=None):
        ds = batching.make_dataset(data.training_pairs(), tokenizer, 128, 16, repeat=True, seed=1,
                                   shuffle_buffer=50, cache=cache, cache_path=path)
        return [(s.tolist(), t.tolist()) for s, t in ds.take(60).as_numpy_iterator()]  # > 2 epochs

    memory = epochs("memory")
    assert epochs("none") == memory
    prefix = str(tmp_path / "cache" / "train")
    os.makedirs(tmp_path / "cache")
    assert epochs("disk", prefix) == memory
    assert os.path.isfile(prefix + ".index")  # the first epoch was written; later ones read it
    assert epochs("disk", prefix) == memory  # read back by a new pipeline
    with pytest.raises(ValueError, match="needs cache_path"):
        batching.make_dataset(data.training_pairs(), tokenizer, 128, 16, cache="disk")


def test_auto_cache_keeps_small_corpora_in_memory_and_streams_large_ones(tmp_path, monkeypatch):
    from keras_transformer.pipelines import data_config
    data = DataConfig(train_files=corpora.parse_train_files([f"web:{_corpus(tmp_path, 'web', 100)}"]))
    assert data.cache_mode()[0] == "memory"
    monkeypatch.setattr(data_config, "CACHE_MEMORY_TEXT_BYTES", 1000)
    mode, why = data.cache_mode()
    assert mode == "none" and "MiB of training text > 0 MiB" in why
    assert DataConfig(cache="disk").cache_mode() == ("disk", "--cache")
    assert DataConfig(dataset="wmt14_en_de").cache_mode()[0] == "none"
    with pytest.raises(ValueError, match="cache must be one of"):
        DataConfig(cache="ram")


def test_disk_cache_of_other_data_and_a_killed_writers_lockfile_are_removed(tmp_path):
    from keras_transformer.tasks import disk_cache
    data = DataConfig(train_files=corpora.parse_train_files([f"web:{_corpus(tmp_path / 'data', 'web', 10)}"]))
    prefix = disk_cache.prepare_disk_cache(str(tmp_path / "run"), data, "f" * 64, log=lambda _: None)
    folder = os.path.dirname(prefix)
    keep = [prefix + ".index", prefix + ".data-00000-of-00001"]
    stale = [prefix + "_0.lockfile", prefix + "_0.data-00000-of-00001.tempstate123", folder + "/train-0123-web.index"]
    list(tf.data.Dataset.range(50).cache(prefix))  # a whole cache of this key
    for path in stale:
        open(path, "w").close()
    lines = []
    assert disk_cache.prepare_disk_cache(str(tmp_path / "run"), data, "f" * 64, log=lines.append) == prefix
    assert sorted(os.listdir(folder)) == sorted(os.path.basename(p) for p in keep)
    assert lines == [f"removed 3 stale or half-written cache file(s) from {folder}"]
    os.truncate(keep[1], os.path.getsize(keep[1]) // 2)  # a cache a full disk cut short: tf.data fails mid-epoch
    assert disk_cache.prepare_disk_cache(str(tmp_path / "run"), data, "f" * 64, log=lines.append) == prefix
    assert os.listdir(folder) == [] and lines[-1].startswith(f"removed the damaged disk cache {prefix} (")
    write_lines(tmp_path / "data" / "web.en", ["changed"] * 10)  # other data: another key
    assert disk_cache.prepare_disk_cache(str(tmp_path / "run"), data, "f" * 64, log=lines.append) != prefix
