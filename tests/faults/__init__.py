"""Faults injected into the real commands: lost files, damaged checkpoints, kills, bad input."""
