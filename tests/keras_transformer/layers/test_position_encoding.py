"""Sinusoids of section 3.5 at known positions; learned positions; start indices."""

import math

import numpy as np
import pytest

from keras_transformer.layers import LearnedPositionEmbedding, SinusoidalPositionEncoding, sinusoids
from tests.helpers.layer_checks import check_layer


def test_golden_values():
    d_model = 4
    encoding = sinusoids(np.arange(3), d_model).numpy()
    # PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
    expected = [
        [0.0, 1.0, 0.0, 1.0],
        [math.sin(1), math.cos(1), math.sin(1 / 100), math.cos(1 / 100)],
        [math.sin(2), math.cos(2), math.sin(2 / 100), math.cos(2 / 100)],
    ]
    np.testing.assert_allclose(encoding, expected, atol=1e-6)


def test_base_model_value_at_a_far_position():
    pos, i, d_model = 50, 10, 512  # dimension 2i = 20
    encoding = sinusoids(np.array([pos]), d_model).numpy()
    assert encoding[0, 2 * i] == pytest.approx(math.sin(pos / 10000 ** (2 * i / d_model)), abs=1e-5)
    assert encoding[0, 2 * i + 1] == pytest.approx(math.cos(pos / 10000 ** (2 * i / d_model)), abs=1e-5)


def test_relative_positions_are_a_fixed_rotation():
    """PE(pos + k) is a linear function of PE(pos), the same for every pos (section 3.5)."""
    d_model, k = 8, 3
    encoding = sinusoids(np.arange(40), d_model).numpy()
    # Fit the map on positions 0-19, check it on 20-36.
    transform, *_ = np.linalg.lstsq(encoding[:20], encoding[k : 20 + k], rcond=None)
    np.testing.assert_allclose(encoding[20:37] @ transform, encoding[20 + k : 37 + k], atol=1e-4)


def test_start_index_gives_later_rows():
    layer = SinusoidalPositionEncoding()
    x = np.zeros((1, 2, 6), "float32")
    np.testing.assert_allclose(layer(x, start_index=5), sinusoids(np.arange(5, 7), 6), atol=1e-6)


def test_odd_width():
    assert sinusoids(np.arange(4), 5).shape == (4, 5)


def test_learned_positions_contract_and_start_index():
    x = np.zeros((2, 3, 8), "float32")
    layer = check_layer(
        lambda: LearnedPositionEmbedding(max_length=10),
        lambda layer: layer(x) + 0 * x,
        expected_shape=(2, 3, 8),
        expected_num_weights=1,
    )
    table = layer.position_embeddings.numpy()
    np.testing.assert_allclose(layer(x, start_index=4), table[4:7])
