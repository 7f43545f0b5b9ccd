"""Runs the notebooks in notebooks/ headless, as CI does, and keeps them stored without outputs.

Parameters follow papermill's convention. A notebook declares its settings in
exactly one code cell tagged `parameters`, holding only `NAME = <literal>` lines:

    FAST = False          # required: True means tiny settings, well under a minute
    OUTPUT_DIR = "runs"   # optional: the folder the notebook writes files to
    TRAIN_STEPS = 2000    # optional: anything else the notebook needs

To run it with other values, a code cell tagged `injected-parameters` is
inserted right after that cell and reassigns them, so every later cell sees the
new values. Settings derived from parameters are therefore computed after the
parameters cell, e.g. `steps = 20 if FAST else TRAIN_STEPS`. Only declared
names can be injected.

CI (tests/project/test_notebooks.py, `ci_parameters`) injects, in this order:
`FAST = True`; `OUTPUT_DIR = '<a new, empty temporary folder>'` if the cell
declares OUTPUT_DIR; then the notebook's entry of CI_PARAMETERS below. The
kernel is ipykernel started with this interpreter (`sys.executable`, whatever
kernelspecs are installed), in notebooks/, with matplotlib's inline backend.

Command line, from the repository root:

    .venv/bin/python -m tests.helpers.notebooks --ci notebooks/01_architecture.ipynb   # as CI runs it
    .venv/bin/python -m tests.helpers.notebooks --set FAST=True notebooks/01_architecture.ipynb
    .venv/bin/python -m tests.helpers.notebooks --clear notebooks/*.ipynb   # strip outputs before committing
"""

from __future__ import annotations

import argparse
import ast
import copy
import datetime
import os
import pathlib
import re
import sys
import tempfile
import time

import nbformat
from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from tests.helpers.paths import REPO, SHARED_DATA

NOTEBOOKS = REPO / "notebooks"
PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"
REQUIRED_PARAMETERS = ("FAST",)

# What CI injects beyond FAST and OUTPUT_DIR, by notebook file name, e.g.
# {"02_training.ipynb": {"TRAIN_STEPS": 20}}. Each name must be declared in that
# notebook's parameters cell. MODEL_DIR = "" makes 03 and 04 train their own small model
# instead of reading a model notebook 02 may have left in ../runs/notebook_02/model (the pytest run
# of all notebooks gives 03 the model its run of 02 trained: READS_MODEL_OF in
# tests/project/test_notebooks.py); TABLE_DIR = "" makes 06 build a tiny table of its own.
CI_PARAMETERS: dict[str, dict[str, object]] = {
    "02_train_and_translate.ipynb": {"TRAIN_STEPS": 60, "EVAL_EVERY_STEPS": 30},
    "03_attention_visualization.ipynb": {"MODEL_DIR": "", "TRAIN_STEPS": 60},
    "04_export_and_serve.ipynb": {"MODEL_DIR": "", "TRAIN_STEPS": 60},
    "05_constituency_parsing.ipynb": {"MODEL_DIR": "", "TRAIN_STEPS": 40, "SENTENCES": 6, "BEAM_SIZE": 3,
                                      "DATA_DIR": str(SHARED_DATA / "ptb_sample")},
    "06_table3.ipynb": {"TABLE_DIR": ""},
}
# Notebooks that read ../shared/data (their test skips without it).
NEEDS_SHARED_DATA = ("05_constituency_parsing.ipynb",)

INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class NotebookError(Exception):
    """A notebook that breaks the conventions above or fails to run; the message says where."""


def discover(folder: pathlib.Path = NOTEBOOKS) -> list[pathlib.Path]:
    """The notebooks of `folder`, sorted by name (01_..., 02_...)."""
    return sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))


def read(path: pathlib.Path) -> nbformat.NotebookNode:
    """Reads and validates a version-4 notebook."""
    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    if nb.nbformat != 4:
        raise NotebookError(f"{path.name}: nbformat {nb.nbformat}, expected 4")
    nbformat.validate(nb)
    return nb


# Stored form ---------------------------------------------------------------------


def stored_output_problems(nb: nbformat.NotebookNode) -> list[str]:
    """Code cells that carry outputs or an execution count (empty if the notebook is clean)."""
    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if cell.get("outputs"):
            problems.append(f"cell {index}: {len(cell.outputs)} output(s)")
        if cell.get("execution_count") is not None:
            problems.append(f"cell {index}: execution_count {cell.execution_count}")
    return problems


