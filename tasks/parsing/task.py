"""The parsing task (section 6.3): its decoding defaults and its dev score, EVALB F1.

The model is trained as translation's, on sentence -> linearized tree pairs of the Penn Treebank
(the `ptb` data set, whose `DataSpec.task` names this task), and decoded with "a beam size of 21
and alpha = 0.3", output up to "input length + 300", only trees over the input's words
(`keras_transformer.config.PARSING_DECODING`). Its dev evaluation adds the labelled EVALB F1 of the
decoded dev trees against the treebank's gold ones (the dev metric "f1") and the share of outputs
that needed repair.
"""

from __future__ import annotations

from keras_transformer.config import PARSING_DECODING
from keras_transformer.tasks.task import Task


class ParsingTask(Task):
    """English constituency parsing (section 6.3, Table 4): beam 21, alpha 0.3, input length + 300,
    the tree constraint; EVALB F1 of the dev trees."""

    name = "parsing"
    decoding = PARSING_DECODING
    trained_on = "a treebank (--dataset=ptb)"

    def dev_scores(self, data, pairs):
        """{"f1", "repaired"} of the decoded dev trees against the gold trees of the first
        `len(pairs)` sentences of the treebank's `data.dev_split`
        (`keras_transformer.tasks.parsing.parse_files.Gold.dev_scores`)."""
        from keras_transformer.tasks.parsing import parse_files  # pylint: disable=g-import-not-at-top

        return parse_files.Gold.from_treebank(data.data_dir, data.dev_split).take(len(pairs)).dev_scores
