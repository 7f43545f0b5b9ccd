"""Prints a preset's layers and parameter count, beside the paper's (Table 3).

Presets are "tiny", "base", "big" and the rows of Table 3 (e.g. "C/d_model=256"); --num_layers,
--num_encoder_layers and --num_decoder_layers change their depths, as in training. The count is
also given per stack: the encoder, the decoder and the embeddings.

Typical command lines:

    python -m keras_transformer.summary --preset=base
    python -m keras_transformer.summary --preset=B/d_k=16 --vocab_size=37000
    python -m keras_transformer.summary --preset=base --num_encoder_layers=12 --num_decoder_layers=1

docs/reference/errors.md lists what it refuses; docs/reference/commands.md every flag.
"""

from absl import app, flags

from keras_transformer import cli
from keras_transformer.tasks import flags as task_flags

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "base", "Model preset: tiny, base, big or a Table 3 row such as 'B/d_k=16'.")
flags.DEFINE_integer("vocab_size", 37000, "Shared vocabulary size (the paper: about 37,000).")
task_flags.define_depth_flags()


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    from keras_transformer.config import TABLE3, TransformerConfig  # pylint: disable=g-import-not-at-top  (no TF)

    depths = task_flags.depth_flags()
    config = TransformerConfig.preset(FLAGS.preset, vocab_size=FLAGS.vocab_size, **depths)  # a bad flag: before TF
    cli.start_tensorflow()
    from keras_transformer import Transformer  # pylint: disable=g-import-not-at-top

    model = Transformer(config)
    model.build()
    model.summary(expand_nested=False)
    paper = None if depths else TABLE3.get(FLAGS.preset)  # the paper's count is of the preset's depths
    note = f" (paper: {paper.paper_params_millions}M)" if paper and paper.paper_params_millions else ""
    print(f"{FLAGS.preset}: {model.count_params():,} parameters{note}")
    stacks = (("encoder", config.encoder_depth, config.encoder_parameters),
              ("decoder", config.decoder_depth, config.decoder_parameters))
    print("; ".join(f"{name} ({depth} layer{'s' if depth > 1 else ''}): {count:,}" for name, depth, count in stacks)
          + f"; embeddings: {config.embedding_parameters:,}")

