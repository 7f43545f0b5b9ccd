"""Prints a preset's layers and parameter count, beside the paper's (Table 3).

Presets are "tiny", "base", "big" and the rows of Table 3 (e.g. "C/d_model=256").

Typical command lines:

    python -m keras_transformer.summary --preset=base
    python -m keras_transformer.summary --preset=B/d_k=16 --vocab_size=37000

docs/reference/errors.md lists what it refuses; docs/reference/commands.md every flag.
"""

from absl import app, flags

from keras_transformer import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "base", "Model preset: tiny, base, big or a Table 3 row such as 'B/d_k=16'.")
flags.DEFINE_integer("vocab_size", 37000, "Shared vocabulary size (the paper: about 37,000).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    from keras_transformer.config import TABLE3, TransformerConfig  # pylint: disable=g-import-not-at-top  (no TF)

    config = TransformerConfig.preset(FLAGS.preset, vocab_size=FLAGS.vocab_size)  # a bad flag: before TF starts
    cli.start_tensorflow()
    from keras_transformer import Transformer  # pylint: disable=g-import-not-at-top

    model = Transformer(config)
    model.build()
    model.summary(expand_nested=False)
    paper = TABLE3.get(FLAGS.preset)
    note = f" (paper: {paper.paper_params_millions}M)" if paper and paper.paper_params_millions else ""
    print(f"{FLAGS.preset}: {model.count_params():,} parameters{note}")


if __name__ == "__main__":
    cli.run(main)
