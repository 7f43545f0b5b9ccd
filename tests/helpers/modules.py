"""The project's modules, its entry points and its import graph, read from the source (nothing imported).

One namespace: the folder keras_transformer/ is the package of that name, and each other folder below
installs as keras_transformer.<folder> (setup.py's package_dir). The layers, by folder:

    keras_transformer/   ids -> logits -> ids   (the model core: imports no other layer)
    pipelines/           text -> ids            (may import the core: its special ids)
    training_directory/  a run on disk          (may import pipelines and the core)
    export/              strings -> strings     (may import the three below)
    tasks/               runs of a task         (may import all four)
    commands/            the commands           (may import all five; only entry points import them)
    entry points         `python -m` modules    (anything; nothing imports them)

An entry point is derived, not listed: a `__main__.py`, or a module with a top-level
`if __name__ == "__main__":` block. Imports inside functions count like the others.
"""

from __future__ import annotations

import ast
import pathlib

from tests.helpers.paths import REPO

NAMESPACE = "keras_transformer"
LAYERS = {"keras_transformer": 0, "pipelines": 1, "training_directory": 2, "export": 3, "tasks": 4,
          "commands": 5}  # by folder


def module_name(path: pathlib.Path) -> str:
    """The installed name of a source file: pipelines/batching.py -> keras_transformer.pipelines.batching."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[0] != NAMESPACE:
        parts.insert(0, NAMESPACE)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_package(name: str) -> str:
    """The layer a module belongs to, as a package name: keras_transformer.pipelines.batching ->
    keras_transformer.pipelines; keras_transformer.decoding.search -> keras_transformer (the core)."""
    parts = name.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return ".".join(parts[:2])
    return NAMESPACE


MODULES = {module_name(p): p for package in LAYERS for p in sorted((REPO / package).rglob("*.py"))}


def is_entry_point(path: pathlib.Path) -> bool:
    if path.name == "__main__.py":
        return True
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = {getattr(n, "id", None) for n in ast.walk(node.test)}
            constants = {getattr(n, "value", None) for n in ast.walk(node.test)}
            if "__name__" in names and "__main__" in constants:
                return True
    return False


ENTRY_POINTS = {name for name, path in MODULES.items() if is_entry_point(path)}


def imports(name: str) -> set[str]:
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


GRAPH = {name: imports(name) for name in MODULES}


def layer(name: str) -> int:
    return LAYERS[layer_package(name).rpartition(".")[2]]
