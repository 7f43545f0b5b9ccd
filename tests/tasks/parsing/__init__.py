"""Tests of tasks.parsing, one file per module: the parse command's runs, the PCFG, reranking, EVALB."""
