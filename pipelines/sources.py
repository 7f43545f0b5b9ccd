"""One registry for every source of (source text, target text) pairs.

The training entry point names a data set with one string (`--dataset`) and a
split; `load_pairs` returns a `tf.data.Dataset` of `(source, target)` `tf.string`
scalars whatever the source:

  embedded                     the rule-based English->German corpus that code
                               generates (`pipelines.grammar_corpus`); offline
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
a one-line `DataError`.
"""

import dataclasses
import functools
import os
from typing import Optional

from pipelines.errors import DataError

SPLITS = ("train", "validation", "test")


@dataclasses.dataclass(frozen=True)
class DataSpec:
    """Where the pairs of one registered data set come from.

    Attributes:
        kind: "embedded", "multi30k", "wmt14", "treebank" or "files".
        source_lang: language code of the source side ("" if unknown).
        target_lang: language code of the target side.
        pair: the tfds config, e.g. "en-de" (multi30k) or "de-en" (wmt14).
        task: "translation", or "parsing" (section 6.3: targets are linearized trees, decoded
            with beam 21 and alpha 0.3 and scored with EVALB F1 as well).
    """
    kind: str
    source_lang: str = ""
    target_lang: str = ""
    pair: str = ""
    task: str = "translation"


DATASETS = {
    "embedded": DataSpec("embedded", "en", "de"),
    "files": DataSpec("files"),
    "ptb": DataSpec("treebank", "en", "trees", task="parsing"),
    "multi30k_en_de": DataSpec("multi30k", "en", "de", "en-de"),
    "multi30k_de_en": DataSpec("multi30k", "de", "en", "en-de"),
    "multi30k_en_fr": DataSpec("multi30k", "en", "fr", "en-fr"),
    "multi30k_fr_en": DataSpec("multi30k", "fr", "en", "en-fr"),
    "wmt14_en_de": DataSpec("wmt14", "en", "de", "de-en"),
    "wmt14_de_en": DataSpec("wmt14", "de", "en", "de-en"),
    "wmt14_en_fr": DataSpec("wmt14", "en", "fr", "fr-en"),
    "wmt14_fr_en": DataSpec("wmt14", "fr", "en", "fr-en"),
}


def task_of(dataset: str) -> str:
    """The task of a run trained on `dataset` (the name its model_config.json records):
    "parsing" for a treebank, else "translation" (also for a name no longer registered)."""
    return DATASETS[dataset].task if dataset in DATASETS else "translation"


def spec(dataset: str) -> DataSpec:
    """The `DataSpec` registered under `dataset`; `DataError` if there is none."""
    if dataset not in DATASETS:
        raise DataError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
    return DATASETS[dataset]


def split_path(path: str, split: str) -> str:
    """`path` with "{split}" replaced by the split name."""
    return os.fspath(path).replace("{split}", split)


def check_inputs(dataset: str, split: str = "train", *, manual_dir: Optional[str] = None,
                 source_file: Optional[str] = None, target_file: Optional[str] = None,
                 data_dir: Optional[str] = None) -> None:
    """Checks named files and folders exist and are usable; no TensorFlow import.

    Raises:
        DataError: one line naming the missing folder, the missing or empty file,
            or the parallel file whose line count differs.
    """
    from pipelines import text_files  # pylint: disable=g-import-not-at-top
    data = spec(dataset)
    if data.kind == "files":
        if not source_file or not target_file:
            raise DataError("dataset 'files' needs both source_file and target_file")
        text_files.check_parallel_files(split_path(source_file, split),
                                        split_path(target_file, split))
    elif data.kind == "multi30k" and manual_dir:
        a, b = data.pair.split("-")
        stems = ("train", "val", "test_2016_flickr")  # as in multi30k.SPLIT_FILES
        text_files.check_folder(manual_dir, [f"{s}.{lang}.gz" for s in stems for lang in (a, b)],
                                what="Multi30k raw .gz")
    elif data.kind == "treebank":
        from pipelines import treebank  # pylint: disable=g-import-not-at-top
        treebank.check_inputs(data_dir)


@functools.lru_cache(maxsize=4)
def embedded_splits(seed: int = 0) -> dict:
    """The embedded corpus' train/validation/test pairs (cached per seed)."""
    from pipelines import grammar_corpus  # pylint: disable=g-import-not-at-top
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
            its targets with words or placeholders (`pipelines.treebank.pair_list`).

    Returns:
        `tf.data.Dataset` of `(source, target)` scalar `tf.string` pairs, in a
        fixed order (shuffling is the batching stage's job).
    """
    data = spec(dataset)
    check_inputs(dataset, split, manual_dir=manual_dir, source_file=source_file,
                 target_file=target_file, data_dir=data_dir)
    if data.kind == "treebank":
        from pipelines import treebank  # pylint: disable=g-import-not-at-top
        return pairs_dataset(treebank.pair_list(data_dir, split, source_tags, tagger_file, tree_targets))
    if data.kind == "embedded":
        if split not in SPLITS:
            raise DataError(f"embedded corpus has splits {SPLITS}, not {split!r}")
        return pairs_dataset(embedded_splits(seed)[split])
    if data.kind == "files":
        from pipelines import text_files  # pylint: disable=g-import-not-at-top
        return text_files.parallel_text_files(split_path(source_file, split),
                                              split_path(target_file, split), validate=False)
    if data.kind == "multi30k":
        from pipelines import multi30k  # pylint: disable=g-import-not-at-top
        return multi30k.load(data.pair, data.source_lang, split, data_dir=data_dir,
                             manual_dir=manual_dir, download=download)
    from pipelines import wmt14  # pylint: disable=g-import-not-at-top
    return wmt14.wmt14(data.pair, data.source_lang, split, data_dir=data_dir, download=download)


def load_pair_list(dataset: str, split: str = "train", **kwargs) -> list[tuple[str, str]]:
    """`load_pairs` materialised as a list of (source, target) str pairs (small sets)."""
    data = spec(dataset)
    if data.kind == "embedded":
        if split not in SPLITS:
            raise DataError(f"embedded corpus has splits {SPLITS}, not {split!r}")
        return list(embedded_splits(kwargs.get("seed", 0))[split])
    if data.kind == "treebank":
        from pipelines import treebank  # pylint: disable=g-import-not-at-top
        return treebank.pair_list(kwargs.get("data_dir"), split, kwargs.get("source_tags", "none"),
                                  kwargs.get("tagger_file"), kwargs.get("tree_targets", "words"))
    from pipelines import tokenizers  # pylint: disable=g-import-not-at-top
    return list(tokenizers.iter_pairs(load_pairs(dataset, split, **kwargs)))
