"""Length-sorted batches with results back in the input order (dev evaluation and translate)."""

import pytest

from keras_transformer.decoding import sorted_batches


def test_batches_are_sorted_by_length_and_ties_keep_the_input_order():
    lengths = [3, 1, 2, 1, 3]
    assert sorted_batches.length_sorted_batches(lengths, 2) == [[1, 3], [2, 0], [4]]
    assert sorted_batches.length_sorted_batches(lengths, 2, descending=True) == [[0, 4], [2, 1], [3]]
    assert sorted_batches.length_sorted_batches([], 2) == []
    with pytest.raises(ValueError, match="batch_size"):
        sorted_batches.length_sorted_batches(lengths, 0)


def test_results_come_back_in_the_input_order_with_progress():
    seen, progress = [], []

    def shout(batch):
        seen.append(list(batch))
        return [word.upper() for word in batch]

    words = ["ccc", "a", "bb", "dddd", "e"]
    out = sorted_batches.map_in_input_order(shout, words, [len(w) for w in words], 2, on_batch=progress.append)
    assert out == ["CCC", "A", "BB", "DDDD", "E"]
    assert seen == [["a", "e"], ["bb", "ccc"], ["dddd"]]
    assert progress == [2, 4, 5]


def test_a_function_that_drops_results_is_an_error():
    with pytest.raises(ValueError, match="1 results for a batch of 2"):
        sorted_batches.map_in_input_order(lambda batch: batch[:1], ["a", "b"], [1, 1], 2)
    with pytest.raises(ValueError, match="2 items but 1 lengths"):
        sorted_batches.map_in_input_order(list, ["a", "b"], [1], 2)
