"""Sphinx configuration of the documentation site: `make docs` builds it into docs/_build/html.

Pages are MyST Markdown (myst-nb, which includes myst-parser) with the furo theme. The build is
strict: `make docs` passes -W --keep-going -n (every warning an error, every cross-reference
resolved). Two extensions of docs/_ext/ generate content: `command_reference` (the flag tables of
reference/commands.md, from the commands' absl flags) and `notebook_pages` (the notebooks of
notebooks/, executed beforehand by `make docs`, read through docs/notebooks/*.nblink).
No intersphinx: the build needs no network.
"""

import os
import pathlib
import re
import sys

DOCS = pathlib.Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path[:0] = [str(DOCS / "_ext"), str(REPO)]  # the extensions; the packages autodoc imports
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

project = "keras_transformer"
author = "the keras_transformer authors"
copyright = "the keras_transformer authors"  # pylint: disable=redefined-builtin
release = version = re.search(r'^__version__ = "([^"]+)"', (REPO / "keras_transformer" / "__init__.py").read_text(
    encoding="utf-8"), re.MULTILINE).group(1)  # written once, in the package

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "command_reference",
    "notebook_pages",
    "sphinx-mathjax-offline",  # MathJax served from the site itself: the formulas render without a network
]

exclude_patterns = [
    "_build",
    "_ext",
    "**.ipynb_checkpoints",
]
root_doc = "index"
nitpicky = True  # also where -n is not given (Read the Docs)
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
smartquotes = False  # "--flag" stays two hyphens; quotes stay as written

# MyST ----------------------------------------------------------------------------------------------
myst_heading_anchors = 3  # GitHub's heading slugs: [text](../guide/training.md#checkpoints)
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath", "amsmath", "attrs_inline", "attrs_block"]

# Notebooks (myst-nb) -------------------------------------------------------------------------------
nb_execution_mode = "off"  # executed by `make docs` beforehand (docs/_ext/notebook_pages.py)
nb_custom_formats = {".nblink": "notebook_pages.read_link"}
nb_merge_streams = True
nb_output_stderr = "remove"  # TensorFlow's native start-up lines; what a notebook shows goes to stdout
kt_notebooks = "auto"  # executed copies when current; -D kt_notebooks=stored: never (the tests' build)

# API reference (autodoc, Google-style docstrings) --------------------------------------------------
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
autodoc_member_order = "bysource"
autodoc_class_signature = "separated"
autodoc_default_options = {"show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_custom_sections = [("Call arguments", "params_style")]  # Keras layers' section
default_role = "literal"  # docstrings write `name` for code, as Markdown does

# Nitpicky mode: types of other libraries have no page here (no intersphinx); the project's own
# references must all resolve.
nitpick_ignore_regex = [
    (r"py:.*", r"(tf|tensorflow|keras|np|numpy|tensorflow_text|tf_text|ctranslate2|grpc|nltk|sentencepiece)(\..*)?"),
    (r"py:.*", r"(typing|collections\.abc|enum|dataclasses|pathlib|os|io)\..*"),
    (r"py:class", r"(NoneType|optional|callable|function|iterable|sequence|any|Any)"),
]

# HTML ------------------------------------------------------------------------------------------
html_theme = "furo"
html_title = "keras_transformer"
html_show_sourcelink = False
html_copy_source = False
html_static_path = ["_static"]
html_css_files = ["custom.css"]


# The docstrings are plain text: "lp(|Y|)" is a length, not a reST substitution reference.
_SUBSTITUTION = re.compile(r"(?<!\\)\|([^|\s][^|]*?)\|")
_LITERAL = re.compile(r"(``.*?``|`[^`]*`)")


def _plain_bars(app, what, name, obj, options, lines):
    """Escapes |text| outside `literals` in docstrings, so that reST reads it as text."""
    lines[:] = ["".join(part if _LITERAL.fullmatch(part) else _SUBSTITUTION.sub(r"\\|\1\\|", part)
                        for part in _LITERAL.split(line)) for line in lines]


def _literal_examples(app, what, name, obj, options, lines):
    """A paragraph ending in ":" followed by an indented block (the docstrings' code examples, as in
    Markdown) ends in "::", so that reST shows the block as code, not as a quotation."""
    for i, line in enumerate(lines[:-2]):
        text = line.rstrip()
        if (text.endswith(":") and not text.endswith("::") and not text.lstrip().startswith(":")
                and not lines[i + 1].strip() and _indent(lines[i + 2]) > _indent(line)):
            lines[i] = text + ":"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip()) if line.strip() else -1


def _quiet_tensorflow(app):
    """Starts TensorFlow before autodoc imports it, its native start-up lines (not warnings) silenced."""
    from keras_transformer.cli import silence_native_stderr  # pylint: disable=import-outside-toplevel

    with silence_native_stderr():
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

        tf.constant(0)


def setup(app):
    app.connect("builder-inited", _quiet_tensorflow)
    app.connect("autodoc-process-docstring", _plain_bars)
    app.connect("autodoc-process-docstring", _literal_examples)
