"""`keras_transformer.pipelines.pos_tags`: a parser's source with part-of-speech tags (Vinyals et al. 2015).

Covered: the tagged source's form; the tagger trained on the sample's training split tags its
validation words well (the accuracy is printed; a floor, not a golden value); training is
deterministic and a saved tagger tags as the trained one; the sample's tagged pairs keep the
targets and the words (`keras_transformer.pipelines.treebank.pair_list`). Needs ../shared/data for the sample.
"""

import json

import pytest

from keras_transformer.pipelines import pos_tags, treebank
from keras_transformer.pipelines.errors import DataError


def test_each_word_is_followed_by_its_tag_token():
    assert pos_tags.tagged_source(["The", "dog", ","], ["DT", "NN", ","]) == "The <DT> dog <NN> , <,>"
    with pytest.raises(ValueError, match="2 words but 1 tags"):
        pos_tags.tagged_source(["a", "b"], ["DT"])


@pytest.fixture(scope="module")
def tagger(ptb):
    """The tagger of the sample's training split (what a --source_tags=predicted run trains)."""
    return treebank.tagger_for(str(ptb))


def test_the_tagger_of_the_training_split_tags_validation_words_well(tagger, sample):
    accuracy = pos_tags.accuracy(tagger, sample["validation"])
    print(f"tagger accuracy on the validation split's {sum(len(s.words) for s in sample['validation'])} words: "
          f"{100 * accuracy:.2f}%")
    assert accuracy > 0.85  # measured 96.02% (nltk 3.10.4, 5 passes)


def test_training_is_deterministic_and_a_saved_tagger_tags_alike(sample, tmp_path):
    few = sample["train"][:150]  # small: two trainings
    first, second = pos_tags.train_tagger(few), pos_tags.train_tagger(few)
    assert first.model.weights == second.model.weights and first.tagdict == second.tagdict
    path = str(tmp_path / pos_tags.TAGGER_FILE)
    pos_tags.save(first, path)
    loaded = pos_tags.load(path)
    for sentence in sample["validation"][:40]:
        assert pos_tags.tag_words(loaded, sentence.words) == pos_tags.tag_words(first, sentence.words)
    (tmp_path / "bad.json").write_text(json.dumps({"weights": {}}))
    with pytest.raises(DataError, match="bad.json: not a saved part-of-speech tagger"):
        pos_tags.load(str(tmp_path / "bad.json"))


def test_tagged_pairs_keep_the_targets_and_the_words(ptb, tagger):
    plain = treebank.pair_list(str(ptb), "validation")
    tagged = treebank.pair_list(str(ptb), "validation", "predicted")  # the tagger of the fixture (cached)
    gold = treebank.pair_list(str(ptb), "validation", "gold")
    sentences = treebank.read_split(str(ptb), "validation")
    assert [t for _, t in tagged] == [t for _, t in plain] == [t for _, t in gold]
    for (source, _), (tagged_source, _), (gold_source, _), sentence in zip(plain, tagged, gold, sentences):
        tokens, gold_tokens = tagged_source.split(), gold_source.split()
        assert tokens[0::2] == gold_tokens[0::2] == source.split() == list(sentence.words)
        assert tokens[1::2] == [pos_tags.tag_token(t) for t in pos_tags.tag_words(tagger, sentence.words)]
        assert gold_tokens[1::2] == [pos_tags.tag_token(t) for t in sentence.tags]
