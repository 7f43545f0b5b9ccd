"""pipelines.tokenizers: special ids, exact round trips, save/load, SavedModel, WordPiece."""

import dataclasses
import json
import os

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from keras_transformer.pipelines import text_files
from keras_transformer.pipelines.errors import DataError
from keras_transformer import special_ids
from keras_transformer.pipelines import tokenizers as tok_lib

# Cased text, punctuation, umlauts, sharp s, accents, and characters no training
# sentence has (they must survive through byte fallback).
HARD_CASES = [
    "Größe, Übermäßig: Äpfel & Öl (süß) für José!",
    "Café? Naïve \"quotes\" -- l'été.",
    "Zwei  Leerzeichen und ein Tab\tnach dem Wort.",
    "Straße 12, 3.5 % ÄÖÜ äöü ß é É",
    "Unseen: ç ø 漢字 🙂 €",
]


def _pairs(n=1500):
    """Embedded-corpus pairs, or a small fake list while grammar_corpus is absent."""
    try:
        from keras_transformer.pipelines import grammar_corpus
    except ImportError:
        words = ["Der Hund", "die Straße", "über", "schön", "Café", "the dog", "is", "big", "süß"]
        return [(f"{words[i % 5]} {words[(i * 7) % 9]} {i}.", f"{words[(i * 3) % 9]}, {words[i % 4]}!")
                for i in range(n)]
    return grammar_corpus.generate_pairs(n, seed=3)


@pytest.fixture(scope="module")
def pairs():
    return _pairs()


@pytest.fixture(scope="module")
def bpe(pairs):
    source, target = tok_lib.train_pair(pairs, tok_lib.TokenizerConfig(type="bpe", vocab_size=600))
    assert source is target  # shared vocabulary by default
    return source


@pytest.fixture(scope="module")
def lowercase_bpe(pairs):
    tokenizer, _ = tok_lib.train_pair(pairs[:500], tok_lib.TokenizerConfig(vocab_size=500, lowercase=True))
    return tokenizer


def _round_trip(tokenizer, sentences):
    ids = tokenizer.tokenize(tf.constant(sentences))
    return [s.decode("utf-8") for s in tokenizer.detokenize(ids).numpy()]


def test_special_ids_are_the_project_convention(bpe):
    assert (special_ids.PAD_ID, special_ids.UNK_ID, special_ids.BOS_ID, special_ids.EOS_ID) == (0, 1, 2, 3)
    processor = spm.SentencePieceProcessor(model_proto=bpe._model_bytes())
    assert [processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id()] == [0, 1, 2, 3]
    ids = bpe.tokenize(tf.constant(["Der Hund."]), add_eos=True)
    assert ids.dtype == tf.int32 and ids.shape.rank == 2
    row = ids[0].numpy()
    assert row[-1] == special_ids.EOS_ID and not np.isin(row[:-1], [0, 1, 2, 3]).any()


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_sentencepiece_round_trip_on_embedded_corpus(pairs, model_type):
    tokenizer, _ = tok_lib.train_pair(pairs, tok_lib.TokenizerConfig(type=model_type, vocab_size=600))
    sentences = [s for pair in pairs[:300] for s in pair] + HARD_CASES
    assert _round_trip(tokenizer, sentences) == sentences


def test_round_trip_on_multi30k_validation(shared_data):
    folder = shared_data / "multi30k"
    train = text_files.read_parallel_pairs(folder / "train.en.gz", folder / "train.de.gz")
    val = text_files.read_parallel_pairs(folder / "val.en.gz", folder / "val.de.gz")
    tokenizer, _ = tok_lib.train_pair(train, tok_lib.TokenizerConfig(vocab_size=8000))
    sentences = [s for pair in val for s in pair] + HARD_CASES
    assert len(sentences) == 2 * 1014 + len(HARD_CASES)
    assert _round_trip(tokenizer, sentences) == sentences


