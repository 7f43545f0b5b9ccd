"""The whole Transformer: Table 3 sizes, causality, cached decoding, saving, mixed precision."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import TABLE3, Transformer, TransformerConfig
from tests.helpers.model_checks import SOURCE, TARGET, check_cached_decoding
from tests.helpers.model_checks import tiny_model as _tiny


@pytest.mark.parametrize("name", [n for n, row in TABLE3.items() if row.paper_params_millions])
def test_parameter_count_matches_table3(name):
    """Each row's count is within 7% of the paper's "params x 10^6" column.

    Why they differ at all: the paper's vocabulary is "about 37000 tokens"
    (section 5.1; the exact byte-pair vocabulary of tensor2tensor is not
    given), the column is rounded to millions, and which small tensors
    (biases, LayerNorm gains) its implementation counted is not stated. Ours is
    the exact number of weights of this model with a 37,000-token shared
    vocabulary: embeddings 37,000 x d_model once (section 3.4), per encoder
    layer 4 d_model h d_k-sized projections + 2 d_model d_ff, per decoder layer
    8 + 2, plus biases and LayerNorms.
    """
    row = TABLE3[name]
    model = Transformer(TransformerConfig.preset(name, vocab_size=37000))
    model.build()
    millions = model.count_params() / 1e6
    assert millions == pytest.approx(row.paper_params_millions, rel=0.07), f"{name}: {millions:.1f}M"


def test_logits_shape_and_dtype():
    logits = _tiny()((SOURCE, TARGET))
    assert logits.shape == (2, 5, 50) and logits.dtype == tf.float32


def test_changing_target_token_t_leaves_earlier_outputs_unchanged():
    model = _tiny()
    before = model((SOURCE, TARGET)).numpy()
    changed = TARGET.copy()
    changed[0, 3] = 40
    after = model((SOURCE, changed)).numpy()
    np.testing.assert_allclose(after[0, :3], before[0, :3], atol=1e-6)
    assert not np.allclose(after[0, 3:], before[0, 3:])
    np.testing.assert_allclose(after[1], before[1], atol=1e-6)


def test_source_padding_is_invisible():
    model = _tiny()
    short = model((SOURCE[1:, :3], TARGET[1:])).numpy()
    long = model((SOURCE[1:], TARGET[1:])).numpy()
    np.testing.assert_allclose(long, short, atol=1e-5)


@pytest.mark.parametrize(
    "overrides",
    [{}, {"positional_encoding": "learned"}, {"layer_norm": "pre"}, {"share_embeddings": False, "target_vocab_size": 40},
     {"num_encoder_layers": 3, "num_decoder_layers": 1}, {"num_encoder_layers": 1, "num_decoder_layers": 3}],
    ids=["base", "learned", "pre_ln", "separate_vocab", "deep_encoder", "deep_decoder"],
)
def test_cached_decoding_equals_the_full_pass(overrides):
    check_cached_decoding(_tiny(**overrides), SOURCE, TARGET)


def test_cached_step_t_ignores_later_tokens_and_earlier_steps_ignore_token_t():
    model = _tiny()
    encoder_outputs, source_mask = model.encode(SOURCE)
    memory = model.init_memory(encoder_outputs, source_mask)
    changed = TARGET.copy()
    changed[0, 3] = 40
    runs = []
    for target in (TARGET, changed):
        cache, steps = model.init_cache(2, TARGET.shape[1]), []
        for t in range(TARGET.shape[1]):
            logits, cache = model.decode_step(target[:, t], t, cache, memory)
            steps.append(logits.numpy())
        runs.append(np.stack(steps, axis=1))  # (B, T, V)
    np.testing.assert_array_equal(runs[1][0, :3], runs[0][0, :3])
    assert not np.allclose(runs[1][0, 3:], runs[0][0, 3:])
    np.testing.assert_array_equal(runs[1][1], runs[0][1])


def test_init_memory_and_init_cache_structures():
    model = _tiny(d_k=4, d_v=2)  # d_k != d_v, to tell keys from values
    c = model.config
    encoder_outputs, source_mask = model.encode(SOURCE)
    memory = model.init_memory(encoder_outputs, source_mask)
    assert sorted(memory) == ["layer_0", "layer_1", "source_mask"]
    np.testing.assert_array_equal(memory["source_mask"], source_mask)
    cache = model.init_cache(2, 9)
    assert sorted(cache) == ["layer_0", "layer_1"]  # nothing static in the per-step structure
    for i, layer in enumerate(model.decoder_layers):
        # The memory is each layer's encoder-decoder W^K, W^V applied to the encoder output once.
        expected = layer.cross_attention.project_key_value(encoder_outputs)
        assert memory[f"layer_{i}"]["key"].shape == (2, c.num_heads, 4, SOURCE.shape[1])  # keys transposed
        assert memory[f"layer_{i}"]["value"].shape == (2, c.num_heads, SOURCE.shape[1], 2)
        for name in ("key", "value"):
            np.testing.assert_array_equal(memory[f"layer_{i}"][name], expected[name])
        assert cache[f"layer_{i}"]["key"].shape == (2, c.num_heads, 9, 4)
        assert cache[f"layer_{i}"]["value"].shape == (2, c.num_heads, 9, 2)
        assert cache[f"layer_{i}"]["key"].dtype == layer.compute_dtype
        assert not np.any(cache[f"layer_{i}"]["value"].numpy())
    # Every leaf is batch-major: a beam search can expand either without knowing its layout.
    beams = tf.nest.map_structure(lambda t: tf.repeat(t, 3, axis=0), (memory, cache))
    assert all(leaf.shape[0] == 6 for leaf in tf.nest.flatten(beams))


def test_decode_step_reads_the_memory_and_leaves_it_unchanged():
    model = _tiny()
    encoder_outputs, source_mask = model.encode(SOURCE)
    memory = model.init_memory(encoder_outputs, source_mask)
    before = tf.nest.map_structure(lambda t: t.numpy().copy(), memory)
    cache = model.init_cache(2, 4)
    logits, new_cache = model.decode_step(TARGET[:, 0], 0, cache, memory)
    tf.nest.assert_same_structure(new_cache, cache)  # the step returns the per-step part only
    for a, b in zip(tf.nest.flatten(memory), tf.nest.flatten(before)):
        np.testing.assert_array_equal(a, b)
    # The step uses the memory it is given, not the encoder output: another memory, other logits.
    other = model.init_memory(encoder_outputs[::-1], source_mask[::-1])
    swapped, _ = model.decode_step(TARGET[:, 0], 0, cache, other)
    np.testing.assert_allclose(swapped[0], logits[1], atol=1e-5)
    assert not np.allclose(swapped[0], logits[0])


def test_decode_step_under_tf_function_with_a_longer_cache():
    model = _tiny()
    encoder_outputs, source_mask = model.encode(SOURCE)
    full = model.decode(TARGET, encoder_outputs, source_mask)
    step = tf.function(model.decode_step)
    memory = model.init_memory(encoder_outputs, source_mask)
    cache = model.init_cache(tf.shape(encoder_outputs)[0], max_length=12)
    for t in range(TARGET.shape[1]):
        logits, cache = step(tf.constant(TARGET[:, t]), tf.constant(t), cache, memory)
        np.testing.assert_allclose(logits, full[:, t], atol=1e-5)
    assert step.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("overrides", [{}, {"num_encoder_layers": 3, "num_decoder_layers": 1}],
                         ids=["one_depth", "two_depths"])
def test_keras_file_round_trip(tmp_path, overrides):
    model = _tiny(dropout_rate=0.1, layer_norm="pre", **overrides)
    path = tmp_path / "model.keras"
    model.save(path)
    restored = keras.models.load_model(path)
    assert restored.config == model.config
    np.testing.assert_array_equal(restored((SOURCE, TARGET)), model((SOURCE, TARGET)))


def test_source_word_dropout_drops_whole_source_tokens_and_nothing_at_inference():
    """Word dropout zeroes source token embeddings before the positions are added. At a rate
    so close to 1 that no token is kept, a training pass (no other dropout) equals the inference
    pass on a source whose every token has a zero embedding: only the positions (and the padding)
    are left. At inference the layer is absent in effect: a model without it, with the same
    weights, gives the same logits."""
    model = _tiny(source_word_dropout_rate=1 - 1e-9)
    plain = _tiny()
    plain.set_weights(model.get_weights())
    np.testing.assert_array_equal(model((SOURCE, TARGET)), plain((SOURCE, TARGET)))
    trained = model((SOURCE, TARGET), training=True).numpy()
    zero_id = 49  # in neither SOURCE nor TARGET
    embeddings = model.source_embedding.embeddings
    embeddings.assign(tf.tensor_scatter_nd_update(embeddings, [[zero_id]], tf.zeros([1, 16])))
    blank = np.where(SOURCE != 0, zero_id, 0).astype("int32")
    # The shared matrix is also the output projection: the zeroed row's logit is left out.
    np.testing.assert_allclose(trained[..., :zero_id], model((blank, TARGET)).numpy()[..., :zero_id], atol=1e-5)
    assert not np.allclose(trained[..., :zero_id], model((SOURCE, TARGET)).numpy()[..., :zero_id], atol=1e-3)


def test_source_word_dropout_keeps_every_other_random_state_in_its_place():
    """Its dropout is the model's last random state, and only when used, so the checkpoints of runs
    without it (`training.checkpoints.dropout_seed_states`, a list in model order) keep their layout."""
    import re  # pylint: disable=g-import-not-at-top

    from keras_transformer.training.checkpoints import dropout_seed_states  # pylint: disable=g-import-not-at-top

    def owners(model):  # the layer each random state belongs to, Keras' name counters left out
        layers = {id(layer.seed_generator.state): re.sub(r"_\d+$", "", layer.name)
                  for layer in model._flatten_layers() if hasattr(layer, "seed_generator")}
        return [layers[id(state)] for state in dropout_seed_states(model)]

    without = owners(_tiny(dropout_rate=0.1))
    with_it = owners(_tiny(dropout_rate=0.1, source_word_dropout_rate=0.1))
    assert len(without) > 10 and with_it == without + ["source_word_dropout"]


def test_each_stack_has_its_own_depth_and_one_depth_keeps_the_layer_order():
    """Encoder layer i, then decoder layer i: a model of one depth makes its layers (and with them
    its random states, `dropout_seed_states`, a list in model order) in the order it always did,
    so the checkpoints of runs from before the stacks had their own depths still restore."""
    def stacks(model):  # the top-level layers that are a stack's, in the model's order
        return [layer.name for layer in model._flatten_layers(include_self=False, recursive=False)
                if layer.name.startswith(("encoder_layer", "decoder_layer"))]

    assert stacks(_tiny()) == ["encoder_layer_0", "decoder_layer_0", "encoder_layer_1", "decoder_layer_1"]
    assert stacks(_tiny(num_layers=3, num_decoder_layers=1)) == [
        "encoder_layer_0", "decoder_layer_0", "encoder_layer_1", "encoder_layer_2"]
    model = _tiny(num_encoder_layers=1, num_decoder_layers=2)
    assert (len(model.encoder_layers), len(model.decoder_layers)) == (1, 2)
    _, _, self_scores = model.encode(SOURCE, return_attention_scores=True)
    encoder_outputs, source_mask = model.encode(SOURCE)
    assert len(self_scores) == 1 and model.cross_attention(TARGET, encoder_outputs, source_mask).shape[1] == 2


def test_embeddings_are_shared_three_ways():
    model = _tiny()
    assert model.source_embedding is model.target_embedding
    names = [w.path for w in model.weights if "embedding" in w.path]
    assert len(names) == 1, names


def test_attention_scores_for_figures():
    model = _tiny()
    _, _, encoder_scores = model.encode(SOURCE, return_attention_scores=True)
    assert len(encoder_scores) == 2 and encoder_scores[0].shape == (2, 2, 6, 6)
    assert np.all(encoder_scores[0].numpy()[1, :, :, 3:] == 0.0)  # padding gets no attention


def test_mixed_bfloat16_runs_without_nan():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = Transformer(TransformerConfig.tiny(dropout_rate=0.1))
    with tf.GradientTape() as tape:
        logits = model((SOURCE, TARGET), training=True)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(TARGET, logits))
    grads = tape.gradient(loss, model.trainable_variables)
    assert model.encoder_layers[0].self_attention.query_dense.compute_dtype == "bfloat16"
    assert logits.dtype == tf.float32 and np.isfinite(logits.numpy()).all()
    assert all(np.isfinite(g.numpy()).all() for g in grads)
    encoder_outputs, source_mask = model.encode(SOURCE)
    memory, cache = model.init_memory(encoder_outputs, source_mask), model.init_cache(2, 4)
    assert cache["layer_0"]["key"].dtype == memory["layer_0"]["key"].dtype == tf.bfloat16
    logits, _ = model.decode_step(TARGET[:, 0], 0, cache, memory)
    assert logits.dtype == tf.float32 and np.isfinite(logits.numpy()).all()
