"""One registry for every source of (source text, target text) pairs.

The training entry point names a data set with one string (`--dataset`) and a
split; `load_pairs` returns a `tf.data.Dataset` of `(source, target)` `tf.string`
scalars whatever the source. Each kind of source is a `DataSource` subclass
registered under its kind with `@register_source`; it names its data sets (a
`DataSpec` each; `DATASETS` holds every registered one) and owns what a run asks
of them: its `DataConfig` checks, its keyword arguments, its file and folder
checks and its reading. The kinds registered here:

  embedded                     the rule-based English->German corpus that code
                               generates (`keras_transformer.pipelines.grammar_corpus`); offline
                               default for the demo and the tests.
  multi30k_en_de, multi30k_de_en, multi30k_en_fr, multi30k_fr_en
                               Multi30k through the tfds builder in `multi30k.py`
                               (`manual_dir` = a folder of the original .gz files,
                               else downloaded).
  wmt14_en_de, wmt14_de_en, wmt14_en_fr, wmt14_fr_en
                               the paper's data (section 5.1) through tfds'
                               `wmt14_translate` (needs the network once).
  ptb                          the Penn Treebank's WSJ trees as (sentence, linearized
                               tree) pairs for parsing (section 6.3, `treebank.py`):
                               `data_dir` = the folder of NLTK's sample treebank.zip or
                               of the full treebank's .mrg files.
  files                        two parallel text files, `source_file` and
                               `target_file`; "{split}" in a path is replaced by
                               the split name, e.g. "data/{split}.en.gz".

Splits are "train", "validation" and "test". `check_inputs` runs the file and
folder checks without importing TensorFlow, so a command line can fail fast with
a one-line `DataError`; this module imports no TensorFlow either (each kind
imports its loader when it reads). A new kind is a subclass under
`@register_source`; docs/architecture.md ("Adding a data source") shows one.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any, ClassVar, Optional, Type

from keras_transformer.pipelines.errors import DataError
from keras_transformer.registry import Registry

SPLITS = ("train", "validation", "test")


@dataclasses.dataclass(frozen=True)
class DataSpec:
    """Where the pairs of one registered data set come from.

    Attributes:
        kind: the `DataSource` that reads it: "embedded", "multi30k", "wmt14", "treebank",
            "files", or a kind registered later.
        source_lang: language code of the source side ("" if unknown).
        target_lang: language code of the target side.
        pair: the tfds config, e.g. "en-de" (multi30k) or "de-en" (wmt14).
        task: the name of the task of a run trained on it, whose behaviour is the task's
            (`keras_transformer.tasks.registry`): "translation", or "parsing" (section 6.3:
            targets are linearized trees, decoded with beam 21 and alpha 0.3 and scored with EVALB
            F1 as well), or a task registered later.
    """
    kind: str
    source_lang: str = ""
    target_lang: str = ""
    pair: str = ""
    task: str = "translation"


class DataSource:
    """One kind of source of (source, target) text pairs; subclasses are registered with
    `register_source`. The methods take the `DataSpec` of one of its data sets; `options` are
    `load_pairs`' keyword arguments (what `source_kwargs` makes of a `DataConfig`), of which each
    kind reads those it needs.

    Attributes:
        kind: str, the kind's name (`DataSpec.kind`).
        datasets: dict of the data sets it serves, name -> `DataSpec` of this kind; the names
            `--dataset` takes.
        by_languages: bool (default False), whether `--dataset` names its data sets by the kind
            and `--source_lang` / `--target_lang` ("multi30k" with en, de -> "multi30k_en_de").
        named_splits: bool (default True), whether its splits are `SPLITS` (False: any name,
            a file per split, whose file is checked instead).
        trees: bool (default False), whether its pairs are sentences and their gold trees, so
            part-of-speech tags in the source and placeholder targets apply.
        many_pairs: str (default ""), why `--cache=auto` never keeps its pairs in memory ("":
            it may).
    """

    kind: ClassVar[str] = ""
    datasets: ClassVar[dict[str, DataSpec]] = {}
    by_languages: ClassVar[bool] = False
    named_splits: ClassVar[bool] = True
    trees: ClassVar[bool] = False
    many_pairs: ClassVar[str] = ""

    def check_config(self, data) -> None:
        """A one-line `DataError` (or `ValueError`) when the `DataConfig` `data` of one of its
        data sets lacks what it needs (e.g. `data_dir`); reads no file."""

    def source_kwargs(self, data) -> dict[str, Any]:
        """The keyword arguments of `load_pairs` for the `DataConfig` `data` (default: its `data_dir`)."""
        return dict(data_dir=data.data_dir)

    def check(self, spec: DataSpec, split: str, **options) -> None:
        """A one-line `DataError` naming the missing or unusable file or folder of `split`; no
        TensorFlow (default: nothing to check)."""

    def load(self, spec: DataSpec, split: str, **options):
        """`tf.data.Dataset` of the `(source, target)` `tf.string` pairs of `split`, in a fixed order."""
        raise NotImplementedError(f"data source {self.kind!r} reads no pairs")

    def load_list(self, spec: DataSpec, split: str, **options) -> list[tuple[str, str]]:
        """The (source, target) str pairs of `split` (default: `check`, then `load` materialised)."""
        from keras_transformer.pipelines import tokenizers  # pylint: disable=g-import-not-at-top
        self.check(spec, split, **options)
        return list(tokenizers.iter_pairs(self.load(spec, split, **options)))

    def text_files(self, data, split: str) -> Optional[tuple[str, str]]:
        """The source and target text files of `split` of the `DataConfig` `data`, which the
        words of a pair can be counted in before a tokenizer exists (`DataConfig.check_can_batch`,
        `cache_mode`); None where the pairs are not plain text files."""
        return None


_KINDS: Registry[DataSource] = Registry("data source", "the data source kind")
DATASETS: dict[str, DataSpec] = {}  # every registered kind's data sets, in the order registered


def register_source(cls: Type[DataSource]) -> Type[DataSource]:  # typing.Type: `type` is ambiguous in the docs
    """Class decorator: registers an instance of the `DataSource` subclass `cls` under
    `cls.kind`, and its data sets in `DATASETS`.

    Raises:
        ValueError: `cls` is not a `DataSource`, has no kind, its kind or a data set's name is
            taken, or the `DataSpec` of one of its data sets names another kind.
    """
    if not (isinstance(cls, type) and issubclass(cls, DataSource)):
        raise ValueError(f"{cls!r} is not a DataSource subclass")
    for name, data in cls.datasets.items():
        if name in DATASETS:
            raise ValueError(f"{cls.__name__}: a data set named {name!r} is already registered")
        if data.kind != cls.kind:
            raise ValueError(f"{cls.__name__}: data set {name!r} is of kind {data.kind!r}, not {cls.kind!r}")
    _KINDS.add(cls.kind, cls())
    DATASETS.update(cls.datasets)
    return cls


def unregister_source(kind: str) -> None:
    """Removes the kind `kind` and its data sets from the registry (a test's or a plug-in's own kind)."""
    for name in lookup(kind).datasets:
        del DATASETS[name]
    _KINDS.remove(kind)


def kinds() -> tuple[str, ...]:
    """The registered kinds, in the order they were registered."""
    return _KINDS.names()


def lookup(kind: str) -> DataSource:
    """The registered kind `kind`.

    Raises:
        ValueError: no kind has that name ("the data source kind must be one of embedded, ...").
    """
    return _KINDS.lookup(kind)


def short_names() -> tuple[str, ...]:
    """What `--dataset` takes besides the full names: a kind named by languages ("multi30k"),
    the data sets of the others ("embedded", "ptb", "files"), in the order registered."""
    return tuple(name for source in _KINDS.values()
                 for name in ((source.kind,) if source.by_languages else source.datasets))


def task_of(dataset: str) -> str:
    """The name of the task of a run trained on `dataset` (the data set its model_config.json
    records): "parsing" for a treebank, else "translation" (also for a name no longer
    registered); `keras_transformer.tasks.registry.of_dataset` gives the task itself."""
    return DATASETS[dataset].task if dataset in DATASETS else "translation"


def spec(dataset: str) -> DataSpec:
    """The `DataSpec` registered under `dataset`; `DataError` if there is none."""
    if dataset not in DATASETS:
        raise DataError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
    return DATASETS[dataset]


def source_of(dataset: str) -> DataSource:
    """The `DataSource` that reads `dataset`; `DataError` if no data set has that name."""
    return lookup(spec(dataset).kind)


def split_path(path: str, split: str) -> str:
    """`path` with "{split}" replaced by the split name."""
    return os.fspath(path).replace("{split}", split)


def check_inputs(dataset: str, split: str = "train", **options) -> None:
    """Checks named files and folders exist and are usable; no TensorFlow import.

    Args:
        dataset: a key of `DATASETS`.
        split: the split whose files are checked.
        **options: `load_pairs`' keyword arguments (`manual_dir`, `source_file`, `target_file`,
            `data_dir`, ...); the data set's kind reads those it needs.

    Raises:
        DataError: one line naming the missing folder, the missing or empty file,
            or the parallel file whose line count differs.
    """
    data = spec(dataset)
    lookup(data.kind).check(data, split, **options)


@functools.lru_cache(maxsize=4)
def embedded_splits(seed: int = 0) -> dict:
    """The embedded corpus' train/validation/test pairs (cached per seed)."""
    from keras_transformer.pipelines import grammar_corpus  # pylint: disable=g-import-not-at-top
    return grammar_corpus.splits(seed=seed)


