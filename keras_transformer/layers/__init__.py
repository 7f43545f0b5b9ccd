"""The Transformer's Keras layers, one concept per module (section 3)."""

from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.embedding import SharedEmbedding
from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.feed_forward import PositionwiseFeedForward
from keras_transformer.layers.layer_norm import LayerNormalization, layer_norm
from keras_transformer.layers.masks import causal_mask, padding_mask
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.position_encoding import (
    LearnedPositionEmbedding,
    SinusoidalPositionEncoding,
    sinusoids,
)
from keras_transformer.layers.sublayer import SublayerConnection

__all__ = [
    "DecoderLayer",
    "Dropout",
    "EncoderLayer",
    "LayerNormalization",
    "LearnedPositionEmbedding",
    "MultiHeadAttention",
    "PositionwiseFeedForward",
    "SharedEmbedding",
    "SinusoidalPositionEncoding",
    "SublayerConnection",
    "causal_mask",
    "layer_norm",
    "padding_mask",
    "sinusoids",
]
