"""Training corpora: several sources of sentence pairs, mixed by weight.

Section 5.1 of "Attention Is All You Need" trains on one corpus per language pair (WMT 2014,
4.5M pairs for en-de, 36M for en-fr), but the WMT data is itself several corpora (Europarl,
Common Crawl, News Commentary), and a user's own data usually is too: a large noisy web crawl
and a small in-domain set. `--train_files` names them, one entry per corpus:

    --train_files=web:data/web-*.{en,de}.gz:0.3,news:data/news.{en,de}.gz:0.7
    --train_files=embedded:0.2                         # a registered data set's train split
    --train_files=data/web.{en,de}                     # one corpus, no mixing

An entry is `[NAME:]CORPUS[:WEIGHT]`. CORPUS is either a path pattern whose one `{SOURCE,TARGET}`
brace group names the two sides (shell brace style; globs select shards, paired as in
`keras_transformer.pipelines.text_files.parallel_shards`), or the name of a registered data set
(`keras_transformer.pipelines.sources.DATASETS`: embedded, multi30k_en_de, wmt14_en_de, ...; its files are found
with the run's --data_dir / --tfds_dir). NAME defaults to the data set name or the file stem;
WEIGHT (default 1) is the corpus' share of the sampled pairs after normalising the weights.
The flag may be repeated (one line per corpus in a flagfile); commas inside braces do not split.

Each corpus is read as a stream and repeated on its own, then
`tf.data.Dataset.sample_from_datasets` draws every pair from corpus i with probability
weight_i / sum(weights), so a small corpus is revisited more often than a large one, as
intended. `ShareCounter` counts the pairs actually batched per corpus for the training log.

Parsing and checking import no TensorFlow, so a bad entry is one `DataError` line before
TensorFlow starts: an unknown corpus (neither a pattern with a brace pair nor a data set), a
weight that is not a positive number, a repeated name, a pattern that matches no file, a shard
without its partner.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import threading
from typing import Callable, Sequence

import numpy as np

from keras_transformer.pipelines import sources
from keras_transformer.pipelines.errors import DataError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*$")
_BRACES = re.compile(r"\{([^{},]*),([^{},]*)\}")


@dataclasses.dataclass(frozen=True)
class Corpus:
    """One training corpus.

    Attributes:
        name: how the log names it.
        weight: its share of the sampled pairs, before normalising (> 0).
        source, target: file paths or glob patterns of the two sides (file corpora).
        dataset: a registered data set whose train split this corpus is (else "").
    """

    name: str
    weight: float = 1.0
    source: str = ""
    target: str = ""
    dataset: str = ""

    def describe(self) -> str:
        return self.dataset or f"{self.source} + {self.target}"


def _split_entries(value: str) -> list[str]:
    """Splits on commas outside braces."""
    entries, depth, current = [], 0, ""
    for char in value:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            entries.append(current)
            current = ""
        else:
            current += char
    entries.append(current)
    return [entry.strip() for entry in entries if entry.strip()]


def _weight(text: str, entry: str) -> float:
    try:
        weight = float(text)
    except ValueError:
        raise DataError(f"--train_files={entry}: weight {text!r} is not a number") from None
    if not math.isfinite(weight) or weight <= 0:
        raise DataError(f"--train_files={entry}: weight {text} must be a positive number")
    return weight


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_entry(entry: str) -> Corpus:
    """One `[NAME:]CORPUS[:WEIGHT]` entry (see the module docstring)."""
    parts = entry.split(":")
    weight = 1.0
    if len(parts) > 1 and _is_number(parts[-1]):
        weight = _weight(parts.pop(), entry)
    if len(parts) > 2:
        raise DataError(f"--train_files={entry}: expected [NAME:]CORPUS[:WEIGHT]")
    name, what = (parts if len(parts) == 2 else (None, parts[0]))
    what = what.strip()
    if name is not None and not _NAME.match(name):
        raise DataError(f"--train_files={entry}: corpus name {name!r} must be a word (letters, digits, _ . -)")
    braces = _BRACES.findall(what)
    if len(braces) == 1:
        (source_part, target_part), = braces
        source = _BRACES.sub(source_part, what).replace("{split}", "train")
        target = _BRACES.sub(target_part, what).replace("{split}", "train")
        stem = os.path.basename(_BRACES.split(what)[0]).rstrip(".-_") or "corpus"
        return Corpus(name=name or re.sub(r"[^A-Za-z0-9_.-]", "_", stem), weight=weight, source=source, target=target)
    if len(braces) > 1:
        raise DataError(f"--train_files={entry}: give one {{SOURCE,TARGET}} brace pair, not {len(braces)}")
    if what in sources.DATASETS:
        return Corpus(name=name or what, weight=weight, dataset=what)
    raise DataError(f"--train_files={entry}: unknown corpus {what!r}: give a registered data set "
                    f"({', '.join(sources.DATASETS)}) or a path pattern with a {{SOURCE,TARGET}} pair, "
                    "e.g. data/web.{en,de}.gz")


def parse_train_files(values: Sequence[str]) -> tuple[Corpus, ...]:
    """The corpora of the `--train_files` values (each a comma-separated list of entries)."""
    for value in values:
        if not _split_entries(value):
            raise DataError(f"--train_files={value}: names no corpus; give [NAME:]CORPUS[:WEIGHT], or leave the "
                            "flag out to train on --dataset's train split")
    corpora = tuple(parse_entry(entry) for value in values for entry in _split_entries(value))
    names = [corpus.name for corpus in corpora]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise DataError(f"--train_files: corpus name {repeated[0]!r} is used twice; name each corpus "
                        "(NAME:CORPUS[:WEIGHT])")
    return corpora


def shares(corpora: Sequence[Corpus]) -> list[float]:
    """The normalised weights: each corpus' expected share of the sampled pairs."""
    total = sum(corpus.weight for corpus in corpora)
    return [corpus.weight / total for corpus in corpora]


