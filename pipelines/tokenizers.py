"""Subword tokenizers that run as tensorflow-text ops, so they can live in a SavedModel.

Vaswani et al. (2017), section 5.1: "Sentences were encoded using byte-pair encoding,
which has a shared source-target vocabulary of about 37000 tokens." This module
trains such a vocabulary from the training data and wraps it in a `tf.Module`:

* SentencePiece, BPE or unigram (`type="bpe"|"unigram"`): trained with the
    `sentencepiece` package, run with `tensorflow_text.SentencepieceTokenizer`.
    Normalization is the identity, extra whitespace is kept and unseen characters
    fall back to UTF-8 bytes, so `detokenize(tokenize(x)) == x` exactly for cased
    text with punctuation and any Unicode (a leading/trailing space is the one thing
    not kept; the sources strip every line anyway).
* WordPiece (`type="wordpiece"`): run with `tensorflow_text.FastWordpieceTokenizer`
    (linear-time WordPiece, Song et al. 2021). It splits on whitespace and punctuation before
    looking up pieces, and its detokenizer joins words with single spaces, so it does
    NOT round-trip: "Hi, you." comes back as "Hi , you .". Words with a character
    missing from the vocabulary become a single [UNK]. The vocabulary is learned
    with sentencepiece BPE over pre-tokenized words and converted to WordPiece form
    ("##" marks a word-internal piece), much faster than tensorflow-text's own
    learner (docs/speed.md#input-pipeline).

Both reserve the special ids the model depends on (`keras_transformer.special_ids`:
PAD, UNK, BOS, EOS, the first four ids).
`tokenize(tf.string[N]) -> tf.RaggedTensor(int32)[N, None]` (EOS appended only
with `add_eos=True`); `detokenize(ids)` takes ragged or right-padded int32 [N, T]
ids, ignores everything from the first EOS or PAD on, drops BOS, and returns
`tf.string[N]`. No `py_function` and no sentencepiece Python op is in the graph.

On disk a tokenizer is a folder holding `tokenizer.json` (settings) and the model
file (`tokenizer.model` or `vocab.txt`); `load(folder)` restores it and
`tokenizer.asset_path` names the model file for `tf.saved_model.Asset`. Each file is
written to a temporary name and renamed, `tokenizer.json` last, so a folder with a
`tokenizer.json` is complete (`is_saved`); `load_or_train_pair` reuses such a folder.
"""

import dataclasses
import hashlib
import io
import json
import os
import re
from typing import Callable, Iterable, Iterator, Optional, Sequence, Union

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow.python.trackable import resource as tf_resource  # pylint: disable=g-direct-tensorflow-import
from tensorflow_text.python.ops import sentencepiece_tokenizer as tf_text_sentencepiece  # pylint: disable=g-direct-tensorflow-import

from keras_transformer.files import json_files
from keras_transformer.files.atomic import write_atomically
from keras_transformer.cli import silence_native_stderr
from keras_transformer.special_ids import BOS_ID, EOS_ID, PAD_ID, SPECIAL_IDS, UNK_ID
from keras_transformer.pipelines.bpe_dropout import check_bpe_dropout

WORDPIECE_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[BOS]", "[EOS]")

CONFIG_FILE = "tokenizer.json"
SENTENCEPIECE_FILE = "tokenizer.model"
WORDPIECE_FILE = "vocab.txt"
TYPES = ("bpe", "unigram", "wordpiece")
# How `lowercase` tokenizers fold case. "lower" (Unicode lowercase, `tf.strings.lower`): ß, ä, ö, ü
# stay as they are, as in lowercased references (Moses' lowercase.perl, Python's str.lower), so a
# German model writes "weiße", not "weisse". "case_fold" (`tensorflow_text.case_fold_utf8`, NFKC
# case folding: ß -> ss, final sigma -> sigma, compatibility characters decomposed): what every
# lowercase tokenizer did before "lower"; a saved tokenizer.json without "lowercase_op" has it.
LOWERCASE_OPS = ("lower", "case_fold")


