"""Tests of pipelines (text -> token ids) and its command, `python -m pipelines`."""
