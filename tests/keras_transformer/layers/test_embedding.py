"""The shared, scaled embedding of section 3.4."""

import numpy as np

from keras_transformer.layers import SharedEmbedding
from tests.helpers.layer_checks import check_layer


def test_contract():
    ids = np.array([[1, 2, 3], [4, 0, 0]])
    check_layer(lambda: SharedEmbedding(vocab_size=10, d_model=8), lambda layer: layer(ids), (2, 3, 8), 1)


def test_scaled_by_sqrt_d_model_and_tied_to_the_softmax():
    layer = SharedEmbedding(vocab_size=10, d_model=16)
    ids = np.array([[1, 7]])
    vectors = layer(ids).numpy()
    table = layer.embeddings.numpy()
    np.testing.assert_allclose(vectors[0], table[[1, 7]] * 4.0, rtol=1e-6)
    logits = layer.logits(vectors).numpy()
    np.testing.assert_allclose(logits, vectors @ table.T, rtol=1e-5)
    assert logits.shape == (1, 2, 10) and logits.dtype == np.float32
