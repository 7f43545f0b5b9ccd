"""IBM Model 1's lexical translation table, the source of a vocabulary shortlist (NumPy only).

Brown et al. (1993), "The Mathematics of Statistical Machine Translation: Parameter
Estimation", section 4.1: Model 1 explains a target sentence f_1..f_m given a source sentence
e_0..e_l (e_0 the empty word, NULL) by letting each target token choose one source position
uniformly and then drawing the token from t(f | e) of that source token:

    p(f | e) = eps / (l + 1)^m * prod_j sum_i t(f_j | e_i)

Its only hidden variable is the alignment, so EM's two steps are in closed form. The E-step
gives each target token's posterior over the source positions of its sentence,
a(i | j) = t(f_j | e_i) / sum_i' t(f_j | e_i'); the M-step sums the posteriors of every (e, f)
into a count c(f | e) and normalises per source id: t(f | e) = c(f | e) / sum_f' c(f' | e).
Every pair starts equal (Brown et al.'s uniform t; only pairs that co-occur in a sentence
pair ever get a count), and NULL is the id PAD_ID, appended to every source sentence.

Why a shortlist: the output layer's softmax costs O(V d) per decoding step for a target
vocabulary of V ids. Marian's lexical shortlist (Junczys-Dowmunt et al. 2018, `--shortlist
lex.s2t first best`) and CTranslate2's vocabulary map (`vmap`, `use_vmap`) restrict it, per
batch, to the `first` most frequent target ids plus the `best` most probable translations
t(f | e) of each source token in the batch (`most_frequent`, `best_translations`); the
logits are computed for those few thousand ids only.

The EM iterations are vectorised over every (source token, target token) combination of
every sentence pair: one entry per combination, (|source| + 1) * |target| per pair, each an
int64 pair key, an int64 target-occurrence group and a float64 posterior (and, while the
keys are built, the combination's source and target ids and the copy `np.unique` sorts).
Memory grows with the corpus, so the caller caps the number of sentence pairs it passes in
(its `max_pairs`); this module takes what it is given.

    table = translation_table(id_pairs, source_vocab_size, target_vocab_size)
    candidates = np.union1d(table.most_frequent(100),
                            table.best_translations(50)[batch_source_ids].ravel())  # PAD_ID too
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

import numpy as np

from keras_transformer.special_ids import PAD_ID, SPECIAL_IDS

NULL_ID = PAD_ID  # the empty source word of Brown et al. (1993), e_0
_FIRST_WORD_ID = max(SPECIAL_IDS) + 1  # ids below this are special and never aligned


@dataclasses.dataclass(frozen=True, eq=False)
class TranslationTable:
    """t(target | source) of IBM Model 1 over the pairs that co-occur, and the target frequencies.

    Attributes:
        source_ids: int32 [pairs], the source id of each pair (NULL_ID for the empty word).
        target_ids: int32 [pairs], the target id of each pair.
        probabilities: float32 [pairs], t(target | source); they sum to 1 per source id.
        target_counts: int64 [target_vocab_size], occurrences of each id in the target
            sentences (special ids are not counted).
        source_vocab_size, target_vocab_size: the sizes of the two vocabularies.
    """
    source_ids: np.ndarray
    target_ids: np.ndarray
    probabilities: np.ndarray
    target_counts: np.ndarray
    source_vocab_size: int
    target_vocab_size: int

    def best_translations(self, k: int) -> np.ndarray:
        """int32 [source_vocab_size, k]: each source id's k most probable target ids, best first.

        Ties go to the smaller target id; a row with fewer than k pairs is padded with PAD_ID,
        and the rows of special ids (NULL's among them) and of ids never seen are all PAD_ID.
        """
        if k < 0:
            raise ValueError(f"k must be non-negative, got {k}")
        best = np.full((self.source_vocab_size, k), PAD_ID, dtype=np.int32)
        words = self.source_ids >= _FIRST_WORD_ID
        source, target = self.source_ids[words], self.target_ids[words]
        order = np.lexsort((target, -self.probabilities[words], source))  # source, then t desc, then id
        source, target = source[order], target[order]
        run_start = np.flatnonzero(np.r_[True, source[1:] != source[:-1]])  # [sources]
        rank = np.arange(len(source)) - np.repeat(run_start, np.diff(np.r_[run_start, len(source)]))
        kept = rank < k
        best[source[kept], rank[kept]] = target[kept]
        return best

    def most_frequent(self, n: int) -> np.ndarray:
        """int32 [min(n, ids that occur)]: the n most frequent target ids, most frequent first,
        ties to the smaller id; never a special id."""
        if n < 0:
            raise ValueError(f"n must be non-negative, got {n}")
        ids = np.flatnonzero(self.target_counts)
        ids = ids[ids >= _FIRST_WORD_ID]
        order = np.lexsort((ids, -self.target_counts[ids]))
        return ids[order][:n].astype(np.int32)


def _word_ids(ids: Sequence[int]) -> np.ndarray:
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    return ids[ids >= _FIRST_WORD_ID]


def _check_ids(ids: np.ndarray, vocab_size: int, side: str) -> None:
    if len(ids) and ids.max() >= vocab_size:
        raise ValueError(f"{side} id {ids.max()} is outside the {side} vocabulary of {vocab_size} ids")


def _combinations(pairs):
    """Every (source id, target id) combination of every pair, and the target occurrence of each.

    A pair whose target has no word ids is skipped; NULL ends every source sentence.
    Returns (source [C], target [C], group [C], targets [T]): combination c pairs target
    occurrence group[c] (its id targets[group[c]]) with one source position of its sentence.
    """
    sources, targets = [], []
    for source, target in pairs:
        target = _word_ids(target)
        if len(target):
            sources.append(np.append(_word_ids(source), NULL_ID))
            targets.append(target)
    source_lengths = np.array([len(s) for s in sources], dtype=np.int64)
    target_lengths = np.array([len(t) for t in targets], dtype=np.int64)
    flat_sources = np.concatenate(sources) if sources else np.zeros(0, np.int64)
    flat_targets = np.concatenate(targets) if targets else np.zeros(0, np.int64)
    source_start = np.cumsum(source_lengths) - source_lengths
    # Each target occurrence meets every source position of its sentence: repeat it that often.
    per_target = np.repeat(source_lengths, target_lengths)  # [T] source positions it meets
    start = np.repeat(np.repeat(source_start, target_lengths), per_target)  # [C]
    group = np.repeat(np.arange(len(flat_targets)), per_target)  # [C]
    offset = np.arange(len(group)) - np.repeat(np.cumsum(per_target) - per_target, per_target)  # [C]
    return flat_sources[start + offset], flat_targets[group], group, flat_targets


def translation_table(pairs: Iterable[tuple[Sequence[int], Sequence[int]]], source_vocab_size: int,
                      target_vocab_size: int, iterations: int = 5) -> TranslationTable:
    """IBM Model 1 trained with EM on (source ids, target ids) pairs (module docstring).

    Special ids in the sequences (EOS at their ends, say) are dropped first; pairs left
    without target ids are skipped. Memory is one entry per combination of a source and a
    target token of each pair: cap the number of pairs before calling.

    Raises:
        ValueError: for fewer than one iteration or an id outside its vocabulary.
    """
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    source, target, group, targets = _combinations(pairs)
    _check_ids(source, source_vocab_size, "source")
    _check_ids(targets, target_vocab_size, "target")
    keys, key = np.unique(source * target_vocab_size + target, return_inverse=True)  # [K], [C]
    key = key.reshape(-1)
    del source, target  # the iterations need only the keys and the groups
    key_source = keys // target_vocab_size  # [K]
    t = np.ones(len(keys))  # uniform: only ratios within a target occurrence matter
    tiny = np.finfo(np.float64).tiny
    for _ in range(iterations):
        posterior = t[key]  # E-step: a(i | j) = t(f_j | e_i) / sum_i' t(f_j | e_i')
        posterior /= np.maximum(np.bincount(group, posterior, minlength=len(targets)), tiny)[group]
        counts = np.bincount(key, posterior, minlength=len(keys))  # M-step: c(f | e), normalised per e
        t = counts / np.maximum(np.bincount(key_source, counts, minlength=source_vocab_size), tiny)[key_source]
    return TranslationTable(
        source_ids=key_source.astype(np.int32),
        target_ids=(keys % target_vocab_size).astype(np.int32),
        probabilities=t.astype(np.float32),
        target_counts=np.bincount(targets, minlength=target_vocab_size).astype(np.int64),
        source_vocab_size=source_vocab_size,
        target_vocab_size=target_vocab_size)
