"""A task: what a kind of run owns besides the model (fairseq's `FairseqTask`), and translation's.

A run's task is named by its data set (`keras_transformer.pipelines.sources.DataSpec.task`, the
name `--dataset` chooses) and registered under that name (`keras_transformer.tasks.registry`).
A `Task` owns:

  name            what data sets, model_config.json and an export's export.json call it.
  decoding        its decoding defaults, a `DecodingConfig` (translation: section 6.1's beam 4,
                  alpha 0.6, output up to input length + 50): its command's flags' defaults and
                  what an export of its runs decodes with.
  dev_scores      its own scores of the decoded dev sentences, beside the loss, BLEU and chrF that
                  every run's dev evaluation reports (`keras_transformer.training.evaluation.Evaluator`).
  metrics         the dev metrics its evaluation computes (`keras_transformer.dev_metrics`: those of
                  every task and those that name it), which may rank its checkpoints.
  grammar         the output grammar a constrained search decodes by (`DecodingConfig.tree_constraint`).
  check_training  the checks of a training run's settings that depend on the task, before
                  TensorFlow starts.

The translation task is `Task`'s defaults under the name "translation"; docs/architecture.md
("Adding a task") shows another. This module imports no TensorFlow (the training command checks
its flags with it first).
"""

from __future__ import annotations

from typing import Callable, ClassVar, Optional, Sequence

from keras_transformer import dev_metrics
from keras_transformer.config import DecodingConfig


class Task:
    """One kind of run; subclasses are registered with `keras_transformer.tasks.registry.register_task`.

    Attributes:
        name: str, the task's name: the value of `DataSpec.task` of its data sets.
        decoding: `DecodingConfig` (default section 6.1's: beam 4, alpha 0.6, input length + 50),
            its decoding defaults.
        trained_on: str, what its models are trained on, in errors ("a treebank (--dataset=ptb)").
    """

    name: ClassVar[str] = ""
    decoding: ClassVar[DecodingConfig] = DecodingConfig()
    trained_on: ClassVar[str] = ""

    def metrics(self) -> tuple[dev_metrics.DevMetric, ...]:
        """The registered dev metrics this task's dev evaluation computes: every task's (BLEU, the
        loss) and its own (`DevMetric.task`), in the order registered."""
        return tuple(metric for metric in map(dev_metrics.lookup, dev_metrics.names())
                     if metric.task in ("", self.name))

    def dev_scores(self, data, pairs: Sequence[tuple[str, str]]) -> Optional[Callable[[list[str]], dict]]:
        """The task's own scores of decoded dev sentences: a function from the hypotheses of
        `pairs` (the (source, reference) dev pairs of the `DataConfig` `data` being decoded, in
        order) to more results of the dev evaluation, keyed by its metrics' names; None (the
        default) for none besides the loss, BLEU and chrF."""
        return None

    def grammar(self, data, target_tokenizer, vocab_size: int):
        """The output grammar of a constrained search (`DecodingConfig.tree_constraint`) over
        `target_tokenizer`'s pieces and `vocab_size` output ids, for runs of the `DataConfig`
        `data`. The default is section 6.3's linearized trees over the input's words
        (`keras_transformer.pipelines.linearized_trees.tree_grammar`), the grammar an export builds
        for any run's tree constraint; a task whose outputs follow another one overrides it."""
        from keras_transformer.pipelines import linearized_trees  # pylint: disable=g-import-not-at-top

        return linearized_trees.tree_grammar(target_tokenizer.pieces(), vocab_size, source_tags=data.tagged,
                                             placeholders=data.tree_targets == "placeholders")

    def check_training(self, training, data, bleu_sentences: Optional[int]) -> None:
        """A one-line `ValueError` when a training run of this task ranks checkpoints (its
        `TrainingConfig` `training` keeps the best ones or stops early) by a dev metric its dev
        evaluation will not compute: one that only another task computes (EVALB F1 of a
        translation run), or one of decoded sentences when none is decoded (`bleu_sentences` 0;
        None: all the dev sentences). `data` is the run's `DataConfig`."""
        metric = dev_metrics.lookup(training.best_checkpoint_metric)
        if not (training.keep_best_checkpoints or training.early_stopping_patience) or not metric.decoded:
            return
        if metric not in self.metrics():
            computed = " or ".join(m.name for m in self.metrics())
            raise ValueError(f"--best_checkpoint_metric={metric.name} ranks by the dev {metric.full_name} of a "
                             f"{metric.task} run, but --dataset={data.dataset} is not a {metric.task} data set (no "
                             f"{metric.display_name} is computed): pass --best_checkpoint_metric={computed}")
        if bleu_sentences == 0:
            teacher = " or ".join(m for m in dev_metrics.names() if not dev_metrics.lookup(m).decoded)
            raise ValueError(f"--keep_best_checkpoints and --early_stopping_patience rank by dev {metric.full_name}, "
                             "which --eval_max_sentences=-1 turns off: decode some dev sentences, or pass "
                             f"--best_checkpoint_metric={teacher}")

    def model_problem(self, trained_for: str) -> str:
        """Why a model trained for the task named `trained_for` (what its run or export recorded)
        does not serve this task ("a translation model; parsing needs a model trained on a
        treebank (--dataset=ptb)"); "" when it does."""
        if trained_for == self.name:
            return ""
        return f"a {trained_for} model; {self.name} needs a model trained on {self.trained_on}"


class TranslationTask(Task):
    """Translation (sections 5 and 6.1): `Task`'s defaults. Its runs are scored by BLEU (and chrF,
    chrF++) of the decoded dev sentences, decoded with beam 4, alpha 0.6, up to input length + 50."""

    name = "translation"
    trained_on = "a translation data set"
