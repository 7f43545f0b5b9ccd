"""The registry of position encodings: the stock kinds' contracts, a lookup's error, and a kind
registered here (half-amplitude sinusoids) that the model, cached decoding and the counts follow."""

import numpy as np
import pytest

from keras_transformer import TransformerConfig
from keras_transformer.layers import SinusoidalPositionEncoding, sinusoids
from keras_transformer.position_encodings import (PositionEncoding, lookup, names, register_position_encoding,
                                                  unregister_position_encoding)
from tests.helpers.model_checks import SOURCE, TARGET, check_cached_decoding
from tests.helpers.model_checks import tiny_model as _tiny


def _position_weights(model) -> int:
    layers = {id(layer): layer for layer in (model.source_positions, model.target_positions)}.values()
    return sum(int(np.prod(weight.shape)) for layer in layers for weight in layer.weights)


class HalfSinusoids(SinusoidalPositionEncoding):
    """Section 3.5's sinusoids at half amplitude: a kind the library does not have."""

    def call(self, inputs, start_index=0):
        return 0.5 * super().call(inputs, start_index=start_index)


class HalfSinusoidal(PositionEncoding):
    name = "half_sinusoidal"

    def make_layers(self, config, dtype):
        layer = HalfSinusoids(dtype=dtype, name="source_positions")
        return layer, layer


@pytest.fixture
def half_sinusoidal():
    """`HalfSinusoidal` registered for one test, then removed: other tests see the stock registry."""
    register_position_encoding(HalfSinusoidal)
    yield lookup(HalfSinusoidal.name)
    unregister_position_encoding(HalfSinusoidal.name)


def test_the_stock_kinds():
    assert names() == ("sinusoidal", "learned")
    sinusoidal, learned = lookup("sinusoidal"), lookup("learned")
    assert not sinusoidal.bounded and not sinusoidal.fixed_max_length  # sinusoids extend (section 3.5)
    assert learned.bounded and learned.fixed_max_length  # a table of max_length rows (Table 3, row E)
    config = TransformerConfig.tiny(positional_encoding="learned")
    assert learned.num_parameters(config) == 2 * 64 * 16 and sinusoidal.num_parameters(config) == 0
    assert config.positions is learned


def test_an_unknown_name_fails_naming_the_known_kinds():
    for ask in (lambda: lookup("rotary"), lambda: TransformerConfig.tiny(positional_encoding="rotary")):
        with pytest.raises(ValueError, match="positional_encoding must be one of sinusoidal, learned, got 'rotary'"):
            ask()


def test_registration_refuses_a_taken_name_no_name_and_other_classes():
    class Again(HalfSinusoidal):
        name = "learned"

    class Nameless(PositionEncoding):
        pass

    with pytest.raises(ValueError, match="'learned' is already registered"):
        register_position_encoding(Again)
    with pytest.raises(ValueError, match="needs a name"):
        register_position_encoding(Nameless)
    with pytest.raises(ValueError, match="not a PositionEncoding"):
        register_position_encoding(HalfSinusoids)
    assert names() == ("sinusoidal", "learned")


@pytest.mark.parametrize("name", names())
def test_the_parameter_count_is_the_built_models_position_weights(name):
    model = _tiny(positional_encoding=name)
    assert lookup(name).num_parameters(model.config) == _position_weights(model)
    assert model.config.num_parameters == model.count_params()


@pytest.mark.parametrize("name", names())
def test_the_ctranslate2_table_is_what_the_model_adds_at_each_position(name):
    """Row p is the encoding of position p, also past a learned table's last row (clipped)."""
    model = _tiny(positional_encoding=name, max_length=8)
    rows = 12
    for layer in (model.source_positions, model.target_positions):
        table = model.config.positions.ctranslate2_table(layer, rows, model.config)
        assert table.shape == (rows, 16) and table.dtype == np.float32
        added = np.stack([layer(np.zeros((1, 1, 16), "float32"), start_index=p)[0] for p in range(rows)])
        np.testing.assert_array_equal(table, added)


def test_a_registered_kind_builds_decodes_and_counts(half_sinusoidal):
    assert names() == ("sinusoidal", "learned", "half_sinusoidal")
    model = _tiny(positional_encoding="half_sinusoidal")
    assert model.config.positions is half_sinusoidal
    positions = model.target_positions(np.zeros((1, 3, 16), "float32"), start_index=4)
    np.testing.assert_allclose(positions, 0.5 * sinusoids(np.arange(4, 7), 16), atol=1e-7)
    check_cached_decoding(model, SOURCE, TARGET)
    assert model.config.num_parameters == model.count_params() and _position_weights(model) == 0
    # The same weights with the stock sinusoids give other outputs: the kind is the one in use.
    stock = _tiny()
    stock.set_weights(model.get_weights())
    assert not np.allclose(stock((SOURCE, TARGET)), model((SOURCE, TARGET)))
    assert not half_sinusoidal.bounded


def test_a_kind_without_a_table_is_refused_by_the_ctranslate2_export(half_sinusoidal):
    from keras_transformer.export import ctranslate2_model  # pylint: disable=g-import-not-at-top

    model = _tiny(positional_encoding="half_sinusoidal")
    with pytest.raises(ValueError, match="the model cannot be converted to CTranslate2: position encoding "
                                         "'half_sinusoidal' has no table of encodings per position"):
        ctranslate2_model._check_supported(model)


def test_unregistering_restores_the_registry():
    register_position_encoding(HalfSinusoidal)
    unregister_position_encoding("half_sinusoidal")
    assert names() == ("sinusoidal", "learned")
    with pytest.raises(ValueError, match="got 'half_sinusoidal'"):
        unregister_position_encoding("half_sinusoidal")
    assert lookup("sinusoidal").name == "sinusoidal"
