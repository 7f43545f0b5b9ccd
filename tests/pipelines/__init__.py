"""Tests of pipelines (text -> token ids) and its command, `python -m keras_transformer.pipelines`."""
