"""Tests of keras_transformer.run_dir: the training directory's layout, checkpoints and averaging."""
