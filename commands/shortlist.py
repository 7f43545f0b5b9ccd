"""Learns a lexical shortlist for decoding from parallel text: a vocabulary-map file.

A shortlist restricts each batch's search to the target ids its sources are likely to need
(`keras_transformer.decoding.shortlist`): the --frequent most frequent target pieces and, per
source piece, its --top_k most probable translations under IBM Model 1 (Brown et al. 1993,
`keras_transformer.pipelines.word_alignment`), learned here from the first --max_pairs lines of --source and
--target, tokenized by the training directory's tokenizers. The output projection and softmax
of every decoding step (section 3.4) then cover those ids instead of the whole vocabulary.

The file is CTranslate2's vocabulary map: `translate --shortlist=FILE` and `export
--shortlist=FILE` read it (the SavedModel holds it; a CTranslate2 export keeps it as its
vmap.txt and translates with it).

    python -m keras_transformer.shortlist --model_dir=runs/multi30k_en_de \\
        --source=data/train.en.gz --target=data/train.de.gz --output=runs/multi30k_en_de/shortlist.vmap

docs/guide/translating.md explains shortlists; docs/reference/commands.md lists every flag.
"""

from __future__ import annotations

import os
import sys
import time

from absl import flags

from keras_transformer import cli
from keras_transformer.files import command_files
from keras_transformer.training_directory import TrainingDirectory

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Training directory whose tokenizers read the text (and whose model the "
                    "shortlist is for).")
flags.DEFINE_string("source", None, "Source sentences, one per line, plain or gzipped (e.g. the training sources); "
                    "a file, a pipe or - (stdin).")
flags.DEFINE_string("target", None, "Their translations, line for line with --source, plain or gzipped; a file or a "
                    "pipe.")
flags.DEFINE_string("output", None, "The vocabulary-map file to write (replaced atomically); - writes to stdout.")
flags.DEFINE_integer("top_k", 20, "Candidate target pieces per source piece: its most probable translations.",
                     lower_bound=1)
flags.DEFINE_integer("frequent", 100, "The most frequent target pieces, candidates of every batch.", lower_bound=0)
flags.DEFINE_integer("iterations", 5, "EM iterations of IBM Model 1.", lower_bound=1)
flags.DEFINE_integer("max_pairs", 200_000, "Learn from at most the first this many line pairs (memory grows with "
                     "the pairs: about their source x target tokens).", lower_bound=1)
flags.mark_flags_as_required(["model_dir", "source", "target", "output"])


def _read_text(path: str, flag: str) -> list[str]:
    """The stripped lines of a file, a pipe or stdin, read once (`command_files.read_lines`: plain or gzipped); a
    one-line error for an empty or non-UTF-8 one."""
    lines = []
    for number, line in enumerate(command_files.read_lines(path), 1):
        try:
            lines.append(line.decode("utf-8").strip())
        except UnicodeDecodeError as error:
            raise ValueError(f"--{flag}={path}: not UTF-8 text (line {number} has the byte "
                             f"0x{line[error.start]:02x})") from None
    if not lines:
        raise ValueError(f"--{flag}={path}: no lines (an empty file)")
    return lines


def read_pairs(source_path: str, target_path: str, max_pairs: int) -> tuple[list[str], list[str]]:
    """The first `max_pairs` lines of both inputs (files, pipes or stdin, each read once; plain or gzipped UTF-8);
    a one-line error for a missing, empty or non-UTF-8 input, or inputs that do not match line for line."""
    sources, targets = _read_text(source_path, "source"), _read_text(target_path, "target")
    if len(sources) != len(targets):
        raise ValueError(f"{target_path} has {len(targets)} lines but {source_path} has {len(sources)}; "
                         "each source line needs its translation on the same line")
    return sources[:max_pairs], targets[:max_pairs]


def token_ids(tokenizer, lines: list[str], chunk: int = 8192) -> list:
    """Each line's subword ids (numpy int32, no EOS), tokenized in chunks."""
    import numpy as np  # pylint: disable=g-import-not-at-top

    ids = []
    for start in range(0, len(lines), chunk):
        ragged = tokenizer.tokenize(lines[start:start + chunk])
        ids.extend(np.split(ragged.flat_values.numpy(), ragged.row_splits.numpy()[1:-1]))
    return ids


def within_length(source_ids: list, target_ids: list, max_length: int) -> tuple[list, int]:
    """The (source, target) id pairs whose sides both fit in `max_length` tokens (with EOS, as training counts
    them), and how many were left out: the model never learned from longer ones."""
    pairs = [(s, t) for s, t in zip(source_ids, target_ids) if len(s) < max_length and len(t) < max_length]
    return pairs, len(source_ids) - len(pairs)


# IBM Model 1 keeps about this many bytes per source x target token combination (ids, keys, posteriors).
BYTES_PER_COMBINATION = 48


def check_memory(pairs: list, max_pairs: int, available: int = None) -> None:
    """A one-line `ValueError` before the work when the pairs' source x target token combinations would take more
    than half of this machine's memory."""
    if available is None:
        available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    combinations = sum((len(s) + 1) * len(t) for s, t in pairs)  # each target token meets every source one, NULL
    needed = combinations * BYTES_PER_COMBINATION
    if needed > available // 2:
        raise ValueError(f"--max_pairs={max_pairs}: these pairs make {combinations:,} source x target token "
                         f"combinations, about {needed / 2**30:.1f} GiB for IBM Model 1, more than half of this "
                         f"machine's {available / 2**30:.1f} GiB; pass a smaller --max_pairs")


def main(argv):
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}")
    TrainingDirectory(FLAGS.model_dir).check_exists()
    command_files.check_input_file(FLAGS.source, "source")
    command_files.check_input_file(FLAGS.target, "target", stdin=False)
    command_files.check_output_path(FLAGS.output, inputs={"source": FLAGS.source, "target": FLAGS.target})
    sources, targets = read_pairs(FLAGS.source, FLAGS.target, FLAGS.max_pairs)
    cli.start_tensorflow()
    from keras_transformer.decoding import shortlist as shortlist_lib  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import word_alignment  # pylint: disable=g-import-not-at-top

    start = time.perf_counter()
    run = TrainingDirectory(FLAGS.model_dir).open()
    config = run.config
    pairs, dropped = within_length(token_ids(run.source_tokenizer, sources), token_ids(run.target_tokenizer, targets),
                                   config.max_length)
    if not pairs:
        raise ValueError(f"--source={FLAGS.source}: no pair fits the model's max_length={config.max_length} tokens "
                         "(training leaves longer ones out too)")
    check_memory(pairs, FLAGS.max_pairs)
    table = word_alignment.translation_table(pairs, config.vocab_size, config.output_vocab_size, FLAGS.iterations)
    shortlist = shortlist_lib.Shortlist(frequent=table.most_frequent(FLAGS.frequent),
                                        table=table.best_translations(FLAGS.top_k))
    shortlist_lib.write(shortlist, FLAGS.output, run.source_tokenizer.pieces(), run.target_tokenizer.pieces())
    print(f"wrote {'stdout' if FLAGS.output == '-' else FLAGS.output}: {shortlist.frequent.size} frequent target "
          f"pieces and up to {FLAGS.top_k} per source piece, from {len(pairs):,} pairs"
          + (f" ({dropped:,} longer than the model's max_length={config.max_length} left out, as training leaves them)"
             if dropped else "") + f" in {time.perf_counter() - start:.0f} s", file=sys.stderr)

