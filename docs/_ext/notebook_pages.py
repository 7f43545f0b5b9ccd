"""The notebooks of notebooks/ as pages of the site, with their outputs.

The notebooks are stored without outputs (tests/project/test_notebooks.py). `make docs` first
executes them (`python docs/_ext/notebook_pages.py`, this file's command line) into
docs/_build/notebooks/, headless, with the settings CI runs them with (tests/helpers/notebooks.py:
FAST = True, a fresh OUTPUT_DIR, CI_PARAMETERS), except that notebooks 03 and 04 are given a
trained model as MODEL_DIR: the demo's when `make demo` has trained it (runs/demo), so their
attention maps and translations are a trained model's, else the one notebook 02 trained here (a
few updates). A notebook runs again only when its file, its parameters or that model changed
(the key in the executed copy's metadata).

Each page of docs/notebooks/ is a small `.nblink` file, `{"path": "notebooks/NAME.ipynb"}` (from
the repository root). myst-nb reads it through `read_link` (`nb_custom_formats` in docs/conf.py),
which returns the executed copy when it is current, else the stored notebook (no outputs);
myst-nb renders the notebook as it is (`nb_execution_mode = "off"`). The Sphinx option
`kt_notebooks` chooses: "auto" (the default: executed when current), "executed" (an error
without a current executed copy) or "stored" (never executed: the tests' quick build).

    python docs/_ext/notebook_pages.py                  # execute what changed, into docs/_build/notebooks
    python docs/_ext/notebook_pages.py --force 03       # run notebook 03 again
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import shutil
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
EXECUTED = REPO / "docs" / "_build" / "notebooks"  # the executed copies (and their OUTPUT_DIRs, work/)
DEMO_MODEL = REPO / "runs" / "demo"  # make demo's RUN_DIR
READS_DEMO_MODEL = ("03_attention_visualization.ipynb", "04_export_and_serve.ipynb")
METADATA_KEY = "kt_docs"
MODES = ("auto", "executed", "stored")

_mode = "auto"  # set from the Sphinx option kt_notebooks when the build starts


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def notebook_hash(path: pathlib.Path) -> str:
    """The hash of the stored notebook's file."""
    return _sha256(path.read_bytes())


def executed_copy(name: str) -> pathlib.Path:
    return EXECUTED / name


def current_executed(path: pathlib.Path):
    """The executed copy of the notebook at `path` if it was made from the file as it is now, else None."""
    import nbformat  # pylint: disable=import-outside-toplevel

    copy = executed_copy(path.name)
    if not copy.is_file():
        return None
    nb = nbformat.read(copy, as_version=4)
    if nb.metadata.get(METADATA_KEY, {}).get("notebook_sha256") != notebook_hash(path):
        return None
    return nb


# The Sphinx side -------------------------------------------------------------------------------


def read_link(text: str):
    """myst-nb's reader of a `.nblink` page: the notebook it names, executed or as stored (`_mode`)."""
    import nbformat  # pylint: disable=import-outside-toplevel

    path = REPO / json.loads(text)["path"]
    if _mode != "stored":
        nb = current_executed(path)
        if nb is not None:
            return nb
        if _mode == "executed":
            raise RuntimeError(f"{path.name}: no executed copy of the notebook as it is in "
                               f"{EXECUTED.relative_to(REPO)}; run: python docs/_ext/notebook_pages.py")
    return nbformat.read(path, as_version=4)


def _config_inited(app, config):
    global _mode  # pylint: disable=global-statement
    if config.kt_notebooks not in MODES:
        raise ValueError(f"kt_notebooks = {config.kt_notebooks!r}: one of {', '.join(MODES)}")
    _mode = config.kt_notebooks


def _always_outdated(app, env, added, changed, removed):
    """The notebook pages are read again on every build: their executed copies change, not their .nblink."""
    pages = [name for name in env.found_docs if env.doc2path(name).suffix == ".nblink"]
    return [name for name in pages if name not in added | changed]


