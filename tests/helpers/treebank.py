"""What the treebank, linearized-tree and parsing tests share: one-line trees, a hand-written
.mrg folder, the PTB sample's splits (the `ptb` and `sample` fixtures are in tests/conftest.py)."""

from __future__ import annotations

import pathlib
import sys

from keras_transformer.pipelines import treebank

SPLITS = ("train", "validation", "test")
SAMPLE_SIZES = {"train": 3396, "validation": 273, "test": 245}  # 3,914 trees, none lost by cleaning

MRG = """( (S
    (NP-SBJ (DT The) (NN dog) )
    (VP (VBZ barks) )
    (. .) ))
( (S
    (NP-SBJ (-NONE- *) )
    (VP (VB Run)
      (NP (-NONE- *T*-1) ))
    (. !) ))
"""


def one_line(tree) -> str:
    return tree.pformat(margin=sys.maxsize)


def read_sample(ptb: pathlib.Path) -> dict:
    """{split: its cleaned sentences}: each split read once per process (`read_split` is cached)."""
    return {split: treebank.read_split(str(ptb), split) for split in SPLITS}


def write_mrg(folder: pathlib.Path) -> pathlib.Path:
    """`folder` with one hand-written file of section 00 (file number 1: the sample's split)."""
    (folder / "00").mkdir(parents=True)
    (folder / "00" / "wsj_0001.mrg").write_text(MRG, encoding="utf-8")
    return folder
