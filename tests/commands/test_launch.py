"""keras_transformer.commands: every command runs as `python -m` and as a console script, says its version,
prints its own help, and imports the plugins before its flags."""

import os
import pathlib
import subprocess
import sys

import pytest

from keras_transformer import __version__
from keras_transformer.commands import (COMMANDS, expand_recipes, load_plugins, plugin_modules, recipe_args,
                                       recipe_names)
from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.modules import MODULES
from tests.helpers.paths import REPO


def test_every_command_module_has_a_main_and_a_python_m_module_that_launches_it():
    for command in COMMANDS.values():
        assert command.module in MODULES, command.module
        source = MODULES[command.module].read_text(encoding="utf-8")
        assert "\ndef main(argv" in source, command.module
        runnable = MODULES.get(f"{command.runnable}.__main__") or MODULES.get(command.runnable)
        assert runnable is not None, command.runnable
        assert f'launch("{command.name}")' in runnable.read_text(encoding="utf-8"), runnable
    assert {m for m in MODULES if m.startswith("keras_transformer.commands.")} == {
        c.module for c in COMMANDS.values()}


def test_setup_installs_a_console_script_per_command():
    scripts = {c.script for c in COMMANDS.values()}
    assert "kt-train" in scripts and "kt-average-checkpoints" in scripts and len(scripts) == len(COMMANDS)
    bin_dir = pathlib.Path(sys.executable).parent
    installed = {p.name for p in bin_dir.iterdir() if p.name.startswith("kt-")}
    if not installed:
        pytest.skip(f"the package is not installed into {bin_dir} (console scripts come with pip install)")
    assert scripts <= installed, scripts - installed


@pytest.mark.parametrize("name", ["export", "summary"])
def test_version_through_python_m_and_the_console_script(name):
    command = COMMANDS[name]
    result = run_command("-m", command.runnable, "--version")
    assert result.returncode == 0 and result.stdout.strip() == f"keras_transformer {__version__} ({command.script})"
    script = pathlib.Path(sys.executable).parent / command.script
    if script.exists():
        result = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0 and __version__ in result.stdout, result.stderr


def test_help_prints_the_command_modules_docstring():
    result = run_command("-m", "keras_transformer.summary", "--help")
    first = MODULES["keras_transformer.commands.summary"].read_text(encoding="utf-8").split('"""')[1].splitlines()[0]
    assert first in result.stdout, result.stdout[:2000]  # (absl's --help exits 1)
    assert "--preset" in result.stdout  # the command's key flags, though main lives in an imported module


def test_plugins_are_imported_before_the_flags(tmp_path):
    result = run_command("-m", "keras_transformer.summary", "--preset=tiny", "--vocab_size=60",
                         env={"KT_PLUGINS": "tests.helpers.plugin_probe"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.splitlines()[0] == "plugin_probe imported", result.stderr[:500]


def test_a_missing_plugin_is_one_error_line():
    result = run_command("-m", "keras_transformer.summary", "--preset=tiny",
                         env={"KT_PLUGINS": "tests.helpers.no_such_plugin"})
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: KT_PLUGINS:"), result.stderr
    assert "tests.helpers.no_such_plugin" in lines[0]


def test_plugin_modules_read_the_variable_in_order_once():
    names = plugin_modules({"KT_PLUGINS": " a.b , c,a.b,,"})
    assert names[:2] == ["a.b", "c"] and names.count("a.b") == 1
    with pytest.raises(ValueError, match="'no.such.module' does not import"):
        load_plugins({"KT_PLUGINS": "no.such.module"})
    assert "tests.helpers.plugin_probe" not in os.environ.get("KT_PLUGINS", "")
    assert (REPO / "commands" / "__init__.py").is_file()


def test_recipes_expand_in_place_with_their_includes():
    student = recipe_args("multi30k_en_de_student")
    recipe = recipe_args("multi30k_en_de")
    assert student[:len(recipe)] == recipe  # the include's flags where the include stood
    assert all(arg.startswith("--") and "configs/" not in arg for arg in student)
    assert expand_recipes(["--model_dir=x", "--recipe=tiny", "--train_steps=3"]) == [
        "--model_dir=x", *recipe_args("tiny"), "--train_steps=3"]
    with pytest.raises(ValueError, match="no such recipe; choose from demo, "):
        recipe_args("no_such")
    assert set(recipe_names()) == {p.stem for p in (REPO / "configs").glob("*.flags")}


def test_an_unknown_recipe_is_one_error_line():
    result = run_command("-m", "keras_transformer.train", "--recipe=no_such", "--model_dir=unused")
    assert_one_error_line(result, "--recipe=no_such: no such recipe")


@pytest.mark.slow
def test_the_installed_wheel_trains_the_demo_from_its_packaged_recipe(tmp_path):
    """`pip install .` outside a clone: the wheel's files alone (installed into a folder first on the path,
    the working folder elsewhere) train from `--recipe=demo` and export; every module comes from the wheel."""
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path / "w"),
                            str(REPO)], capture_output=True, text=True, timeout=900, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "w").glob("keras_transformer-*.whl")
    site = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(site),
                                str(wheel)], capture_output=True, text=True, timeout=900, check=False)
    assert installed.returncode == 0, installed.stderr[-3000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {"PYTHONPATH": str(site)}
    where = run_command("-c", "import keras_transformer.commands as c, keras_transformer.pipelines as p; "
                        "print(c.__file__); print(p.__file__); print(c.recipes_folder())", cwd=work, env=env)
    assert where.returncode == 0 and all(line.startswith(str(site)) for line in where.stdout.split()), where.stdout
    trained = run_command("-m", "keras_transformer.train", "--recipe=demo", "--model_dir=run", "--train_steps=20",
                          "--checkpoint_every_steps=20", "--eval_every_steps=20", "--eval_max_sentences=8",
                          cwd=work, env=env, timeout=900)
    assert trained.returncode == 0, trained.stderr[-3000:]
    settings = (work / "run" / "model_config.json").read_text(encoding="utf-8")
    assert '"d_model": 128' in settings  # the demo recipe's model, read from the wheel
    exported = run_command("-m", "keras_transformer.export", "--model_dir=run", "--export_dir=serving",
                           "--signatures=serving_default", cwd=work, env=env, timeout=900)
    assert exported.returncode == 0 and (work / "serving" / "1" / "saved_model.pb").is_file(), exported.stderr[-3000:]
