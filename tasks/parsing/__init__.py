"""The parsing task (section 6.3, Table 4): sentences -> constituency trees, scored with EVALB F1.

  task         `ParsingTask`: section 6.3's decoding defaults and the dev evaluation's EVALB F1.
  parse_files  what `python -m keras_transformer.parse` runs: `parse_file` (a file or a treebank
               split -> one tree per line, EVALB F1 against gold trees), `parse_sentences`, `Gold`
               (gold trees; `dev_scores`, the dev evaluation's F1), `Parses`, `right_branching`.
  pcfg         the classical baseline: a treebank PCFG (Klein & Manning 2003) and its CKY parser,
               its k best trees (Huang & Chiang 2005); `--baseline=pcfg`.
  reranking    the PCFG's k best trees reranked by the parsing model's log P(tree | sentence) plus
               a weighted PCFG log-probability (Charniak & Johnson 2005; Fried et al. 2017).
  evalb        EVALB's labelled bracketing F1 (COLLINS.prm), in Python.

The model is trained by `keras_transformer.tasks.training` on the `ptb` data set, whose task is `ParsingTask`.
"""
