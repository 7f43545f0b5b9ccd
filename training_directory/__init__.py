"""A training directory (MODEL_DIR) as every command sees it: its one owner.

  directory    `TrainingDirectory`: open a run and check it (layout, settings, tokenizers and
               their fingerprint), choose and read its checkpoint, check a resume; `OpenedRun`,
               what `open` read.
  vocabulary   the run's tokenizers loaded or trained (section 5.1), the model sized to them
               (section 3.4), the tokenizer flags a resume must repeat.

The layer sits on the model core (`keras_transformer.run_dir`: the model's files) and on
`pipelines` (the tokenizers), below `export/` and `tasks/`, which use it. Importing it loads
no TensorFlow.
"""

from keras_transformer.training_directory.directory import OpenedRun, TrainingDirectory

__all__ = ["OpenedRun", "TrainingDirectory"]