def test_detokenize_ignores_everything_after_eos_or_pad(bpe):
    ids = bpe.tokenize(tf.constant(["Der Hund.", "Ein Café, süß!"]), add_eos=True)
    dense = ids.to_tensor(default_value=special_ids.PAD_ID)  # (2, T)
    junk = tf.fill([2, 3], 57)  # ids after the first EOS/PAD must not show
    padded = tf.concat([dense, tf.zeros([2, 2], tf.int32), junk], axis=1)
    with_bos = tf.concat([tf.fill([2, 1], special_ids.BOS_ID), padded], axis=1)
    expected = [b"Der Hund.", "Ein Café, süß!".encode()]
    for x in (dense, padded, with_bos, ids, tf.cast(padded, tf.int64)):
        assert bpe.detokenize(x).numpy().tolist() == expected


def test_save_and_load_in_a_fresh_module(bpe, tmp_path):
    bpe.save(str(tmp_path / "tok"))
    settings = json.loads((tmp_path / "tok" / "tokenizer.json").read_text())
    assert settings["type"] == "bpe" and settings["vocab_size"] == bpe.vocab_size
    assert (settings["pad_id"], settings["unk_id"], settings["bos_id"], settings["eos_id"]) == (0, 1, 2, 3)
    loaded = tok_lib.load(str(tmp_path / "tok"))
    assert loaded is not bpe and isinstance(loaded, tf.Module)
    assert loaded.asset_path == str(tmp_path / "tok" / "tokenizer.model")
    assert os.path.isfile(loaded.asset_path)
    x = tf.constant(HARD_CASES)
    np.testing.assert_array_equal(loaded.tokenize(x, add_eos=True).to_tensor(),
                                  bpe.tokenize(x, add_eos=True).to_tensor())


@pytest.mark.parametrize("lowercase", [False, True])
def test_tokenizer_survives_a_savedmodel(bpe, lowercase_bpe, lowercase, tmp_path):
    """The exporter's path: tokenizer ops inside a SavedModel, loaded without Python objects."""
    if lowercase:
        bpe = lowercase_bpe

    class Wrapper(tf.Module):
        def __init__(self, tokenizer):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def round_trip(self, strings):
            ids = self.tokenizer.tokenize(strings, add_eos=True)
            return {"ids": ids.to_tensor(), "text": self.tokenizer.detokenize(ids.to_tensor())}

    tf.saved_model.save(Wrapper(bpe), str(tmp_path / "sm"))
    restored = tf.saved_model.load(str(tmp_path / "sm"))
    out = restored.round_trip(tf.constant(HARD_CASES))
    assert [s.decode() for s in out["text"].numpy()] == [s.lower() if lowercase else s for s in HARD_CASES]
    np.testing.assert_array_equal(out["ids"], bpe.tokenize(tf.constant(HARD_CASES), add_eos=True).to_tensor())


def test_separate_vocabularies_save_and_load(pairs, tmp_path):
    config = tok_lib.TokenizerConfig(type="bpe", vocab_size=500, shared=False)
    source, target = tok_lib.train_pair(pairs, config)
    assert source is not target
    tok_lib.save_pair(source, target, str(tmp_path))
    loaded_source, loaded_target = tok_lib.load_pair(str(tmp_path))
    assert loaded_source.asset_path.endswith(os.path.join("source", "tokenizer.model"))
    s, t = pairs[0]
    assert _round_trip(loaded_source, [s]) == [s] and _round_trip(loaded_target, [t]) == [t]