@dataclasses.dataclass(frozen=True)
class TokenizerConfig:
    """How to train a tokenizer.

    Attributes:
        type: "bpe" (default, the paper's choice), "unigram" or "wordpiece".
        vocab_size: number of ids including the 4 special ones (paper: 37,000).
            An upper bound: a corpus too small for it gives fewer pieces
            (sentencepiece's hard_vocab_limit=False); size the model's embedding
            with the trained tokenizer's `vocab_size`.
        shared: one vocabulary for source and target (the paper); else one per side.
        lowercase: lowercase text before tokenizing (Unicode lowercase: German ß stays ß, as in
            lowercased references; round trips lose case).
        split_by_script: sentencepiece's split_by_unicode_script: no piece joins characters of
            two Unicode scripts (punctuation is one); False lets a linearized tree's "(NP" be one
            piece instead of "(" + "NP" (section 6.3's targets: 62 instead of 100 pieces a tree).
        character_coverage: sentencepiece's share of characters given their own
            piece; the rest go through byte fallback (1.0 suits Latin scripts).
        input_sentence_size: at most this many sentences, sampled uniformly from the stream (which
            is read once, never held in memory), train the model.
        seed: seed for that sampling.
        num_threads: sentencepiece training threads.
        user_defined_symbols: pieces always kept whole, "\u2581" marking one that begins a word
            (sentencepiece's user_defined_symbols; a WordPiece vocabulary gets each as a word):
            the placeholder "\u2581XX" of linearized trees (`keras_transformer.pipelines.linearized_trees`).
    """
    type: str = "bpe"
    vocab_size: int = 37000
    shared: bool = True
    lowercase: bool = False
    split_by_script: bool = True
    character_coverage: float = 1.0
    input_sentence_size: int = 2_000_000
    seed: int = 0
    num_threads: int = 2
    user_defined_symbols: tuple = ()

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(f"tokenizer type must be one of {TYPES}, got {self.type!r}")
        if self.vocab_size <= len(WORDPIECE_SPECIAL_TOKENS):
            raise ValueError(f"vocab_size must exceed 4 special ids, got {self.vocab_size}")


def _trim(ids) -> tf.RaggedTensor:
    """Ragged int32 ids up to (excluding) the first EOS or PAD, BOS removed."""
    if isinstance(ids, tf.RaggedTensor):
        ids = ids.to_tensor(default_value=PAD_ID)
    ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)  # (N, T)
    stop = tf.logical_or(tf.equal(ids, EOS_ID), tf.equal(ids, PAD_ID))
    keep = tf.equal(tf.cumsum(tf.cast(stop, tf.int32), axis=1), 0)  # (N, T)
    keep = tf.logical_and(keep, tf.not_equal(ids, BOS_ID))
    return tf.ragged.boolean_mask(ids, keep)


class _SharedSentencepieceModel(tf_resource.TrackableResource):
    """The sentencepiece model resource, under a shared name derived from the model.

    tensorflow-text creates it private to its kernel, so anything that clears the
    eager kernel cache - `tf.random.set_seed`, hence `keras.utils.set_random_seed` -
    deletes it and the next `tokenize` fails with `NotFoundError: Resource
    .../SentencepieceResource does not exist`. A shared name keeps it in the resource
    manager; the same model gives the same name, so sharing is harmless.
    """

    def __init__(self, model: bytes):
        self._model = model
        self._shared_name = "kt_sentencepiece_" + hashlib.sha256(model).hexdigest()[:24]
        super().__init__()
        _ = self.resource_handle  # creates the resource

    def _create_resource(self):
        return tf_text_sentencepiece.gen_sentencepiece_tokenizer.sentencepiece_op(
            model=self._model, shared_name=self._shared_name)


