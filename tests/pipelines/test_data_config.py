"""`DataConfig`: one description of a run's data, shared by training and `python -m keras_transformer.pipelines`."""

import dataclasses

import pytest

from keras_transformer.pipelines.data_config import DataConfig, check_batch_tokens, dataset_name
from keras_transformer.pipelines.errors import DataError


def test_short_names_resolve_and_the_kind_comes_from_the_registry():
    assert dataset_name("multi30k", "en", "de") == "multi30k_en_de"
    assert dataset_name("wmt14", "fr", "en") == "wmt14_fr_en"
    assert dataset_name("embedded") == "embedded" and dataset_name("files") == "files"
    with pytest.raises(DataError, match="unknown dataset 'multi30k_en_xx'"):
        dataset_name("multi30k", "en", "xx")
    assert DataConfig(dataset="wmt14_de_en").kind == "wmt14"


def test_data_dir_means_where_the_data_is_for_every_kind(tmp_path):
    assert DataConfig(dataset="multi30k_en_de", data_dir="raw", tfds_dir="tfds").source_kwargs() == {
        "manual_dir": "raw", "data_dir": "tfds"}
    assert DataConfig(dataset="wmt14_en_de", data_dir="prepared").source_kwargs() == {"data_dir": "prepared"}
    files = DataConfig(dataset="files", data_dir="corpus", source_file="{split}.en", target_file="{split}.de")
    assert files.source_kwargs() == {"source_file": "corpus/{split}.en", "target_file": "corpus/{split}.de"}
    assert DataConfig(seed=7).source_kwargs() == {"seed": 7}


@pytest.mark.parametrize("values, message", [
    (dict(dataset="multi30k_en_de"), "needs data_dir"),
    (dict(dataset="files", source_file="a.en"), "needs both source_file and target_file"),
    (dict(dataset="nope"), "unknown dataset 'nope'"),
    (dict(batch_tokens=100, max_length=256), "batch_tokens=100 is smaller than one sentence but pairs of up to "
                                             "max_length=256"),
    (dict(source_tags="predicted"), "source_tags=predicted: part-of-speech tags come from a treebank"),
    (dict(dataset="ptb", data_dir=".", source_tags="noun"), "source_tags must be one of none, predicted, gold"),
    (dict(dataset="multi30k_en_de", data_dir=".", tree_targets="placeholders"),
     "tree_targets=placeholders: the targets are trees only with a treebank"),
    (dict(dataset="ptb", data_dir=".", tree_targets="xx"), "tree_targets must be one of words, placeholders"),
    (dict(tokenizer="unigram", bpe_dropout=0.1), "bpe_dropout=0.1 needs the bpe tokenizer, not unigram"),
    (dict(bpe_dropout=1.0), r"bpe_dropout must be in \[0, 1\), got 1.0"),
])
def test_bad_configs_are_one_line_errors(values, message):
    with pytest.raises(ValueError, match=message):
        DataConfig(**values)


def test_check_inputs_names_the_missing_folder_and_file(tmp_path):
    with pytest.raises(DataError, match=f"data_dir {tmp_path / 'missing'}: no such folder"):
        DataConfig(dataset="multi30k_en_de", data_dir=str(tmp_path / "missing")).check_inputs()
    (tmp_path / "train.de").write_text("Eins.\n", encoding="utf-8")
    config = DataConfig(dataset="files", source_file=str(tmp_path / "{split}.en"),
                        target_file=str(tmp_path / "{split}.de"))
    with pytest.raises(DataError, match="train.en"):
        config.check_inputs("train")


def test_the_token_budget_per_replica_and_micro_batch_must_hold_one_sentence():
    check_batch_tokens(1024, 64, replicas=2, accumulation_steps=8)  # 64 tokens each: fits
    with pytest.raises(ValueError, match=r"split over 2 replica\(s\) and 1 micro-batch\(es\), leaves 20 tokens"):
        check_batch_tokens(40, 32, replicas=2)


def test_the_config_is_frozen_and_json_able():
    config = DataConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.dataset = "files"
    assert dataclasses.asdict(config)["dataset"] == "embedded"


def test_placeholder_targets_reach_the_treebank_and_the_tokenizer():
    words = DataConfig(dataset="ptb", data_dir="tb", split_by_script=False)
    placeholders = dataclasses.replace(words, tree_targets="placeholders")
    assert placeholders.source_kwargs()["tree_targets"] == "placeholders"
    assert words.tokenizer_config().user_defined_symbols == ()
    assert placeholders.tokenizer_config().user_defined_symbols == ("\u2581XX",)
