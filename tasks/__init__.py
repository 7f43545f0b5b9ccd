"""Tasks: the runs a user starts, wiring the three layers below them together.

`pipelines/` (text -> ids), `keras_transformer/` (ids -> logits -> ids) and `export/`
(strings -> strings) know nothing of each other's runs; a task puts them together:

  translation   train a translation model on a data set, evaluate it, translate files.
  scoring       log P(target | source) of sentence pairs from files.
  parsing       section 6.3: parse sentences into trees with a model trained on a treebank
                (training is translation's), score them with EVALB F1; a baseline.
  evalb         EVALB's labelled bracketing F1 (COLLINS.prm), in Python.
  flags         the one definition of the flags the commands share (data, decoding) and
                the frozen configs they parse into; only entry points call it.

Entry points (`python -m keras_transformer.train`, `... .translate`, `... .parse`, `... .score`,
`python -m export`,
`python -m pipelines`) parse flags and call one function here or in the layer they serve.
"""
