"""keras_transformer: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) in Keras 3.

    >>> from keras_transformer import Transformer, TransformerConfig
    >>> model = Transformer(TransformerConfig.base(vocab_size=37000))

Layout follows the data: `pipelines/` (text -> ids) feeds this package (ids -> logits
-> ids), which `export/` wraps (strings -> strings); `tasks/` runs them together. This
package's library modules import none of those (docs/architecture.md).

  config, special_ids, model, losses, metrics   the model core: settings, special ids, the
               Transformer (section 3), its loss (5.4), corpus BLEU and chrF (6.1).
  registry, position_encodings
               a seam's `Registry`; the kinds of position encoding (3.5): sinusoidal, learned.
  layers/      the Keras layers, one concept per module (section 3).
  decoding/    ids in, ids out: `decoding.search.translate_ids`, the one decoding entry point.
  training/    the custom training loop of section 5 and its parts.
  run_dir/     the training directory on disk: layout, readable checkpoints, averaging.
  cli/         what the commands share: quiet start-up, checked files, one `error:` line.
  train, translate, parse, score, average_checkpoints, summary
               the commands, `python -m keras_transformer.<name>`: flags in, one call.

Importing the package loads nothing and changes no process-wide state (environment,
file descriptors, TensorFlow's logging; only `python -m` starting a command guards Ctrl-C:
`command_start`): the names below are imported on first use.
Command-line entry points quieten TensorFlow themselves (`keras_transformer.cli`).
"""

import importlib

from keras_transformer import command_start

command_start.guard()  # Ctrl-C while `python -m keras_transformer.<command>` starts: one line

__version__ = "0.2.0"  # the one place it is written: setup.py, docs/conf.py and --version read it (CHANGELOG.md)

_EXPORTS = {
    "TABLE3": "keras_transformer.config",
    "DecodingConfig": "keras_transformer.config",
    "TransformerConfig": "keras_transformer.config",
    "LabelSmoothedCrossEntropy": "keras_transformer.losses",
    "label_smoothed_cross_entropy": "keras_transformer.losses",
    "Transformer": "keras_transformer.model",
    "TransformerSchedule": "keras_transformer.training.schedules",
    "create_optimizer": "keras_transformer.training.schedules",
    "learning_rate": "keras_transformer.training.schedules",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    """`keras_transformer.Transformer` and the other names of `__all__`, imported on first use (PEP 562)."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'keras_transformer' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
