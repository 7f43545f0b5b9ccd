"""Part-of-speech tags in a parser's source sentence: "The <DT> dog <NN> barks <VBZ> . <.>".

Vinyals et al. (2015, "Grammar as a Foreign Language", section 3) and the sequence-to-sequence
parsers after them read the words with their tags; on little data the tags carry what a
small model would otherwise learn from few examples. Here each word of a source sentence is
followed by its tag written as one token of its own, `<TAG>` (`tag_token`), so that:

* the targets do not change: the linearized tree is over the words only
  (`keras_transformer.pipelines.linearized_trees`);
* the tree constraint copies only the words: in a tagged source every second whitespace-
  separated token is a tag, and `keras_transformer.decoding.tree_constraint` skips the pieces
  of those tokens when it counts and copies source pieces (`TreeGrammar.source_tags`);
* a word and its tag never share a token ("," and its tag "<,>" are two).

Three settings (`SOURCE_TAGS`, `DataConfig.source_tags`, `--source_tags`):

  none       the words alone (section 6.3 of "Attention Is All You Need", and the default);
  predicted  tags from nltk's averaged perceptron tagger (Collins 2002; nltk's
             `PerceptronTagger`) trained on the training split only, deterministically
             (`train_tagger`); a training run saves it as MODEL_DIR/tagger.json, and parsing
             raw text tags it with that file (`save`, `load`);
  gold       the treebank's own tags: an upper bound on what tags can give, never a headline
             number (raw text has no gold tags, so such a model parses only treebank splits).

    tagger = train_tagger(treebank.read_split(data_dir, "train"))   # or treebank.tagger_for(data_dir)
    tagged_source(words, tag_words(tagger, words))                  # "The <DT> dog <NN> ..."
"""

from __future__ import annotations

import json
import random
from typing import Sequence

SOURCE_TAGS = ("none", "predicted", "gold")
TAGGER_FILE = "tagger.json"  # in a training directory: the tagger of a --source_tags=predicted run
TRAINING_ITERATIONS = 5  # nltk's default number of passes over the training sentences
_SEED = 0  # the order of the passes (nltk shuffles the sentences with `random`)


def tag_token(tag: str) -> str:
    """The source token of a part-of-speech tag: "NN" -> "<NN>"."""
    return f"<{tag}>"


def tagged_source(words: Sequence[str], tags: Sequence[str]) -> str:
    """The source sentence with each word followed by its tag's token (module docstring)."""
    if len(words) != len(tags):
        raise ValueError(f"{len(words)} words but {len(tags)} tags")
    return " ".join(token for word, tag in zip(words, tags) for token in (word, tag_token(tag)))


def train_tagger(sentences):
    """nltk's averaged perceptron tagger trained on `sentences` (`keras_transformer.pipelines.treebank.ParsedSentence`s
    whose words all have a tag), the same for the same sentences: nltk shuffles them between
    passes with Python's `random`, which is seeded here and left as it was."""
    from nltk.tag.perceptron import PerceptronTagger  # pylint: disable=g-import-not-at-top

    tagger = PerceptronTagger(load=False)
    state = random.getstate()
    random.seed(_SEED)
    try:
        tagger.train([list(zip(s.words, s.tags)) for s in sentences if all(s.tags)], nr_iter=TRAINING_ITERATIONS)
    finally:
        random.setstate(state)
    return tagger


def tag_words(tagger, words: Sequence[str]) -> list[str]:
    """The tags `tagger` gives the words of one sentence."""
    return [tag for _, tag in tagger.tag(list(words))] if words else []


def accuracy(tagger, sentences) -> float:
    """The share of the words of `sentences` (`ParsedSentence`s) that `tagger` tags as the treebank does."""
    right = total = 0
    for sentence in sentences:
        predicted = tag_words(tagger, sentence.words)
        right += sum(p == g for p, g in zip(predicted, sentence.tags))
        total += len(sentence.words)
    return right / max(total, 1)


def save(tagger, path: str) -> None:
    """Writes the tagger (weights, tag dictionary, classes) as JSON, atomically."""
    from keras_transformer.files import atomic  # pylint: disable=g-import-not-at-top  (no TensorFlow)

    text = json.dumps({"weights": tagger.model.weights, "tagdict": tagger.tagdict,
                       "classes": sorted(tagger.classes)}, sort_keys=True)
    atomic.write_atomically(path, text.encode("utf-8"))


def load(path: str):
    """The tagger `save` wrote; a one-line `DataError` for a file that is not one."""
    from nltk.tag.perceptron import PerceptronTagger  # pylint: disable=g-import-not-at-top

    from keras_transformer.pipelines.errors import DataError  # pylint: disable=g-import-not-at-top

    try:
        with open(path, encoding="utf-8") as file:
            saved = json.load(file)
        tagger = PerceptronTagger(load=False)
        tagger.model.weights, tagger.tagdict = saved["weights"], saved["tagdict"]
        tagger.classes = tagger.model.classes = set(saved["classes"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DataError(f"{path}: not a saved part-of-speech tagger ({error})") from None
    return tagger
