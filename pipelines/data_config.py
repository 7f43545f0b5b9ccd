"""`DataConfig`: where a run's sentence pairs come from and how they are tokenized and batched.

Section 5.1 of "Attention Is All You Need": sentence pairs, a shared byte-pair vocabulary,
batches of about 25,000 source and 25,000 target tokens. One frozen dataclass names all of
it, so the training command, `python -m pipelines` and a notebook describe data the same way:

    data = DataConfig(dataset="multi30k_en_de", data_dir="../shared/data/multi30k")
    data.check_inputs("train")                   # files and folders; no TensorFlow import
    pairs = data.load_pairs("train")             # tf.data.Dataset of (source, target) strings
    tokenizer_config = data.tokenizer_config()   # pipelines.tokenizers.TokenizerConfig

`data_dir` means one thing everywhere: where the data set's files are (the Multi30k .gz
files, the tensorflow-datasets folder of wmt14, the folder `files` paths are relative to).
This module imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from pipelines import sources
from pipelines.errors import DataError

DATASET_KINDS = ("embedded", "multi30k", "wmt14", "files")


def dataset_name(dataset: str, source_lang: str = "en", target_lang: str = "de") -> str:
    """A registered data set: "multi30k" with en, de -> "multi30k_en_de"; full names pass through."""
    name = f"{dataset}_{source_lang}_{target_lang}" if dataset in ("multi30k", "wmt14") else dataset
    if name not in sources.DATASETS:
        raise DataError(f"unknown dataset {name!r}; choose {', '.join(DATASET_KINDS)} or one of "
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
        dataset: a key of `pipelines.sources.DATASETS` ("embedded", "multi30k_en_de",
            "wmt14_en_de", "files", ...); see `dataset_name` for the short forms.
        data_dir: where the data set's files are: Multi30k's original .gz files (required for
            multi30k), wmt14's tensorflow-datasets folder, or the folder `files` paths are
            relative to.
        tfds_dir: where tensorflow-datasets prepares multi30k (None: ~/tensorflow_datasets).
        source_file, target_file: dataset "files": parallel text, "{split}" replaced by the split.
        dev_split: the split evaluated during training (never test when tuning).
        tokenizer: "bpe" (the paper's), "unigram" or "wordpiece".
        vocab_size: an upper bound on the trained vocabulary (paper: about 37,000).
        shared_vocab: one vocabulary for both sides (section 3.4).
        lowercase: case-fold text before tokenizing.
        batch_tokens: source (and target) tokens of one update, padding included (paper: 25,000).
        max_length: longest pair, in tokens with EOS, on either side; longer pairs are dropped.
        seed: the embedded corpus' generator seed and the tokenizer's sampling seed.
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
    batch_tokens: int = 25000
    max_length: int = 256
    seed: int = 0

    def __post_init__(self):
        kind = sources.spec(self.dataset).kind
        if kind == "multi30k" and not self.data_dir:
            raise DataError(f"dataset {self.dataset} needs data_dir, the folder of the original Multi30k .gz files")
        if kind == "files" and not (self.source_file and self.target_file):
            raise DataError("dataset 'files' needs both source_file and target_file")
        if self.max_length < 1 or self.vocab_size < 1:
            raise ValueError(f"max_length and vocab_size must be positive, got {self.max_length}, {self.vocab_size}")
        check_batch_tokens(self.batch_tokens, self.max_length)

    @property
    def kind(self) -> str:
        """"embedded", "multi30k", "wmt14" or "files"."""
        return sources.spec(self.dataset).kind

    def source_kwargs(self) -> dict:
        """Keyword arguments of `pipelines.sources.load_pairs` for this data set."""
        if self.kind == "files":
            join = (lambda p: os.path.join(self.data_dir, p)) if self.data_dir else (lambda p: p)
            return dict(source_file=join(self.source_file), target_file=join(self.target_file))
        if self.kind == "multi30k":
            return dict(manual_dir=self.data_dir, data_dir=self.tfds_dir)
        if self.kind == "wmt14":
            return dict(data_dir=self.data_dir or self.tfds_dir)
        return dict(seed=self.seed)

    def check_inputs(self, split: str = "train") -> None:
        """Checks the named folders and files of `split` (no TensorFlow); `DataError` if unusable."""
        if self.data_dir and not os.path.isdir(self.data_dir):
            raise DataError(f"data_dir {self.data_dir}: no such folder")
        kwargs = self.source_kwargs()
        sources.check_inputs(self.dataset, split, **{k: v for k, v in kwargs.items()
                                                     if k in ("manual_dir", "source_file", "target_file")})

    def load_pairs(self, split: str = "train"):
        """`tf.data.Dataset` of (source, target) `tf.string` pairs of `split`, in a fixed order."""
        return sources.load_pairs(self.dataset, split, **self.source_kwargs())

    def load_pair_list(self, split: str) -> list[tuple[str, str]]:
        """The (source, target) str pairs of `split` as a list (dev and test sets)."""
        return sources.load_pair_list(self.dataset, split, **self.source_kwargs())

    def tokenizer_config(self):
        """The `pipelines.tokenizers.TokenizerConfig` to train this run's vocabulary with."""
        from pipelines import tokenizers  # pylint: disable=g-import-not-at-top  (TensorFlow)

        return tokenizers.TokenizerConfig(type=self.tokenizer, vocab_size=self.vocab_size,
                                          shared=self.shared_vocab, lowercase=self.lowercase, seed=self.seed)
