"""A tensorflow-datasets builder for Multi30k (WMT16 multimodal task 1): en, de, fr.

Multi30k (Elliott et al., 2016; 2017) describes Flickr30k images in English and
translates each description into German and French: train 29,000 pairs,
validation 1,014, test 1,000 (`test_2016_flickr`). It is small enough to train a
Transformer on a CPU, unlike the paper's WMT 2014 (section 5.1), and is read with
the same pipeline.

The builder reads the original raw `.gz` files of github.com/multi30k/dataset
(`data/task1/raw/`) from a local folder when one is given (tfds' manual dir),
and otherwise downloads them from that repository. Text is raw: original casing
and punctuation, each line stripped. Examples keep the files' line order.

    builder = Multi30k(config="en-de", data_dir=tmp)
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
            manual_dir="../shared/data/multi30k"))
    ds = builder.as_dataset(split="validation")  # {"en": ..., "de": ...}

Or through `keras_transformer.pipelines.sources.load_pairs("multi30k_en_de", "validation", ...)`.
"""

import os

import tensorflow_datasets as tfds
from etils import epath

from keras_transformer.pipelines import text_files

RAW_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
# tfds split name -> file stem in the Multi30k release.
SPLIT_FILES = {"train": "train", "validation": "val", "test": "test_2016_flickr"}
SPLIT_SIZES = {"train": 29000, "validation": 1014, "test": 1000}
LANGUAGE_PAIRS = (("en", "de"), ("en", "fr"))

_CITATION = """\
@inproceedings{elliott-etal-2016-multi30k,
    title = {Multi30K: Multilingual English-German Image Descriptions},
    author = {Elliott, Desmond and Frank, Stella and Sima'an, Khalil and Specia, Lucia},
    booktitle = {Proceedings of the 5th Workshop on Vision and Language},
    year = {2016}, pages = {70--74}}
"""


def file_names(language_pair: tuple[str, str]) -> dict[str, tuple[str, str]]:
    """split -> (source file, target file) names in the release, e.g. val.en.gz."""
    a, b = language_pair
    return {split: (f"{stem}.{a}.gz", f"{stem}.{b}.gz") for split, stem in SPLIT_FILES.items()}


def check_manual_dir(manual_dir: str, language_pair: tuple[str, str] = ("en", "de")) -> None:
    """Raises `DataError` naming the folder or file if `manual_dir` is unusable.

    Checks existence and non-emptiness only (cheap); line counts are checked
    while the examples are generated.
    """
    names = [n for pair in file_names(language_pair).values() for n in pair]
    text_files.check_folder(manual_dir, names, what="Multi30k raw .gz")


class Multi30kConfig(tfds.core.BuilderConfig):
    """One language pair, named "en-de" or "en-fr"; either direction at load time."""

    def __init__(self, *, language_pair: tuple[str, str], **kwargs):
        super().__init__(name="-".join(language_pair),
                         description=f"Multi30k task 1, {language_pair[0]}-{language_pair[1]}",
                         **kwargs)
        self.language_pair = tuple(language_pair)


class Multi30k(tfds.core.GeneratorBasedBuilder):
    """Multi30k task 1 (en-de, en-fr): 29,000 / 1,014 / 1,000 sentence pairs."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Raw task 1 text; test = test_2016_flickr."}
    # Where its metadata would sit: this file's folder (TFDS infers it from the module's name, which an installed
    # name mapped onto another folder, keras_transformer.pipelines from pipelines/, would misplace).
    pkg_dir_path = epath.Path(__file__).resolve().parent
    BUILDER_CONFIGS = [Multi30kConfig(language_pair=pair) for pair in LANGUAGE_PAIRS]
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    Optional. Without it the files are downloaded from
    https://github.com/multi30k/dataset (data/task1/raw). To build offline, put the
    original gzipped files in the manual folder, unchanged:
    train.{en,de,fr}.gz, val.{en,de,fr}.gz, test_2016_flickr.{en,de,fr}.gz
    """

    def _info(self) -> tfds.core.DatasetInfo:
        pair = self.builder_config.language_pair
        return self.dataset_info_from_configs(
                features=tfds.features.Translation(languages=pair),
                supervised_keys=pair,
                homepage="https://github.com/multi30k/dataset",
                citation=_CITATION,
                disable_shuffling=True,  # keep the files' line order (references stay aligned)
        )

    def _manual_folder(self, dl_manager):
        """The manual folder if one was given and holds files, else None."""
        try:
            return dl_manager.manual_dir
        except AssertionError:  # tfds: manual dir missing or empty
            return None

    def _split_generators(self, dl_manager):
        pair = self.builder_config.language_pair
        names = file_names(pair)
        manual = self._manual_folder(dl_manager)
        if manual is not None:
            check_manual_dir(os.fspath(manual), pair)
            paths = {split: tuple(os.path.join(os.fspath(manual), n) for n in files)
                     for split, files in names.items()}
        else:
            flat = {n: RAW_URL + n for files in names.values() for n in files}
            downloaded = dl_manager.download(flat)
            paths = {split: tuple(os.fspath(downloaded[n]) for n in files)
                     for split, files in names.items()}
        return {split: self._generate_examples(*paths[split]) for split in names}

    def _generate_examples(self, source_path, target_path):
        a, b = self.builder_config.language_pair
        for i, (s, t) in enumerate(text_files.iter_parallel_lines(source_path, target_path)):
            yield i, {a: s, b: t}


def load(pair: str = "en-de", source_lang: str = "en", split: str = "train",
         data_dir: str | None = None, manual_dir: str | None = None,
         download: bool = True):
    """(source, target) `tf.string` scalar pairs of one Multi30k split, in file order.

    Args:
        pair: the builder config, "en-de" or "en-fr".
        source_lang: the source side, e.g. "de" for de->en.
        split: "train", "validation" or "test" (or a tfds split expression).
        data_dir: where tfds keeps the prepared data (default ~/tensorflow_datasets).
        manual_dir: folder of the original .gz files; if None they are downloaded.
        download: prepare the data set if it is not in `data_dir` yet.
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    a, b = pair.split("-")
    if source_lang not in (a, b):
        raise ValueError(f"source_lang must be {a!r} or {b!r} for {pair}, got {source_lang!r}")
    target_lang = b if source_lang == a else a
    if manual_dir is not None:
        check_manual_dir(manual_dir, (a, b))
    builder = Multi30k(config=pair, data_dir=data_dir)
    if download:
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=manual_dir))
    ds = builder.as_dataset(split=split, shuffle_files=False)
    return ds.map(lambda ex: (ex[source_lang], ex[target_lang]),
                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
