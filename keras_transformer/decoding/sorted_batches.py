"""Many sentences through a batched function: batches of similar length, results in input order.

Section 5.1 batches sentence pairs "by approximate sequence length"; decoding (section 6.1)
gains the same way: sorted by length, a batch carries little padding, and a beam search stops
when its longest sentence does, so few steps are wasted on sentences that ended long before.

    translations = map_in_input_order(translate_batch, sentences, lengths, batch_size=64)

is how dev evaluation (id lists) and `python -m keras_transformer.translate` (lines of text)
both decode a corpus. Pure Python: the batched function does the TensorFlow work.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence


def length_sorted_batches(lengths: Sequence[Any], batch_size: int, descending: bool = False) -> list[list[int]]:
    """Indices of `lengths` in batches of `batch_size`, sorted by length (ties keep the input order).

    Args:
        lengths: one sortable length per item (an int, or a tuple such as (words, bytes)).
        batch_size: items per batch (the last batch may be smaller).
        descending: longest first (the slowest batch first, so a progress bar's rate is honest).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=descending)
    return [order[start: start + batch_size] for start in range(0, len(order), batch_size)]


def map_in_input_order(fn: Callable[[list], Sequence[Any]], items: Sequence[Any], lengths: Sequence[Any],
                       batch_size: int, *, descending: bool = False,
                       on_batch: Optional[Callable[[int], None]] = None) -> list:
    """`fn` over length-sorted batches of `items`; its per-item results, in the order of `items`.

    Args:
        fn: a list of items -> one result per item, in the same order.
        items: what to process.
        lengths: one sortable length per item (see `length_sorted_batches`).
        batch_size, descending: see `length_sorted_batches`.
        on_batch: called after each batch with the number of items done so far (progress).
    """
    if len(items) != len(lengths):
        raise ValueError(f"{len(items)} items but {len(lengths)} lengths")
    results: list = [None] * len(items)
    done = 0
    for batch in length_sorted_batches(lengths, batch_size, descending):
        outputs = list(fn([items[i] for i in batch]))
        if len(outputs) != len(batch):
            raise ValueError(f"fn returned {len(outputs)} results for a batch of {len(batch)}")
        for i, output in zip(batch, outputs):
            results[i] = output
        done += len(batch)
        if on_batch is not None:
            on_batch(done)
    return results
