"""The encoder layer: post-LN and pre-LN residuals, padding."""

import numpy as np
import pytest

from keras_transformer.layers import EncoderLayer
from tests.helpers.layer_checks import check_layer

ARGS = dict(num_heads=2, key_dim=8, value_dim=8, d_ff=32, dropout_rate=0.0)


@pytest.mark.parametrize("layer_norm", ["post", "pre"])
def test_contract(layer_norm):
    x = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")
    # attention 8 + feed-forward 4 + two LayerNorms 4
    check_layer(lambda: EncoderLayer(**ARGS, layer_norm=layer_norm), lambda layer: layer(x), (2, 5, 16), 16,
                zero_gradient=("key/bias",))  # softmax is shift-invariant: see test_multi_head_attention


def test_post_ln_output_is_normalized():
    x = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32") * 10
    y = EncoderLayer(**ARGS)(x).numpy()
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(y.std(-1), 1.0, atol=1e-2)


def test_padding_does_not_change_real_positions():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 3, 16)).astype("float32")
    padded = np.concatenate([x, rng.normal(size=(1, 2, 16)).astype("float32")], axis=1)
    layer = EncoderLayer(**ARGS)
    short = layer(x, padding_mask=np.ones((1, 3), bool)).numpy()
    mask = np.array([[True, True, True, False, False]])
    long = layer(padded, padding_mask=mask).numpy()
    np.testing.assert_allclose(long[:, :3], short, atol=1e-5)
