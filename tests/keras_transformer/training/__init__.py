"""Tests of keras_transformer.training: the training loop and each of its parts alone."""
