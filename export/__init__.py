"""Strings in, strings out: the SavedModel that stock TF Serving loads.

`python -m export --model_dir=DIR --export_dir=OUT` turns a training directory into
`OUT/<version>/`; `export.serving_module` holds the `tf.Module` and the writer, and
`export.ops` the check that only core TF and tensorflow-text ops are in the graph.
"""
