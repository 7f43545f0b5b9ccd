"""The registry of position encodings: how the model tells positions apart (section 3.5).

"Since our model contains no recurrence and no convolution, in order for the model to make use
of the order of the sequence, we must inject some information about the relative or absolute
position of the tokens" (section 3.5). The paper uses sinusoids and reports that learned
positions give nearly identical results (Table 3, row (E)). Each kind is a `PositionEncoding`
registered under its name, the value of `TransformerConfig.positional_encoding`:

    >>> lookup("learned").bounded          # positions end at max_length
    True
    >>> names()                            # what --positional_encoding accepts
    ('sinusoidal', 'learned')

A kind owns what the rest of the code asks of positions: the Keras layers the model adds to
its embeddings (`make_layers`; the layers themselves live in
`keras_transformer.layers.position_encoding`), whether positions end at `max_length`
(`bounded`: the search, scoring and the CTranslate2 export cap lengths there), the weights it
adds (`num_parameters`, counted without TensorFlow for `TransformerConfig.num_parameters`),
whether a fine-tuning run may change `max_length` (`fixed_max_length`), and its CTranslate2
form (`ctranslate2_table`). A new kind is a subclass under `@register_position_encoding`;
docs/architecture.md ("Adding a position encoding") shows one.

This module imports no TensorFlow (`keras_transformer.config` reads it before TensorFlow
starts); a kind imports its layers when the model asks for them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Type

from keras_transformer.registry import Registry


class PositionEncoding:
    """One kind of position encoding; subclasses are registered with `register_position_encoding`.

    Class attributes:
        name: str, the kind's value of `TransformerConfig.positional_encoding` (and of
            `--positional_encoding`).
        bounded: bool (default False), whether positions end at `max_length` (a learned table
            has that many rows) rather than extend to any length (sinusoids). Decoding caps an
            output at `max_length` tokens, scoring refuses longer pairs.
        fixed_max_length: bool (default False), whether the weights' shapes depend on
            `max_length`, so a model fine-tuned from a run (`--init_from`) keeps the run's
            `max_length` (it is also one of the sizes a too-large model's error names).
    """

    name: ClassVar[str] = ""
    bounded: ClassVar[bool] = False
    fixed_max_length: ClassVar[bool] = False

    def make_layers(self, config, dtype) -> tuple[Any, Any]:
        """The source's and the target's position layers of a `Transformer` of `config`, named
        "source_positions" and "target_positions" (their weights' names in checkpoints); one
        layer for both sides where it has no weights.

        A layer is called as `layer(x, start_index=0)` with `x` the embeddings `(B, T, d_model)`
        and returns the `(T, d_model)` encodings of positions start_index ... start_index + T - 1
        in its compute dtype, which the model adds to `x` (one-token decoding passes the step).
        """
        raise NotImplementedError(f"position encoding {self.name!r} makes no layers")

    def num_parameters(self, config) -> int:
        """The weights of both sides' position layers of a model of `config` (0: none)."""
        return 0

    def ctranslate2_table(self, layer, rows: int, config):
        """What `layer` adds at positions 0 ... rows - 1 (or more), float32 NumPy `(rows, d_model)`: the
        table a CTranslate2 model stores as `position_encodings.encodings`
        (`keras_transformer.export.ctranslate2_model`). CTranslate2's own sinusoids (from
        position 1, sin and cos concatenated) are not the paper's interleaved ones, so every kind
        the export supports writes its table.

        Raises:
            ValueError: the kind cannot be expressed as a table of positions.
        """
        raise ValueError(f"position encoding {self.name!r} has no table of encodings per position, "
                         "CTranslate2's only form")


_KINDS: Registry[PositionEncoding] = Registry("position encoding", "positional_encoding")


def register_position_encoding(cls: Type[PositionEncoding]) -> Type[PositionEncoding]:
    """Class decorator: registers an instance of the `PositionEncoding` subclass `cls` under `cls.name`.

    Raises:
        ValueError: `cls` is not a `PositionEncoding`, has no name, or its name is taken.
    """
    if not (isinstance(cls, type) and issubclass(cls, PositionEncoding)):
        raise ValueError(f"{cls!r} is not a PositionEncoding subclass")
    _KINDS.add(cls.name, cls())
    return cls


def unregister_position_encoding(name: str) -> None:
    """Removes the kind `name` (a test's or a plug-in's own kind)."""
    _KINDS.remove(name)


def names() -> tuple[str, ...]:
    """The registered kinds' names, in the order they were registered."""
    return _KINDS.names()


def lookup(name: str) -> PositionEncoding:
    """The registered kind `name`.

    Raises:
        ValueError: no kind has that name; the message names the known ones.
    """
    return _KINDS.lookup(name)


@register_position_encoding
class Sinusoidal(PositionEncoding):
    """The sinusoids of section 3.5, PE(pos, 2i) = sin(pos / 10000^(2i / d_model)) and
    PE(pos, 2i + 1) = cos(...): no weights, defined at every position, so neither the length
    of a sentence nor a fine-tuning run's `max_length` is bound by the model's."""

    name = "sinusoidal"

    def make_layers(self, config, dtype):
        from keras_transformer.layers.position_encoding import (  # pylint: disable=g-import-not-at-top
            SinusoidalPositionEncoding)

        layer = SinusoidalPositionEncoding(dtype=dtype, name="source_positions")
        return layer, layer

    def ctranslate2_table(self, layer, rows, config):
        import numpy as np  # pylint: disable=g-import-not-at-top
        import tensorflow as tf  # pylint: disable=g-import-not-at-top

        from keras_transformer.layers.position_encoding import sinusoids  # pylint: disable=g-import-not-at-top

        table = sinusoids(tf.range(rows), config.d_model, layer.max_wavelength).numpy()
        return np.ascontiguousarray(table, dtype=np.float32)


@register_position_encoding
class Learned(PositionEncoding):
    """Learned positions, Table 3 row (E): a `(max_length, d_model)` table per side; positions
    end at `max_length` (later ones would read the last row), and the tables' shape fixes
    `max_length` for a fine-tuning run."""

    name = "learned"
    bounded = True
    fixed_max_length = True

    def make_layers(self, config, dtype):
        from keras_transformer.layers.position_encoding import (  # pylint: disable=g-import-not-at-top
            LearnedPositionEmbedding)

        return tuple(LearnedPositionEmbedding(config.max_length, dtype=dtype, name=name)
                     for name in ("source_positions", "target_positions"))

    def num_parameters(self, config):
        return 2 * config.max_length * config.d_model

    def ctranslate2_table(self, layer, rows, config):
        """The table, its last row repeated up to `rows` (all of its rows where `rows` is fewer):
        the model clips later positions to its last row, and CTranslate2 rejects positions past
        its table."""
        import keras  # pylint: disable=g-import-not-at-top
        import numpy as np  # pylint: disable=g-import-not-at-top

        table = np.asarray(keras.ops.convert_to_numpy(layer.position_embeddings), np.float32)  # (max_length, d)
        extra = max(rows - table.shape[0], 0)
        return np.ascontiguousarray(np.concatenate([table, np.repeat(table[-1:], extra, axis=0)]))
