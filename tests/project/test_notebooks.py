"""The notebooks in notebooks/: stored without outputs, and each one runs headless with CI settings.

Every notebook gets `FAST = True` and, if its parameters cell declares
OUTPUT_DIR, a fresh temporary folder as `OUTPUT_DIR` (notebooks write there,
never next to themselves); further CI values go in CI_PARAMETERS of
tests/helpers/notebooks.py, which describes the convention; notebooks/README.md says how
to run the notebooks by hand. Notebook 03 is given the model notebook 02 trained (READS_MODEL_OF),
as a user who runs them in order has it; 04 trains its own, so the cell that trains a model when
there is none runs too.
"""

import os
import pathlib
import sys

import nbformat
import pytest

from tests.helpers.notebooks import (
    CI_PARAMETERS,
    NEEDS_SHARED_DATA,
    NOTEBOOKS,
    NotebookError,
    ci_parameters,
    discover,
    execute,
    inject_parameters,
    parameters_cell,
    read,
    stored_output_problems,
)
from tests.helpers.paths import skip_without_shared_data

NAMES = [path.name for path in discover()]

# Seconds allowed for each cell; a notebook should take well under a minute with FAST = True.
CELL_TIMEOUT = int(os.environ.get("KT_NOTEBOOK_CELL_TIMEOUT", "600"))

# {notebook: the notebook whose OUTPUT_DIR/model it gets as MODEL_DIR}: notebook 02's model is 03's
# default MODEL_DIR, and reading it saves training a second one. Run without 02 (`-k 03`), 03 keeps
# CI_PARAMETERS' MODEL_DIR = "" and trains its own.
READS_MODEL_OF = {"03_attention_visualization.ipynb": "02_train_and_translate.ipynb"}


@pytest.fixture(scope="module")
def output_dirs(tmp_path_factory):
    """The folder holding each notebook's OUTPUT_DIR (one per notebook, named after it) in this module."""
    return tmp_path_factory.mktemp("notebooks")


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_stored_without_outputs(name):
    nb = read(NOTEBOOKS / name)
    problems = stored_output_problems(nb)
    assert not problems, (
        f"{name} is stored with outputs ({'; '.join(problems)}); "
        f"run: .venv/bin/python -m tests.helpers.notebooks --clear notebooks/{name}"
    )
    parameters_cell(nb)  # exactly one parameters cell, of literals, declaring FAST


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs(name, output_dirs):
    path = NOTEBOOKS / name
    if name in NEEDS_SHARED_DATA:
        skip_without_shared_data()
    output_dir = output_dirs / path.stem
    values = ci_parameters(path, output_dir)
    if name in READS_MODEL_OF:
        trained = output_dirs / pathlib.Path(READS_MODEL_OF[name]).stem / "model"
        if (trained / "checkpoints" / "checkpoint").is_file():
            values["MODEL_DIR"] = str(trained)
    before = _visible_files()
    try:
        execute(path, values, timeout=CELL_TIMEOUT)
    except NotebookError as error:
        pytest.fail(str(error), pytrace=False)
    written = sorted(_visible_files() - before)
    assert not written, f"{name} wrote {written} into notebooks/; write to OUTPUT_DIR instead"
    if values.get("MODEL_DIR"):  # it read the model it was given, and trained none of its own
        assert not (output_dir / "model").exists(), f"{name} trained a model though given {values['MODEL_DIR']}"


def test_ci_parameters_name_existing_notebooks():
    assert set(CI_PARAMETERS) <= set(NAMES), sorted(set(CI_PARAMETERS) - set(NAMES))


# The harness itself ---------------------------------------------------------------


def _notebook(parameters, *sources):
    cell = nbformat.v4.new_code_cell(parameters, metadata={"tags": ["parameters"]})
    cells = [cell] + [nbformat.v4.new_code_cell(source) for source in sources]
    return nbformat.v4.new_notebook(cells=cells)


def test_ci_injects_fast_and_a_fresh_output_dir_after_the_parameters_cell(tmp_path):
    path = tmp_path / "writer.ipynb"
    nbformat.write(_notebook("FAST = False\nOUTPUT_DIR = 'runs'\nSTEPS = 100", "print(FAST)"), path)
    values = ci_parameters(path, tmp_path / "output")
    assert values == {"FAST": True, "OUTPUT_DIR": str(tmp_path / "output")}
    assert (tmp_path / "output").is_dir()
    nb = inject_parameters(read(path), values)
    output_dir = str(tmp_path / "output")
    assert nb.cells[1].source.splitlines()[1:] == ["FAST = True", f"OUTPUT_DIR = {output_dir!r}"]
    assert nb.cells[1].metadata["tags"] == ["injected-parameters"]
    with pytest.raises(NotebookError, match="TRAIN_STEPS: not declared"):
        inject_parameters(_notebook("FAST = False"), {"TRAIN_STEPS": 20})


@pytest.mark.parametrize(
    "source, message",
    [
        ("STEPS = 10", "does not declare FAST"),
        ("FAST = 2 > 1", "must be a literal"),
        ("import os\nFAST = True", "only assign"),
    ],
)
def test_parameters_cell_is_checked(source, message):
    with pytest.raises(NotebookError, match=message):
        parameters_cell(_notebook(source))


def test_stored_outputs_are_found():
    nb = _notebook("FAST = False", "1 + 1")
    nb.cells[1].execution_count = 1
    nb.cells[1].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "2"}, execution_count=1)]
    assert stored_output_problems(nb) == ["cell 1: 1 output(s)", "cell 1: execution_count 1"]


def test_the_kernel_is_this_python_in_the_notebook_folder(tmp_path):
    path = tmp_path / "where.ipynb"
    source = "import os, sys\nprint(sys.executable, os.getcwd(), FAST)"
    nbformat.write(_notebook("FAST = False", source), path)
    ran = execute(path, {"FAST": True})
    assert ran.cells[2].outputs[0].text.split() == [sys.executable, str(tmp_path.resolve()), "True"]
    assert not stored_output_problems(read(path))  # the file itself is left as it was


def test_a_failing_cell_is_reported_with_its_source_and_error(tmp_path):
    path = tmp_path / "failing.ipynb"
    nbformat.write(_notebook("FAST = False", "x = 1", "y = 2\n1 / 0"), path)
    with pytest.raises(NotebookError) as error:
        execute(path, {"FAST": True}, timeout=60)
    message = str(error.value)
    assert message.startswith("failing.ipynb: cell 2 (In [4]) failed with ZeroDivisionError")
    assert "y = 2\n1 / 0" in message


def _visible_files():
    """Files under notebooks/, leaving out hidden ones (.ipynb_checkpoints) and caches."""
    files = set()
    for path in NOTEBOOKS.rglob("*"):
        parts = path.relative_to(NOTEBOOKS).parts
        if not any(part.startswith(".") or part == "__pycache__" for part in parts):
            files.add(str(path.relative_to(NOTEBOOKS)))
    return files
