"""The position-wise feed-forward network, equation (2)."""

import numpy as np

from keras_transformer.layers import PositionwiseFeedForward
from tests.helpers.layer_checks import check_layer


def test_contract():
    x = np.random.default_rng(0).normal(size=(2, 4, 16)).astype("float32")
    check_layer(lambda: PositionwiseFeedForward(d_ff=32), lambda layer: layer(x), (2, 4, 16), 4)


def test_equation_2_position_by_position():
    x = np.random.default_rng(1).normal(size=(2, 4, 16)).astype("float32")
    layer = PositionwiseFeedForward(d_ff=32)
    outputs = layer(x).numpy()
    w1, b1 = layer.inner_dense.get_weights()
    w2, b2 = layer.output_dense.get_weights()
    np.testing.assert_allclose(outputs, np.maximum(0, x @ w1 + b1) @ w2 + b2, atol=1e-5)
    # The same map at every position: permuting positions permutes outputs.
    np.testing.assert_allclose(layer(x[:, ::-1]).numpy(), outputs[:, ::-1], atol=1e-6)