def test_wordpiece_ids_and_documented_whitespace_loss(pairs, tmp_path):
    config = tok_lib.TokenizerConfig(type="wordpiece", vocab_size=600)
    tokenizer, _ = tok_lib.train_pair(pairs, config)
    assert tokenizer.vocab_size <= 600
    assert tuple(tokenizer._vocab[:4]) == ("[PAD]", "[UNK]", "[BOS]", "[EOS]")
    sentences = [s for pair in pairs[:50] for s in pair]
    ids = tokenizer.tokenize(tf.constant(sentences), add_eos=True)
    assert ids.dtype == tf.int32
    assert not np.isin(ids.flat_values.numpy(), [special_ids.PAD_ID, special_ids.UNK_ID, special_ids.BOS_ID]).any()
    back = _round_trip(tokenizer, sentences)
    # Not exact: punctuation comes back space-separated ("Hund ."), documented.
    assert [b.replace(" ", "") for b in back] == [s.replace(" ", "") for s in sentences]
    assert tokenizer.detokenize(tokenizer.tokenize(["Der Hund."])).numpy()[0] == b"Der Hund ."
    loaded = tok_lib.load(tokenizer.save(str(tmp_path / "wp")))
    assert loaded.asset_path.endswith("vocab.txt")
    np.testing.assert_array_equal(loaded.tokenize(sentences).to_tensor(),
                                  tokenizer.tokenize(sentences).to_tensor())


def test_lowercase_folds_case(pairs):
    tokenizer, _ = tok_lib.train_pair(pairs[:500], tok_lib.TokenizerConfig(vocab_size=500, lowercase=True))
    a, b = tokenizer.tokenize(tf.constant(["Der HUND", "der hund"])).to_list()
    assert a == b


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_lowercase_is_unicode_lowercase_that_keeps_sharp_s(pairs, lowercase_bpe, model_type):
    """Lowercased references keep ß (Moses' lowercase.perl, str.lower): so must the model's text."""
    tokenizer = lowercase_bpe if model_type == "bpe" else tok_lib.train_pair(pairs[:500], tok_lib.TokenizerConfig(
        type=model_type, vocab_size=500, lowercase=True))[0]
    assert tokenizer.lowercase_op == "lower"
    assert _round_trip(tokenizer, HARD_CASES) == [s.lower() for s in HARD_CASES]
    assert _round_trip(tokenizer, ["WEIßE Straße, STRASSE"]) == ["weiße straße, strasse"]


def _lowercase_pair_saved(tokenizer, directory, **settings_changes):
    tok_lib.save(tokenizer, str(directory))
    config = directory / tok_lib.CONFIG_FILE
    settings = json.loads(config.read_text(encoding="utf-8"))
    assert settings["lowercase_op"] == "lower"
    settings.update(settings_changes)
    settings = {key: value for key, value in settings.items() if value is not None}
    config.write_text(json.dumps(settings), encoding="utf-8")
    return tokenizer, settings


def test_lowercase_tokenizer_saved_before_lowercase_op_still_case_folds(lowercase_bpe, tmp_path):
    """A lowercase tokenizer.json without "lowercase_op" was written when lowercasing was
    tensorflow-text's case folding: it keeps folding ß to ss, and its settings, which the model's
    fingerprint hashes, come back unchanged."""
    new, old_settings = _lowercase_pair_saved(lowercase_bpe, tmp_path, lowercase_op=None)
    old = tok_lib.load(str(tmp_path))
    assert old.lowercase_op == "case_fold"
    assert old.settings() == old_settings
    assert _round_trip(old, ["WEIßE Straße"]) == ["weisse strasse"]
    assert tok_lib.fingerprint(old, old) != tok_lib.fingerprint(new, new)


def test_lowercase_op_saves_loads_and_rejects_an_unknown_op(lowercase_bpe, tmp_path):
    saved, _ = _lowercase_pair_saved(lowercase_bpe, tmp_path / "lower")
    loaded = tok_lib.load(str(tmp_path / "lower"))
    assert loaded.lowercase_op == "lower"
    assert tok_lib.fingerprint(loaded, loaded) == tok_lib.fingerprint(saved, saved)
    assert _round_trip(loaded, ["WEIßE Straße"]) == ["weiße straße"]
    _lowercase_pair_saved(lowercase_bpe, tmp_path / "upper", lowercase_op="upper")
    with pytest.raises(DataError, match="lowercase_op"):
        tok_lib.load(str(tmp_path / "upper"))


