"""The sentences both toolkits read, and the shared SentencePiece model's view of them.

    files = write_plain_splits(data_dir, work, "en", "de")   # {"train": (source, target), ...}
    model = SentencePieceModel(tokenizer_dir)                # the project run's tokenizer
    model.pieces(), model.tokenize(lines), model.detokenize(pieces)

Multi30k's release files (`{train,val,test_2016_flickr}.{lang}.gz`, the names
`keras_transformer.pipelines.multi30k.SPLIT_FILES` reads) are written once as plain UTF-8, each line stripped as
the project's reader strips it (40 lines of train.de end in spaces), so OpenNMT-tf, which reads
plain text files, gets the very sentences the project trains on. The tokenizer is the project's
saved one (`keras_transformer.pipelines.tokenizers`: tokenizer.json and tokenizer.model in one folder, shared by
both sides); the Python `sentencepiece` package reads it here (its pieces, the serving batches'
source pieces, output lengths), as tensorflow-text runs it in both toolkits' graphs.
"""

from __future__ import annotations

import gzip
import json
import os
from typing import Sequence

SPLITS = {"train": "train", "validation": "val", "test": "test_2016_flickr"}  # as pipelines.multi30k.SPLIT_FILES
TOKENIZER_SETTINGS, TOKENIZER_MODEL = "tokenizer.json", "tokenizer.model"  # pipelines.tokenizers' file names


def read_lines(path: str) -> list[str]:
    """The lines of a plain or gzipped UTF-8 file, each stripped."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as file:
        return [line.strip() for line in file]


def write_lines(path: str, lines: Sequence[str]) -> str:
    with open(path, "w", encoding="utf-8") as file:
        file.write("".join(line + "\n" for line in lines))
    return path


def write_plain_splits(data_dir: str, folder: str, source_lang: str, target_lang: str) -> dict[str, tuple[str, str]]:
    """Each split's (source, target) as plain stripped text in `folder`; raises FileNotFoundError
    naming a missing release file."""
    os.makedirs(folder, exist_ok=True)
    files = {}
    for split, stem in SPLITS.items():
        pair = []
        for lang in (source_lang, target_lang):
            release = os.path.join(data_dir, f"{stem}.{lang}.gz")
            if not os.path.isfile(release):
                raise FileNotFoundError(f"--data_dir={data_dir}: no {stem}.{lang}.gz (Multi30k's raw release files)")
            pair.append(write_lines(os.path.join(folder, f"{stem}.{lang}"), read_lines(release)))
        files[split] = tuple(pair)
    return files


class SentencePieceModel:
    """The project's saved shared SentencePiece tokenizer in `folder`.

    Raises ValueError for a tokenizer both toolkits cannot run alike: WordPiece, separate source and
    target vocabularies, or lowercasing (OpenNMT-tf's SentencePieceTokenizer does not lowercase).
    """

    def __init__(self, folder: str):
        settings_path = os.path.join(folder, TOKENIZER_SETTINGS)
        if not os.path.isfile(settings_path):
            raise ValueError(f"{folder}: not a shared tokenizer (no {TOKENIZER_SETTINGS}; separate source and "
                             "target vocabularies are not compared)")
        with open(settings_path, encoding="utf-8") as file:
            settings = json.load(file)
        if settings.get("type") not in ("bpe", "unigram") or settings.get("lowercase"):
            raise ValueError(f"{folder}: a {settings.get('type')} tokenizer, lowercase={settings.get('lowercase')}: "
                             "the harness compares a cased SentencePiece model")
        import sentencepiece  # pylint: disable=import-outside-toplevel

        self.path = os.path.join(folder, TOKENIZER_MODEL)
        self.settings = settings
        self._processor = sentencepiece.SentencePieceProcessor(model_file=self.path)

    def pieces(self) -> list[str]:
        return [self._processor.id_to_piece(i) for i in range(self._processor.get_piece_size())]

    def tokenize(self, lines: Sequence[str]) -> list[list[str]]:
        return self._processor.encode(list(lines), out_type=str)

    def detokenize(self, pieces: Sequence[Sequence[str]]) -> list[str]:
        return [self._processor.decode_pieces(list(p)) for p in pieces]


def length_sorted_batches(pieces: Sequence[Sequence[str]], batch_size: int) -> list[list[int]]:
    """Sentence indices in batches of up to `batch_size`, longest source first (ties in input
    order), the same batches for every engine."""
    order = sorted(range(len(pieces)), key=lambda i: (-len(pieces[i]), i))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
