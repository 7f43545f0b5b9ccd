"""docs/architecture.md names every part of the repository, and only parts that exist.

A newcomer reads docs/architecture.md (the site's architecture page) to find where a thing
lives, so it must not go stale either way. Its convention: a file or folder is named by its path from the repository root, in
backticks (`keras_transformer/decoding/search.py`, `configs/demo.flags`, `tests/project/`), and a
module's member by its dotted path (`keras_transformer.decoding.search.translate_ids`). Checked:

* every module of keras_transformer/, pipelines/, training_directory/, export/, tasks/ and bench/, every file of
  configs/, notebooks/ and docs/, and the top-level files are named;
* every folder of tests/ is named (tests mirror the packages: a new package, a new folder);
* every backticked path (a name ending in .py, .flags, .ipynb, .md or /) exists;
* every backticked dotted name of a project module (the start of a span) names a module, or a
  module and a name it defines.

The files are git's (tracked, plus untracked files git does not ignore), so a new module
counts before it is committed; without git the tree is walked.
"""

import ast
import pathlib
import re
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
DOC_NAME = DOC.relative_to(REPO).as_posix()

PACKAGES = ("keras_transformer", "pipelines", "training_directory", "export", "tasks", "commands")  # folders
PYTHON_FOLDERS = (*PACKAGES, "bench")  # every .py file under these
ALL_FILES_FOLDERS = ("configs", "notebooks", "docs", ".ci")  # every file under these
PATH_SUFFIXES = (".py", ".flags", ".ipynb", ".md", "/")
SKIPPED_PARTS = {"__pycache__", ".ipynb_checkpoints"}


def _repository_files() -> list[str]:
    """Repository-relative paths (posix) of git's files, or of the tree's without git."""
    try:
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                                cwd=REPO, capture_output=True, check=True, timeout=60).stdout
        paths = [p for p in listed.decode("utf-8").split("\0") if p]
        paths = [p for p in paths if (REPO / p).is_file()]  # deleted but not yet committed: gone
    except (OSError, subprocess.SubprocessError):
        paths = [p.relative_to(REPO).as_posix() for p in REPO.rglob("*") if p.is_file()
                 and not any(part.startswith(".") and part != ".ci" for part in p.relative_to(REPO).parts)]
    return sorted(p for p in paths if not SKIPPED_PARTS & set(p.split("/")))


FILES = _repository_files()
TEXT = DOC.read_text(encoding="utf-8")
PROSE = re.sub(r"^```.*?^```", "", TEXT, flags=re.MULTILINE | re.DOTALL)  # fenced blocks drawn, not named
SPANS = {" ".join(span.split()) for span in re.findall(r"`([^`]+)`", PROSE)}  # may wrap a line


def _named(path: str) -> bool:
    return path in SPANS


def test_every_module_recipe_and_notebook_is_named():
    wanted = [p for p in FILES if
              (p.split("/")[0] in PYTHON_FOLDERS and p.endswith(".py"))
              or p.split("/")[0] in ALL_FILES_FOLDERS
              or "/" not in p]
    missing = [p for p in wanted if not _named(p)]
    assert not missing, (f"{DOC_NAME} does not name these files (add a line each: `path` | what it holds):\n  "
                         + "\n  ".join(missing))


def test_every_test_folder_is_named():
    folders = sorted({"tests/"} | {p.rsplit("/", 1)[0] + "/" for p in FILES if p.startswith("tests/")})
    missing = [f for f in folders if not _named(f)]
    assert not missing, (f"{DOC_NAME} does not name these test folders (tests mirror the packages; add a row "
                         f"to its tests/ table):\n  " + "\n  ".join(missing))


def test_every_path_it_names_exists():
    paths = sorted(s for s in SPANS if re.fullmatch(r"[\w.\-/]+", s) and s.endswith(PATH_SUFFIXES))
    stale = [p for p in paths if not (REPO / p).exists()]
    assert not stale, (f"{DOC_NAME} names paths that do not exist (renamed or removed? paths are from the "
                       f"repository root):\n  " + "\n  ".join(stale))


def _module_path(dotted: str) -> pathlib.Path | None:
    """The source of an installed name: keras_transformer.export.client lives in export/client.py."""
    parts = dotted.split(".")
    if len(parts) > 1 and parts[1] in PACKAGES[1:]:
        parts = parts[1:]
    base = REPO.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _top_level_names(path: pathlib.Path) -> set[str]:
    """The names a module defines or imports at its top level (inside `if` / `try` blocks too)."""
    names, body = set(), list(ast.parse(path.read_text(encoding="utf-8")).body)
    while body:
        node = body.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            body += node.body + getattr(node, "orelse", []) + getattr(node, "finalbody", [])
            body += [n for handler in getattr(node, "handlers", []) for n in handler.body]
    return names


def test_every_dotted_name_it_uses_resolves():
    stale = []
    for span in sorted(SPANS):
        dotted = re.match(r"keras_transformer(?:\.\w+)+", span)  # also `...search.translate_ids(model, ...)`
        if not dotted:
            continue
        parts = dotted.group().split(".")
        depth = max((k for k in range(1, len(parts) + 1) if _module_path(".".join(parts[:k]))), default=0)
        module = _module_path(".".join(parts[:depth])) if depth else None
        if module is None or (depth < len(parts) and parts[depth] not in _top_level_names(module)):
            stale.append(dotted.group())
    assert not stale, (f"{DOC_NAME} uses dotted names that no module defines (moved or renamed?):\n  "
                       + "\n  ".join(stale))
