"""pipelines sources: parallel text files, the Multi30k tfds builder, wmt14 on mock data, the registry.

A kind of source registered by this module alone (`TabSeparated`, nothing in the library edited)
is read by the ordinary loading functions and named by every list of data sets."""

import gzip
import os

import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_transformer.pipelines import batching
from keras_transformer.pipelines import corpora
from keras_transformer.pipelines import multi30k
from keras_transformer.pipelines import sources
from keras_transformer.pipelines import text_files
from keras_transformer.pipelines import tokenizers as tok_lib
from keras_transformer.pipelines.data_config import DataConfig, dataset_name
from keras_transformer.pipelines.errors import DataError
from tests.helpers.files import write_lines


def _as_list(ds):
    return [(s.decode(), t.decode()) for s, t in ds.as_numpy_iterator()]


def test_parallel_text_files_plain_and_gzipped(tmp_path):
    source = write_lines(tmp_path / "a.en.gz", ["A dog. ", "  Two cats."], gz=True)
    target = write_lines(tmp_path / "a.de", ["Ein Hund.", "Zwei Katzen.  "])
    expected = [("A dog.", "Ein Hund."), ("Two cats.", "Zwei Katzen.")]
    assert text_files.check_parallel_files(source, target) == 2
    assert _as_list(text_files.parallel_text_files(source, target)) == expected
    assert text_files.read_parallel_pairs(source, target) == expected
    files = sources.load_pairs("files", "a", source_file=str(tmp_path / "{split}.en.gz"),
                               target_file=str(tmp_path / "{split}.de"))
    assert _as_list(files) == expected


@pytest.mark.parametrize("case", ["missing folder", "missing file", "empty file", "line counts differ"])
def test_bad_files_give_one_line_naming_the_file(tmp_path, case):
    good = write_lines(tmp_path / "good.de", ["Eins.", "Zwei."])
    bad = {
        "missing folder": str(tmp_path / "nowhere" / "x.en"),
        "missing file": str(tmp_path / "x.en"),
        "empty file": write_lines(tmp_path / "empty.en", []),
        "line counts differ": write_lines(tmp_path / "three.en", ["1", "2", "3"]),
    }[case]
    with pytest.raises(DataError) as error:
        text_files.check_parallel_files(bad, good)
    message = str(error.value)
    assert "\n" not in message
    assert (str(tmp_path / "nowhere") if case == "missing folder" else bad) in message
    with pytest.raises(DataError):
        sources.load_pairs("files", source_file=bad, target_file=good)


@pytest.mark.parametrize("compress", [False, True])
def test_invalid_utf8_is_named_by_file_line_and_byte(tmp_path, compress):
    data = b"Eins.\nZwei.\nDrei \xc3\x28 vier\n" + b"ok\n" * 5 + b"\xe2\x82"  # bad on line 3, cut on line 9
    path = tmp_path / ("bad.en.gz" if compress else "bad.en")
    path.write_bytes(gzip.compress(data) if compress else data)
    with pytest.raises(DataError, match=r"bad\.en(\.gz)?: line 3: not UTF-8 text \(invalid continuation byte at "
                                        r"byte 6 of the line\)"):
        text_files.check_file(str(path))
    path.write_bytes(data.replace(b"\xc3\x28", b"\xc3\xa4"))
    with pytest.raises(DataError, match=r"line 9: not UTF-8 text"):
        text_files.check_file(str(path))


def test_multi30k_builder_counts_from_the_local_folder(shared_data, tmp_path):
    builder = multi30k.Multi30k(config="en-de", data_dir=str(tmp_path))
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
        manual_dir=str(shared_data / "multi30k")))
    counts = {split: info.num_examples for split, info in builder.info.splits.items()}
    assert counts == {"train": 29000, "validation": 1014, "test": 1000}
    # Either direction, file order kept, lines stripped.
    val_en = text_files.read_lines(shared_data / "multi30k" / "val.en.gz")
    val_de = text_files.read_lines(shared_data / "multi30k" / "val.de.gz")
    de_en = sources.load_pairs("multi30k_de_en", "validation", data_dir=str(tmp_path),
                               manual_dir=str(shared_data / "multi30k"))
    assert _as_list(de_en.take(3)) == list(zip(val_de[:3], val_en[:3]))
    test = _as_list(multi30k.load("en-de", "en", "test", data_dir=str(tmp_path), download=False))
    assert len(test) == 1000 and all(s == s.strip() and t == t.strip() for s, t in test)


def test_multi30k_missing_or_incomplete_folder(tmp_path):
    with pytest.raises(DataError, match="nowhere: no such folder"):
        sources.load_pairs("multi30k_en_de", manual_dir=str(tmp_path / "nowhere"))
    (tmp_path / "m30k").mkdir()
    write_lines(tmp_path / "m30k" / "train.en.gz", ["x"], gz=True)
    with pytest.raises(DataError, match="train.de.gz: no such file"):
        sources.check_inputs("multi30k_en_de", manual_dir=str(tmp_path / "m30k"))


