"""Tests of keras_transformer.layers, one file per layer module."""
