"""Strings in, strings out: the SavedModel that stock TF Serving loads.

`python -m keras_transformer.export --model_dir=DIR --export_dir=OUT` turns a training directory into
`OUT/<version>/`:

  exporters       the export formats: `Exporter` per format (write, check options, load
                  back), `register_exporter`, `locate` (an export folder's format).
  serving_module  the `tf.Module` (`Translator`: tokenizer + beam search in the graph), its
                  signatures, and the atomic writer of a version folder.
  versions        TF Serving's layout: version folders, the next one, the SavedModel to load.
  ensemble_members  the runs of `--ensemble_model_dirs`, their vocabulary (and a parser's source
                  tags, tagger, tree targets) checked before TensorFlow.
  client          what translates on the host (`Engine`: a training directory or an export of
                  any format, checked once), lines through it in sorted batches.
  loaded_saved_model  a SavedModel export read back: its checks, its signatures as functions.
  warmup          TF Serving's warm-up file (PredictionLog records of sample requests),
                  written into every version folder; the gRPC client shares its request builder.
  ops             the check that only core TF and tensorflow-text ops are in the graph, read
                  in a fresh interpreter by servable_ops (`python -m keras_transformer.export.servable_ops`).
  ctranslate2_model  the same model as a CTranslate2 model (`--format=ctranslate2`), decoded
                  as the project decodes.
"""

from keras_transformer import command_start

command_start.guard()  # Ctrl-C while `python -m keras_transformer.export` starts: one line