def setup(app):
    app.add_config_value("kt_notebooks", "auto", "env", types=(str,))
    app.connect("config-inited", _config_inited)
    app.connect("env-get-outdated", _always_outdated)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


# Executing -------------------------------------------------------------------------------------


def _model_key(model_dir: pathlib.Path) -> str | None:
    """What identifies a training directory's model (its checkpoint lists), or None when it has none."""
    state = model_dir / "checkpoints" / "checkpoint"
    if not state.is_file():
        return None
    averaged = model_dir / "averaged" / "checkpoint"
    return _sha256(state.read_bytes() + (averaged.read_bytes() if averaged.is_file() else b""))


def given_model(name: str) -> pathlib.Path | None:
    """The trained model notebook `name` reads: the demo's (runs/demo) if `make demo` trained it, else
    the one notebook 02 trained here (as tests/project/test_notebooks.py gives 03); None: it trains its own."""
    if name not in READS_DEMO_MODEL:
        return None
    for model_dir in (DEMO_MODEL, EXECUTED / "work" / "02_train_and_translate" / "model"):
        if _model_key(model_dir):
            return model_dir
    return None


def plan(path: pathlib.Path, output_dir: pathlib.Path) -> tuple[dict, dict]:
    """(the parameters to inject, the key of that run) for the notebook at `path`."""
    from tests.helpers.notebooks import ci_parameters  # pylint: disable=import-outside-toplevel

    parameters = ci_parameters(path, output_dir)
    model_dir = given_model(path.name)
    if model_dir:
        parameters["MODEL_DIR"] = str(model_dir)
    key = {"notebook_sha256": notebook_hash(path), "model": _model_key(model_dir) if model_dir else None,
           "parameters": {k: v for k, v in parameters.items() if k != "OUTPUT_DIR"}}
    return parameters, key


def execute(path: pathlib.Path, force: bool = False) -> str:
    """Executes the notebook into EXECUTED unless its copy is current; returns what was done."""
    import nbformat  # pylint: disable=import-outside-toplevel
    from tests.helpers.notebooks import NEEDS_SHARED_DATA, execute as run  # pylint: disable=import-outside-toplevel
    from tests.helpers.paths import SHARED_DATA  # pylint: disable=import-outside-toplevel

    copy = executed_copy(path.name)
    output_dir = EXECUTED / "work" / path.stem
    parameters, key = plan(path, output_dir)
    if not force and copy.is_file() and nbformat.read(copy, as_version=4).metadata.get(METADATA_KEY) == key:
        return "up to date"
    if path.name in NEEDS_SHARED_DATA and not SHARED_DATA.is_dir():
        return f"not run: it needs the shared data folder {SHARED_DATA} (the page shows no outputs)"
    shutil.rmtree(output_dir, ignore_errors=True)
    parameters, key = plan(path, output_dir)  # ci_parameters creates OUTPUT_DIR afresh
    start = time.monotonic()
    nb = run(path, parameters)
    nb.metadata[METADATA_KEY] = key
    copy.parent.mkdir(parents=True, exist_ok=True)
    temporary = copy.with_suffix(".ipynb.tmp")
    nbformat.write(nb, temporary)
    os.replace(temporary, copy)
    model = f", MODEL_DIR={parameters['MODEL_DIR']}" if parameters.get("MODEL_DIR") else ""
    return f"executed in {time.monotonic() - start:.0f} s (FAST=True{model})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", nargs="*", default=None, metavar="NN",
                        help="run these notebooks again (their number, e.g. 03; none given: all)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from tests.helpers.notebooks import NotebookError, discover  # pylint: disable=import-outside-toplevel

    status = 0
    for path in discover(NOTEBOOKS):
        force = args.force is not None and (not args.force or path.name[:2] in args.force)
        try:
            print(f"{path.relative_to(REPO)}: {execute(path, force)}", flush=True)
        except NotebookError as error:
            print(error, file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
