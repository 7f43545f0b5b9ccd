"""`keras_transformer.tasks.training_process`: the training command in a child process, its lines passed on, its
exit status returned. (A chain stopped by SIGTERM and run again: tests/keras_transformer/test_variations.py
and tests/bench/test_compute_robustness.py.)"""

import os

from keras_transformer.tasks.training_process import run_training


def test_a_refused_run_returns_its_exit_status_and_no_summary(tmp_path, capfd):
    lines = []
    summary, code = run_training([f"--model_dir={tmp_path / 'run'}", "--train_steps=0"], lines.append)
    assert (summary, code, lines) == (None, 2, [])  # refused before TensorFlow: nothing on stdout
    assert capfd.readouterr().err.splitlines()[-1].startswith("error: ")  # its stderr is this process's
    assert not os.path.exists(tmp_path / "run")
