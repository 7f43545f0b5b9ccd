"""A plugin module for the task registry's tests (KT_PLUGINS=tests.helpers.plugin_task): a task of
its own, "reverse" (write a sentence's words in reverse order), over a data source it registers
too, scored on dev by exact match, with decoding defaults of its own."""

from keras_transformer import dev_metrics
from keras_transformer.config import DecodingConfig
from keras_transformer.pipelines import sources
from keras_transformer.tasks import registry
from keras_transformer.tasks.task import Task

DECODING = DecodingConfig(beam_size=2, alpha=0.0, max_extra_length=5)


@sources.register_source
class ReversedWords(sources.DataSource):
    """The embedded corpus' English sentences, each paired with its words in reverse order."""

    kind = "reversed_words"
    datasets = {"reversed_words": sources.DataSpec("reversed_words", "en", "en", task="reverse")}

    def source_kwargs(self, data):
        return dict(seed=data.seed)

    def load(self, spec, split, **options):
        return sources.pairs_dataset(self.load_list(spec, split, **options))

    def load_list(self, spec, split, *, seed=0, **_):
        return [(s, " ".join(reversed(s.split()))) for s, _ in sources.embedded_splits(seed)[split]]


dev_metrics.register_metric(dev_metrics.DevMetric("exact", "exact match", higher_is_better=True, task="reverse",
                                                  help="reverse runs: % of dev outputs equal to their reference"))


@registry.register_task
class ReverseTask(Task):
    """Reverse a sentence's words; scored by the share of dev outputs equal to their reference."""

    name = "reverse"
    decoding = DECODING
    trained_on = "reversed sentences (--dataset=reversed_words)"

    def dev_scores(self, data, pairs):
        references = [target for _, target in pairs]
        return lambda outputs: {"exact": 100 * sum(map(str.__eq__, outputs, references)) / len(references)}
