"""`keras_transformer.tasks.task`: the `Task` base's behaviour, as the translation task has it.

Section 6.1's decoding defaults, the metrics its dev evaluation computes (so may rank its
checkpoints), its checks of a training run's settings (the training command's messages), the
tree grammar a constrained search decodes by, and which models serve it.
"""

import pytest

from keras_transformer.config import DecodingConfig, TrainingConfig
from keras_transformer.pipelines.data_config import DataConfig
from keras_transformer.tasks.task import Task, TranslationTask

EMBEDDED = DataConfig(dataset="embedded")


def ranking(metric, **values):
    """A `TrainingConfig` that keeps its best checkpoint by `metric` (or, with values, stops early)."""
    return TrainingConfig(best_checkpoint_metric=metric, **(values or {"keep_best_checkpoints": 1}))


def test_translation_decodes_as_section_6_1():
    decoding = TranslationTask.decoding
    assert (decoding.beam_size, decoding.alpha, decoding.max_extra_length) == (4, 0.6, 50)
    assert not decoding.tree_constraint and decoding == DecodingConfig()
    assert TranslationTask.name == "translation" and issubclass(TranslationTask, Task)


def test_translation_computes_bleu_and_the_loss_not_the_f1_of_parsing():
    metrics = {metric.name: metric for metric in TranslationTask().metrics()}
    assert list(metrics) == ["bleu", "loss"]
    assert metrics["bleu"].higher_is_better and not metrics["loss"].higher_is_better
    assert TranslationTask().dev_scores(EMBEDDED, [("a", "b")]) is None  # BLEU and chrF: every run's evaluation


@pytest.mark.parametrize("training", [ranking("bleu"), ranking("loss"), ranking("bleu", early_stopping_patience=3),
                                      TrainingConfig(best_checkpoint_metric="f1")])  # F1 ranks nothing there
def test_translation_accepts_ranking_by_what_it_computes(training):
    TranslationTask().check_training(training, EMBEDDED, bleu_sentences=None)


def test_translation_refuses_ranking_by_parsing_f1_and_names_what_it_computes():
    for training in (ranking("f1"), ranking("f1", early_stopping_patience=2)):
        with pytest.raises(ValueError) as error:
            TranslationTask().check_training(training, EMBEDDED, bleu_sentences=None)
        assert str(error.value) == (
            "--best_checkpoint_metric=f1 ranks by the dev EVALB F1 of a parsing run, but --dataset=embedded is "
            "not a parsing data set (no F1 is computed): pass --best_checkpoint_metric=bleu or loss")


def test_a_decoded_metric_needs_decoded_dev_sentences_the_loss_does_not():
    with pytest.raises(ValueError, match=r"rank by dev BLEU, which --eval_max_sentences=-1 turns off: .* "
                                         r"--best_checkpoint_metric=loss$"):
        TranslationTask().check_training(ranking("bleu"), EMBEDDED, bleu_sentences=0)
    TranslationTask().check_training(ranking("loss"), EMBEDDED, bleu_sentences=0)
    TranslationTask().check_training(ranking("bleu"), EMBEDDED, bleu_sentences=8)


def test_a_model_serves_the_task_it_was_trained_for():
    assert TranslationTask().model_problem("translation") == ""
    assert TranslationTask().model_problem("parsing") == (
        "a parsing model; translation needs a model trained on a translation data set")


class FakeTokenizer:
    """Pieces as sentencepiece marks them: the brackets of S whole, one word."""

    def pieces(self):
        return ["<pad>", "<unk>", "<s>", "</s>", "\u2581(S", "\u2581)S", "\u2581dog", "s"]


def test_the_grammar_of_a_constrained_search_is_of_linearized_trees():
    grammar = TranslationTask().grammar(EMBEDDED, FakeTokenizer(), vocab_size=9)
    assert list(grammar.closing) == [-1, -1, -1, -1, 5, -1, -1, -1, -1]  # "(S" is closed by ")S"
    assert [i for i, start in enumerate(grammar.word_starts) if start] == [6]  # "s" continues a word
    assert grammar.placeholder == -1 and not grammar.source_tags