def test_vocab_too_small_is_a_clear_error(pairs):
    with pytest.raises(ValueError, match="vocab"):
        tok_lib.train_pair(pairs[:100], tok_lib.TokenizerConfig(vocab_size=50))
    with pytest.raises(ValueError, match="type"):
        tok_lib.TokenizerConfig(type="char")


@pytest.mark.parametrize("model_type", ["bpe", "wordpiece"])
def test_tokenizer_survives_set_random_seed(pairs, model_type):
    """tf.random.set_seed clears the eager kernel cache; tf-text's private resource died with it."""
    tokenizer, _ = tok_lib.train_pair(pairs[:500], tok_lib.TokenizerConfig(type=model_type, vocab_size=500))
    before = tokenizer.tokenize(["Der Hund."]).to_list()
    tf.random.set_seed(7)
    assert tokenizer.tokenize(["Der Hund."]).to_list() == before


def test_vocab_size_is_an_upper_bound_on_a_small_corpus(pairs):
    tokenizer, _ = tok_lib.train_pair(pairs[:200], tok_lib.TokenizerConfig(vocab_size=37000))
    assert 300 < tokenizer.vocab_size < 37000
    assert _round_trip(tokenizer, HARD_CASES) == HARD_CASES


def test_load_or_train_pair_reuses_a_saved_pair_and_never_retrains_it(tmp_path):
    pairs = [("a red dog runs", "ein roter Hund rennt"), ("the cat sleeps", "die Katze schläft")] * 40
    calls = []

    def train_pairs():
        calls.append(1)
        return pairs

    config = tok_lib.TokenizerConfig(vocab_size=320)
    directory = str(tmp_path / "tok")
    source, target, trained = tok_lib.load_or_train_pair(directory, train_pairs, config)
    assert trained and source is target and calls == [1] and tok_lib.is_saved(directory)
    stamp = (tmp_path / "tok" / tok_lib.SENTENCEPIECE_FILE).stat().st_mtime_ns
    again, _, trained = tok_lib.load_or_train_pair(directory, train_pairs, tok_lib.TokenizerConfig(vocab_size=400))
    assert not trained and calls == [1] and again.vocab_size == source.vocab_size  # loaded, not retrained
    assert (tmp_path / "tok" / tok_lib.SENTENCEPIECE_FILE).stat().st_mtime_ns == stamp
    assert not [p for p in (tmp_path / "tok").iterdir() if p.name.startswith(".tmp")]  # atomic writes leave none

    separate = tok_lib.TokenizerConfig(vocab_size=320, shared=False)
    src, tgt, trained = tok_lib.load_or_train_pair(str(tmp_path / "sep"), lambda: pairs, separate, save=False)
    assert trained and src is not tgt and not tok_lib.is_saved(str(tmp_path / "sep"))


def test_split_by_script_false_keeps_a_bracket_and_its_label_in_one_piece():
    # Section 6.3's targets: "(NP" is punctuation followed by Latin letters, two Unicode scripts.
    trees = ["(S (NP XX XX )NP (VP XX (NP XX )NP )VP XX )S", "(S (NP XX )NP (VP XX (PP XX (NP XX XX )NP )PP )VP )S",
             "(SINV (VP XX )VP (NP XX XX )NP XX )SINV"] * 30
    pieces = {}
    for split in (True, False):
        tokenizer = tok_lib.train(trees, tok_lib.TokenizerConfig(vocab_size=400, split_by_script=split))
        ids = tokenizer.tokenize(trees[:3])
        assert [t.decode() for t in tokenizer.detokenize(ids.to_tensor()).numpy()] == trees[:3]
        pieces[split] = ids.row_lengths().numpy().tolist()
    assert pieces[False] == [len(t.split()) for t in trees[:3]]  # one piece per bracket, label and XX
    assert all(joined < split for joined, split in zip(pieces[False], pieces[True]))


