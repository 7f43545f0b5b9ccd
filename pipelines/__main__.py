"""Command line for the input pipelines: data statistics and tokenizer training.

  python -m pipelines stats --dataset=multi30k_en_de --manual_dir=../shared/data/multi30k \
      --data_dir=/tmp/tfds --vocab_size=8000 --batch_tokens=25000
  python -m pipelines stats --dataset=files --source_file=data/{split}.en.gz \
      --target_file=data/{split}.de.gz
  python -m pipelines train_tokenizer --dataset=embedded --vocab_size=2000 \
      --tokenizer_dir=/tmp/tok

`stats` prints the number of pairs, the pairs dropped for length, the batches, the
tokens and the padding share of one pass of `batching.make_dataset` (section 5.1
batching); with `--tokenizer_dir` it loads that tokenizer (or trains and saves
one there if the folder holds none). Bad input (a missing folder, an empty file,
parallel files whose line counts differ) prints one line `error: ...` on stderr
and exits with status 2. Flags are read here only; the library takes arguments.
"""

import os
import sys

from absl import app
from absl import flags
from absl import logging

from pipelines import sources
from pipelines.errors import DataError

COMMANDS = ("stats", "train_tokenizer")

FLAGS = flags.FLAGS
flags.DEFINE_enum("dataset", "embedded", list(sources.DATASETS), "Which data set (pipelines.sources).")
flags.DEFINE_string("split", "train", "Split to batch for `stats`: train, validation or test.")
flags.DEFINE_string("data_dir", None, "tensorflow-datasets data folder (multi30k_*, wmt14_*).")
flags.DEFINE_string("manual_dir", None, "Folder of the original Multi30k .gz files (else downloaded).")
flags.DEFINE_string("source_file", None, "Source-side text file for --dataset=files; '{split}' is replaced.")
flags.DEFINE_string("target_file", None, "Target-side text file for --dataset=files; '{split}' is replaced.")
flags.DEFINE_integer("seed", 0, "Seed of the embedded corpus and of the shuffle.")
flags.DEFINE_string("tokenizer_dir", None, "Load the tokenizer from here, or train and save it here.")
flags.DEFINE_enum("tokenizer_type", "bpe", ["bpe", "unigram", "wordpiece"], "Subword model.")
flags.DEFINE_integer("vocab_size", 37000, "Vocabulary size including 4 special ids (paper: 37,000).")
flags.DEFINE_boolean("shared_vocab", True, "One vocabulary for source and target (the paper).")
flags.DEFINE_boolean("lowercase", False, "Case-fold text before tokenizing.")
flags.DEFINE_integer("batch_tokens", 25000, "Token budget per batch and side, padding included.")
flags.DEFINE_integer("max_length", 256, "Drop pairs with more tokens (EOS included) on either side.")


def _source_kwargs() -> dict:
    return dict(data_dir=FLAGS.data_dir, manual_dir=FLAGS.manual_dir,
                source_file=FLAGS.source_file, target_file=FLAGS.target_file)


def _tokenizers(train_pairs_fn):
    from pipelines import tokenizers  # pylint: disable=g-import-not-at-top
    directory = FLAGS.tokenizer_dir
    if directory and (os.path.isfile(os.path.join(directory, tokenizers.CONFIG_FILE))
                      or os.path.isdir(os.path.join(directory, "source"))):
        return tokenizers.load_pair(directory)
    config = tokenizers.TokenizerConfig(
        type=FLAGS.tokenizer_type, vocab_size=FLAGS.vocab_size,
        shared=FLAGS.shared_vocab, lowercase=FLAGS.lowercase, seed=FLAGS.seed)
    source, target = tokenizers.train_pair(train_pairs_fn(), config)
    if directory:
        tokenizers.save_pair(source, target, directory)
        print(f"tokenizer saved to {directory}")
    return source, target


def run(command: str) -> None:
    """Runs one command; raises DataError or ValueError on bad input."""
    if command == "train_tokenizer" and not FLAGS.tokenizer_dir:
        raise ValueError("train_tokenizer needs --tokenizer_dir (where to save it)")
    sources.check_inputs(FLAGS.dataset, FLAGS.split, manual_dir=FLAGS.manual_dir,
                         source_file=FLAGS.source_file, target_file=FLAGS.target_file)
    if command == "stats" and FLAGS.split != "train":
        sources.check_inputs(FLAGS.dataset, "train", manual_dir=FLAGS.manual_dir,
                             source_file=FLAGS.source_file, target_file=FLAGS.target_file)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from pipelines import batching  # pylint: disable=g-import-not-at-top

    def train_pairs():
        return sources.load_pairs(FLAGS.dataset, "train", seed=FLAGS.seed, **_source_kwargs())

    source_tok, target_tok = _tokenizers(train_pairs)
    print(f"tokenizer: {source_tok.type}, vocab {source_tok.vocab_size}"
          + ("" if source_tok is target_tok else f" / {target_tok.vocab_size} (separate)"))
    if command == "train_tokenizer":
        return
    pairs = sources.load_pairs(FLAGS.dataset, FLAGS.split, seed=FLAGS.seed, **_source_kwargs())
    read, too_long = batching.count_too_long(pairs, source_tok, FLAGS.max_length, target_tok)
    ds = batching.make_dataset(pairs, source_tok, FLAGS.batch_tokens, FLAGS.max_length,
                               target_tokenizer=target_tok, shuffle=True, seed=FLAGS.seed)
    stats = batching.batch_stats(ds)
    print(f"dataset: {FLAGS.dataset} [{FLAGS.split}]")
    print(f"pairs: {read} read, {too_long} longer than {FLAGS.max_length} tokens dropped, "
          f"{stats.pairs} batched")
    print(f"batches: {stats.batches} at batch_tokens={FLAGS.batch_tokens}; largest "
          f"{stats.max_source_positions} source / {stats.max_target_positions} target positions")
    print(f"tokens: {stats.source_tokens} source, {stats.target_tokens} target (EOS included)")
    print(f"padding share: {stats.padding_share:.2%} (source {stats.source_padding_share:.2%}, "
          f"target {stats.target_padding_share:.2%})")


def main(argv):
    if len(argv) != 2 or argv[1] not in COMMANDS:
        raise app.UsageError(f"expected one command, {' or '.join(COMMANDS)}; got {argv[1:]}")
    logging.set_verbosity(logging.WARNING)  # tensorflow-datasets' INFO lines
    try:
        run(argv[1])
    except (DataError, ValueError) as e:
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    app.run(main)
