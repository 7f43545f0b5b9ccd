"""pipelines.text_files: what exists of a path is literal. A folder whose name holds glob characters
(a --data_dir, a --train_files folder) holds files, and only the rest of a path is a pattern."""

import glob
import os

import pytest

from keras_transformer.pipelines import corpora, text_files
from keras_transformer.pipelines.data_config import DataConfig
from keras_transformer.pipelines.errors import DataError
from tests.helpers.files import write_lines

GLOB_NAME = "ünï [x]*"  # "[x]" and "*" are wildcards to glob: unescaped, this path matches no file


def _pairs(folder, stem, count):
    write_lines(folder / f"{stem}.en", [f"a dog number {i} runs ." for i in range(count)])
    write_lines(folder / f"{stem}.de", [f"ein hund nummer {i} rennt ." for i in range(count)])


def test_a_data_dir_named_with_glob_characters_holds_its_files(tmp_path):
    folder = tmp_path / GLOB_NAME
    folder.mkdir()
    for split in ("train", "validation", "test"):
        _pairs(folder, split, 5)
    source, target = str(folder / "train.en"), str(folder / "train.de")
    assert text_files.parallel_shards(source, target) == [(source, target)]
    assert text_files.check_parallel_files(source, target) == 5
    data = DataConfig(dataset="files", data_dir=str(folder), source_file="{split}.en", target_file="{split}.de")
    data.check_inputs("train")
    data.check_can_batch("validation")
    assert data.cache_mode() == ("memory", "auto: 0.0 MiB of training text <= 256 MiB")
    assert data.load_pair_list("test")[4] == ("a dog number 4 runs .", "ein hund nummer 4 rennt .")
    os.remove(folder / "test.de")
    with pytest.raises(DataError, match=r"ünï \[x\]\*/test.de: no such file$"):  # the path, not "matches no file"
        data.check_inputs("test")
    with pytest.raises(DataError, match="no such folder"):  # a folder name, never a pattern
        DataConfig(dataset="files", data_dir=glob.escape(str(folder)), source_file="{split}.en",
                   target_file="{split}.de").check_inputs("train")


def test_shards_in_a_folder_named_with_glob_characters_are_selected_by_their_own_names(tmp_path):
    folder = tmp_path / GLOB_NAME
    folder.mkdir()
    for k in range(3):
        _pairs(folder, f"web-{k:03d}", 2 + k)
    (corpus,) = corpora.parse_train_files([f"web:{folder}/web-*.{{en,de}}"])
    shards = text_files.parallel_shards(corpus.source, corpus.target)
    assert shards == [(str(folder / f"web-{k:03d}.en"), str(folder / f"web-{k:03d}.de")) for k in range(3)]
    data = DataConfig(train_files=(corpus,))
    data.check_inputs("train")
    assert text_files.check_parallel_files(corpus.source, corpus.target) == 2 + 3 + 4
    os.remove(folder / "web-001.de")
    with pytest.raises(DataError) as error:
        data.check_inputs("train")
    assert str(error.value) == (f"--train_files corpus web: {folder / 'web-001.de'}: no such file (the target shard "
                                f"of {folder / 'web-001.en'}, by {folder}/web-*.de)")
    with pytest.raises(DataError, match=r"ünï \[x\]\*/news-\*.en: matches no file"):
        text_files.check_parallel_files(f"{folder}/news-*.en", f"{folder}/news-*.de")


def test_glob_pattern_escapes_what_exists_and_keeps_the_rest(tmp_path):
    folder = tmp_path / GLOB_NAME
    folder.mkdir()
    write_lines(folder / "a[1].en", ["a"])
    escaped = glob.escape(str(folder))
    assert text_files.glob_pattern(str(folder / "a[1].en")) == glob.escape(str(folder / "a[1].en"))  # a file
    assert text_files.glob_pattern(f"{folder}/web-*.en") == f"{escaped}/web-*.en"
    assert text_files.glob_pattern(f"{folder}/shards-*/web.en") == f"{escaped}/shards-*/web.en"
    assert text_files.glob_pattern(f"{tmp_path}/web-*.en") == f"{tmp_path}/web-*.en"  # no folder to escape
    assert text_files.glob_pattern(f"{tmp_path}/nowhere [y]/a.en") == f"{tmp_path}/nowhere [y]/a.en"
    assert not text_files.is_pattern(str(folder / "a[1].en")) and text_files.is_pattern(f"{folder}/web-*.en")
