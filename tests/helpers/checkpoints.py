"""Training checkpoints of stand-in parts, and checkpoints of one variable (`save_checkpoints`),
for the checkpoint tests."""

import tensorflow as tf

from keras_transformer.training.checkpoints import Checkpoints


def parts(value=0.0):
    """Stand-ins for the model and optimizer: any trackable object checkpoints the same way."""
    model = tf.Module()
    model.kernel = tf.Variable(tf.fill([2, 3], value))
    optimizer = tf.Module()
    optimizer.iterations = tf.Variable(0, dtype=tf.int64)
    return model, optimizer, tf.Variable(0, dtype=tf.int64, trainable=False, name="step")


def saved_twice(tmp_path):
    """ckpt-2 (kernel 2.0) and ckpt-4 (kernel 4.0) of a run; returns their prefixes."""
    model, optimizer, step = parts()
    checkpoints = Checkpoints(str(tmp_path), model, optimizer, step)
    for s in (2, 4):
        model.kernel.assign(tf.fill([2, 3], float(s)))
        optimizer.iterations.assign(s)
        step.assign(s)
        checkpoints.save()
    return [str(tmp_path / "checkpoints" / f"ckpt-{s}") for s in (2, 4)]


def save_checkpoints(directory, steps):
    """Real checkpoints ckpt-<step> of one variable whose value is the step; returns their prefixes."""
    value = tf.Variable(0.0)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(value=value), directory, max_to_keep=None)
    prefixes = {}
    for step in steps:
        value.assign(float(step))
        prefixes[step] = manager.save(checkpoint_number=step)
    return prefixes
