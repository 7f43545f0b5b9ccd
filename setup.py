"""keras_transformer: the Transformer of "Attention Is All You Need" in Keras 3."""

import importlib.util
import pathlib
import re
import sys

import setuptools

# The version is written once, in keras_transformer/__init__.py (CHANGELOG.md says what a change of it means).
VERSION = re.search(r'^__version__ = "([^"]+)"', pathlib.Path(__file__).with_name("keras_transformer").joinpath(
    "__init__.py").read_text(encoding="utf-8"), re.MULTILINE).group(1)

# One import namespace: the model core is keras_transformer/, and each of these top-level folders installs as
# keras_transformer.<folder> (pipelines/ as keras_transformer.pipelines, ...).
SUBPACKAGE_FOLDERS = ("pipelines", "training_directory", "export", "tasks", "commands")


def _packages():
    """Every package of the namespace, and the folder each one's name maps to."""
    packages = setuptools.find_packages(include=["keras_transformer", "keras_transformer.*"])
    package_dir = {"keras_transformer": "keras_transformer"}
    for folder in SUBPACKAGE_FOLDERS:
        for found in setuptools.find_packages(include=[folder, f"{folder}.*"]):
            packages.append(f"keras_transformer.{found}")
        package_dir[f"keras_transformer.{folder}"] = folder
    packages.append("keras_transformer.recipes")  # data only: configs/'s recipes (keras_transformer.commands.recipe_file)
    package_dir["keras_transformer.recipes"] = "configs"
    return packages, package_dir


PACKAGES, PACKAGE_DIR = _packages()


def _commands():
    """keras_transformer.commands.COMMANDS, read from its file (it imports nothing of the project)."""
    spec = importlib.util.spec_from_file_location(
        "keras_transformer_commands", pathlib.Path(__file__).with_name("commands") / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.COMMANDS.values()


COMMANDS = _commands()

# The documentation site's builders (make docs; docs/conf.py), one major version each.
DOCS = ["sphinx>=9,<10", "myst-nb>=1.3,<2", "furo>=2025.7", "sphinx-mathjax-offline>=0.0.2"]

setuptools.setup(
    name="keras_transformer",
    version=VERSION,
    description=(
        "The Transformer of 'Attention Is All You Need' (Vaswani et al., 2017) "
        "in Keras 3: train, export for TF Serving, translate."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    license_files=["LICENSE"],
    # The Python versions TensorFlow 2.21 and tensorflow-text 2.21 publish wheels for.
    python_requires=">=3.10,<3.14",
    classifiers=[
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    # Every command is a console script too: kt-train, kt-translate, kt-export, ... (keras_transformer.commands).
    entry_points={"console_scripts": [f"{c.script} = keras_transformer.commands:kt_{c.name}" for c in COMMANDS]},
    packages=PACKAGES,
    package_dir=PACKAGE_DIR,
    package_data={"keras_transformer.recipes": ["*.flags", "demo_sentences.*"]},
    install_requires=[
        # TF and tensorflow-text must share a minor version; so must the model server.
        "tensorflow==2.21.*",
        "tensorflow-text==2.21.*",
        "tensorflow-serving-api==2.21.*",  # the warm-up file (PredictionLog) and the gRPC client
        "keras>=3.15",
        "tensorflow-datasets>=4.9",
        "sentencepiece>=0.2",
        "sacrebleu>=2.4",
        "sacremoses>=0.1",  # BLEU in the lowercased Moses-tokenized convention of published Multi30k numbers
        "absl-py>=2.0",
        "nltk>=3.9",  # the Penn Treebank reader and trees (constituency parsing, section 6.3)
        "tensorboard>=2.20",  # tf.summary.scalar (the training summaries); TF 2.21 no longer pulls it in
        "importlib_resources",  # tensorflow-datasets 4.9 builders need it (via etils.epath)
        "numpy",
    ],
    extras_require={
        "test": ["pytest>=8", "pytest-xdist>=3.5", "pytest-timeout>=2.3", "pyyaml", "nbclient>=0.10", "nbformat>=5.10", "ipykernel", "matplotlib",
                 "ctranslate2>=4,<5", *DOCS],  # DOCS: tests/project/test_docs.py builds the site
        # make docs: the Sphinx site (docs/conf.py), its notebooks executed (as the tests run them) and rendered
        "docs": [*DOCS, "nbclient>=0.10", "nbformat>=5.10", "ipykernel", "matplotlib"],
        "ctranslate2": ["ctranslate2>=4,<5"],  # python -m keras_transformer.export --format=ctranslate2
        "notebooks": ["jupyter", "matplotlib"],
        "bench": ["torch==2.13.0", "ctranslate2>=4,<5"],
    },
)
