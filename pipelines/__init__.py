"""Input pipelines for the Transformer: text pairs -> subword ids -> token batches.

Vaswani et al. (2017), section 5.1: sentence pairs are encoded with a shared
byte-pair vocabulary (37,000 tokens for WMT 2014 en-de) and "batched together by
approximate sequence length", each batch holding about 25,000 source and 25,000
target tokens. The modules, upstream to downstream:

  errors       `DataError`, the one-line error for bad input files.
  text_files   plain parallel text files (optionally gzipped), sharded by glob.
  corpora      the training corpora of `--train_files`, mixed by weight.
  multi30k     a tensorflow-datasets builder for Multi30k (en, de, fr).
  wmt14        tensorflow-datasets' `wmt14_translate`, either direction.
  treebank     the Penn Treebank as parsing data (section 6.3).
  linearized_trees  a tree as a target sentence and back (Vinyals et al., 2015).
  word_alignment  IBM Model 1's lexical translation table (the source of a decoding shortlist).
  sources      `load_pairs(dataset, split, ...)`: one registry for all of them,
               including the embedded rule-based corpus (`grammar_corpus`, its words in
               `grammar_corpus_lexicon`).
  tokenizers   SentencePiece (BPE, unigram) and WordPiece tokenizers as tf.Modules
               made of tensorflow-text ops, with training, save and load.
  batching     token-budget length bucketing, `make_dataset`, `make_input_fn`.
  data_config  `DataConfig`: a run's data set, tokenizer and batching in one frozen
               dataclass (what the training command and `python -m keras_transformer.pipelines` share).

The special ids (PAD, UNK, BOS, EOS) are the model's (`keras_transformer.special_ids`);
the tokenizers reserve them. From the rest of `keras_transformer/` only what a pipeline
shares with the commands is imported: atomic writes (`keras_transformer.files.atomic`), the quiet
start-up (`cli`), the registry of data sources (`registry`) and the tree constraint's grammar
(`decoding.tree_constraint`); never the model.

This file imports nothing heavy on purpose: `python -m keras_transformer.pipelines` validates its
inputs before TensorFlow is imported. Import the submodules directly, e.g.
`from keras_transformer.pipelines import batching, sources, tokenizers`.
"""

from keras_transformer import command_start

command_start.guard()  # Ctrl-C while `python -m keras_transformer.pipelines` starts: one line

