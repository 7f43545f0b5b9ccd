"""The scoring task: log P(target | source) of every pair of two parallel files.

    score_files("run", "train.en", "train.de", "scores.tsv")   # python -m keras_transformer.score

Line i of the output scores line i of the source with line i of the target, tab-separated:

    <log-probability>\t<tokens>\t<per-token NLL>        e.g.  -12.345678\t9\t1.371742

the sum over the target's tokens (EOS included) of log softmax(logits) with teacher forcing,
no label smoothing and dropout off (`keras_transformer.decoding.sequence_scores`); the number of those tokens;
and -log-probability / tokens, the training loss of section 5.4 without label smoothing. Low
scores point at noisy pairs (misaligned, untranslated, another language), which is what the
command is for: filtering a corpus.

The model is the training directory's averaged checkpoint, else its newest readable one (or
`checkpoint`: `keras_transformer.run_dir.layout.restore_model`); the text goes through the run's
tokenizer (MODEL_DIR/tokenizer), each side with EOS appended, after the surrounding
whitespace of each line is stripped (as `keras_transformer.pipelines.text_files` does for training). Pairs are
scored in length-sorted batches of at most `batch_tokens` tokens a side, padding included,
and written in the input order.

Defined cases:

* An empty line is scored: an empty target is just EOS (one token: log P(EOS | source)), an
  empty source just EOS (the model's encoding of "nothing"). Every score is finite.
* Length: with sinusoidal positions (section 3.5, defined at every position) a pair longer
  than the model's `max_length` is scored (a length it never trained on; a long line is a
  batch of its own and needs memory for its length squared), up to `max_length` +
  `keras_transformer.config.MAX_EXTRA_LENGTH` tokens a side (EOS included), the longest output
  any search of the model makes. With learned positions (Table 3, row E) the limit is
  `max_length` tokens (the table has no row for later positions). A side past the limit is
  an error naming the file, the first such line, its length, the limit and how many pairs
  are longer, raised before the model loads; the pair is refused, not cut, since the score
  of a cut target is not the pair's. Remove those pairs first (training drops pairs longer
  than `max_length` the same way, `keras_transformer.pipelines.batching`). A batch the machine has no memory
  for is a one-line error too (lower `batch_tokens`).
* Bad input is a one-line `ValueError` / `FileNotFoundError` (`keras_transformer.pipelines.errors.DataError`
  for the files), raised before the model loads, and nothing is written: a missing file, a
  folder, gzip-compressed text, an empty file, text that is not UTF-8 (naming the file and
  line, `keras_transformer.pipelines.text_files.check_file`), files whose line counts differ, an output that
  is a folder, cannot be written or is one of the inputs, a missing training directory,
  model config (or one whose weights exceed the machine's memory), tokenizer or checkpoint,
  a tokenizer that is not the run's.
* The output file is replaced atomically once every pair is scored
  (`keras_transformer.files.atomic`): a failed or interrupted run leaves an existing file as
  it was. On stderr: a first line naming the model, a progress bar only when stderr is a
  terminal (as `keras_transformer.export.client.translate_lines`), a last line with the time and speed.

Both files are read whole (their lines and ids are held in memory): split a very large
corpus into parts. `check_inputs` imports no TensorFlow, so the command runs it before
TensorFlow starts.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Optional, Sequence

from keras_transformer import cli
from keras_transformer.files import command_files
from keras_transformer.files import atomic
from keras_transformer.pipelines import text_files
from keras_transformer.pipelines.errors import DataError

TOKENIZE_CHUNK = 8192  # lines tokenized at once (bounds the tokenizer's intermediate tensors)


def check_inputs(source_path: str, target_path: str, output_path: str = "-") -> Optional[int]:
    """The common line count of two parallel text files; a one-line `DataError` / `ValueError`
    for a missing or empty file, a folder, gzip-compressed or non-UTF-8 text (with its line),
    different line counts, or an `output_path` that cannot be written or is one of the inputs
    (`command_files.check_output_path`). No TensorFlow. An input that can be read only once (a
    pipe, /dev/stdin: `command_files.is_stream`) is checked when `read_pair_lines` reads it;
    the count is then None."""
    counts = []
    for path in (source_path, target_path):  # one file each: a name is never read as a glob pattern
        if command_files.is_stream(path) and path != "-":
            counts.append(None)
            continue
        if os.path.isfile(path) and text_files.is_gzip(path):
            raise DataError(f"{path}: gzip-compressed; decompress it first (e.g. zcat)")
        counts.append(text_files.check_file(path))
    command_files.check_output_path(output_path, inputs={"source": source_path, "target": target_path})
    if None in counts:
        return None
    _check_counts(*counts, source_path, target_path)
    return counts[0]


def _check_counts(count: int, target_count: int, source_path: str, target_path: str) -> None:
    if target_count != count:
        raise DataError(f"{target_path}: has {target_count} lines but {source_path} has {count}; each source line "
                        "needs its target on the same line")


def read_pair_lines(source_path: str, target_path: str) -> tuple[list[str], list[str]]:
    """The lines of both files (checked by `check_inputs`) as stripped text, in file order; a
    stream's lines are checked here (UTF-8, the other file's line count)."""
    texts = []
    for path in (source_path, target_path):
        lines = []
        for number, line in enumerate(command_files.read_lines(path), 1):
            try:
                lines.append(line.decode("utf-8").strip())
            except UnicodeDecodeError:
                raise DataError(f"{path}: line {number}: not UTF-8 text") from None
        texts.append(lines)
    _check_counts(len(texts[0]), len(texts[1]), source_path, target_path)
    return texts[0], texts[1]


def tokenize_lines(tokenizer, lines: Sequence[str]):
    """int32 ragged [N, None]: each line's ids then EOS (what the training pipeline feeds)."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    with cli.silence_native_stderr():  # sentencepiece's C++ INFO lines
        parts = [tokenizer.tokenize(list(lines[start: start + TOKENIZE_CHUNK]), add_eos=True)
                 for start in range(0, max(len(lines), 1), TOKENIZE_CHUNK)]
    return tf.concat(parts, axis=0) if len(parts) > 1 else parts[0]


