"""A function or method over LIMIT lines says what it does: a docstring, or it is split into named phases.

Checked on the packages, commands/ and bench/ by parsing each file (`ast`): the lines of a
function run from its `def` to its last line, decorators and nested functions included.
"""

import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
FOLDERS = ("keras_transformer", "pipelines", "training_directory", "export", "tasks", "commands", "bench")
LIMIT = 100  # lines


def long_functions_without_docstring(source: str, limit: int = LIMIT) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of each function or method of `source` over `limit` lines without a docstring."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > limit and ast.get_docstring(node) is None:
                found.append((node.name, node.lineno, lines))
    return found


def test_the_check_finds_a_long_function_without_a_docstring_and_passes_one_with():
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT))
    assert long_functions_without_docstring(f"def long():\n{body}") == [("long", 1, LIMIT + 1)]
    assert long_functions_without_docstring(f"class A:\n    def method(self):\n{body}".replace("\n    x", "\n        x")) \
        == [("method", 2, LIMIT + 1)]
    assert long_functions_without_docstring(f'def long():\n    """Says what it does."""\n{body}') == []
    assert long_functions_without_docstring(f"def exactly_the_limit():\n{body[body.index(chr(10)) + 1:]}") == []


def test_every_function_over_the_limit_has_a_docstring():
    found = [f"{path.relative_to(REPO)}:{line} {name} ({lines} lines)"
             for folder in FOLDERS for path in sorted((REPO / folder).rglob("*.py"))
             if "__pycache__" not in path.parts
             for name, line, lines in long_functions_without_docstring(path.read_text(encoding="utf-8"))]
    assert not found, "over 100 lines without a docstring:\n" + "\n".join(found)
