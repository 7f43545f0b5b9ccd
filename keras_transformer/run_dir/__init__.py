"""The training directory on disk (MODEL_DIR), read and written by every command.

  layout                the folders and files of a run, its model_config.json,
                        `restore_model` (averaged, else the newest readable checkpoint).
  readable_checkpoints  which checkpoints a folder lists and whether one reads completely; paths
                        TensorFlow never reads as a glob (`tf_path`); a model read from one.
  averaging             checkpoint averaging (section 6.1): the last or the best checkpoints.
  best_checkpoints      the K best checkpoints by a dev metric, in MODEL_DIR/best.
  atomic_files          a file whole or not at all; a command's output to stdout or a file.
"""
