"""`keras_transformer.tasks.parsing.task.ParsingTask`: section 6.3's decoding defaults, EVALB F1 as its
dev score and ranking metric, and the message that refuses a translation model."""

import pytest

from keras_transformer.config import PARSING_DECODING, TrainingConfig
from keras_transformer.pipelines.data_config import DataConfig
from keras_transformer.tasks.parsing.task import ParsingTask


def test_parsing_decodes_as_section_6_3():
    decoding = ParsingTask.decoding
    assert (decoding.beam_size, decoding.alpha, decoding.max_extra_length) == (21, 0.3, 300)
    assert decoding.tree_constraint and decoding == PARSING_DECODING
    assert ParsingTask.name == "parsing"


def test_parsing_computes_evalb_f1_and_may_rank_by_it():
    metrics = {metric.name: metric for metric in ParsingTask().metrics()}
    assert list(metrics) == ["bleu", "loss", "f1"]
    assert metrics["f1"].higher_is_better and metrics["f1"].full_name == "EVALB F1"
    training = TrainingConfig(keep_best_checkpoints=1, best_checkpoint_metric="f1")
    ParsingTask().check_training(training, DataConfig(dataset="ptb", data_dir="unread"), bleu_sentences=100)
    with pytest.raises(ValueError, match="rank by dev EVALB F1, which --eval_max_sentences=-1 turns off"):
        ParsingTask().check_training(training, DataConfig(dataset="ptb", data_dir="unread"), bleu_sentences=0)


def test_parsing_refuses_a_translation_model():
    assert ParsingTask().model_problem("parsing") == ""
    assert ParsingTask().model_problem("translation") == (
        "a translation model; parsing needs a model trained on a treebank (--dataset=ptb)")


def test_its_dev_score_is_the_evalb_f1_of_the_first_dev_trees(ptb):
    data = DataConfig(dataset="ptb", data_dir=str(ptb))
    pairs = data.load_pair_list("validation")[:3]
    score = ParsingTask().dev_scores(data, pairs)
    assert score([tree for _, tree in pairs]) == {"f1": pytest.approx(100.0), "repaired": 0.0}  # the gold trees
    flat = score([f"(S {source} )S" for source, _ in pairs])  # every word right under the root: no phrase right
    assert flat["f1"] < 50.0 and flat["repaired"] == 0.0
