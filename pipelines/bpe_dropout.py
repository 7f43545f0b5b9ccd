"""BPE-dropout's settings, checked before TensorFlow starts (this module imports no TensorFlow).

Provilkov et al. (2020), "BPE-Dropout: Simple and Effective Subword Regularization": while
training, each merge of the byte-pair encoding (section 5.1's vocabulary) is skipped with
probability p, so every epoch sees the same text in another segmentation; translation uses the
plain one. `keras_transformer.pipelines.tokenizers.Tokenizer.tokenize(..., bpe_dropout=p)` draws the segmentations,
`keras_transformer.pipelines.batching.make_dataset(..., bpe_dropout=p)` caches the text and segments it each epoch,
and `DataConfig.bpe_dropout` carries p from `--bpe_dropout`.
"""


def check_bpe_dropout(bpe_dropout: float, tokenizer_type: str) -> None:
    """BPE-dropout's rate is a probability below 1, and only a bpe tokenizer has merges to drop.

    Raises:
        ValueError: naming the rate or the tokenizer type.
    """
    if not 0.0 <= bpe_dropout < 1.0:
        raise ValueError(f"bpe_dropout must be in [0, 1), got {bpe_dropout}")
    if bpe_dropout and tokenizer_type != "bpe":
        raise ValueError(f"bpe_dropout={bpe_dropout} needs the bpe tokenizer, not {tokenizer_type} "
                         "(BPE-dropout skips merges, which only BPE has)")
