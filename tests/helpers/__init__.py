"""What the tests share: the repository's paths, running a command, tiny models and checks."""
