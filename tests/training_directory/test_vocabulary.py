"""`TrainingDirectory.check_tokenizer_flags` (`keras_transformer.training_directory.vocabulary`): a run's saved tokenizer is reused, so the data flags it
was trained on, --source_tags (tagged sources, `keras_transformer.pipelines.pos_tags`) and --tree_targets (placeholder
targets, "XX" one piece) among them, cannot change; and a placeholder run's tokenizer must keep "XX" whole."""

import dataclasses
import json

import pytest

from keras_transformer.pipelines.data_config import DataConfig
from keras_transformer.training_directory import TrainingDirectory
from tests.helpers.commands import assert_one_error_line, run_command


def test_a_resume_with_other_source_tags_is_refused(tmp_path):
    data = DataConfig(dataset="ptb", data_dir=str(tmp_path), source_tags="predicted")
    (tmp_path / "model_config.json").write_text(json.dumps({"model": {}, "data": dataclasses.asdict(data)}))
    TrainingDirectory(str(tmp_path)).check_tokenizer_flags(data, "the run")  # the same flags pass
    with pytest.raises(ValueError, match="--source_tags=none: the run was trained with --source_tags=predicted"):
        TrainingDirectory(str(tmp_path)).check_tokenizer_flags(dataclasses.replace(data, source_tags="none"), "the run")
    older = {k: v for k, v in dataclasses.asdict(data).items() if k != "source_tags"}  # a run from before the flag
    (tmp_path / "model_config.json").write_text(json.dumps({"model": {}, "data": older}))
    TrainingDirectory(str(tmp_path)).check_tokenizer_flags(dataclasses.replace(data, source_tags="none"), "the run")


def test_names_limits_the_check_to_those_flags(tmp_path):
    data = DataConfig(dataset="ptb", data_dir=str(tmp_path), source_tags="predicted", vocab_size=1000)
    (tmp_path / "model_config.json").write_text(json.dumps({"model": {}, "data": dataclasses.asdict(data)}))
    other_vocabulary = dataclasses.replace(data, vocab_size=2000)
    TrainingDirectory(str(tmp_path)).check_tokenizer_flags(other_vocabulary, "the run", names=("source_tags",))
    with pytest.raises(ValueError, match="--vocab_size=2000"):
        TrainingDirectory(str(tmp_path)).check_tokenizer_flags(other_vocabulary, "the run")


def test_evaluate_only_of_a_tagged_run_without_its_tags_is_refused_before_the_model_loads(tmp_path, ptb):
    """--evaluate_only reuses the run's tokenizer whatever the tokenizer flags say, but tags are in
    the dev sources it builds from the flags: a tagged run given untagged sources is one line."""
    run = tmp_path / "run"
    run.mkdir()
    data = DataConfig(dataset="ptb", data_dir=str(ptb), source_tags="predicted")
    (run / "model_config.json").write_text(json.dumps({"model": {}, "data": dataclasses.asdict(data)}))
    result = run_command("-m", "keras_transformer.train", f"--model_dir={run}", "--dataset=ptb",
                         f"--data_dir={ptb}", "--evaluate_only")
    assert_one_error_line(result, "--source_tags=none:", "--source_tags=predicted")
    assert sorted(p.name for p in run.iterdir()) == ["model_config.json"]


def test_a_resume_or_evaluation_with_other_tree_targets_is_refused(tmp_path, ptb):
    """Placeholder targets change the tokenizer ("XX" one piece) and the targets: a resume (every
    tokenizer flag) and --evaluate_only (the dev targets and the tree constraint's) must repeat them."""
    data = DataConfig(dataset="ptb", data_dir=str(ptb), tree_targets="placeholders")
    (tmp_path / "model_config.json").write_text(json.dumps({"model": {}, "data": dataclasses.asdict(data)}))
    TrainingDirectory(str(tmp_path)).check_tokenizer_flags(data, "the run")
    with pytest.raises(ValueError, match="--tree_targets=words: the run was trained with --tree_targets=placeholders"):
        TrainingDirectory(str(tmp_path)).check_tokenizer_flags(dataclasses.replace(data, tree_targets="words"), "the run")
    result = run_command("-m", "keras_transformer.train", f"--model_dir={tmp_path}", "--dataset=ptb",
                         f"--data_dir={ptb}", "--evaluate_only")
    assert_one_error_line(result, "--tree_targets=words:", "--tree_targets=placeholders")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model_config.json"]


def test_a_tokenizer_that_splits_the_placeholder_is_refused():
    from keras_transformer.pipelines import tokenizers
    from keras_transformer.training_directory.vocabulary import check_placeholder

    trees = ["(S (NP XX XX )NP (VP XX )VP XX )S", "(S (NP The dog )NP (VP barks )VP . )S"] * 20
    whole = tokenizers.TokenizerConfig(vocab_size=400, split_by_script=False, user_defined_symbols=("\u2581XX",))
    check_placeholder(tokenizers.train(trees, whole))
    split = tokenizers.train([t.replace("XX", "word") for t in trees], dataclasses.replace(whole, user_defined_symbols=()))
    with pytest.raises(ValueError, match="writes the placeholder 'XX' as [2-9] ids .*not one piece of its own"):
        check_placeholder(split)
