"""Tests of tasks, the commands' work (parsing, EVALB)."""