def clear_outputs(path: pathlib.Path) -> bool:
    """Removes outputs and execution counts in place; returns whether the file changed."""
    nb = read(path)
    if not stored_output_problems(nb):
        return False
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nbformat.write(nb, path)
    return True


# Parameters ----------------------------------------------------------------------


def parameters_cell(nb: nbformat.NotebookNode) -> tuple[int, dict[str, object]]:
    """The index of the one `parameters`-tagged cell and its default values.

    Raises NotebookError unless there is exactly one such code cell and it holds
    only `NAME = <literal>` assignments.
    """
    indices = [
        i for i, cell in enumerate(nb.cells)
        if PARAMETERS_TAG in cell.get("metadata", {}).get("tags", [])
    ]
    if len(indices) != 1:
        raise NotebookError(f"expected one cell tagged {PARAMETERS_TAG!r}, found {len(indices)}")
    index = indices[0]
    cell = nb.cells[index]
    if cell.cell_type != "code":
        raise NotebookError(f"the {PARAMETERS_TAG!r} cell (cell {index}) is not a code cell")
    defaults = {}
    for node in ast.parse(cell.source).body:
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            raise NotebookError(
                f"the {PARAMETERS_TAG!r} cell may only assign literals to names; "
                f"line {node.lineno}: {ast.get_source_segment(cell.source, node)!r}"
            )
        try:
            defaults[node.targets[0].id] = ast.literal_eval(node.value)
        except ValueError:
            raise NotebookError(
                f"parameter {node.targets[0].id} must be a literal; "
                f"got {ast.get_source_segment(cell.source, node.value)!r}"
            ) from None
    missing = [name for name in REQUIRED_PARAMETERS if name not in defaults]
    if missing:
        raise NotebookError(f"the {PARAMETERS_TAG!r} cell does not declare {', '.join(missing)}")
    return index, defaults


def ci_parameters(path: pathlib.Path, output_dir: pathlib.Path) -> dict[str, object]:
    """The values CI injects: FAST = True, OUTPUT_DIR if declared, then CI_PARAMETERS[path.name].

    OUTPUT_DIR is `output_dir` as a string, created (empty) if it does not exist.
    """
    _, defaults = parameters_cell(read(path))
    values = {"FAST": True}
    if "OUTPUT_DIR" in defaults:
        pathlib.Path(output_dir).mkdir(parents=True, exist_ok=True)
        values["OUTPUT_DIR"] = str(output_dir)
    values.update(CI_PARAMETERS.get(path.name, {}))
    return values


def inject_parameters(nb: nbformat.NotebookNode, values: dict[str, object]) -> nbformat.NotebookNode:
    """A copy of `nb` with an `injected-parameters` cell assigning `values` after the parameters cell.

    Every name must be declared in the parameters cell, so a misspelt or renamed
    parameter fails loudly instead of being silently ignored.
    """
    index, defaults = parameters_cell(nb)
    unknown = sorted(set(values) - set(defaults))
    if unknown:
        raise NotebookError(
            f"cannot inject {', '.join(unknown)}: not declared in the {PARAMETERS_TAG!r} cell "
            f"(declared: {', '.join(defaults)})"
        )
    nb = copy.deepcopy(nb)
    lines = ["# Parameters injected by tests/helpers/notebooks.py"]
    lines += [f"{name} = {value!r}" for name, value in values.items()]
    cell = nbformat.v4.new_code_cell("\n".join(lines), metadata={"tags": [INJECTED_TAG]})
    nb.cells.insert(index + 1, cell)
    return nb


# Execution -----------------------------------------------------------------------


class VenvKernelManager(AsyncKernelManager):
    """Starts ipykernel with this interpreter, ignoring installed kernelspecs.

    A user-level `python3` kernelspec (~/.local/share/jupyter/kernels) would
    otherwise shadow the virtual environment's and run another Python.
    """

    @property
    def kernel_spec(self) -> KernelSpec:
        if self._kernel_spec is None:
            self._kernel_spec = KernelSpec(
                argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                display_name=f"Python ({sys.executable})",
                language="python",
                name="python3",
            )
        return self._kernel_spec


