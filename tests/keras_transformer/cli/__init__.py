"""Tests of keras_transformer.cli, what every command-line entry point shares."""