class Tokenizer(tf.Module):
    """Base class: settings, `tokenize`, `detokenize`, `save`.

    Attributes:
        type: "bpe", "unigram" or "wordpiece".
        vocab_size: number of ids, special ones included.
        lowercase: whether text is lowercased first.
        lowercase_op: how (`LOWERCASE_OPS`): "lower" for every tokenizer trained now.
        asset_path: the model/vocabulary file on disk once saved or loaded (for the
            exporter's `tf.saved_model.Asset`), else None.
    """

    def __init__(self, type: str, vocab_size: int, lowercase: bool, lowercase_op: str = "lower", name=None):  # pylint: disable=redefined-builtin
        super().__init__(name=name)
        if lowercase_op not in LOWERCASE_OPS:
            raise ValueError(f"lowercase_op={lowercase_op!r}: expected one of {LOWERCASE_OPS}")
        self.type = type
        self.vocab_size = int(vocab_size)
        self.lowercase = bool(lowercase)
        self.lowercase_op = lowercase_op
        self.asset_path: Optional[str] = None

    @property
    def model_file(self) -> str:
        raise NotImplementedError

    def _model_bytes(self) -> bytes:
        raise NotImplementedError

    def pieces(self) -> list[str]:
        """The vocabulary in id order, each id's piece as a string (what CTranslate2 reads)."""
        raise NotImplementedError

    def _pieces(self, strings: tf.Tensor) -> tf.RaggedTensor:
        raise NotImplementedError

    def _sampled_pieces(self, strings: tf.Tensor, bpe_dropout: float) -> tf.RaggedTensor:
        raise NotImplementedError

    def _join(self, ids: tf.RaggedTensor) -> tf.Tensor:
        raise NotImplementedError

    def tokenize(self, strings, add_eos: bool = False, bpe_dropout: float = 0.0) -> tf.RaggedTensor:
        """tf.string [N] -> int32 ragged [N, None]; EOS appended if `add_eos`.

        With `bpe_dropout` p > 0 (bpe tokenizers only), each merge is skipped with probability p
        and every call draws a new segmentation of the same text (BPE-dropout, Provilkov et al.,
        2020, "BPE-Dropout: Simple and Effective Subword Regularization"); `detokenize` still gives
        the text back. The draws come from sentencepiece's own generator, which tensorflow-text
        does not let a caller seed.
        """
        check_bpe_dropout(bpe_dropout, self.type)
        strings = tf.convert_to_tensor(strings, tf.string)
        if self.lowercase:
            strings = _lowercase_op(self.lowercase_op)(strings)
        pieces = self._sampled_pieces(strings, bpe_dropout) if bpe_dropout else self._pieces(strings)
        ids = tf.cast(pieces, tf.int32)
        if add_eos:
            eos = tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, tf.int32))
            ids = tf.concat([ids, eos], axis=1)
        return ids

    def detokenize(self, ids) -> tf.Tensor:
        """Ragged or right-padded int ids [N, T] -> tf.string [N], cut at EOS/PAD."""
        return self._join(_trim(ids))

    def settings(self) -> dict:
        settings = {"type": self.type, "vocab_size": self.vocab_size,
                    "lowercase": self.lowercase, "model_file": self.model_file,
                    "pad_id": PAD_ID, "unk_id": UNK_ID, "bos_id": BOS_ID, "eos_id": EOS_ID}
        if self.lowercase and self.lowercase_op != "case_fold":
            # Only where it says something new: a case-folding or cased tokenizer keeps the settings
            # (and so the fingerprint, `fingerprint`) it was saved with before the key existed.
            settings["lowercase_op"] = self.lowercase_op
        return settings

    def save(self, directory: str) -> str:
        """Writes the model file, then `tokenizer.json`, into `directory` (each atomically); returns it."""
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, self.model_file)
        write_atomically(path, self._model_bytes())
        settings = json.dumps(self.settings(), indent=2) + "\n"
        write_atomically(os.path.join(directory, CONFIG_FILE), settings.encode("utf-8"))
        self.asset_path = path
        return directory


