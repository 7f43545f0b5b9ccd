"""Scores sentence pairs with a trained model: one line of log-probabilities per pair.

Line i of the output scores line i of --source with line i of --target, tab-separated:

    -12.345678<TAB>9<TAB>1.371742

log P(target | source) (summed over the target's tokens, EOS included, with teacher forcing,
dropout off), the number of those tokens, and the per-token NLL: the loss of section 5.4 without
label smoothing. Pairs run in length-sorted batches of at most --batch_tokens tokens a side and are
written in input order (`keras_transformer.tasks.scoring.score_files`). Sort or threshold on the last column to
filter a noisy corpus.

Typical command lines:

    python -m keras_transformer.score --model_dir=runs/multi30k --source=crawl.en --target=crawl.de \\
        --output=crawl.scores
    paste crawl.scores crawl.en crawl.de | sort -t$'\\t' -k3,3g | head

docs/guide/translating.md explains scoring; docs/reference/errors.md lists what it refuses;
docs/reference/commands.md every flag.
"""

from __future__ import annotations

from absl import flags

from keras_transformer import cli
from keras_transformer.export import client
from keras_transformer.tasks import flags as task_flags
from keras_transformer.tasks import scoring

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Training directory to score with (checkpoint + tokenizer).")
flags.DEFINE_string("source", None, "Source sentences, one per line (UTF-8 text).")
flags.DEFINE_string("target", None, "Target sentences, one per line, aligned with --source.")
flags.DEFINE_string("output", "-", "Where to write the scores, one line per pair; '-' for stdout.")
task_flags.define_checkpoint_flag("This checkpoint prefix instead of the averaged/latest one.")
flags.DEFINE_integer("batch_tokens", 4096, "Most tokens (padding included) on each side of a batch; a longer "
                     "pair is a batch of its own.", lower_bound=1)
flags.mark_flags_as_required(["model_dir", "source", "target"])


def main(argv):
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}")
    # The paths and the text, before TensorFlow starts: a bad one must not cost a model load
    # (score_files checks them again before it loads the model).
    client.Engine(model_dir=FLAGS.model_dir, checkpoint=FLAGS.checkpoint).check()  # the run exists
    scoring.check_inputs(FLAGS.source, FLAGS.target, FLAGS.output)  # and the output (`command_files.check_output_path`)
    cli.start_tensorflow()
    scoring.score_files(FLAGS.model_dir, FLAGS.source, FLAGS.target, FLAGS.output, checkpoint=FLAGS.checkpoint,
                        batch_tokens=FLAGS.batch_tokens)

