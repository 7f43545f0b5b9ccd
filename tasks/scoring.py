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
whitespace of each line is stripped (as `pipelines.text_files` does for training). Pairs are
scored in length-sorted batches of at most `batch_tokens` tokens a side, padding included,
and written in the input order.

Defined cases:

* An empty line is scored: an empty target is just EOS (one token: log P(EOS | source)), an
  empty source just EOS (the model's encoding of "nothing"). Every score is finite.
* Length: with sinusoidal positions (section 3.5, defined at every position) every pair is
  scored, also one longer than the model's `max_length` (a length it never trained on; a very
  long line is a batch of its own and needs memory for its length squared). With learned
  positions (Table 3, row E) a side longer than `max_length` tokens (EOS included) cannot be
  scored (the table has no row for its positions): that is an error naming the file, the
  first such line and how many there are, raised before any pair is scored. Remove those
  pairs first (training drops them the same way, `pipelines.batching`).
* Bad input is a one-line `ValueError` / `FileNotFoundError` (`pipelines.errors.DataError`
  for the files), raised before the model loads, and nothing is written: a missing file, a
  folder, gzip-compressed text, an empty file, text that is not UTF-8 (naming the file and
  line, `pipelines.text_files.check_file`), files whose line counts differ, an output that
  is a folder, cannot be written or is one of the inputs, a missing training directory,
  model config, tokenizer or checkpoint, a tokenizer that is not the run's.
* The output file is replaced atomically once every pair is scored
  (`keras_transformer.files.atomic`): a failed or interrupted run leaves an existing file as
  it was. On stderr: a first line naming the model, a progress bar only when stderr is a
  terminal (as `export.client.translate_lines`), a last line with the time and speed.

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
from pipelines import text_files
from pipelines.errors import DataError

TOKENIZE_CHUNK = 8192  # lines tokenized at once (bounds the tokenizer's intermediate tensors)


def check_inputs(source_path: str, target_path: str, output_path: str = "-") -> int:
    """The common line count of two parallel text files; a one-line `DataError` / `ValueError`
    for a missing or empty file, a folder, gzip-compressed or non-UTF-8 text (with its line),
    different line counts, or an `output_path` that cannot be written or is one of the inputs
    (`command_files.check_output_path`). No TensorFlow."""
    counts = []
    for path in (source_path, target_path):  # one file each: a name is never read as a glob pattern
        if os.path.isfile(path) and text_files.is_gzip(path):
            raise DataError(f"{path}: gzip-compressed; decompress it first (e.g. zcat)")
        counts.append(text_files.check_file(path))
    count, target_count = counts
    if target_count != count:
        raise DataError(f"{target_path}: has {target_count} lines but {source_path} has {count}; each source line "
                        "needs its target on the same line")
    command_files.check_output_path(output_path, inputs={"source": source_path, "target": target_path})
    return count


def read_pair_lines(source_path: str, target_path: str) -> tuple[list[str], list[str]]:
    """The lines of both files (checked by `check_inputs`) as stripped text, in file order."""
    return tuple([line.decode("utf-8").strip() for line in command_files.read_lines(path)] for path in (source_path, target_path))


