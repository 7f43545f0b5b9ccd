"""One check for every layer: config round trip, weights, output shape and dtype, a training step.

(keras-hub `tests/test_case.py` does the same for its layers.)
"""

import keras
import numpy as np
import tensorflow as tf


def check_layer(make_layer, call, expected_shape, expected_num_weights, expected_dtype="float32",
                zero_gradient=()):
    """Builds `make_layer()`, runs `call(layer)` and checks the layer as a reusable Keras piece.

    Args:
        make_layer: () -> layer.
        call: layer -> output tensor (the first output if several).
        expected_shape: the output shape.
        expected_num_weights: the number of trainable weight tensors.
        expected_dtype: the output dtype.
        zero_gradient: path suffixes of weights whose gradient is zero in exact arithmetic
            (checked to be zero up to rounding instead of checked to move).
    """
    layer = make_layer()
    output = call(layer)
    assert tuple(output.shape) == tuple(expected_shape)
    assert output.dtype == expected_dtype
    assert len(layer.trainable_weights) == expected_num_weights

    # The config round trip rebuilds the same layer: same outputs with the same weights.
    clone = layer.__class__.from_config(layer.get_config())
    call(clone)
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(call(clone), output, atol=1e-6)

    # A training step moves every trainable weight.
    before = [w.numpy().copy() for w in layer.trainable_weights]
    # (A fixed random projection of the output: a sum of squares would be constant after a LayerNorm.)
    probe = tf.random.stateless_normal(output.shape, seed=[1, 2])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(probe * tf.cast(call(layer), tf.float32))
    grads = tape.gradient(loss, layer.trainable_weights)
    assert all(g is not None for g in grads), "a weight gets no gradient"
    keras.optimizers.SGD(0.1).apply_gradients(zip(grads, layer.trainable_weights))
    for b, w, g in zip(before, layer.trainable_weights, grads):
        if w.path.endswith(tuple(zero_gradient)):
            np.testing.assert_allclose(g, 0.0, atol=1e-5, err_msg=f"{w.path} should get no gradient")
        else:
            assert not np.allclose(b, w.numpy()), f"{w.path} did not change after one step"
    return layer
