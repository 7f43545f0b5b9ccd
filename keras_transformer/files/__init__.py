"""Files, one module a concern; none imports TensorFlow:

  atomic          files written whole or not at all (`write_atomically`, `replacing`, ...).
  json_files      JSON read with a one-line error naming the file (`read_json`), written atomically
                  (`write_json_atomically`).
  command_files   a command's files, checked before any work: inputs that exist, outputs that can be
                  written (never one of the inputs), the lines of a file or of stdin ("-").

What a training directory holds is `keras_transformer.run_dir`'s (its checkpoints) and
`training_directory`'s (the whole run, as the commands see it).
"""