def pairs_dataset(pairs):
    """A `tf.data.Dataset` of (source, target) strings from a list of str pairs."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    if not pairs:
        raise DataError("no sentence pairs to make a dataset from")
    sources, targets = zip(*pairs)
    # Tensors first: given Python lists, from_tensor_slices looks for a type spec in each string, one
    # at a time; tf.constant converts a list in one call (a run makes the embedded splits datasets often).
    return tf.data.Dataset.from_tensor_slices((tf.constant(sources, tf.string), tf.constant(targets, tf.string)))


def load_pairs(dataset: str, split: str = "train", *, data_dir: Optional[str] = None,
               manual_dir: Optional[str] = None, source_file: Optional[str] = None,
               target_file: Optional[str] = None, seed: int = 0, download: bool = True,
               source_tags: str = "none", tagger_file: Optional[str] = None, tree_targets: str = "words"):
    """(source, target) `tf.string` scalar pairs of one split of a registered data set.

    Args:
        dataset: a key of `DATASETS`, e.g. "embedded", "multi30k_en_de", "wmt14_en_de".
        split: "train", "validation" or "test" (tfds split expressions such as
            "train[:10%]" also work for the tfds sources).
        data_dir: tfds data folder (multi30k, wmt14); the treebank's folder (ptb).
        manual_dir: folder of the original Multi30k .gz files; downloaded if None.
        source_file, target_file: the parallel files for dataset "files".
        seed: the embedded corpus' generator seed.
        download: let tfds build a missing data set (wmt14 needs the network).
        source_tags, tagger_file, tree_targets: a treebank's sources with part-of-speech tags,
            its targets with words or placeholders (`keras_transformer.pipelines.treebank.pair_list`).

    Returns:
        `tf.data.Dataset` of `(source, target)` scalar `tf.string` pairs, in a
        fixed order (shuffling is the batching stage's job).
    """
    options = dict(data_dir=data_dir, manual_dir=manual_dir, source_file=source_file, target_file=target_file,
                   seed=seed, download=download, source_tags=source_tags, tagger_file=tagger_file,
                   tree_targets=tree_targets)
    check_inputs(dataset, split, **options)
    data = spec(dataset)
    return lookup(data.kind).load(data, split, **options)


def load_pair_list(dataset: str, split: str = "train", **kwargs) -> list[tuple[str, str]]:
    """`load_pairs` materialised as a list of (source, target) str pairs (small sets)."""
    data = spec(dataset)
    return lookup(data.kind).load_list(data, split, **kwargs)


def _embedded_split(split: str) -> str:
    if split not in SPLITS:
        raise DataError(f"embedded corpus has splits {SPLITS}, not {split!r}")
    return split


def _check_both(source_file: Optional[str], target_file: Optional[str]) -> None:
    if not source_file or not target_file:
        raise DataError("dataset 'files' needs both source_file and target_file")


def _both_directions(kind: str, pairs: dict[str, str]) -> dict[str, DataSpec]:
    """English to and from each language of `pairs` (language -> the tfds config that holds it):
    {"multi30k_en_de": DataSpec("multi30k", "en", "de", "en-de"), "multi30k_de_en": ...}."""
    return {f"{kind}_{a}_{b}": DataSpec(kind, a, b, pair)
            for language, pair in pairs.items() for a, b in (("en", language), (language, "en"))}


@register_source
class Embedded(DataSource):
    """The embedded corpus, generated by rules (`keras_transformer.pipelines.grammar_corpus`)."""

    kind = "embedded"
    datasets = {"embedded": DataSpec("embedded", "en", "de")}

    def source_kwargs(self, data) -> dict[str, Any]:
        return dict(seed=data.seed)

    def load(self, spec, split, **options):
        return pairs_dataset(self.load_list(spec, split, **options))

    def load_list(self, spec, split, *, seed: int = 0, **_):
        return list(embedded_splits(seed)[_embedded_split(split)])


@register_source
class Files(DataSource):
    """Two parallel text files (plain or gzipped), "{split}" in their paths replaced by the split."""

    kind = "files"
    datasets = {"files": DataSpec("files")}
    named_splits = False

    def check_config(self, data) -> None:
        _check_both(data.source_file, data.target_file)

    def source_kwargs(self, data) -> dict[str, Any]:
        return dict(source_file=data.in_data_dir(data.source_file), target_file=data.in_data_dir(data.target_file))

    def check(self, spec, split, *, source_file=None, target_file=None, **_):
        from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top
        _check_both(source_file, target_file)
        text_files.check_parallel_files(split_path(source_file, split), split_path(target_file, split))

    def load(self, spec, split, *, source_file=None, target_file=None, **_):
        from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top
        return text_files.parallel_text_files(split_path(source_file, split), split_path(target_file, split),
                                              validate=False)

    def text_files(self, data, split: str) -> tuple[str, str]:
        paths = self.source_kwargs(data)
        return split_path(paths["source_file"], split), split_path(paths["target_file"], split)


@register_source
class Treebank(DataSource):
    """The Penn Treebank as (sentence, linearized tree) pairs (section 6.3, `treebank.py`)."""

    kind = "treebank"
    datasets = {"ptb": DataSpec("treebank", "en", "trees", task="parsing")}
    trees = True

    def check_config(self, data) -> None:
        from keras_transformer.pipelines import treebank  # pylint: disable=g-import-not-at-top
        if not data.data_dir:
            raise DataError(f"dataset {data.dataset} needs data_dir, {treebank.DATA_DIR_IS}")
        if data.lowercase:
            raise ValueError(f"lowercase with dataset {data.dataset}: it would fold the trees' labels and "
                             "the placeholder XX, which must stay as they are")

    def source_kwargs(self, data) -> dict[str, Any]:
        return dict(data_dir=data.data_dir, source_tags=data.source_tags, tagger_file=data.tagger_file,
                    tree_targets=data.tree_targets)

    def check(self, spec, split, *, data_dir=None, **_):
        from keras_transformer.pipelines import treebank  # pylint: disable=g-import-not-at-top
        treebank.check_inputs(data_dir)

    def load(self, spec, split, **options):
        return pairs_dataset(self.load_list(spec, split, **options))

    def load_list(self, spec, split, *, data_dir=None, source_tags="none", tagger_file=None,
                  tree_targets="words", **_):
        from keras_transformer.pipelines import treebank  # pylint: disable=g-import-not-at-top
        return treebank.pair_list(data_dir, split, source_tags, tagger_file, tree_targets)


@register_source
class Multi30k(DataSource):
    """Multi30k through the tfds builder of `multi30k.py`, English to and from German and French."""

    kind = "multi30k"
    datasets = _both_directions("multi30k", {"de": "en-de", "fr": "en-fr"})
    by_languages = True

    def check_config(self, data) -> None:
        if not data.data_dir:
            raise DataError(f"dataset {data.dataset} needs data_dir, the folder of the original Multi30k .gz files")

    def source_kwargs(self, data) -> dict[str, Any]:
        return dict(manual_dir=data.data_dir, data_dir=data.tfds_dir)

    def check(self, spec, split, *, manual_dir=None, **_):
        if not manual_dir:
            return
        from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top
        a, b = spec.pair.split("-")
        stems = ("train", "val", "test_2016_flickr")  # as in multi30k.SPLIT_FILES
        text_files.check_folder(manual_dir, [f"{s}.{lang}.gz" for s in stems for lang in (a, b)],
                                what="Multi30k raw .gz")

    def load(self, spec, split, *, data_dir=None, manual_dir=None, download=True, **_):
        from keras_transformer.pipelines import multi30k  # pylint: disable=g-import-not-at-top
        return multi30k.load(spec.pair, spec.source_lang, split, data_dir=data_dir, manual_dir=manual_dir,
                             download=download)


@register_source
class Wmt14(DataSource):
    """WMT 2014 through tfds' `wmt14_translate` (section 5.1), English to and from German and French."""

    kind = "wmt14"
    datasets = _both_directions("wmt14", {"de": "de-en", "fr": "fr-en"})
    by_languages = True
    many_pairs = "WMT 2014 has millions of pairs"

    def source_kwargs(self, data) -> dict[str, Any]:
        return dict(data_dir=data.data_dir or data.tfds_dir)

    def load(self, spec, split, *, data_dir=None, download=True, **_):
        from keras_transformer.pipelines import wmt14  # pylint: disable=g-import-not-at-top
        return wmt14.wmt14(spec.pair, spec.source_lang, split, data_dir=data_dir, download=download)
