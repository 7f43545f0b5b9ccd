"""keras_transformer: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) in Keras 3.

    >>> from keras_transformer import Transformer, TransformerConfig
    >>> model = Transformer(TransformerConfig.base(vocab_size=37000))

Layout follows the data: `pipelines/` (text -> ids) feeds this package
(ids -> logits -> ids), which `export/` wraps (strings -> strings). This
package never imports either of them, except in its command-line entry points.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_transformer.cli import silence_native_stderr  # noqa: E402

with silence_native_stderr():  # TensorFlow's C++ start-up lines (tensorflow#100442)
    from keras_transformer.config import TABLE3, TransformerConfig  # noqa: E402
    from keras_transformer.losses import LabelSmoothedCrossEntropy, label_smoothed_cross_entropy  # noqa: E402
    from keras_transformer.model import Transformer  # noqa: E402
    from keras_transformer.schedules import TransformerSchedule, create_optimizer, learning_rate  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "TABLE3",
    "LabelSmoothedCrossEntropy",
    "Transformer",
    "TransformerConfig",
    "TransformerSchedule",
    "create_optimizer",
    "label_smoothed_cross_entropy",
    "learning_rate",
]