def check_lengths(config, source_ids, target_ids, source_name: str = "source", target_name: str = "target") -> None:
    """A one-line `ValueError` naming the first line the model cannot score, its length and the
    limit (`keras_transformer.decoding.sequence_scores.too_long`: bounded positions, learned ones,
    end at `config.max_length`; sinusoids score up to `config.max_length` + `MAX_EXTRA_LENGTH` tokens,
    the longest output a search of the model makes). Refused, not cut: the score of a cut
    target is not the pair's."""
    from keras_transformer.config import MAX_EXTRA_LENGTH  # pylint: disable=g-import-not-at-top
    from keras_transformer.decoding import sequence_scores  # pylint: disable=g-import-not-at-top

    source_lengths = source_ids.row_lengths().numpy().tolist()
    target_lengths = target_ids.row_lengths().numpy().tolist()
    bad = sequence_scores.too_long(config, source_lengths, target_lengths)
    if bad:
        i, limit = bad[0], sequence_scores.max_scorable_length(config)
        name, length = ((source_name, source_lengths[i]) if source_lengths[i] > limit
                        else (target_name, target_lengths[i]))
        where = (f"the model's {config.positional_encoding} positions end at max_length={limit}"
                 if config.positions.bounded
                 else f"the model scores at most {limit} a side (its max_length={config.max_length} plus the longest "
                      f"extra length a search adds, {MAX_EXTRA_LENGTH})")
        raise ValueError(f"{name}: line {i + 1}: {length} tokens (EOS included), but {where}; {len(bad)} pair(s) are "
                         "longer: remove them and score the rest")


def score_lines(model, source_tokenizer, target_tokenizer, source_lines: Sequence[str], target_lines: Sequence[str],
                batch_tokens: int = 4096, progress: Optional[bool] = None,
                names: tuple[str, str] = ("source", "target")) -> list[tuple[float, int]]:
    """`(log_prob, tokens)` of each pair of lines, in their order.

    Args:
        model: a `Transformer` (e.g. from `keras_transformer.run_dir.layout.restore_model`).
        source_tokenizer, target_tokenizer: the run's (`keras_transformer.pipelines.tokenizers.load_pair`).
        source_lines, target_lines: one sentence per item, aligned.
        batch_tokens: the most tokens a side of one batch holds, padding included.
        progress: a `keras.utils.Progbar` on stderr; by default only when stderr is a terminal
            (see `keras_transformer.export.client.translate_lines`).
        names: the two inputs as error messages name them (the file paths).

    Raises:
        ValueError: different numbers of lines, or a pair too long for the model
            (`check_lengths`), before any pair is scored; a batch that runs out of memory
            (`score_ids`).
    """
    if len(source_lines) != len(target_lines):
        raise ValueError(f"{names[1]} has {len(target_lines)} lines but {names[0]} has {len(source_lines)}")
    source_ids = tokenize_lines(source_tokenizer, source_lines)
    target_ids = tokenize_lines(target_tokenizer, target_lines)
    check_lengths(model.config, source_ids, target_ids, *names)
    return score_ids(model, source_ids, target_ids, batch_tokens, progress, names)