class SentencePieceTokenizer(Tokenizer):
    """A sentencepiece model (BPE or unigram) run by `tensorflow_text.SentencepieceTokenizer`.

    Args:
        model: the serialized sentencepiece `ModelProto` (bytes).
        type: "bpe" or "unigram" (informational).
        lowercase: lowercase inputs first, as `lowercase_op` says (`LOWERCASE_OPS`).
        lowercase_op: "lower" or, for tokenizers saved before it, "case_fold".

    Example:
        >>> tok = train(["Grüße aus Köln.", "Hello, world!"] * 50,
        ...             TokenizerConfig(vocab_size=300))
        >>> tok.detokenize(tok.tokenize(["Grüße, world!"])).numpy()
        array([b'Gr\\xc3\\xbc\\xc3\\x9fe, world!'], dtype=object)
    """

    def __init__(self, model: bytes, type: str = "bpe", lowercase: bool = False, lowercase_op: str = "lower",  # pylint: disable=redefined-builtin
                 name=None):
        processor = spm.SentencePieceProcessor(model_proto=model)
        specials = [processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id()]
        if specials != list(SPECIAL_IDS):
            raise ValueError(f"sentencepiece model has special ids (pad, unk, bos, eos) = "
                             f"{specials}, expected {list(SPECIAL_IDS)}")
        super().__init__(type, processor.get_piece_size(), lowercase, lowercase_op, name=name)
        self._model = model
        with silence_native_stderr():  # each model resource logs "normalizer.cc ... precompiled_charsmap is empty"
            self._sp = tf_text.SentencepieceTokenizer(model=model, out_type=tf.int32)
            self._sp._model_resource = _SharedSentencepieceModel(model)  # pylint: disable=protected-access

    @property
    def model_file(self) -> str:
        return SENTENCEPIECE_FILE

    def _model_bytes(self) -> bytes:
        return self._model

    def pieces(self) -> list[str]:
        """"<pad>", "<unk>", "<s>", "</s>", then byte pieces "<0x00>".. and "▁the", ..."""
        processor = spm.SentencePieceProcessor(model_proto=self._model)
        return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]

    def _pieces(self, strings):
        return self._sp.tokenize(strings)

    def _sampled_pieces(self, strings, bpe_dropout):
        # sentencepiece's SampleEncode: for a BPE model, nbest_size < 0 and alpha p is BPE-dropout.
        values, row_splits = tf_text_sentencepiece.gen_sentencepiece_tokenizer.sentencepiece_tokenize_op(
            self._sp._model_resource.resource_handle, strings, nbest_size=-1, alpha=bpe_dropout,  # pylint: disable=protected-access
            add_bos=False, add_eos=False, reverse=False, out_type=tf.int32, return_nbest=False)
        return tf.RaggedTensor.from_row_splits(values, row_splits, validate=False)

    def _join(self, ids):
        return self._sp.detokenize(ids)


class WordPieceTokenizer(Tokenizer):
    """A WordPiece vocabulary run by `tensorflow_text.FastWordpieceTokenizer`.

    Splits on whitespace and punctuation first; `detokenize` joins words with one
    space, so it does not restore the original spacing around punctuation.

    Args:
        vocab: the pieces, starting with [PAD], [UNK], [BOS], [EOS] in that order;
            word-internal pieces carry the "##" prefix.
        lowercase: lowercase inputs first, as `lowercase_op` says (`LOWERCASE_OPS`).
        lowercase_op: "lower" or, for tokenizers saved before it, "case_fold".
    """

    def __init__(self, vocab: Sequence[str], lowercase: bool = False, lowercase_op: str = "lower", name=None):
        vocab = list(vocab)
        if tuple(vocab[:4]) != WORDPIECE_SPECIAL_TOKENS:
            raise ValueError(f"WordPiece vocabulary must start with {WORDPIECE_SPECIAL_TOKENS}, "
                             f"got {tuple(vocab[:4])}")
        super().__init__("wordpiece", len(vocab), lowercase, lowercase_op, name=name)
        self._vocab = vocab
        self._wp = tf_text.FastWordpieceTokenizer(
                vocab=vocab, token_out_type=tf.int32, unknown_token="[UNK]",
                no_pretokenization=False, support_detokenization=True)

    @property
    def model_file(self) -> str:
        return WORDPIECE_FILE

    def _model_bytes(self) -> bytes:
        return ("\n".join(self._vocab) + "\n").encode("utf-8")

    def pieces(self) -> list[str]:
        """"[PAD]", "[UNK]", "[BOS]", "[EOS]", then "the", "##s", ..."""
        return list(self._vocab)

    def _pieces(self, strings):
        return self._wp.tokenize(strings)

    def _join(self, ids):
        return self._wp.detokenize(ids)


