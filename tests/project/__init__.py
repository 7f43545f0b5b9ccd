"""Rules over the whole project: import layers, one owner per concept, the README's commands, the notebooks."""
