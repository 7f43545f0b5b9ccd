"""A plugin module for the tests (KT_PLUGINS=tests.helpers.plugin_positions): registers a position encoding the
library does not have, "half_sinusoidal" (section 3.5's sinusoids at half amplitude), as a user's package would.
It imports no TensorFlow until the model asks for its layers."""

from keras_transformer.position_encodings import PositionEncoding, register_position_encoding


@register_position_encoding
class HalfSinusoidal(PositionEncoding):
    """Section 3.5's sinusoids, halved: no weights, any length."""

    name = "half_sinusoidal"

    def make_layers(self, config, dtype):
        from keras_transformer.layers import SinusoidalPositionEncoding  # pylint: disable=import-outside-toplevel

        class HalfSinusoids(SinusoidalPositionEncoding):
            def call(self, inputs, start_index=0):
                return 0.5 * super().call(inputs, start_index=start_index)

        layer = HalfSinusoids(dtype=dtype, name="source_positions")
        return layer, layer
