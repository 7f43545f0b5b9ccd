"""The four special ids every vocabulary of this project starts with, and nothing else.

The model masks PAD (section 3.2.3: padding never takes part in attention or the loss),
the decoder starts from BOS, and a translation ends at EOS (section 6.1). The tokenizers
of `pipelines/` reserve the same ids, in this order, before any subword:

    PAD_ID: padding, right of every sequence
    UNK_ID: an unknown piece (WordPiece; SentencePiece falls back to bytes)
    BOS_ID: the decoder's first input; never an output
    EOS_ID: the end of a source or a target sequence

Defined here and only here; every other module imports them. This module imports
nothing, so `pipelines/` can use it without loading the model.
"""

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3

SPECIAL_IDS = (PAD_ID, UNK_ID, BOS_ID, EOS_ID)
