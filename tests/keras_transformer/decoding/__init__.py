"""Tests of keras_transformer.decoding: beam search, the search entry point, constraints, batching."""