def _failure_message(name: str, nb: nbformat.NotebookNode, error: Exception) -> str:
    """Where the run failed (the cell's index in the stored file) and nbclient's report of it.

    nbclient's report holds the cell's source and the traceback; terminal colours are removed.
    """
    code = [(i, cell) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    failing = [(i, c) for i, c in code if any(o.output_type == "error" for o in c.get("outputs", []))]
    if not failing:  # a timeout leaves no error output: the failing cell is the last one started
        failing = [(i, c) for i, c in code if c.get("execution_count") is not None][-1:]
    if failing:
        index, cell = failing[0]
        injected = [i for i, c in enumerate(nb.cells) if INJECTED_TAG in c.metadata.get("tags", [])]
        stored_index = index - sum(1 for i in injected if i < index)
        where = f"cell {stored_index} (In [{cell.get('execution_count')}])"
    else:
        where = "a cell"
    # CellTimeoutError and DeadKernelError (the kernel died, e.g. out of memory) carry no ename.
    summary = type(error).__name__
    if isinstance(error, CellExecutionError):
        summary = f"{error.ename}: {error.evalue}"
    return f"{name}: {where} failed with {summary}\n\n{_ANSI.sub('', str(error)).strip()}"


def execute(
    path: pathlib.Path,
    parameters: dict[str, object] | None = None,
    timeout: int = 600,
    env: dict[str, str] | None = None,
) -> nbformat.NotebookNode:
    """Executes the notebook at `path` with `parameters` injected; returns it with outputs.

    Args:
        path: the .ipynb file; the kernel runs in its folder. The file is not modified.
        parameters: values for the injected-parameters cell (see the module docstring).
        timeout: seconds allowed for each cell.
        env: extra environment variables for the kernel, on top of os.environ
            and MPLBACKEND set to Jupyter's inline backend (headless).

    Raises:
        NotebookError: with the failing cell's source and the error.
    """
    path = pathlib.Path(path).resolve()
    try:
        nb = inject_parameters(read(path), parameters or {})
    except NotebookError as error:
        raise NotebookError(f"{path.name}: {error}") from None
    # The inline backend draws every figure to PNG without a display, so a figure
    # that fails to render fails the run (plain Agg would make plt.show() a no-op).
    kernel_env = {**os.environ, "MPLBACKEND": INLINE_BACKEND, "PYTHONUNBUFFERED": "1", **(env or {})}
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        kernel_manager_class=VenvKernelManager,
        resources={"metadata": {"path": str(path.parent)}},
        allow_errors=False,
        record_timing=True,
    )
    try:
        client.execute(env=kernel_env)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as error:
        raise NotebookError(_failure_message(path.name, nb, error)) from None
    return nb


def cell_times(nb: nbformat.NotebookNode) -> list[tuple[int, float]]:
    """(execution count, seconds) of each executed code cell, from nbclient's recorded timing."""
    times = []
    for cell in nb.cells:
        timing = cell.get("metadata", {}).get("execution", {})
        start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if start and end:
            seconds = datetime.datetime.fromisoformat(end) - datetime.datetime.fromisoformat(start)
            times.append((cell.execution_count, seconds.total_seconds()))
    return times


def _assignment(text: str) -> tuple[str, object]:
    name, _, value = text.partition("=")
    try:
        return name.strip(), ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        raise argparse.ArgumentTypeError(f"expected NAME=<Python literal>, got {text!r}") from None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=pathlib.Path)
    parser.add_argument("--clear", action="store_true", help="strip outputs in place instead of running")
    parser.add_argument(
        "--ci", action="store_true",
        help="inject what CI injects (FAST = True, OUTPUT_DIR = a new temporary folder, CI_PARAMETERS)",
    )
    parser.add_argument(
        "--set", dest="values", action="append", type=_assignment, default=[], metavar="NAME=VALUE",
        help="inject one parameter, e.g. --set TRAIN_STEPS=100 (after --ci's values)",
    )
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed for each cell")
    args = parser.parse_args(argv)
    status = 0
    for path in args.notebooks:
        if args.clear:
            print(f"{path}: {'cleared' if clear_outputs(path) else 'already clean'}")
            continue
        parameters = {}
        if args.ci:
            parameters = ci_parameters(path, pathlib.Path(tempfile.mkdtemp(prefix=f"{path.stem}_")))
        parameters.update(args.values)
        start = time.monotonic()
        try:
            nb = execute(path, parameters, timeout=args.timeout)
        except NotebookError as error:
            print(error, file=sys.stderr)
            status = 1
            continue
        slowest = sorted(cell_times(nb), key=lambda t: -t[1])[:3]
        print(
            f"{path}: ran in {time.monotonic() - start:.1f} s with {parameters or 'its defaults'}; "
            "slowest cells: " + ", ".join(f"In [{n}] {seconds:.1f} s" for n, seconds in slowest)
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
