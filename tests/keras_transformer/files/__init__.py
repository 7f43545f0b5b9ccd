"""Tests of keras_transformer.files: files written whole, files read with a one-line error, a command's files."""
