"""The registry of tasks: a run's `Task` by name, by data set or by training directory.

    >>> names()                              # the registered tasks
    ('translation', 'parsing')
    >>> of_dataset("ptb").decoding.beam_size  # the data set names its task (section 6.3)
    21
    >>> lookup("summarization")
    ValueError: task must be one of translation, parsing, got 'summarization'

A data set names its task (`keras_transformer.pipelines.sources.DataSpec.task`, a plain name:
`pipelines/` sits below the tasks); what the task does is its `Task` here. The stock tasks are
translation (`keras_transformer.tasks.task.TranslationTask`) and parsing
(`keras_transformer.tasks.parsing.task.ParsingTask`). A new task is a `Task` subclass under
`@register_task`, with a data set that names it; docs/architecture.md ("Adding a task") shows one.
This module imports no TensorFlow.
"""

from __future__ import annotations

from typing import Type

from keras_transformer.pipelines import sources
from keras_transformer.registry import Registry
from keras_transformer.tasks.parsing.task import ParsingTask
from keras_transformer.tasks.task import Task, TranslationTask

_TASKS: Registry[Task] = Registry("task", "task")


def register_task(cls: Type[Task]) -> Type[Task]:  # typing.Type: `type` is ambiguous in the docs
    """Class decorator: registers an instance of the `Task` subclass `cls` under `cls.name`.

    Raises:
        ValueError: `cls` is not a `Task` subclass, has no name, or its name is taken.
    """
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise ValueError(f"{cls!r} is not a Task subclass")
    _TASKS.add(cls.name, cls())
    return cls


def unregister_task(name: str) -> None:
    """Removes the task `name` (a test's or a plug-in's own task)."""
    _TASKS.remove(name)


def names() -> tuple[str, ...]:
    """The registered tasks' names, in the order they were registered."""
    return _TASKS.names()


def lookup(name: str) -> Task:
    """The registered task `name`.

    Raises:
        ValueError: no task has that name ("task must be one of translation, parsing, got 'x'").
    """
    return _TASKS.lookup(name)


def of_dataset(dataset: str) -> Task:
    """The task of a run trained on `dataset` (`sources.task_of`: translation for a name no
    longer registered); a `ValueError` naming the known tasks when the data set names none of them."""
    return lookup(sources.task_of(dataset))


def of_run(model_dir: str) -> Task:
    """The task of the training directory `model_dir`: the one its model_config.json records, else
    (a run trained before runs recorded it) its data set's. Reads JSON only: no TensorFlow."""
    from keras_transformer.training_directory import TrainingDirectory  # pylint: disable=g-import-not-at-top

    settings = TrainingDirectory(model_dir).settings()
    recorded = settings.get("task")
    return lookup(recorded) if recorded else of_dataset(settings.get("data", {}).get("dataset", ""))


def dataset_label(dataset: str) -> str:
    """`dataset` as `--dataset`'s help lists it: with its task's name unless that is the data sets'
    default, translation ("ptb (parsing)", "embedded")."""
    task = sources.task_of(dataset)
    return dataset if task == sources.DataSpec.task else f"{dataset} ({task})"


register_task(TranslationTask)
register_task(ParsingTask)
