"""Tests of training_directory: a run opened, checked and resumed through its one owner."""
