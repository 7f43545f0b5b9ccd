"""Layout follows the data: each layer imports only the layers below it; commands sit on top.

The layers, the entry points (derived, not listed) and the import graph are those of
tests/helpers/modules.py, which test_owners.py uses too.
"""

import ast

from tests.helpers.commands import run_command
from tests.helpers.modules import ENTRY_POINTS, GRAPH, layer
from tests.helpers.paths import REPO


def test_entry_points_are_derived_and_include_every_command():
    assert {"keras_transformer.train", "keras_transformer.translate", "keras_transformer.average_checkpoints",
            "keras_transformer.summary", "export.__main__", "pipelines.__main__"} <= ENTRY_POINTS
    assert "keras_transformer.training.trainer" not in ENTRY_POINTS and "tasks.translation" not in ENTRY_POINTS


def test_library_modules_import_only_their_layer_and_the_layers_below():
    offenders = [f"{name} imports {target}" for name, targets in GRAPH.items() if name not in ENTRY_POINTS
                 for target in targets if layer(target) > layer(name)]
    assert not offenders, offenders


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
    tree = ast.parse((REPO / "keras_transformer" / "decoding" / "beam_search.py").read_text(encoding="utf-8"))
    roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert roots <= {"tensorflow", "__future__", "typing", "dataclasses", "math", "collections"}, roots


def test_importing_the_library_changes_no_process_wide_state():
    """`import keras_transformer` (and its TF-free config modules) leave os.environ, fd 2 and TF alone."""
    probe = (
        "import os, sys\n"
        "before = (dict(os.environ), os.fstat(2).st_ino, os.fstat(2).st_dev)\n"
        "import keras_transformer, keras_transformer.config, keras_transformer.special_ids\n"
        "after = (dict(os.environ), os.fstat(2).st_ino, os.fstat(2).st_dev)\n"
        "assert before == after, 'changed'\n"
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules, 'loaded TensorFlow'\n"
        "assert keras_transformer.TransformerConfig.__name__ == 'TransformerConfig'\n"
        "print('ok')\n"
    )
    result = run_command("-c", probe, env={"KERAS_BACKEND": None, "TF_CPP_MIN_LOG_LEVEL": None}, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