@pytest.mark.parametrize("model_type", ["bpe", "unigram", "wordpiece"])
def test_user_defined_symbols_keep_the_placeholder_one_piece(pairs, model_type):
    """Placeholder targets (`DataConfig.tree_targets`): "XX", which this corpus never has, is one id
    of its own with the symbol "\u2581XX" and several pieces without it."""
    def xx_ids(config):
        tokenizer = tok_lib.train((s for pair in pairs[:400] for s in pair), config)
        rows = tokenizer.tokenize(tf.constant(["XX", "Der Hund XX XX ."])).to_list()
        return tokenizer, rows

    plain = tok_lib.TokenizerConfig(type=model_type, vocab_size=400)
    tokenizer, (alone, sentence) = xx_ids(dataclasses.replace(plain, user_defined_symbols=("\u2581XX",)))
    assert len(alone) == 1 and alone[0] != special_ids.UNK_ID
    assert tokenizer.pieces()[alone[0]] == ("XX" if model_type == "wordpiece" else "\u2581XX")
    assert sentence.count(alone[0]) == 2
    if model_type != "wordpiece":
        assert _round_trip(tokenizer, ["Der Hund XX XX .", "XXL"]) == ["Der Hund XX XX .", "XXL"]
    _, (alone, _) = xx_ids(plain)
    assert len(alone) > 1 or alone == [special_ids.UNK_ID]


def test_bpe_dropout_draws_new_segmentations_that_detokenize_to_the_same_text(bpe, pairs):
    """BPE-dropout (Provilkov et al. 2020): each call segments anew, never changes the text."""
    sentences = [s for s, _ in pairs[:40]] + HARD_CASES
    plain = bpe.tokenize(tf.constant(sentences)).to_list()
    assert bpe.tokenize(tf.constant(sentences), bpe_dropout=0.0).to_list() == plain
    draws = [bpe.tokenize(tf.constant(sentences), bpe_dropout=0.3).to_list() for _ in range(5)]
    for ids in draws:
        assert _round_trip_ids(bpe, ids) == sentences
    assert len({str(ids) for ids in draws}) == 5  # 45 sentences: five draws all alike would be a fixed seed
    with_eos = bpe.tokenize(tf.constant(sentences), add_eos=True, bpe_dropout=0.3).to_list()
    assert all(row[-1] == special_ids.EOS_ID and special_ids.EOS_ID not in row[:-1] for row in with_eos)


def _round_trip_ids(tokenizer, ids):
    return [s.decode("utf-8") for s in tokenizer.detokenize(tf.ragged.constant(ids, tf.int32)).numpy()]


def test_bpe_dropout_rate_lengthens_segmentations_toward_characters(bpe, pairs):
    """Skipping each merge with probability p: more pieces as p grows; nearly every merge
    skipped leaves single characters (one piece per character, spaces' marker included)."""
    sentences = [s for s, _ in pairs[:300]]

    def pieces(p):
        return sum(len(row) for row in bpe.tokenize(tf.constant(sentences), bpe_dropout=p).to_list())

    counts = [pieces(p) for p in (0.0, 0.1, 0.3, 0.999)]
    assert counts == sorted(counts) and len(set(counts)) == 4, counts
    characters = sum(len(s.replace(" ", "")) + s.count(" ") + 1 for s in sentences)  # "▁" starts each word
    assert counts[-1] >= 0.97 * characters, (counts[-1], characters)


@pytest.mark.parametrize("model_type", ["unigram", "wordpiece"])
def test_bpe_dropout_needs_a_bpe_tokenizer(pairs, model_type):
    tokenizer = tok_lib.train([s for s, _ in pairs[:300]], tok_lib.TokenizerConfig(type=model_type, vocab_size=600))
    with pytest.raises(ValueError, match=f"needs the bpe tokenizer, not {model_type}"):
        tokenizer.tokenize(tf.constant(["a b"]), bpe_dropout=0.1)


def test_bpe_dropout_rate_is_a_probability_below_one(bpe):
    for rate in (-0.1, 1.0):
        with pytest.raises(ValueError, match=r"bpe_dropout must be in \[0, 1\)"):
            bpe.tokenize(tf.constant(["a b"]), bpe_dropout=rate)
