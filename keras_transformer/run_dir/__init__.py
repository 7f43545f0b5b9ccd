"""The model's files in a training directory (MODEL_DIR): its layout, settings and checkpoints.
What a command reads of a whole run (its tokenizers as well) is `training_directory`'s, the
one owner of a training directory, which uses these modules.

  layout                the folders and files of a run, its model_config.json,
                        `restore_model` (averaged, else the newest readable checkpoint).
  readable_checkpoints  which checkpoints a folder lists and whether one reads completely; paths
                        TensorFlow never reads as a glob (`tf_path`); a model read from one.
  averaging             checkpoint averaging (section 6.1): the last or the best checkpoints.
  best_checkpoints      the K best checkpoints by a dev metric, in MODEL_DIR/best.
"""