def tokenize_lines(tokenizer, lines: Sequence[str]):
    """int32 ragged [N, None]: each line's ids then EOS (what the training pipeline feeds)."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    with cli.silence_native_stderr():  # sentencepiece's C++ INFO lines
        parts = [tokenizer.tokenize(list(lines[start: start + TOKENIZE_CHUNK]), add_eos=True)
                 for start in range(0, max(len(lines), 1), TOKENIZE_CHUNK)]
    return tf.concat(parts, axis=0) if len(parts) > 1 else parts[0]


def check_lengths(config, source_ids, target_ids, source_name: str = "source", target_name: str = "target") -> None:
    """A one-line `ValueError` naming the first line the model cannot score
    (`keras_transformer.decoding.sequence_scores.too_long`: learned positions end at `config.max_length`)."""
    from keras_transformer.decoding import sequence_scores  # pylint: disable=g-import-not-at-top

    source_lengths = source_ids.row_lengths().numpy().tolist()
    target_lengths = target_ids.row_lengths().numpy().tolist()
    bad = sequence_scores.too_long(config, source_lengths, target_lengths)
    if bad:
        i, limit = bad[0], sequence_scores.max_scorable_length(config)
        name, length = ((source_name, source_lengths[i]) if source_lengths[i] > limit
                        else (target_name, target_lengths[i]))
        raise ValueError(f"{name}: line {i + 1}: {length} tokens (EOS included), but the model's learned positions "
                         f"end at max_length={limit}; {len(bad)} pair(s) are longer: remove them and score the rest")


def score_lines(model, source_tokenizer, target_tokenizer, source_lines: Sequence[str], target_lines: Sequence[str],
                batch_tokens: int = 4096, progress: Optional[bool] = None,
                names: tuple[str, str] = ("source", "target")) -> list[tuple[float, int]]:
    """`(log_prob, tokens)` of each pair of lines, in their order.

    Args:
        model: a `Transformer` (e.g. from `keras_transformer.run_dir.layout.restore_model`).
        source_tokenizer, target_tokenizer: the run's (`pipelines.tokenizers.load_pair`).
        source_lines, target_lines: one sentence per item, aligned.
        batch_tokens: the most tokens a side of one batch holds, padding included.
        progress: a `keras.utils.Progbar` on stderr; by default only when stderr is a terminal
            (see `export.client.translate_lines`).
        names: the two inputs as error messages name them (the file paths).

    Raises:
        ValueError: different numbers of lines, or a pair too long for learned positions
            (`check_lengths`), before any pair is scored.
    """
    from keras_transformer.decoding import sequence_scores  # pylint: disable=g-import-not-at-top

    if len(source_lines) != len(target_lines):
        raise ValueError(f"{names[1]} has {len(target_lines)} lines but {names[0]} has {len(source_lines)}")
    source_ids = tokenize_lines(source_tokenizer, source_lines)
    target_ids = tokenize_lines(target_tokenizer, target_lines)
    check_lengths(model.config, source_ids, target_ids, *names)
    on_batch = cli.stderr_progress(len(source_lines), "pair", progress)
    return sequence_scores.score_corpus(sequence_scores.make_score_fn(model), source_ids, target_ids, batch_tokens,
                                pad_id=model.config.pad_id, on_batch=on_batch)


def format_line(log_prob: float, tokens: int) -> str:
    """`<log-probability>\\t<tokens>\\t<per-token NLL>`, six decimals."""
    nll = -log_prob / tokens if tokens else float("nan")
    return f"{log_prob:.6f}\t{tokens}\t{nll:.6f}"


def load_run(model_dir: str, checkpoint: Optional[str] = None):
    """The model (`keras_transformer.run_dir.layout.restore_model`) and tokenizers of a training directory:
    `(model, checkpoint_path, source_tokenizer, target_tokenizer)`. A missing directory,
    config, tokenizer or checkpoint, or a tokenizer that is not the one the run recorded, is a
    one-line error; the directory, config and tokenizer are checked before the model loads
    (`training_directory.TrainingDirectory.open`)."""
    from training_directory import TrainingDirectory  # pylint: disable=g-import-not-at-top

    run = TrainingDirectory(model_dir).open()
    model, checkpoint = run.restore(checkpoint)
    return model, checkpoint, run.source_tokenizer, run.target_tokenizer


def score_files(model_dir: str, source_path: str, target_path: str, output_path: str = "-", *,
                checkpoint: Optional[str] = None, batch_tokens: int = 4096, progress: Optional[bool] = None) -> int:
    """Scores each pair of lines of two parallel files with a training directory's model and
    writes one `format_line` per pair to `output_path` ("-": stdout). Returns the number of pairs.

    See the module docstring for the defined cases. Bad input is found before the model loads
    (`command_files.check_output_path`, `check_inputs`, `load_run`), a pair too long for learned positions
    before any pair is scored; the output file is replaced atomically at the end.
    """
    count = check_inputs(source_path, target_path, output_path)  # the output too (`command_files.check_output_path`)
    start = time.perf_counter()
    model, checkpoint, source_tokenizer, target_tokenizer = load_run(model_dir, checkpoint)
    print(f"scoring {count} pairs with {checkpoint}", file=sys.stderr)
    source_lines, target_lines = read_pair_lines(source_path, target_path)
    results = score_lines(model, source_tokenizer, target_tokenizer, source_lines, target_lines, batch_tokens,
                          progress, names=(source_path, target_path))
    text = "".join(format_line(log_prob, tokens) + "\n" for log_prob, tokens in results)
    atomic.write_output(output_path, text)
    elapsed = time.perf_counter() - start
    print(f"{len(results)} pairs in {elapsed:.1f} s ({len(results) / max(elapsed, 1e-9):.1f} pairs/s)",
          file=sys.stderr)
    return len(results)
