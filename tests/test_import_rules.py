"""Layout follows the data: keras_transformer's library modules never import pipelines/ or export/.

Entry points (train, translate, demo, summary) are the exception: they wire the pieces together.
"""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_transformer"
ENTRY_POINTS = {"train.py", "translate.py", "demo.py", "summary.py", "average_checkpoints.py", "__main__.py"}


def _imported_roots(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module.split(".")[0]


def test_library_modules_import_upstream_only():
    offenders = [
        f"{path.relative_to(PACKAGE.parent)} imports {root}"
        for path in PACKAGE.rglob("*.py")
        if path.name not in ENTRY_POINTS
        for root in _imported_roots(path)
        if root in ("pipelines", "export")
    ]
    assert not offenders, offenders


def test_beam_search_imports_no_model_code():
    path = PACKAGE / "beam_search.py"
    if path.exists():
        roots = set(_imported_roots(path))
        assert roots <= {"tensorflow", "__future__", "typing", "dataclasses", "math", "collections"}, roots
