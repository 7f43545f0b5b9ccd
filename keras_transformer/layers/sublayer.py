"""The residual connection around each sub-layer (sections 3.1 and 5.4).

"We employ a residual connection around each of the two sub-layers, followed by
layer normalization. That is, the output of each sub-layer is
LayerNorm(x + Sublayer(x)) [...]. We apply dropout to the output of each
sub-layer, before it is added to the sub-layer input and normalized."

`layer_norm="post"` is that (post-LN); `layer_norm="pre"` is the pre-LN variant
x + Dropout(Sublayer(LayerNorm(x))), which trains without warm-up at depth and
needs a final LayerNorm after the stack (Xiong et al., 2020).
"""

from __future__ import annotations

import keras

from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.layer_norm import LayerNormalization

LAYER_NORMS = ("post", "pre")


@keras.saving.register_keras_serializable(package="keras_transformer")
class SublayerConnection(keras.layers.Layer):
    """LayerNorm(x + Dropout(Sublayer(x))) or x + Dropout(Sublayer(LayerNorm(x))).

    Args:
        dropout_rate: float, P_drop on the sub-layer output (0.1 in the base model).
        layer_norm: "post" (the paper) or "pre".
        epsilon: float, the LayerNormalization epsilon.

    Call arguments:
        x: `(B, T, d_model)`, the sub-layer input.
        sublayer: a callable `(B, T, d_model) -> (B, T, d_model)`, the sub-layer.
        training: enables dropout.

    Returns:
        `(B, T, d_model)`.
    """

    def __init__(self, dropout_rate=0.1, layer_norm="post", epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        if layer_norm not in LAYER_NORMS:
            raise ValueError(f"layer_norm must be one of {LAYER_NORMS}, got {layer_norm!r}")
        self.dropout_rate = dropout_rate
        self.layer_norm = layer_norm
        self.epsilon = epsilon
        self.norm = LayerNormalization(epsilon=epsilon, dtype=self.dtype_policy, name="layer_norm")
        self.dropout = Dropout(dropout_rate, name="dropout")

    def build(self, x_shape):
        self.norm.build(x_shape)
        self.built = True

    def call(self, x, sublayer, training=None):
        inputs = self.norm(x) if self.layer_norm == "pre" else x
        outputs = x + self.dropout(sublayer(inputs), training=training)
        return self.norm(outputs) if self.layer_norm == "post" else outputs

    def get_config(self):
        config = super().get_config()
        config.update(dropout_rate=self.dropout_rate, layer_norm=self.layer_norm, epsilon=self.epsilon)
        return config
