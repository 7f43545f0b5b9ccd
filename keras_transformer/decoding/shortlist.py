"""A lexical shortlist: the target ids a batch's search may produce, chosen from its sources.

The output projection `x E^T` (section 3.4) and the softmax over it cost `d_model x V` per
hypothesis and step; with a small model and a subword vocabulary of thousands it is most of a
shallow decoder's step. A shortlist restricts both to the candidates of the batch (Marian's
lexical shortlists; CTranslate2's vocabulary map, "vmap"; the Bergamot students serve with one):

* the special ids (PAD, UNK, BOS, EOS; PAD and BOS stay masked: never outputs);
* the `frequent` target ids, candidates for every batch;
* for every source id of the batch, its row of `table`: its best translations in a lexical
  table (IBM Model 1 over the training pairs, `keras_transformer.pipelines.word_alignment`;
  `python -m keras_transformer.shortlist` learns and writes one);
* a forced target prefix's ids.

Every sentence of a batch searches over their union, sorted (`candidates`), so a batch's
outputs can differ from a search over the whole vocabulary only where the full search would
have produced an id outside the union; the shortlist of a batch of one sentence is that
sentence's alone. The special ids keep their positions in the sorted union (they are the
smallest ids), so EOS ends a hypothesis in either numbering.

The file is CTranslate2's vocabulary map, so one file serves both engines: its first line is
a tab then the frequent target pieces; each next line a source piece, a tab and its
candidate target pieces, space-separated (CTranslate2's n-gram keys are not read here).

    >>> shortlist = read("runs/x/shortlist.vmap", source_pieces, target_pieces)
    >>> sequences, scores = search.translate_ids(model, source_ids, config, shortlist=shortlist)
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import tensorflow as tf

from keras_transformer.files import atomic
from keras_transformer.special_ids import PAD_ID, SPECIAL_IDS


@dataclasses.dataclass(frozen=True, eq=False)
class Shortlist:
    """Target ids, as numpy int32 arrays.

    Attributes:
        frequent: `(F,)`, candidates of every batch.
        table: `(source vocabulary, k)`: row s holds the candidates source id s brings, PAD_ID
            where it has fewer than k (PAD is a special id: always a candidate, never produced).
    """

    frequent: np.ndarray
    table: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "frequent", np.asarray(self.frequent, np.int32).reshape(-1))
        table = np.asarray(self.table, np.int32)
        if table.ndim != 2:
            raise ValueError(f"a shortlist's table is (source vocabulary, k), got shape {table.shape}")
        object.__setattr__(self, "table", table)

    @property
    def source_vocab_size(self) -> int:
        return self.table.shape[0]

    def check_vocabularies(self, source_vocab_size: int, target_vocab_size: int) -> None:
        """ValueError unless the shortlist fits a model with these vocabulary sizes."""
        if self.source_vocab_size > source_vocab_size:
            raise ValueError(f"the shortlist has rows for {self.source_vocab_size} source ids, "
                             f"the model's vocabulary {source_vocab_size}")
        largest = max(int(self.frequent.max(initial=0)), int(self.table.max(initial=0)))
        if largest >= target_vocab_size or min(int(self.frequent.min(initial=0)), int(self.table.min(initial=0))) < 0:
            raise ValueError(f"the shortlist names target id {largest}, the model's output vocabulary "
                             f"has {target_vocab_size}")


def candidates(shortlist: Shortlist, source_ids, target_prefix=None) -> tf.Tensor:
    """int32 `(C,)`, sorted: the target ids a search over the batch `source_ids` may use.

    Args:
        shortlist: the `Shortlist` (its arrays become graph constants where this is traced).
        source_ids: int `(B, S)`, PAD-padded (PAD's row is PAD alone); ids past the table's
            rows bring no candidates of their own.
        target_prefix: optional int `(B, P)`, -1-padded: forced ids, always candidates.
    """
    source_ids = tf.reshape(tf.cast(source_ids, tf.int32), [-1])
    rows = shortlist.source_vocab_size
    known = tf.boolean_mask(source_ids, source_ids < rows)
    parts = [tf.constant(SPECIAL_IDS, tf.int32), tf.constant(shortlist.frequent, tf.int32),
             tf.reshape(tf.gather(tf.constant(shortlist.table, tf.int32), known), [-1])]
    if target_prefix is not None:
        prefix = tf.reshape(tf.cast(target_prefix, tf.int32), [-1])
        parts.append(tf.boolean_mask(prefix, prefix >= 0))
    ids, _ = tf.unique(tf.concat(parts, axis=0))
    return tf.sort(ids)


def read(path: str, source_pieces: Sequence[str], target_pieces: Sequence[str]) -> Shortlist:
    """The shortlist of a vocabulary-map file (see the module docstring) for these vocabularies.

    Raises:
        ValueError: one line naming the file and line, for a piece outside its vocabulary, an
            n-gram key, a line without a tab or a file that is not UTF-8 text; OSError if
            unreadable.
    """
    source_index = {piece: i for i, piece in enumerate(source_pieces)}
    target_index = {piece: i for i, piece in enumerate(target_pieces)}
    frequent: list[int] = []
    rows: dict[int, list[int]] = {}
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a UTF-8 shortlist (a vocabulary map): {error.reason}") from None
    if not lines:
        raise ValueError(f"{path} is empty: a shortlist has one line of frequent target pieces, then one per source piece")
    for number, line in enumerate(lines, start=1):
        key, tab, values = line.partition("\t")
        if not tab:
            raise ValueError(f"{path} line {number}: no tab between the source piece and its target pieces")
        if " " in key:
            raise ValueError(f"{path} line {number}: {key!r} is an n-gram; only single source pieces are read")
        targets = []
        for piece in filter(None, values.split(" ")):  # as CTranslate2 splits: a piece may be "\xa0"
            if piece not in target_index:
                raise ValueError(f"{path} line {number}: {piece!r} is not in the target vocabulary")
            targets.append(target_index[piece])
        if not key:
            frequent.extend(targets)
            continue
        if key not in source_index:
            raise ValueError(f"{path} line {number}: {key!r} is not in the source vocabulary")
        rows.setdefault(source_index[key], []).extend(targets)
    width = max((len(ids) for ids in rows.values()), default=0)
    table = np.full((len(source_pieces), width), PAD_ID, np.int32)
    for source, ids in rows.items():
        table[source, : len(ids)] = ids
    return Shortlist(frequent=np.asarray(frequent, np.int32), table=table)


def write(shortlist: Shortlist, path: str, source_pieces: Sequence[str], target_pieces: Sequence[str]) -> None:
    """Writes `shortlist` as a vocabulary-map file, atomically (a temporary sibling, renamed); "-" is stdout.

    Special ids are left out (they are candidates anyway); so are source ids without any, and
    pieces the format cannot hold (one holding a space, a tab or a line break: such a piece is
    then no candidate, or brings none).
    """
    special = set(SPECIAL_IDS)

    def writable(piece: str) -> bool:
        return not any(c in piece for c in " \t\n\r")

    lines = ["\t" + " ".join(target_pieces[i] for i in shortlist.frequent
                             if i not in special and writable(target_pieces[i]))]
    for source, row in enumerate(shortlist.table):
        targets = [target_pieces[i] for i in row if i not in special and writable(target_pieces[i])]
        if targets and source not in special and writable(source_pieces[source]):
            lines.append(source_pieces[source] + "\t" + " ".join(targets))
    atomic.write_output(path, "\n".join(lines) + "\n")


