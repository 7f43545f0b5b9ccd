"""Layout follows the data: each layer imports only the layers below it; commands sit on top.

The layers, the entry points (derived, not listed) and the import graph are those of
tests/helpers/modules.py, which test_owners.py uses too.
"""

import ast
import json
import re
import subprocess
import sys
import zipfile

import pytest

from tests.helpers.commands import run_command
from tests.helpers.modules import ENTRY_POINTS, GRAPH, MODULES, layer, layer_package
from tests.helpers.paths import REPO


def test_entry_points_are_derived_and_include_every_command():
    assert {"keras_transformer.train", "keras_transformer.translate", "keras_transformer.average_checkpoints",
            "keras_transformer.summary", "keras_transformer.export.__main__",
            "keras_transformer.pipelines.__main__"} <= ENTRY_POINTS
    assert "keras_transformer.training.trainer" not in ENTRY_POINTS and "keras_transformer.tasks.translation" not in ENTRY_POINTS


def test_library_modules_import_only_their_layer_and_the_layers_below():
    offenders = [f"{name} imports {target}" for name, targets in GRAPH.items() if name not in ENTRY_POINTS
                 for target in targets if layer(target) > layer(name)]
    assert not offenders, offenders


def folder(name: str) -> str:
    """A module's folder (package): `keras_transformer.cli.errors` -> `keras_transformer.cli`."""
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


def test_no_two_library_folders_import_each_other():
    """`cli/` and `run_dir/`, `training/` and `decoding/`...: a folder's modules may use another
    folder's, or be used by them, not both (a concept with two owners). A package and a folder
    inside it (`tasks/` and `tasks/parsing/`, the parsing task built on the commands' work) are
    one owner's."""

    def inside(a, b):
        return layer_package(a) == layer_package(b) and (a.startswith(b + ".") or b.startswith(a + "."))

    edges = {(folder(name), folder(target)) for name, targets in GRAPH.items() if name not in ENTRY_POINTS
             for target in targets if folder(name) != folder(target) and not inside(folder(name), folder(target))}
    both_ways = sorted((a, b) for a, b in edges if (b, a) in edges and a < b)
    assert not both_ways, both_ways


def test_nothing_imports_an_entry_point():
    offenders = [f"{name} imports {target}" for name, targets in GRAPH.items() for target in targets
                 if target in ENTRY_POINTS]
    assert not offenders, offenders


def test_the_module_graph_has_no_cycle():
    done, active, cycles = set(), [], []

    def visit(name):
        if name in active:
            cycles.append(active[active.index(name):] + [name])
            return
        if name in done:
            return
        active.append(name)
        for target in sorted(GRAPH[name]):
            visit(target)
        active.pop()
        done.add(name)

    for name in sorted(GRAPH):
        visit(name)
    assert not cycles, cycles


def test_beam_search_imports_no_model_code():
    """beam_search.py is pure TensorFlow, the same search eager, under tf.function and in stock TF
    Serving: it imports tensorflow and three standard modules (a relative import counts as model
    code), and runs no Python inside the graph (py_function, numpy_function)."""
    source = (REPO / "keras_transformer" / "decoding" / "beam_search.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    roots |= {"." * node.level + (node.module or "").split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom)}
    assert roots <= {"tensorflow", "__future__", "typing", "dataclasses"}, roots
    assert "py_function" not in source and "numpy_function" not in source


def test_importing_the_library_changes_no_process_wide_state():
    """`import keras_transformer` (and its TF-free modules: the configs, a command's files, the run's
    layout and its owner, which commands use before TensorFlow starts) leave os.environ, fd 2 and TF
    alone."""
    probe = (
        "import os, sys\n"
        "before = (dict(os.environ), os.fstat(2).st_ino, os.fstat(2).st_dev)\n"
        "import keras_transformer, keras_transformer.config, keras_transformer.special_ids\n"
        "import keras_transformer.files.command_files, keras_transformer.run_dir.layout\n"
        "import keras_transformer.training_directory\n"
        "after = (dict(os.environ), os.fstat(2).st_ino, os.fstat(2).st_dev)\n"
        "assert before == after, 'changed'\n"
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules, 'loaded TensorFlow'\n"
        "assert keras_transformer.TransformerConfig.__name__ == 'TransformerConfig'\n"
        "print('ok')\n"
    )
    result = run_command("-c", probe, env={"KERAS_BACKEND": None, "TF_CPP_MIN_LOG_LEVEL": None}, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


TOP_LEVEL_FOLDERS = ("pipelines", "training_directory", "export", "tasks")
_TOP_LEVEL_IMPORT = re.compile(r"^\s*(?:from|import)\s+(?:" + "|".join(TOP_LEVEL_FOLDERS) + r")\b(?!\.json)", re.MULTILINE)
_TOP_LEVEL_RUN = re.compile(r"-m[\"', ]+(?:" + "|".join(TOP_LEVEL_FOLDERS) + r")\b(?!\.json)")


def test_one_import_namespace_everywhere():
    """The folders pipelines/, export/, tasks/ and training_directory/ install as keras_transformer.<folder>:
    no source, test, notebook or page imports or runs them by a top-level name (which works only from a clone's
    root, and would load a second copy of each module beside the installed one)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True, timeout=60).stdout.split()
    offenders = []
    for name in listed:
        path = REPO / name
        if (path.suffix not in (".py", ".ipynb", ".md", ".flags") and path.name != "Makefile" or not path.is_file()
                or name == "CHANGELOG.md"):  # history names the old forms
            continue
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":
            text = "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
        offenders += [f"{name}: {m.group(0).strip()}" for regex in (_TOP_LEVEL_IMPORT, _TOP_LEVEL_RUN)
                      for m in regex.finditer(text)]
    assert not offenders, "\n".join(offenders)


@pytest.mark.slow
def test_the_wheel_installs_one_top_level_name(tmp_path):
    """`pip install .` adds one import name: every file of the built wheel but its metadata sits under
    keras_transformer/, the four mapped folders among them."""
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(REPO)],
                           capture_output=True, text=True, timeout=900, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = tmp_path.glob("keras_transformer-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"keras_transformer"}, tops
    for folder in TOP_LEVEL_FOLDERS:
        assert f"keras_transformer/{folder}/__init__.py" in names, folder
    assert "keras_transformer/tasks/parsing/__init__.py" in names
    (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")] or [None]
    if top_level:
        assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["keras_transformer"]
