"""The Penn Treebank's WSJ trees as (sentence, linearized tree) pairs: section 6.3's parsing data.

"Attention Is All You Need", section 6.3: a 4-layer Transformer trained on the Wall Street
Journal portion of the Penn Treebank (about 40K training sentences) as a sequence-to-sequence
task, sentence -> linearized tree, as Vinyals et al. (2015) did ("Grammar as a foreign
language"). This module reads the trees with nltk's `BracketParseCorpusReader`, cleans them as
EVALB expects and splits them by file:

  the NLTK sample (`treebank.zip`, files wsj_0001-wsj_0199, 3,914 trees; also unzipped):
      train wsj_0001-wsj_0159, validation wsj_0160-wsj_0179, test wsj_0180-wsj_0199
  the full WSJ treebank (LDC99T42, `.mrg` files in section folders 00-24), the standard split:
      train sections 02-21, validation 22, test 23

Cleaning (`clean`), as in the parsers EVALB scores: `-NONE-` empty elements are removed, and
with them every constituent left without a word; function tags and indices go
(NP-SBJ-1 -> NP, PP-LOC=2 -> PP); the part-of-speech level is taken out of the tree (the model
does not predict tags; the tags are kept beside it, since EVALB drops punctuation by its gold
tag). The tree a model learns is the rest: phrase labels over the words, unary chains
included. `keras_transformer.pipelines.linearized_trees` owns how such a tree is written as a target sentence.

    sentences = treebank.read_split("../shared/data/ptb_sample", "test")
    sentences[0].words, sentences[0].tags, sentences[0].tree
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import os
import re
from typing import Optional

from keras_transformer.pipelines.errors import DataError

SAMPLE_ZIP = "treebank.zip"
# The NLTK sample: files wsj_0001..wsj_0199 (3,914 trees), split by file number.
SAMPLE_SPLITS = {"train": (1, 159), "validation": (160, 179), "test": (180, 199)}
# The full WSJ treebank: sections (file number // 100), the split every parser reports.
WSJ_SPLITS = {"train": (2, 21), "validation": (22, 22), "test": (23, 23)}
DATA_DIR_IS = "the folder of treebank.zip (NLTK's sample) or of the WSJ .mrg files"
ROOT_LABEL = "TOP"  # the label of a root that nltk returns unlabelled (several top constituents)
_FILE_NUMBER = re.compile(r"wsj_(\d{4})\.mrg$")


@dataclasses.dataclass(frozen=True)
class ParsedSentence:
    """One cleaned gold tree.

    Attributes:
        words: the sentence's tokens (PTB tokenization, original case).
        tags: the gold part-of-speech tag of each word (EVALB drops punctuation by these).
        tree: an `nltk.Tree` of phrase labels whose leaves are the words (no tag level).
    """
    words: tuple
    tags: tuple
    tree: object

    @property
    def sentence(self) -> str:
        return " ".join(self.words)

    def tagged_tree(self):
        """The tree with its part-of-speech level back: what EVALB and other tools read."""
        import nltk  # pylint: disable=g-import-not-at-top

        tags = iter(self.tags)

        def build(node):
            return nltk.Tree(node.label(), [build(c) if isinstance(c, nltk.Tree) else nltk.Tree(next(tags), [c])
                                            for c in node])
        return build(self.tree)


def _label(label: str) -> str:
    """NP-SBJ-1 -> NP, PP-LOC=2 -> PP, PRT|ADVP -> PRT; -NONE-, -LRB- stay."""
    if label.startswith("-"):
        return label
    return re.split(r"[-=|]", label, maxsplit=1)[0] or label


def clean(tree) -> Optional[ParsedSentence]:
    """The `ParsedSentence` of a raw treebank tree (see the module docstring); None if no word is
    left (a tree of empty elements only)."""
    import nltk  # pylint: disable=g-import-not-at-top

    words, tags = [], []

    def walk(node):
        if not isinstance(node, nltk.Tree):  # a bare leaf under a phrase: keep it, tag unknown
            words.append(node)
            tags.append("")
            return [node]
        if len(node) == 1 and not isinstance(node[0], nltk.Tree):  # a preterminal (tag word)
            if node.label() == "-NONE-":
                return []
            words.append(node[0])
            tags.append(node.label())
            return [node[0]]
        children = [c for child in node for c in walk(child)]
        if not children:
            return []
        return [nltk.Tree(_label(node.label()), children)]

    nodes = walk(tree)
    if not nodes:
        return None
    root = nodes[0] if isinstance(nodes[0], nltk.Tree) else nltk.Tree(ROOT_LABEL, nodes)  # "(NN dog)"
    while not root.label() and len(root) == 1 and isinstance(root[0], nltk.Tree):  # "( (S ...) )"
        root = root[0]
    if not root.label():
        root.set_label(ROOT_LABEL)
    return ParsedSentence(tuple(words), tuple(tags), root)


def _file_number(fileid: str) -> int:
    match = _FILE_NUMBER.search(fileid)
    return int(match.group(1)) if match else -1


@functools.lru_cache(maxsize=4)
def _reader(data_dir: str):
    """(nltk reader, whether it is the full WSJ treebank) of `data_dir`."""
    import nltk  # pylint: disable=g-import-not-at-top
    from nltk.corpus.reader import BracketParseCorpusReader  # pylint: disable=g-import-not-at-top

    data_dir = os.path.abspath(data_dir)
    # nltk 3.9+ opens files only under its data roots: this folder is the user's treebank.
    if data_dir not in nltk.data.path:
        nltk.data.path.append(data_dir)
    zip_path = os.path.join(data_dir, SAMPLE_ZIP)
    if os.path.isfile(zip_path):
        root = nltk.data.ZipFilePathPointer(zip_path, "treebank/combined/")
        return BracketParseCorpusReader(root, r"wsj_\d{4}\.mrg"), False
    reader = BracketParseCorpusReader(data_dir, r"(.*/)?wsj_\d{4}\.mrg")
    fileids = reader.fileids()
    if not fileids:
        raise DataError(f"data_dir {data_dir}: no {SAMPLE_ZIP} and no wsj_NNNN.mrg files under it")
    return reader, max(_file_number(f) for f in fileids) >= 200


def check_inputs(data_dir: Optional[str]) -> None:
    """Raises a one-line `DataError` unless `data_dir` holds the NLTK sample or .mrg files (no
    TensorFlow, no nltk import)."""
    if not data_dir:
        raise DataError(f"dataset ptb needs data_dir, {DATA_DIR_IS}")
    if not os.path.isdir(data_dir):
        raise DataError(f"data_dir {data_dir}: no such folder")
    if os.path.isfile(os.path.join(data_dir, SAMPLE_ZIP)):
        return
    if not glob.glob(os.path.join(glob.escape(data_dir), "**", "wsj_[0-9][0-9][0-9][0-9].mrg"), recursive=True):
        raise DataError(f"data_dir {data_dir}: no {SAMPLE_ZIP} and no wsj_NNNN.mrg files under it")


def split_fileids(fileids, split: str, full_wsj: bool) -> list:
    """The files of `split` ("train", "validation", "test"): by file number in the sample, by
    section in the full treebank (module docstring)."""
    splits = WSJ_SPLITS if full_wsj else SAMPLE_SPLITS
    if split not in splits:
        raise DataError(f"the treebank has splits {', '.join(splits)}, not {split!r}")
    low, high = splits[split]
    key = (lambda n: n // 100) if full_wsj else (lambda n: n)
    return [f for f in fileids if low <= key(_file_number(f)) <= high]


@functools.lru_cache(maxsize=8)
def read_split(data_dir: str, split: str) -> tuple:
    """The cleaned `ParsedSentence`s of one split, in file order (cached per folder and split)."""
    check_inputs(data_dir)
    reader, full_wsj = _reader(data_dir)
    fileids = split_fileids(reader.fileids(), split, full_wsj)
    if not fileids:
        raise DataError(f"data_dir {data_dir}: no files of the {split} split")
    cleaned = (clean(tree) for tree in reader.parsed_sents(fileids))
    return tuple(s for s in cleaned if s is not None)


@functools.lru_cache(maxsize=4)
def tagger_for(data_dir: str, path: Optional[str] = None):
    """The part-of-speech tagger of the treebank in `data_dir` (`keras_transformer.pipelines.pos_tags`), trained on
    its training split only; with `path`, the one saved there, or trained and saved there if
    there is none yet (cached per process)."""
    from keras_transformer.pipelines import pos_tags  # pylint: disable=g-import-not-at-top

    if path and os.path.isfile(path):
        return pos_tags.load(path)
    tagger = pos_tags.train_tagger(read_split(data_dir, "train"))
    if path:
        pos_tags.save(tagger, path)
    return tagger


def pair_list(data_dir: str, split: str, source_tags: str = "none",
              tagger_file: Optional[str] = None, tree_targets: str = "words") -> list[tuple[str, str]]:
    """(sentence, linearized tree) str pairs of one split; with `source_tags` "predicted" or
    "gold", each source word followed by its tag (`keras_transformer.pipelines.pos_tags`; the tagger of
    `tagger_file`, trained on the training split if the file does not exist yet). The
    targets are the same whatever `source_tags` is; with `tree_targets` "placeholders", each
    of their words is "XX" (`keras_transformer.pipelines.linearized_trees`)."""
    return list(_pairs(data_dir, split, source_tags, tagger_file, tree_targets))


@functools.lru_cache(maxsize=16)
def _pairs(data_dir: str, split: str, source_tags: str, tagger_file: Optional[str], tree_targets: str) -> tuple:
    """`pair_list`'s pairs, made once per process (tagging a split takes seconds)."""
    from keras_transformer.pipelines import linearized_trees, pos_tags  # pylint: disable=g-import-not-at-top

    sentences = read_split(data_dir, split)
    targets = [linearized_trees.linearize(s.tree, placeholders=tree_targets == "placeholders") for s in sentences]
    if source_tags == "none":
        return tuple(zip((s.sentence for s in sentences), targets))
    if source_tags == "gold":
        tags = [s.tags for s in sentences]
    else:
        tagger = tagger_for(data_dir, tagger_file)
        tags = [pos_tags.tag_words(tagger, s.words) for s in sentences]
    return tuple((pos_tags.tagged_source(s.words, t), target) for s, t, target in zip(sentences, tags, targets))
