"""Plugins through the real commands: a position encoding registered by a module of the tests (nothing in the
library edited) trains, exports, translates and scores; without the plugin, a run that needs it is refused in
one line."""

import pytest

from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.train_runs import train_args

PLUGIN = {"KT_PLUGINS": "tests.helpers.plugin_positions"}
SOURCES = "Ein Mann liest ein Buch .\nDie Frau trinkt Wasser .\nZwei Hunde laufen im Park .\n"


@pytest.mark.slow
def test_a_position_encoding_from_a_plugin_trains_exports_and_translates(tmp_path, flagfile):
    run, exported = tmp_path / "run", tmp_path / "serving"
    (tmp_path / "source.txt").write_text(SOURCES, encoding="utf-8")

    refused = run_command(*train_args(run, "--positional_encoding=half_sinusoidal", flagfile=flagfile))
    assert_one_error_line(refused, "--positional_encoding", "half_sinusoidal")  # an enum without the plugin
    assert not run.exists()

    trained = run_command(*train_args(run, "--positional_encoding=half_sinusoidal", "--train_steps=12",
                                      "--eval_every_steps=0", flagfile=flagfile), env=PLUGIN, timeout=900)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert '"positional_encoding": "half_sinusoidal"' in (run / "model_config.json").read_text(encoding="utf-8")

    from_run = run_command("-m", "keras_transformer.translate", f"--model_dir={run}", "--input=source.txt",
                           "--output=from_run.txt", cwd=tmp_path, env=PLUGIN, timeout=600)
    assert from_run.returncode == 0, from_run.stderr[-3000:]
    exported_now = run_command("-m", "keras_transformer.export", f"--model_dir={run}", f"--export_dir={exported}",
                               "--signatures=serving_default", env=PLUGIN, timeout=900)
    assert exported_now.returncode == 0, exported_now.stderr[-3000:]
    # The SavedModel holds the encoding in its graph: serving it needs no plugin.
    served = run_command("-m", "keras_transformer.translate", f"--export_dir={exported}", "--input=source.txt",
                         "--output=from_export.txt", cwd=tmp_path, timeout=600)
    assert served.returncode == 0, served.stderr[-3000:]
    lines = (tmp_path / "from_run.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and (tmp_path / "from_export.txt").read_text(encoding="utf-8").splitlines() == lines

    # The run names a kind this process does not know: one line, before any work.
    unknown = run_command("-m", "keras_transformer.translate", f"--model_dir={run}", "--input=source.txt",
                          "--output=again.txt", cwd=tmp_path, timeout=600)
    assert_one_error_line(unknown, "half_sinusoidal")
    assert not (tmp_path / "again.txt").exists()
