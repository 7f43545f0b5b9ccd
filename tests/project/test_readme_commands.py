"""The README's two commands: `make demo` on a fresh clone, and `make test` as CI's first command.

This is what a new user does first. The clone holds only what is committed, so a file the demo
needs that was never added to git fails here. The demo runs with fewer training steps than its
recipe (the full run is measured in docs/results.md, "The demo").

What is not run here, and why: the clone's `make demo` uses this test's interpreter (`PY=` on make's
command line, `STAMP=` and `DEMO_STAMP=` so make does not install), not a new virtual environment. Creating one and
installing TensorFlow into it was a large part of this test's time, and CI already does exactly
that: `.ci/run` is `make test`, then `make test-slow`, on a clean checkout (checked below), whose first step is the
Makefile's install rule (a new .venv, `pip install -e '.[test]'` from setup.py, the same rule `make
demo` would run), and the suite then runs in that environment, so a dependency missing from
setup.py fails CI. `make test-slow` is the command running this test, so no test command runs again
inside the clone. The clone's own code is what runs: PYTHONPATH and the working folder are the
clone, a `sitecustomize` there maps the subpackages setup.py maps (keras_transformer.pipelines from
the clone's pipelines/, ...) as the editable install maps them to this checkout's, and the test checks
that every package is imported from the clone, not from the checkout this interpreter's environment
was installed from.
"""

import os
import shutil
import subprocess
import sys
import types

import pytest

from tests.helpers.paths import REPO

SHORT_DEMO = (
    "DEMO_ARGS=--train_steps=40 --checkpoint_every_steps=20 --eval_every_steps=40 --eval_max_sentences=16"
)


def _run(args, cwd, timeout, env):
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


# The clone's sitecustomize: setup.py's package_dir, found before the editable install's own finder.
_CLONE_FINDER = """
import importlib.util, pathlib, sys
ROOT = pathlib.Path(__file__).resolve().parent
class CloneFolders:
    @staticmethod
    def find_spec(name, path=None, target=None):
        parts = name.split(".")
        if len(parts) == 2 and parts[0] == "keras_transformer" and (ROOT / parts[1]).is_dir() and parts[1] in FOLDERS:
            return importlib.util.spec_from_file_location(
                name, ROOT / parts[1] / "__init__.py", submodule_search_locations=[str(ROOT / parts[1])])
        return None
sys.meta_path.insert(0, CloneFolders)
"""


def _clone_env(clone):
    """This environment with the clone, and nothing else, on PYTHONPATH (its subpackages mapped as setup.py
    maps them); no virtual environment active."""
    folders = _setup_module().SUBPACKAGE_FOLDERS
    (clone / "sitecustomize.py").write_text(f"FOLDERS = {folders!r}\n" + _CLONE_FINDER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PYTHONPATH"] = str(clone)
    return env


def _setup_module():
    """setup.py's names (SUBPACKAGE_FOLDERS), read without running setuptools.setup."""
    source = (REPO / "setup.py").read_text(encoding="utf-8")
    names = {"__file__": str(REPO / "setup.py")}
    exec(source.split("def _packages")[0], names)  # pylint: disable=exec-used
    return types.SimpleNamespace(**names)


def test_ci_runs_the_readme_test_command_then_the_slow_tests():
    """CI runs the README's `make test` (the tests not marked slow), then `make test-slow` (the
    others): together every test, each once."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "make demo" in readme and "make test" in readme and "make test-slow" in readme
    commands = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert commands[-2:] == ["make test", "make test-slow"]
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert 'PYTEST_ARGS ?= -m "not slow" tests' in makefile
    assert "--dist loadfile -m slow tests" in makefile


@pytest.mark.slow
def test_readme_demo_on_a_fresh_clone(tmp_path):
    if not (REPO / ".git").exists() or shutil.which("make") is None or shutil.which("git") is None:
        pytest.skip("needs a git checkout, git and make")
    clone = tmp_path / "clone"
    _run(["git", "clone", "--quiet", str(REPO), str(clone)], tmp_path, 120, os.environ.copy())
    env = _clone_env(clone)

    # Every package of the installed distribution comes from the clone: were one missing there, this
    # interpreter's editable install would serve it from the checkout it points at.
    packages = ["keras_transformer", *(f"keras_transformer.{f}" for f in _setup_module().SUBPACKAGE_FOLDERS)]
    where = _run([sys.executable, "-c", f"import importlib\nfor name in {packages!r}: "
                  "print(importlib.import_module(name).__file__)"], clone, 300, env)
    assert len(where.stdout.split()) == len(packages) == 6, (packages, where.stdout)
    assert all(path.startswith(str(clone) + os.sep) for path in where.stdout.split()), where.stdout

    demo = _run(["make", "demo", SHORT_DEMO, f"PY={sys.executable}", "STAMP=", "DEMO_STAMP="], clone, 1800, env)
    translations = [line for line in demo.stdout.splitlines() if line.strip()]
    sources = (clone / "configs" / "demo_sentences.en").read_text(encoding="utf-8").splitlines()
    assert len([t for t in translations if not t.startswith(("BLEU", "{", "make", sys.executable))]) >= len(sources)
    assert "BLEU" in demo.stdout + demo.stderr
    assert (clone / "runs" / "demo_export" / "1" / "saved_model.pb").is_file()
    assert not (clone / ".venv").exists()  # the demo ran with this interpreter, not an environment of its own

    # Resuming and the next export version are tested in test_train.py, test_faults_training.py and
    # test_serving_module.py.
