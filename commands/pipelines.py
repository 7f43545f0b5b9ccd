"""Command line for the input pipelines: data statistics and tokenizer training (section 5.1).

`stats` prints the number of pairs, the pairs dropped for length, the batches, the tokens and the
padding share of one pass of `batching.make_dataset`; with --tokenizer_dir it loads that
tokenizer, or trains one and saves it there. `train_tokenizer` trains and saves one. The data
flags are the training command's (`tasks/flags.py`).

Typical command lines:

    python -m keras_transformer.pipelines stats --dataset=multi30k_en_de --data_dir=../shared/data/multi30k \\
        --vocab_size=8000 --batch_tokens=25000
    python -m keras_transformer.pipelines stats --dataset=files --source_file=data/{split}.en.gz \\
        --target_file=data/{split}.de.gz
    python -m keras_transformer.pipelines train_tokenizer --dataset=embedded --vocab_size=2000 --tokenizer_dir=/tmp/tok

docs/guide/data.md explains data sets and tokenizers; docs/reference/errors.md lists what it
refuses; docs/reference/commands.md every flag.
"""

import os

from absl import app
from absl import flags
from absl import logging

from keras_transformer import cli
from keras_transformer.files import command_files
from keras_transformer.tasks import flags as task_flags

COMMANDS = ("stats", "train_tokenizer")

FLAGS = flags.FLAGS
task_flags.define_data_flags()
flags.DEFINE_string("split", "train", "Split to batch for `stats`: train, validation or test.")
flags.DEFINE_string("tokenizer_dir", None, "Load the tokenizer from here, or train and save it here.")


def main(argv):
    if len(argv) != 2 or argv[1] not in COMMANDS:
        raise app.UsageError(f"expected one command, {' or '.join(COMMANDS)}; got {argv[1:]}")
    command = argv[1]
    if command == "train_tokenizer" and not FLAGS.tokenizer_dir:
        raise ValueError("train_tokenizer needs --tokenizer_dir (where to save it)")
    if FLAGS.tokenizer_dir and (command == "train_tokenizer" or not os.path.isdir(FLAGS.tokenizer_dir)):
        command_files.check_writable_folder(FLAGS.tokenizer_dir, "tokenizer_dir")  # a file there: one line, before TF
    data = task_flags.data_config()
    data.check_inputs("train")
    if command == "stats" and FLAGS.split != "train":
        data.check_inputs(FLAGS.split)
    cli.start_tensorflow()
    logging.set_verbosity(logging.WARNING)  # tensorflow-datasets' INFO lines
    from keras_transformer.pipelines import batching, tokenizers  # pylint: disable=g-import-not-at-top

    with cli.silence_native_stderr():  # sentencepiece's C++ INFO lines
        source_tok, target_tok, trained = tokenizers.load_or_train_pair(
            FLAGS.tokenizer_dir, lambda: data.load_pairs("train"), data.tokenizer_config())
    if trained and FLAGS.tokenizer_dir:
        print(f"tokenizer saved to {FLAGS.tokenizer_dir}")
    print(f"tokenizer: {source_tok.type}, vocab {source_tok.vocab_size}"
          + ("" if source_tok is target_tok else f" / {target_tok.vocab_size} (separate)"))
    if command == "train_tokenizer":
        return
    pairs = data.load_pairs(FLAGS.split)
    read, too_long = batching.count_too_long(pairs, source_tok, data.max_length, target_tok)
    ds = batching.make_dataset(pairs, source_tok, data.batch_tokens, data.max_length,
                               target_tokenizer=target_tok, shuffle=True, seed=data.seed)
    stats = batching.batch_stats(ds)
    print(f"dataset: {data.dataset} [{FLAGS.split}]")
    print(f"pairs: {read} read, {too_long} longer than {data.max_length} tokens dropped, "
          f"{stats.pairs} batched")
    print(f"batches: {stats.batches} at batch_tokens={data.batch_tokens}; largest "
          f"{stats.max_source_positions} source / {stats.max_target_positions} target positions")
    print(f"tokens: {stats.source_tokens} source, {stats.target_tokens} target (EOS included)")
    print(f"padding share: {stats.padding_share:.2%} (source {stats.source_padding_share:.2%}, "
          f"target {stats.target_padding_share:.2%})")

