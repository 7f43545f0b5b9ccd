"""`DataConfig`: where a run's sentence pairs come from and how they are tokenized and batched.

Section 5.1 of "Attention Is All You Need": sentence pairs, a shared byte-pair vocabulary,
batches of about 25,000 source and 25,000 target tokens. One frozen dataclass names all of
it, so the training command, `python -m keras_transformer.pipelines` and a notebook describe data the same way:

    data = DataConfig(dataset="multi30k_en_de", data_dir="../shared/data/multi30k")
    data.check_inputs("train")                   # files and folders; no TensorFlow import
    pairs = data.load_pairs("train")             # tf.data.Dataset of (source, target) strings
    tokenizer_config = data.tokenizer_config()   # pipelines.tokenizers.TokenizerConfig

`data_dir` means one thing everywhere: where the data set's files are (the Multi30k .gz
files, the tensorflow-datasets folder of wmt14, the folder `files` paths are relative to).
This module imports no TensorFlow.

At scale (the paper's 4.5M and 36M pairs), `train_files` replaces the training split with one
or more corpora mixed by weight (`keras_transformer.pipelines.corpora`; dev and test still come from `dataset`),
file paths may be glob patterns of shards, and `cache` says where the tokenized pairs are kept
between epochs: "memory" (fastest, grows with the corpus), "disk" (a `tf.data` file cache in
the training directory), "none" (read and tokenize again each epoch; memory stays flat), or
"auto": memory for a corpus of at most `CACHE_MEMORY_TEXT_BYTES` of text, else none
(`cache_mode`, whose reason the training log prints).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from keras_transformer.config import check_seed
from keras_transformer.pipelines import corpora as corpora_lib
from keras_transformer.pipelines.bpe_dropout import check_bpe_dropout
from keras_transformer.pipelines import sources
from keras_transformer.pipelines.errors import DataError

CACHE_MODES = ("auto", "memory", "disk", "none")
# "auto" keeps a corpus in memory up to this much text (source + target, uncompressed): about
# 0.9M sentence pairs of 25-27 words a side (300 bytes a pair), whose tokenized cache takes
# about 0.75 GB of RAM; it grows by 0.85 GB per million such pairs (docs/speed.md#corpora-larger-than-ram,
# bench/input_scale.py), 30 GB for the paper's 36M English-French pairs.
CACHE_MEMORY_TEXT_BYTES = 256 << 20


def dataset_name(dataset: str, source_lang: str = "en", target_lang: str = "de") -> str:
    """A registered data set: "multi30k" with en, de -> "multi30k_en_de" (a kind named by languages,
    `sources.DataSource.by_languages`); full names pass through."""
    by_languages = dataset in sources.kinds() and sources.lookup(dataset).by_languages
    name = f"{dataset}_{source_lang}_{target_lang}" if by_languages else dataset
    if name not in sources.DATASETS:
        raise DataError(f"unknown dataset {name!r}; choose {', '.join(sources.short_names())} or one of "
                        f"{', '.join(sources.DATASETS)}")
    return name


def check_batch_tokens(batch_tokens: int, max_length: int, replicas: int = 1, accumulation_steps: int = 1) -> None:
    """Each replica's micro-batch must hold the longest allowed pair (section 5.1 batching).

    Raises:
        ValueError: naming the token budget, its split and `max_length`.
    """
    per_micro_batch = batch_tokens // (accumulation_steps * replicas)
    if per_micro_batch < max_length:
        split = "" if replicas == accumulation_steps == 1 else (
            f", split over {replicas} replica(s) and {accumulation_steps} micro-batch(es), leaves "
            f"{per_micro_batch} tokens,")
        raise ValueError(f"batch_tokens={batch_tokens} is smaller than one sentence{split} but pairs of up "
                         f"to max_length={max_length} tokens are allowed")


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """The data of a run (section 5.1).

    Attributes:
        dataset: a key of `keras_transformer.pipelines.sources.DATASETS` ("embedded", "multi30k_en_de",
            "wmt14_en_de", "files", ...); see `dataset_name` for the short forms.
        data_dir: where the data set's files are: Multi30k's original .gz files (required for
            multi30k), wmt14's tensorflow-datasets folder, or the folder `files` paths are
            relative to. A folder name, never a pattern: glob characters in it are its own
            (`keras_transformer.pipelines.text_files.glob_pattern`).
        tfds_dir: where tensorflow-datasets prepares multi30k (None: ~/tensorflow_datasets).
        source_file, target_file: dataset "files": parallel text, "{split}" replaced by the split.
        dev_split: the split evaluated during training (never test when tuning).
        tokenizer: "bpe" (the paper's), "unigram" or "wordpiece".
        vocab_size: an upper bound on the trained vocabulary (paper: about 37,000).
        shared_vocab: one vocabulary for both sides (section 3.4).
        lowercase: lowercase text before tokenizing (Unicode lowercase; German ß stays ß).
        split_by_script: no subword joins two Unicode scripts (sentencepiece's default); False
            for linearized trees, whose brackets and labels then make one piece.
        batch_tokens: source (and target) tokens of one update, padding included (paper: 25,000).
        max_length: longest pair, in tokens with EOS, on either side; longer pairs are dropped.
        seed: the embedded corpus' generator seed and the tokenizer's sampling seed.
        train_files: training corpora (`keras_transformer.pipelines.corpora.Corpus`) that replace the training
            split of `dataset`, mixed by their weights; () uses `dataset`'s.
        cache: "auto", "memory", "disk" or "none": where tokenized training pairs are kept
            between epochs (`cache_mode`).
        shuffle_buffer: training pairs shuffled at a time (per corpus), each held in memory.
        source_tags: a treebank's source sentences with part-of-speech tags after the words
            (`keras_transformer.pipelines.pos_tags`): "none", "predicted" (a tagger trained on the training
            split) or "gold" (the treebank's; an upper bound only).
        tagger_file: with "predicted", the saved tagger to use, trained on the training split
            and saved there when the file does not exist yet (a run's MODEL_DIR/tagger.json);
            None: trained in memory.
        tree_targets: a treebank's target trees with their words ("words") or each word
            written as the placeholder "XX" ("placeholders", Vinyals et al. 2015;
            `keras_transformer.pipelines.linearized_trees`), which the tokenizer then keeps one piece.
        bpe_dropout: the training pairs segmented anew in every epoch, each BPE merge skipped
            with this probability (Provilkov et al., 2020; 0: the one segmentation of section
            5.1). Both sides; dev, test, translation and export keep the plain segmentation.
            The text, not the ids, is then what `cache` keeps between epochs.
    """

    dataset: str = "embedded"
    data_dir: Optional[str] = None
    tfds_dir: Optional[str] = None
    source_file: Optional[str] = None
    target_file: Optional[str] = None
    dev_split: str = "validation"
    tokenizer: str = "bpe"
    vocab_size: int = 37000
    shared_vocab: bool = True
    lowercase: bool = False
    split_by_script: bool = True
    batch_tokens: int = 25000
    max_length: int = 256
    seed: int = 0
    train_files: tuple = ()
    cache: str = "auto"
    shuffle_buffer: int = 200_000
    source_tags: str = "none"
    tagger_file: Optional[str] = None
    tree_targets: str = "words"
    bpe_dropout: float = 0.0

    def __post_init__(self):
        source = self.data_source
        source.check_config(self)  # e.g. the folder or files its kind needs
        from keras_transformer.pipelines import pos_tags  # pylint: disable=g-import-not-at-top

        if self.source_tags not in pos_tags.SOURCE_TAGS:
            raise ValueError(f"source_tags must be one of {', '.join(pos_tags.SOURCE_TAGS)}, got {self.source_tags!r}")
        if self.source_tags != "none" and not source.trees:
            raise DataError(f"source_tags={self.source_tags}: part-of-speech tags come from a treebank (dataset "
                            f"{_treebanks()}), not dataset {self.dataset}")
        from keras_transformer.pipelines import linearized_trees  # pylint: disable=g-import-not-at-top

        if self.tree_targets not in linearized_trees.TREE_TARGETS:
            raise ValueError(f"tree_targets must be one of {', '.join(linearized_trees.TREE_TARGETS)}, got "
                             f"{self.tree_targets!r}")
        if self.tree_targets != "words" and not source.trees:
            raise DataError(f"tree_targets={self.tree_targets}: the targets are trees only with a treebank (dataset "
                            f"{_treebanks()}), not dataset {self.dataset}")
        if self.max_length < 1 or self.vocab_size < 1:
            raise ValueError(f"max_length and vocab_size must be positive, got {self.max_length}, {self.vocab_size}")
        check_batch_tokens(self.batch_tokens, self.max_length)
        if self.cache not in CACHE_MODES:
            raise ValueError(f"cache must be one of {', '.join(CACHE_MODES)}, got {self.cache!r}")
        if self.shuffle_buffer < 1:
            raise ValueError(f"shuffle_buffer must be positive, got {self.shuffle_buffer}")
        check_seed(self.seed)
        check_bpe_dropout(self.bpe_dropout, self.tokenizer)
        if source.named_splits and self.dev_split.split("[")[0] not in sources.SPLITS:  # files: its file is checked
            raise DataError(f"dev_split {self.dev_split!r}: dataset {self.dataset} has the splits "
                            f"{', '.join(sources.SPLITS)}")
        object.__setattr__(self, "train_files", tuple(
            c if isinstance(c, corpora_lib.Corpus) else corpora_lib.Corpus(**c) for c in self.train_files))

    def for_run(self, model_dir: str) -> "DataConfig":
        """This data as the run in `model_dir` reads it: with predicted source tags, by the
        tagger saved there (`keras_transformer.pipelines.pos_tags.TAGGER_FILE`, written by the first run)."""
        from keras_transformer.pipelines import pos_tags  # pylint: disable=g-import-not-at-top

        if self.source_tags != "predicted":
            return self
        return dataclasses.replace(self, tagger_file=os.path.join(model_dir, pos_tags.TAGGER_FILE))

    @property
    def tagged(self) -> bool:
        """Whether each source word is followed by its part-of-speech tag (`keras_transformer.pipelines.pos_tags`)."""
        return self.source_tags != "none"

    @property
    def kind(self) -> str:
        """The kind of `dataset`: "embedded", "multi30k", "wmt14", "treebank", "files", or one
        registered later (`keras_transformer.pipelines.sources.kinds`)."""
        return sources.spec(self.dataset).kind

    @property
    def data_source(self) -> "sources.DataSource":
        """The `keras_transformer.pipelines.sources.DataSource` that reads `dataset`."""
        return sources.source_of(self.dataset)

    def in_data_dir(self, path: str) -> str:
        """`path` under data_dir when it is relative and data_dir is given."""
        return os.path.join(self.data_dir, path) if self.data_dir else path

    def source_kwargs(self, dataset: Optional[str] = None) -> dict:
        """Keyword arguments of `keras_transformer.pipelines.sources.load_pairs` for this data set (or `dataset`, a
        registered data set found with this run's data_dir and tfds_dir): its kind's
        (`sources.DataSource.source_kwargs`)."""
        return sources.source_of(dataset or self.dataset).source_kwargs(self)

    def corpus_files(self, corpus) -> tuple[str, str]:
        """A file corpus' source and target paths or patterns, relative ones under data_dir."""
        return self.in_data_dir(corpus.source), self.in_data_dir(corpus.target)

    def check_inputs(self, split: str = "train") -> None:
        """Checks the named folders and files of `split` (no TensorFlow); `DataError` if unusable.
        With `train_files`, the training split is every corpus: each shard pair is read once
        (UTF-8, equal line counts)."""
        from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top

        if self.data_dir and not os.path.isdir(self.data_dir):
            raise DataError(f"data_dir {self.data_dir}: no such folder")
        if split == "train" and self.train_files:
            for corpus in self.train_files:
                if corpus.dataset:
                    self._check_dataset(corpus.dataset, split)
                    continue
                try:
                    text_files.check_parallel_files(*self.corpus_files(corpus))
                except DataError as error:
                    raise DataError(f"--train_files corpus {corpus.name}: {error}") from None
            return
        self._check_dataset(self.dataset, split)

    def check_can_batch(self, split: str = "train") -> None:
        """A one-line `DataError` unless the text files of `split` (each training corpus of
        `train_files`) hold a pair that may fit `max_length`; no TensorFlow, no tokenizer yet.

        Every tokenizer gives each whitespace-separated word at least one token, and EOS ends
        each side: a pair with more than `max_length - 1` words on a side never fits, and
        training on files that hold only such pairs would find no batch. Reads up to the first
        pair that may fit (all of `split` only when none does). Registered data sets pass; their
        tokenized pairs are checked once the tokenizer exists (`keras_transformer.pipelines.batching.check_can_batch`).
        """
        from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top

        if split == "train" and self.train_files:
            files = [(f"--train_files corpus {c.name}", self.corpus_files(c)) for c in self.train_files
                     if not c.dataset]
        else:
            paths = self.data_source.text_files(self, split)
            files = [(f"the {split} split", paths)] if paths else []
        words = self.max_length - 1
        for what, (source, target) in files:
            if not text_files.any_parallel_line(source, target,
                                                lambda s, t: max(len(s.split()), len(t.split())) <= words):
                raise DataError(f"{what} ({source}, {target}): every pair has more than {words} words on a side, "
                                f"so none fits max_length={self.max_length} tokens (EOS included) and no batch "
                                "can be made; raise --max_length or give shorter pairs")

    def _check_dataset(self, dataset: str, split: str) -> None:
        sources.check_inputs(dataset, split, **self.source_kwargs(dataset))

    def load_pairs(self, split: str = "train"):
        """`tf.data.Dataset` of (source, target) `tf.string` pairs of `split`, in a fixed order.
        With `train_files`, the training split is every corpus once, one after the other (what
        the tokenizer is trained on); `training_pairs` gives the weighted mixture."""
        if split == "train" and self.train_files:
            return self.training_mixture().concatenated()
        return sources.load_pairs(self.dataset, split, **self.source_kwargs())

    def load_corpus(self, corpus):
        """One training corpus' pairs, one pass in a fixed order."""
        if corpus.dataset:
            return sources.load_pairs(corpus.dataset, "train", **self.source_kwargs(corpus.dataset))
        from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top

        return text_files.parallel_text_files(*self.corpus_files(corpus), validate=False)

    def training_mixture(self) -> "corpora_lib.Mixture":
        """The training corpora as a `keras_transformer.pipelines.corpora.Mixture` (one corpus: `dataset`'s train split)."""
        chosen = self.train_files or (corpora_lib.Corpus(name=self.dataset, dataset=self.dataset),)
        return corpora_lib.mixture(chosen, self.load_corpus)

    def training_pairs(self):
        """What training batches: the pairs of the one training corpus (a dataset), or a
        `Mixture` of several."""
        if len(self.train_files) > 1:
            return self.training_mixture()
        if self.train_files:
            return self.load_corpus(self.train_files[0])
        return self.load_pairs("train")

    def cache_mode(self) -> tuple[str, str]:
        """("memory" | "disk" | "none", why): `cache`, or what "auto" chose for the training data."""
        if self.cache != "auto":
            return self.cache, "--cache"
        datasets = [c.dataset for c in self.train_files] if self.train_files else [self.dataset]
        many = [reason for reason in (sources.source_of(d).many_pairs for d in datasets if d) if reason]
        if many:
            return "none", f"auto: {many[0]}"
        from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top

        files = [self.corpus_files(c) for c in self.train_files if not c.dataset] + [
            sources.source_of(d).text_files(self, "train") for d in datasets if d]
        text = sum(text_files.text_bytes(*paths) for paths in files if paths)
        limit = CACHE_MEMORY_TEXT_BYTES
        if text > limit:
            return "none", f"auto: {text / 2**20:,.0f} MiB of training text > {limit >> 20} MiB"
        return "memory", (f"auto: {text / 2**20:,.1f} MiB of training text <= {limit >> 20} MiB" if text
                          else "auto: a small data set")

    def load_pair_list(self, split: str) -> list[tuple[str, str]]:
        """The (source, target) str pairs of `split` as a list (dev and test sets)."""
        return sources.load_pair_list(self.dataset, split, **self.source_kwargs())

    def tokenizer_config(self):
        """The `keras_transformer.pipelines.tokenizers.TokenizerConfig` to train this run's vocabulary with."""
        from keras_transformer.pipelines import linearized_trees, tokenizers  # pylint: disable=g-import-not-at-top  (TensorFlow)

        whole = (linearized_trees.PLACEHOLDER_PIECE,) if self.tree_targets == "placeholders" else ()
        return tokenizers.TokenizerConfig(type=self.tokenizer, vocab_size=self.vocab_size,
                                          shared=self.shared_vocab, lowercase=self.lowercase,
                                          split_by_script=self.split_by_script, seed=self.seed,
                                          user_defined_symbols=whole)


def _treebanks() -> str:
    """The registered data sets of gold trees ("ptb"), for the messages that need one."""
    return " or ".join(name for name, data in sources.DATASETS.items() if sources.lookup(data.kind).trees)
