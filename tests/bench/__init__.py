"""Tests of what the benchmarks in bench/ rely on: CTranslate2's backend as an engine worker reports it."""
