"""Reading back the TensorBoard scalars a run wrote."""

import glob
import os

import tensorflow as tf


def read_scalars(directory):
    """{tag: {step: value}} from the event files, as notebook 02 reads them (`value.tensor`)."""
    scalars = {}
    for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                assert value.metadata.plugin_data.plugin_name == "scalars"
                assert value.tensor.dtype == tf.float32.as_datatype_enum
                scalars.setdefault(value.tag, {})[event.step] = float(tf.make_ndarray(value.tensor))
    return scalars