def score_ids(model, source_ids, target_ids, batch_tokens: int = 4096, progress: Optional[bool] = None,
              names: tuple[str, str] = ("source", "target")) -> list[tuple[float, int]]:
    """`(log_prob, tokens)` of each pair of id lists (`tokenize_lines`'s, checked by `check_lengths`),
    in their order (`keras_transformer.decoding.sequence_scores.score_corpus`). A batch the
    machine has no memory for is a one-line `ValueError` naming the files and the batch's shape,
    not TensorFlow's out-of-memory traceback."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    from keras_transformer.decoding import sequence_scores  # pylint: disable=g-import-not-at-top

    score_fn = sequence_scores.make_score_fn(model)

    def guarded(source_batch, target_batch):
        try:
            return score_fn(source_batch, target_batch)
        except tf.errors.ResourceExhaustedError:
            raise ValueError(f"{names[0]}, {names[1]}: out of memory scoring {source_batch.shape[0]} pair(s) of up to "
                             f"{source_batch.shape[1]} source and {target_batch.shape[1]} target tokens: remove the "
                             "longest pairs, or lower --batch_tokens") from None

    on_batch = cli.stderr_progress(int(source_ids.nrows()), "pair", progress)
    return sequence_scores.score_corpus(guarded, source_ids, target_ids, batch_tokens, pad_id=model.config.pad_id,
                                        on_batch=on_batch)


def format_line(log_prob: float, tokens: int) -> str:
    """`<log-probability>\\t<tokens>\\t<per-token NLL>`, six decimals."""
    nll = -log_prob / tokens if tokens else float("nan")
    return f"{log_prob:.6f}\t{tokens}\t{nll:.6f}"


def load_run(model_dir: str, checkpoint: Optional[str] = None):
    """The model (`keras_transformer.run_dir.layout.restore_model`) and tokenizers of a training directory:
    `(model, checkpoint_path, source_tokenizer, target_tokenizer)`. A missing directory,
    config, tokenizer or checkpoint, or a tokenizer that is not the one the run recorded, is a
    one-line error; the directory, config and tokenizer are checked before the model loads
    (`keras_transformer.training_directory.TrainingDirectory.open`)."""
    from keras_transformer.training_directory import TrainingDirectory  # pylint: disable=g-import-not-at-top

    run = TrainingDirectory(model_dir).open()
    model, checkpoint = run.restore(checkpoint)
    return model, checkpoint, run.source_tokenizer, run.target_tokenizer


def score_files(model_dir: str, source_path: str, target_path: str, output_path: str = "-", *,
                checkpoint: Optional[str] = None, batch_tokens: int = 4096, progress: Optional[bool] = None) -> int:
    """Scores each pair of lines of two parallel files with a training directory's model and
    writes one `format_line` per pair to `output_path` ("-": stdout). Returns the number of pairs.

    See the module docstring for the defined cases. Bad input is found before the model loads
    (`command_files.check_output_path`, `check_inputs`, the run's directory, config and
    tokenizer, a pair too long for the model: `check_lengths`); the output file is replaced
    atomically at the end.
    """
    from keras_transformer.training_directory import TrainingDirectory  # pylint: disable=g-import-not-at-top

    check_inputs(source_path, target_path, output_path)  # the output too (`command_files.check_output_path`)
    start = time.perf_counter()
    run = TrainingDirectory(model_dir).open()
    names = (source_path, target_path)
    source_lines, target_lines = read_pair_lines(*names)
    source_ids = tokenize_lines(run.source_tokenizer, source_lines)
    target_ids = tokenize_lines(run.target_tokenizer, target_lines)
    check_lengths(run.config, source_ids, target_ids, *names)  # before the model loads
    model, checkpoint = run.restore(checkpoint)
    print(f"scoring {len(source_lines)} pairs with {checkpoint}", file=sys.stderr)
    results = score_ids(model, source_ids, target_ids, batch_tokens, progress, names)
    text = "".join(format_line(log_prob, tokens) + "\n" for log_prob, tokens in results)
    atomic.write_output(output_path, text)
    elapsed = time.perf_counter() - start
    print(f"{len(results)} pairs in {elapsed:.1f} s ({len(results) / max(elapsed, 1e-9):.1f} pairs/s)",
          file=sys.stderr)
    return len(results)