@dataclasses.dataclass(frozen=True)
class Mixture:
    """Training pairs drawn from several corpora by weight (what `make_dataset` mixes).

    Attributes:
        names: one per corpus.
        weights: the normalised sampling probabilities.
        loaders: one function per corpus returning its `tf.data.Dataset` of (source, target)
            strings, one pass, in a fixed order.
        counter: counts the pairs batched from each corpus.
    """

    names: tuple[str, ...]
    weights: tuple[float, ...]
    loaders: tuple[Callable, ...]
    counter: "ShareCounter"

    def concatenated(self):
        """Every pair of every corpus once, corpus after corpus (e.g. to train a tokenizer on)."""
        datasets = [load() for load in self.loaders]
        out = datasets[0]
        for ds in datasets[1:]:
            out = out.concatenate(ds)
        return out


class ShareCounter:
    """Pairs batched per corpus, counted in the input pipeline (thread-safe)."""

    def __init__(self, names: Sequence[str], weights: Sequence[float]):
        self.names, self.weights = tuple(names), tuple(weights)
        self.counts = [0] * len(self.names)
        self._lock = threading.Lock()

    def add(self, corpus_ids) -> None:
        counts = np.bincount(corpus_ids, minlength=len(self.names))
        with self._lock:
            self.counts = [a + int(b) for a, b in zip(self.counts, counts)]

    def summary(self) -> str:
        """E.g. "web 30.2% (3,021 pairs, weight 30.0%), news 69.8% (...)"."""
        with self._lock:
            counts = list(self.counts)
        total = sum(counts)
        if not total:
            return "no pairs sampled yet"
        return ", ".join(f"{name} {100 * count / total:.1f}% ({count:,} pairs, weight {100 * weight:.1f}%)"
                         for name, count, weight in zip(self.names, counts, self.weights))


def mixture(corpora: Sequence[Corpus], load: Callable[[Corpus], object]) -> Mixture:
    """The `Mixture` of `corpora`; `load(corpus)` returns one corpus' pairs dataset."""
    weights = tuple(shares(corpora))
    names = tuple(corpus.name for corpus in corpora)
    return Mixture(names=names, weights=weights,
                   loaders=tuple((lambda c=corpus: load(c)) for corpus in corpora),
                   counter=ShareCounter(names, weights))