# ----------------------------------------------------------------------------- training

def _train_sentencepiece(sentences: Iterable[str], model_type: str, vocab_size: int,
                         config: TokenizerConfig, **extra) -> bytes:
    model = io.BytesIO()
    if config.user_defined_symbols:
        extra["user_defined_symbols"] = list(config.user_defined_symbols)
    spm.set_random_generator_seed(config.seed)
    try:
        spm.SentencePieceTrainer.train(
                sentence_iterator=iter(sentences), model_writer=model,
                model_type=model_type, vocab_size=vocab_size,
                pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
                character_coverage=config.character_coverage,
                input_sentence_size=config.input_sentence_size, shuffle_input_sentence=True,
                num_threads=config.num_threads, minloglevel=2, **extra)
    except RuntimeError as e:
        reason = str(e).splitlines()[0]
        # Its advice names sentencepiece's own flags (--character_coverage), which no command has.
        needed = re.search(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)", reason)
        if needed:
            raise ValueError(f"vocab_size={needed[1]} is too small for this training text: its characters and the "
                             f"special ids need {needed[2]} ids; raise --vocab_size") from None
        raise ValueError(f"sentencepiece training failed: {reason}") from None
    return model.getvalue()


def _lowercase_op(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """The op `LOWERCASE_OPS`' `name` stands for, on a tf.string tensor."""
    if name == "case_fold":
        return tf_text.case_fold_utf8
    return lambda strings: tf.strings.lower(strings, encoding="utf-8")


def _lowercase(sentences: Iterable[str]) -> Iterator[str]:
    """Lowercases with the op a tokenizer trained now runs, so its vocabulary is learned on what it reads."""
    lower = _lowercase_op("lower")
    batch = []
    for s in sentences:
        batch.append(s)
        if len(batch) == 4096:
            yield from (x.decode("utf-8") for x in lower(tf.constant(batch, tf.string)).numpy())
            batch = []
    if batch:
        yield from (x.decode("utf-8") for x in lower(tf.constant(batch, tf.string)).numpy())


def _sample(sentences: Iterable[str], size: int, seed: int) -> list[str]:
    """At most `size` sentences drawn uniformly from a stream of any length, holding only the sample
    (reservoir sampling, Vitter's algorithm R) - what sentencepiece does with `input_sentence_size`."""
    import random  # pylint: disable=g-import-not-at-top

    rng, sample = random.Random(seed), []
    for i, sentence in enumerate(sentences):
        if i < size:
            sample.append(sentence)
        else:
            j = rng.randrange(i + 1)
            if j < size:
                sample[j] = sentence
    return sample


def _wordpiece_vocab(sentences: Iterable[str], config: TokenizerConfig) -> list[str]:
    """Learns WordPiece pieces via sentencepiece BPE over BERT-pre-tokenized words."""
    from tensorflow_text.python.ops import bert_tokenizer  # pylint: disable=g-import-not-at-top
    basic = bert_tokenizer.BasicTokenizer(lower_case=False)

    def words(batch):
        tokens = basic.tokenize(tf.constant(batch))
        return [" ".join(w.decode("utf-8") for w in row) for row in tokens.to_list()]

    pretokenized, batch = [], []
    for s in _sample(sentences, config.input_sentence_size, config.seed):
        batch.append(s)
        if len(batch) == 4096:
            pretokenized += words(batch)
            batch = []
    if batch:
        pretokenized += words(batch)
    chars = sorted({c for line in pretokenized for c in line if not c.isspace()})
    budget = config.vocab_size - 4 - 2 * len(chars)
    if budget < 0:
        raise ValueError(f"vocab_size {config.vocab_size} is too small for the "
                         f"{len(chars)} characters of the data (need at least {4 + 2 * len(chars)})")
    model = _train_sentencepiece(
            pretokenized, "bpe", max(budget + len(chars) + 8, len(chars) + 8),
            config, normalization_rule_name="identity", byte_fallback=False,
            split_by_whitespace=True, hard_vocab_limit=False)
    processor = spm.SentencePieceProcessor(model_proto=model)
    vocab = list(WORDPIECE_SPECIAL_TOKENS)
    for c in chars:
        vocab += [c, "##" + c]
    seen = set(vocab)
    for i in range(processor.get_piece_size()):
        if processor.is_control(i) or processor.is_unknown(i) or processor.is_byte(i):
            continue
        piece = processor.id_to_piece(i)
        piece = piece[1:] if piece.startswith("\u2581") else "##" + piece
        if piece in ("", "##") or piece in seen:
            continue
        seen.add(piece)
        vocab.append(piece)
        if len(vocab) == config.vocab_size:
            break
    return vocab


def train(sentences: Iterable[str], config: TokenizerConfig = TokenizerConfig()) -> Tokenizer:
    """Trains one tokenizer on an iterable of sentences (str)."""
    if config.lowercase:
        sentences = _lowercase(sentences)
    if config.type == "wordpiece":
        return WordPieceTokenizer(_wordpiece_vocab(sentences, config), lowercase=config.lowercase)
    model = _train_sentencepiece(
            sentences, config.type, config.vocab_size, config,
            normalization_rule_name="identity", remove_extra_whitespaces=False,
            byte_fallback=True, split_digits=False, hard_vocab_limit=False,
            split_by_unicode_script=config.split_by_script)
    return SentencePieceTokenizer(model, type=config.type, lowercase=config.lowercase)


PairsLike = Union[Sequence[tuple[str, str]], "tf.data.Dataset"]


def iter_pairs(pairs: PairsLike) -> Iterator[tuple[str, str]]:
    """(source, target) str pairs from a list of pairs or a dataset of string pairs."""
    if isinstance(pairs, tf.data.Dataset):
        # In batches: iterated one element at a time, a dataset costs a Python round trip per pair.
        for sources, targets in pairs.batch(4096).as_numpy_iterator():
            for s, t in zip(sources, targets):
                yield s.decode("utf-8"), t.decode("utf-8")
    else:
        yield from pairs


def train_pair(pairs: PairsLike, config: TokenizerConfig = TokenizerConfig()
               ) -> tuple[Tokenizer, Tokenizer]:
    """Trains (source_tokenizer, target_tokenizer) on the training pairs.

    With `config.shared` (default, as in the paper) both are the same object,
    trained on source and target sentences together.
    """
    if config.shared:
        tokenizer = train((s for pair in iter_pairs(pairs) for s in pair), config)
        return tokenizer, tokenizer
    return (train((s for s, _ in iter_pairs(pairs)), config),
            train((t for _, t in iter_pairs(pairs)), config))


# ----------------------------------------------------------------------------- save/load

def save(tokenizer: Tokenizer, directory: str) -> str:
    """Saves one tokenizer into `directory` (model file + tokenizer.json)."""
    return tokenizer.save(directory)


def load(directory: str) -> Tokenizer:
    """Loads a tokenizer saved with `save` / `Tokenizer.save`."""
    from keras_transformer.pipelines.errors import DataError  # pylint: disable=g-import-not-at-top
    config_path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(config_path):
        raise DataError(f"{config_path}: no such file (not a saved tokenizer folder)")
    settings = json_files.read_json(config_path, "a saved tokenizer's settings", error=DataError)
    fields = {"model_file": str, "type": str, "lowercase": bool}
    wrong = [name for name, kind in fields.items()
             if not isinstance(settings, dict) or not isinstance(settings.get(name), kind)]
    # Saved before "lowercase_op" existed: such a lowercase tokenizer case-folded (`LOWERCASE_OPS`).
    lowercase_op = settings.get("lowercase_op", "case_fold") if not wrong else None
    if not wrong and lowercase_op not in LOWERCASE_OPS:
        wrong = ["lowercase_op"]
    if wrong:
        raise DataError(f"{config_path}: not a tokenizer's settings (missing or invalid: {', '.join(wrong)})")
    path = os.path.join(directory, settings["model_file"])
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such file (the model file {config_path} names)")
    with open(path, "rb") as f:
        data = f.read()
    try:
        if settings["type"] == "wordpiece":
            tokenizer = WordPieceTokenizer(data.decode("utf-8").split("\n")[:-1],
                                           lowercase=settings["lowercase"], lowercase_op=lowercase_op)
        else:
            tokenizer = SentencePieceTokenizer(data, type=settings["type"],
                                               lowercase=settings["lowercase"], lowercase_op=lowercase_op)
    except (ValueError, RuntimeError, UnicodeDecodeError) as error:  # the model file's bytes: name the file
        reason = " ".join(str(error).split()) or type(error).__name__
        raise DataError(f"{path}: not a {settings['type']} model ({type(error).__name__}: {reason})") from None
    tokenizer.asset_path = path
    return tokenizer


def save_pair(source: Tokenizer, target: Tokenizer, directory: str) -> str:
    """Saves a shared tokenizer into `directory`, separate ones into source/ and target/."""
    if source is target:
        return source.save(directory)
    source.save(os.path.join(directory, "source"))
    target.save(os.path.join(directory, "target"))
    return directory


def is_saved(directory: str) -> bool:
    """Whether `directory` holds a complete tokenizer pair written by `save_pair`."""
    if os.path.isfile(os.path.join(directory, CONFIG_FILE)):
        return True
    return all(os.path.isfile(os.path.join(directory, side, CONFIG_FILE)) for side in ("source", "target"))


def load_or_train_pair(directory: Optional[str], train_pairs: Callable[[], PairsLike],
                       config: TokenizerConfig = TokenizerConfig(), save: bool = True
                       ) -> tuple[Tokenizer, Tokenizer, bool]:
    """The tokenizer pair saved in `directory`, or one trained on `train_pairs()` (and saved there).

    A saved pair is always reused, never retrained, so the ids of a model trained with it stay
    valid. `train_pairs` is called only when training is needed.

    Args:
        directory: where the pair is (or goes); None trains without saving.
        train_pairs: returns the training pairs (a list or a dataset of string pairs).
        config: how to train.
        save: write a newly trained pair to `directory` (False, e.g., on a non-chief worker).

    Returns:
        `(source, target, trained)`; source and target are one object when shared.
    """
    if directory and is_saved(directory):
        return (*load_pair(directory), False)
    source, target = train_pair(train_pairs(), config)
    if directory and save:
        save_pair(source, target, directory)
    return source, target, True


def fingerprint(source: Tokenizer, target: Tokenizer) -> str:
    """SHA-256 of a pair's settings and model bytes: a model's embedding rows are only valid with
    the pair whose fingerprint it was trained with (recorded in model_config.json)."""
    digest = hashlib.sha256()
    for tokenizer in (source,) if source is target else (source, target):
        digest.update(json.dumps(tokenizer.settings(), sort_keys=True).encode("utf-8"))
        digest.update(tokenizer._model_bytes())  # pylint: disable=protected-access
    return digest.hexdigest()


def load_pair(directory: str) -> tuple[Tokenizer, Tokenizer]:
    """Inverse of `save_pair`: (source, target), the same object when shared."""
    if os.path.isfile(os.path.join(directory, CONFIG_FILE)):
        tokenizer = load(directory)
        return tokenizer, tokenizer
    return load(os.path.join(directory, "source")), load(os.path.join(directory, "target"))
