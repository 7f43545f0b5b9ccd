"""The precision a model decodes in: float32, or bfloat16 matrix products (`python -m keras_transformer.export --precision`).

    model = decoding_model(model, "bfloat16")   # a copy whose matrices are bfloat16; "float32": model itself
    resolve("auto")                              # "bfloat16" where this CPU multiplies in bfloat16 faster

A bfloat16 decoding model is the same Transformer built under Keras' "bfloat16" dtype policy
and given the float32 model's weights rounded to bfloat16 once, here:

* in bfloat16 (oneDNN's kernels, which TensorFlow runs on AVX-512 CPUs, accumulate in
  float32 and round the result): every matrix product (W^Q, W^K, W^V, W^O, the feed-forward
  layers, Q K^T, the attention weights times V, the output projection x E^T), and what flows
  between them: embeddings, the residual stream, the decoder's self-attention cache and the
  encoder-decoder keys and values;
* in float32: the attention softmax (`layers.multi_head_attention.masked_softmax`), layer
  normalization with its gamma and beta (`layers.layer_norm`), and in the search the
  log-softmax of the logits, the beam scores and the length penalty (`decoding.beam_search`).

The weights are bfloat16 variables, so a SavedModel stores them so and a decoding step casts
no weight: Keras' "mixed_bfloat16" policy (training's) keeps float32 variables and casts each
one to bfloat16 at every call, e.g. the whole embedding matrix for each step's lookup.
The logits leave the output projection rounded to bfloat16 (TensorFlow's CPU kernels have no
bfloat16 x bfloat16 -> float32 product) before they are cast to float32, so beam search can
rank hypotheses whose scores are that close differently than in float32: most outputs are
identical, not all.

On a CPU without native bfloat16 (no AVX512_BF16 or AMX) the same graph runs correctly, slower
than float32: with AVX-512 on oneDNN's emulated bfloat16, else (AVX2 only) on TensorFlow's own
(Eigen) bfloat16 kernels, which `TF_ENABLE_ONEDNN_OPTS=0` selects on any CPU. (Capping oneDNN
with `ONEDNN_MAX_CPU_ISA=AVX2` on an AVX-512 CPU does not imitate that host: TensorFlow still
hands the bfloat16 products to oneDNN, which then has no kernel for them and aborts.)
`resolve("auto")` picks float32 on such CPUs, as training's `--precision=auto` does, and on
CPUs with the flags it picks bfloat16 only where a start-up timing finds bfloat16 products
faster (`keras_transformer.cpu_precision`, training's rule on a CPU too): an Intel Xeon with
AVX512_BF16 and no AMX multiplied bfloat16 at about half float32's speed.
"""

from __future__ import annotations

from typing import Callable

from absl import logging
import keras
import tensorflow as tf

from keras_transformer import cpu_precision
from keras_transformer.layers.layer_norm import LayerNormalization
from keras_transformer.model import Transformer

PRECISIONS = ("float32", "bfloat16")


def resolve(precision: str, cpu_flags=None, log: Callable[[str], None] = logging.info) -> str:
    """`precision` ("float32" or "bfloat16"), or for "auto" the one this machine's CPU runs
    fastest, by the rule training follows on a CPU (`cpu_precision.choose`): bfloat16
    where the CPU has AVX512_BF16 or AMX and its bfloat16 matrix products are timed at least
    1.15x as fast as float32's (once per process), else float32. `cpu_flags` for tests; `log`
    gets the line saying what "auto" chose and why.

    Raises:
        ValueError: any other `precision`.
    """
    if precision == "auto":
        choice, reason = cpu_precision.choose(cpu_flags)
        log(cpu_precision.auto_line(choice, reason))  # training's line, with its policy name
        return "bfloat16" if choice == "mixed_bfloat16" else "float32"
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be \"auto\" or one of {PRECISIONS}, got {precision!r}")
    return precision


def of(model: Transformer) -> str:
    """The precision `model` decodes in: "float32" or "bfloat16" (its compute dtype)."""
    return keras.backend.standardize_dtype(model.compute_dtype)


def decoding_model(model: Transformer, precision: str) -> Transformer:
    """`model` to decode in `precision` (one of `PRECISIONS`).

    "float32" returns `model` itself. "bfloat16" returns a new built Transformer of the same
    config and name whose weights are `model`'s rounded to bfloat16, but layer normalization's,
    which stay float32 (see the module docstring); `model` is not changed.

    Raises:
        ValueError: another `precision`, or a `model` that does not compute in float32.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if of(model) != "float32":
        raise ValueError(f"the model computes in {of(model)}; give a float32 model")
    if precision == "float32":
        return model
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(precision)  # also for sublayers made without a dtype (Dropout)
    try:
        copy = Transformer(model.config, name=model.name)
        for layer in copy._flatten_layers():  # pylint: disable=protected-access
            if isinstance(layer, LayerNormalization):  # float32 gamma and beta, bfloat16 outputs
                layer.dtype_policy = f"mixed_{precision}"
        copy.build()
    finally:
        keras.mixed_precision.set_global_policy(previous)
    sources = {v.path: v for v in model.weights}
    targets = {v.path: v for v in copy.weights}
    if sorted(sources) != sorted(targets):
        raise ValueError(f"the {precision} copy's weights differ from the model's: "
                         f"{sorted(set(sources) ^ set(targets))}")
    for path, target in targets.items():
        target.assign(tf.cast(sources[path], target.dtype))  # rounded once, here
    return copy
