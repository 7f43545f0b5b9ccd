"""Layout follows the data: each layer imports only the layers below it; commands sit on top.

    keras_transformer   ids -> logits -> ids   (the model core: imports no other layer)
    pipelines           text -> ids            (may import the core: its special ids)
    export              strings -> strings     (may import pipelines and the core)
    tasks               runs of a task         (may import all three)
    entry points        commands               (anything; nothing imports them)

An entry point is derived, not listed: a `__main__.py`, or a module with a top-level
`if __name__ == "__main__":` block. Imports inside functions count like the others.
"""

import ast
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
LAYERS = {"keras_transformer": 0, "pipelines": 1, "export": 2, "tasks": 3}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for package in LAYERS for p in (REPO / package).rglob("*.py")}


def _is_entry_point(path: pathlib.Path) -> bool:
    if path.name == "__main__.py":
        return True
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = {getattr(n, "id", None) for n in ast.walk(node.test)}
            constants = {getattr(n, "value", None) for n in ast.walk(node.test)}
            if "__name__" in names and "__main__" in constants:
                return True
    return False


ENTRY_POINTS = {name for name, path in MODULES.items() if _is_entry_point(path)}


def _imports(name: str) -> set[str]:
    """The project modules `name` imports (a `from package import submodule` names the submodule)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:  # keras_transformer.layers.masks.causal_mask -> the module
                target = target.rpartition(".")[0]
            if target:
                found.add(target)
    return found - {name}


GRAPH = {name: _imports(name) for name in MODULES}


def _layer(name: str) -> int:
    return LAYERS[name.split(".")[0]]


def test_entry_points_are_derived_and_include_every_command():
    assert {"keras_transformer.train", "keras_transformer.translate", "keras_transformer.average_checkpoints",
            "keras_transformer.summary", "export.__main__", "pipelines.__main__"} <= ENTRY_POINTS
    assert "keras_transformer.training.trainer" not in ENTRY_POINTS and "tasks.translation" not in ENTRY_POINTS


def test_library_modules_import_only_their_layer_and_the_layers_below():
    offenders = [f"{name} imports {target}" for name, targets in GRAPH.items() if name not in ENTRY_POINTS
                 for target in targets if _layer(target) > _layer(name)]
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
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "TF_CPP_MIN_LOG_LEVEL")}
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
