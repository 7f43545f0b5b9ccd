"""Decoding: ids in, ids out (section 6.1), and the log-probability of given outputs.

  search           the one entry point every caller decodes through (dev evaluation,
                   `translate`, the SavedModel): the decoding rules (length limit, never PAD or
                   BOS, empty sources) joining the model to the search; `translate_ids`.
  beam_search      beam and greedy search in pure TensorFlow; knows no model.
  sampling         random sampling (temperature, top-k, top-p, a seed) over the same contract.
  tree_constraint  decoding restricted to linearized trees over the input (section 6.3).
  sequence_scores  log P(target | source) per pair with teacher forcing (`score`).
  sorted_batches   many sentences through a batched function in length-sorted batches,
                   results in input order.
  ensemble         models of one vocabulary decoded as one (log of the mean probabilities per step).
  precision        the model in the precision it decodes in: float32, or a bfloat16 copy
                   (the export's --precision).
  shortlist        a lexical shortlist: the target ids a batch's search may produce, from its
                   sources (the output projection covers those alone); its vocabulary-map file.
"""
