"""keras_transformer: the Transformer of "Attention Is All You Need" in Keras 3."""

import setuptools

# The documentation site's builders (make docs; docs/conf.py), one major version each.
DOCS = ["sphinx>=9,<10", "myst-nb>=1.3,<2", "furo>=2025.7", "sphinx-mathjax-offline>=0.0.2"]

setuptools.setup(
    name="keras_transformer",
    version="0.1.0",
    description=(
        "The Transformer of 'Attention Is All You Need' (Vaswani et al., 2017) "
        "in Keras 3: train, export for TF Serving, translate."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=setuptools.find_packages(include=["keras_transformer*", "pipelines*", "training_directory*", "export*", "tasks*"]),
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
        "test": ["pytest>=8", "pytest-xdist>=3.5", "nbclient>=0.10", "nbformat>=5.10", "ipykernel", "matplotlib",
                 "ctranslate2>=4,<5", *DOCS],  # DOCS: tests/project/test_docs.py builds the site
        # make docs: the Sphinx site (docs/conf.py), its notebooks executed (as the tests run them) and rendered
        "docs": [*DOCS, "nbclient>=0.10", "nbformat>=5.10", "ipykernel", "matplotlib"],
        "ctranslate2": ["ctranslate2>=4,<5"],  # python -m export --format=ctranslate2
        "notebooks": ["jupyter", "matplotlib"],
        "bench": ["torch==2.13.0", "ctranslate2>=4,<5"],
    },
)