def test_wmt14_end_to_end_on_mock_data():
    with tfds.testing.mock_data(num_examples=40):
        raw = [(ex["en"].decode(), ex["de"].decode())
               for ex in tfds.load("wmt14_translate/de-en", split="train").as_numpy_iterator()]
        en_de = _as_list(sources.load_pairs("wmt14_en_de", "train"))
        de_en = _as_list(sources.load_pairs("wmt14_de_en", "train"))
        assert en_de == raw and de_en == [(t, s) for s, t in raw]
        pairs = sources.load_pairs("wmt14_en_de", "train")
        tokenizer, _ = tok_lib.train_pair(pairs, tok_lib.TokenizerConfig(vocab_size=300))
        stats = batching.batch_stats(batching.make_dataset(pairs, tokenizer, 512, 256, seed=0))
    read, too_long = batching.count_too_long(tf.data.Dataset.from_tensor_slices(
        tuple(map(list, zip(*raw)))), tokenizer, 256)
    assert stats.pairs == read - too_long > 0
    assert stats.max_source_positions <= 512 and stats.max_target_positions <= 512


def test_registry_and_embedded_corpus():
    with pytest.raises(DataError, match="unknown dataset 'nope'"):
        sources.load_pairs("nope")
    assert sources.spec("wmt14_en_de") == sources.DataSpec("wmt14", "en", "de", "de-en")
    assert sources.spec("multi30k_fr_en") == sources.DataSpec("multi30k", "fr", "en", "en-fr")
    validation = sources.load_pair_list("embedded", "validation")
    assert validation and all(isinstance(s, str) and isinstance(t, str) for s, t in validation)
    assert _as_list(sources.load_pairs("embedded", "validation").take(5)) == validation[:5]
    with pytest.raises(DataError, match="splits"):
        sources.load_pairs("embedded", "dev")


def test_the_stock_kinds_serve_the_stock_data_sets():
    assert sources.kinds() == ("embedded", "files", "treebank", "multi30k", "wmt14")
    assert list(sources.DATASETS) == ["embedded", "files", "ptb", "multi30k_en_de", "multi30k_de_en", "multi30k_en_fr",
                                      "multi30k_fr_en", "wmt14_en_de", "wmt14_de_en", "wmt14_en_fr", "wmt14_fr_en"]
    assert sources.short_names() == ("embedded", "files", "ptb", "multi30k", "wmt14")
    assert sources.source_of("ptb").trees and not sources.source_of("files").named_splits
    assert sources.source_of("wmt14_fr_en").many_pairs and not sources.source_of("multi30k_fr_en").many_pairs
    with pytest.raises(ValueError, match=r"a data source named 'files' is already registered \(Files\)"):
        sources.register_source(type("MoreFiles", (sources.DataSource,), {"kind": "files"}))
    with pytest.raises(ValueError, match="a data set named 'embedded' is already registered"):
        sources.register_source(type("Other", (sources.DataSource,), {
            "kind": "other", "datasets": {"embedded": sources.DataSpec("other")}}))
    with pytest.raises(ValueError, match="the data source kind must be one of embedded, files, treebank"):
        sources.lookup("other")


class TabSeparated(sources.DataSource):
    """One file of `source<TAB>target` lines per split: data_dir/{split}.tsv."""

    kind = "tsv"
    datasets = {"tsv": sources.DataSpec("tsv", "en", "de")}

    def check_config(self, data):
        if not data.data_dir:
            raise DataError(f"dataset {data.dataset} needs data_dir, the folder of its .tsv files")

    def check(self, spec, split, *, data_dir=None, **_):
        text_files.check_file(os.path.join(data_dir, f"{split}.tsv"))

    def load(self, spec, split, *, data_dir=None, **_):
        lines = text_files.read_lines(os.path.join(data_dir, f"{split}.tsv"))
        return sources.pairs_dataset([tuple(line.split("\t", 1)) for line in lines])


@pytest.fixture
def tsv():
    """`TabSeparated` registered for one test, then removed: other tests see the stock registry."""
    sources.register_source(TabSeparated)
    yield sources.lookup("tsv")
    sources.unregister_source("tsv")


def test_a_registered_source_is_read_by_the_ordinary_loading_functions(tsv, tmp_path):
    write_lines(tmp_path / "validation.tsv", ["A dog.\tEin Hund.", "Two cats.\tZwei Katzen."])
    expected = [("A dog.", "Ein Hund."), ("Two cats.", "Zwei Katzen.")]
    data = DataConfig(dataset="tsv", data_dir=str(tmp_path))
    assert data.kind == "tsv" and data.data_source is tsv and data.source_kwargs() == {"data_dir": str(tmp_path)}
    assert _as_list(data.load_pairs("validation")) == expected == data.load_pair_list("validation")
    assert _as_list(sources.load_pairs("tsv", "validation", data_dir=str(tmp_path))) == expected
    with pytest.raises(DataError, match="train.tsv: no such file"):
        data.check_inputs("train")
    with pytest.raises(DataError, match="dataset tsv needs data_dir, the folder of its .tsv files"):
        DataConfig(dataset="tsv")


def test_a_registered_source_is_in_every_list_of_data_sets(tsv):
    assert "tsv" in sources.DATASETS and sources.kinds()[-1] == "tsv" and sources.short_names()[-1] == "tsv"
    assert dataset_name("tsv") == "tsv" and sources.task_of("tsv") == "translation"
    assert corpora.parse_entry("web:tsv:0.5") == corpora.Corpus(name="web", weight=0.5, dataset="tsv")
    with pytest.raises(DataError, match=r"choose embedded, files, ptb, multi30k, wmt14, tsv or one of .*, tsv$"):
        dataset_name("nope")
    with pytest.raises(DataError, match="part-of-speech tags come from a treebank \\(dataset ptb\\), not dataset tsv"):
        DataConfig(dataset="tsv", data_dir=".", source_tags="gold")
