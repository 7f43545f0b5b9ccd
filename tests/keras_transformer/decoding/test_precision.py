"""The precision a model decodes in: "auto" follows the CPU flag and a timing; a bfloat16 copy stores its matrices in
bfloat16 once (a decoding step casts no weight), keeps layer normalization and softmax in float32."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer, TransformerConfig, cpu_precision
from keras_transformer.decoding import precision

SOURCE = np.array([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]], np.int32)
TARGET = np.array([[1, 12, 13, 14], [1, 15, 16, 0]], np.int32)


def make_model(policy="float32"):
    keras.utils.set_random_seed(7)
    keras.mixed_precision.set_global_policy(policy)
    try:
        model = Transformer(TransformerConfig.tiny(vocab_size=40, max_length=16))
        model.build()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    return model


@pytest.mark.parametrize("flags, speedup, expected", [
    ({"avx2", "fma"}, None, "float32"),  # bfloat16 emulated: slower than float32, nothing timed
    (set(), None, "float32"),  # flags unknown (not Linux)
    ({"avx512f", "avx512_bf16"}, 1.9, "bfloat16"),  # bfloat16 products timed faster (host A)
    ({"avx512f", "avx512_bf16"}, 0.55, "float32"),  # the flag, but bfloat16 timed slower (host C)
    ({"amx_bf16"}, 1.0, "float32"),  # a tie: float32
    ({"amx_bf16"}, 3.0, "bfloat16"),
])
def test_auto_follows_the_cpu_flag_and_the_timing_as_training_does(monkeypatch, flags, speedup, expected):
    calls = []
    monkeypatch.setattr(cpu_precision, "_bfloat16_speedup", lambda: calls.append(1) or speedup)
    monkeypatch.setattr(cpu_precision, "_cpu_flags", lambda: frozenset(flags))
    training = {"float32": "float32", "bfloat16": "mixed_bfloat16"}[expected]
    lines = []
    assert precision.resolve("auto", log=lines.append) == expected
    assert lines[0].startswith(f"precision auto: {training} (")  # training's line
    assert precision.resolve("auto", cpu_flags=flags) == expected
    assert cpu_precision.choose()[0] == training  # the rule training follows on a CPU
    assert len(calls) == (0 if speedup is None else 3)  # timed only with AVX512_BF16 or AMX
    assert precision.resolve("float32") == "float32" and precision.resolve("bfloat16") == "bfloat16"


def test_unknown_precisions_are_refused():
    with pytest.raises(ValueError, match="got 'mixed_bfloat16'"):
        precision.resolve("mixed_bfloat16")
    with pytest.raises(ValueError, match="got 'auto'"):
        precision.decoding_model(make_model(), "auto")
    with pytest.raises(ValueError, match="computes in bfloat16"):
        precision.decoding_model(make_model("mixed_bfloat16"), "bfloat16")


def test_float32_is_the_model_itself():
    model = make_model()
    assert precision.decoding_model(model, "float32") is model
    assert precision.of(model) == "float32"


def test_bfloat16_copy_holds_the_weights_rounded_once_and_layer_norm_in_float32():
    model = make_model()
    before = {v.path: v.numpy().copy() for v in model.weights}
    copy = precision.decoding_model(model, "bfloat16")
    assert precision.of(copy) == "bfloat16" and copy.name == model.name
    weights = {v.path: v for v in copy.weights}
    assert sorted(weights) == sorted(before)
    for path, variable in weights.items():
        norm = "norm/" in path  # gamma and beta of every LayerNormalization
        assert variable.dtype == ("float32" if norm else "bfloat16"), path
        rounded = before[path] if norm else tf.cast(tf.cast(before[path], tf.bfloat16), tf.float32).numpy()
        np.testing.assert_array_equal(tf.cast(variable, tf.float32).numpy(), rounded, err_msg=path)
    for variable in model.weights:  # the float32 model is unchanged
        assert variable.dtype == "float32"
        np.testing.assert_array_equal(variable.numpy(), before[variable.path])


def decode_step_graph(model):
    """The graph of one cached decoding step (what the search's loop body runs), weights as the
    search passes them (`step_weights`, computed once per request, outside the loop)."""
    encoder_outputs, source_mask = model.encode(SOURCE)
    memory = model.init_memory(encoder_outputs, source_mask)
    cache = model.init_cache(2, 0)

    @tf.function
    def step(ids, weights):
        return model.decode_step(ids, tf.constant(0), cache, memory, weights=weights)

    weights = model.step_weights()
    return step.get_concrete_function(tf.constant([1, 1]), weights).graph


def test_a_bfloat16_decoding_step_casts_no_weight_and_multiplies_in_bfloat16():
    graph = decode_step_graph(precision.decoding_model(make_model(), "bfloat16"))
    operations = graph.get_operations()
    weight_casts = [op.name for op in operations if op.type == "Cast" and op.inputs[0].op.type == "ReadVariableOp"]
    assert weight_casts == []
    products = [op for op in operations if op.type in ("MatMul", "BatchMatMulV2")]
    assert products and {op.get_attr("T") for op in products} == {tf.bfloat16}
    softmaxes = [op for op in operations if op.type == "Softmax"]
    assert softmaxes and {op.get_attr("T") for op in softmaxes} == {tf.float32}
    # Keras' mixed_bfloat16 policy (training's) casts float32 weights inside the step instead.
    mixed = decode_step_graph(make_model("mixed_bfloat16")).get_operations()
    assert [op for op in mixed if op.type == "Cast" and op.inputs[0].op.type == "ReadVariableOp"]


def test_bfloat16_logits_are_float32_and_close_to_float32s():
    model = make_model()
    copy = precision.decoding_model(model, "bfloat16")
    expected = model((SOURCE, TARGET)).numpy()
    got = copy((SOURCE, TARGET))
    assert got.dtype == tf.float32
    scale = np.abs(expected).max()
    np.testing.assert_allclose(got.numpy(), expected, atol=0.05 * scale)
    assert (got.numpy().argmax(-1) == expected.argmax(-1)).mean() >= 0.75
