"""TransformerConfig: presets, Table 3 rows, validation, each stack's depth."""

import dataclasses
import json

import pytest

from keras_transformer import TABLE3, TransformerConfig
from keras_transformer.config import DecodingConfig, SamplingConfig


def test_base_and_big_presets_are_the_papers():
    base = TransformerConfig.base()
    assert (base.num_layers, base.d_model, base.d_ff, base.num_heads, base.key_dim, base.value_dim) == (
        6, 512, 2048, 8, 64, 64,
    )
    assert (base.dropout_rate, base.label_smoothing) == (0.1, 0.1)
    big = TransformerConfig.big()
    assert (big.d_model, big.d_ff, big.num_heads, big.dropout_rate, big.key_dim) == (1024, 4096, 16, 0.3, 64)


def test_every_table3_row_is_expressible():
    for name in TABLE3:
        config = TransformerConfig.preset(name)
        for field, value in TABLE3[name].overrides.items():
            assert getattr(config, field) == value


def test_frozen_and_round_trips_through_a_dict():
    config = TransformerConfig.tiny(positional_encoding="learned", layer_norm="pre")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.d_model = 3
    assert TransformerConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(d_model=30, num_heads=4), "d_model (30) must be divisible by num_heads (4)"),
        (dict(positional_encoding="rotary"), "positional_encoding"),
        (dict(layer_norm="middle"), "layer_norm"),
        (dict(dropout_rate=1.5), "dropout_rate"),
        (dict(source_word_dropout_rate=1.0), "source_word_dropout_rate must be in"),
        (dict(source_word_dropout_rate=float("nan")), "source_word_dropout_rate"),
        (dict(target_vocab_size=99), "share_embeddings=True needs one vocabulary"),
    ],
)
def test_invalid_values_name_the_problem(overrides, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TransformerConfig.base(**overrides)


def test_unknown_preset_and_fields():
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        TransformerConfig.preset("huge")
    with pytest.raises(ValueError, match="unknown TransformerConfig fields: colour"):
        TransformerConfig.from_dict({"colour": 1})


def test_decoding_config_is_the_papers_search_and_checks_its_fields():
    assert DecodingConfig() == DecodingConfig(beam_size=4, alpha=0.6, max_extra_length=50, n_best=1)  # section 6.1
    assert DecodingConfig(beam_size=1).to_dict()["beam_size"] == 1  # greedy
    for bad, field in [(dict(beam_size=0), "beam_size"), (dict(beam_size=2, n_best=3), "n_best"),
                       (dict(alpha=-0.1), "alpha"), (dict(max_extra_length=-1), "max_extra_length"),
                       (dict(beam_size=2.0), "beam_size")]:
        with pytest.raises(ValueError, match=field):
            DecodingConfig(**bad)


@pytest.mark.parametrize("bad, message", [
    (dict(topk=-1), "topk"), (dict(topp=0.0), "topp"), (dict(topp=1.5), "topp"),
    (dict(temperature=-0.5), "temperature"), (dict(topp=float("nan")), "topp"), (dict(seed=-3), "seed"),
])
def test_sampling_config_refuses_out_of_range_values(bad, message):
    with pytest.raises(ValueError, match=message):
        SamplingConfig(**bad)


@pytest.mark.parametrize("config", [
    TransformerConfig.tiny(),
    TransformerConfig.tiny(positional_encoding="learned", layer_norm="pre"),
    TransformerConfig.tiny(share_embeddings=False, target_vocab_size=37, num_heads=3, d_k=5, d_v=7),
    TransformerConfig.tiny(num_layers=3, d_ff=17, source_word_dropout_rate=0.1),
], ids=["tiny", "learned_pre_ln", "two_vocabularies_own_head_sizes", "three_layers"])
def test_num_parameters_counts_the_built_models_weights(config):
    """`num_parameters` (no TensorFlow) is `count_params()` of the built model: the size check
    below refuses exactly the models whose weights do not fit."""
    from keras_transformer import Transformer  # pylint: disable=import-outside-toplevel  (TensorFlow)

    model = Transformer(config)
    model.build()
    assert config.num_parameters == model.count_params()
    assert config.weight_bytes == 4 * model.count_params()


@pytest.mark.parametrize("overrides, size", [
    (dict(d_ff=10**12), "d_ff=1000000000000"),
    (dict(d_model=10**7, num_heads=8), "d_model=10000000"),
    (dict(vocab_size=10**12), "vocab_size=1000000000000"),
    (dict(positional_encoding="learned", max_length=10**12), "max_length=1000000000000"),
], ids=["d_ff", "d_model", "vocab_size", "learned_max_length"])
def test_a_model_whose_weights_exceed_the_machines_memory_is_refused_on_construction(overrides, size, monkeypatch):
    """Was an out-of-memory traceback from inside TensorFlow when the model was built. Each of
    these needs terabytes; a run's model_config.json with such sizes is refused naming the file."""
    with pytest.raises(ValueError, match=r"^the model \(num_layers=6, d_model=") as error:
        TransformerConfig.base(**overrides)
    message = str(error.value)
    assert size in message and " float32 weights, but this machine has " in message and "\n" not in message
    assert " TB for its " in message or " PB for its " in message

    from keras_transformer.run_dir import layout  # pylint: disable=import-outside-toplevel  (no TensorFlow)

    monkeypatch.setattr(layout, "read_settings", lambda model_dir: {"model": {**TransformerConfig.tiny().to_dict(),
                                                                             **overrides}})
    with pytest.raises(ValueError, match=r"^run/model_config\.json: the model \(num_layers=2, "):
        layout.read_config("run")


def test_the_size_check_compares_the_float32_weights_with_the_memory():
    config = TransformerConfig.base()  # 63,082,496 weights with 37,000 shared tokens: 240.6 MB
    config.check_fits_memory(memory=config.weight_bytes)  # exactly fits
    with pytest.raises(ValueError, match=r"needs about 240\.6 MB for its 63,082,496 float32 weights, but this "
                                         r"machine has 100\.0 MB of memory$"):
        config.check_fits_memory(memory=100 * 2**20)


# Each stack's depth -------------------------------------------------------------------------------

def test_num_layers_sets_both_depths_and_a_stacks_own_depth_wins():
    assert (TransformerConfig.base().encoder_depth, TransformerConfig.base().decoder_depth) == (6, 6)
    config = TransformerConfig.base(num_layers=4, num_decoder_layers=2)
    assert (config.encoder_depth, config.decoder_depth, config.depth_text) == (4, 2, "4/2")
    assert TransformerConfig.base(num_encoder_layers=12, num_decoder_layers=1).depth_text == "12/1"
    assert TransformerConfig.tiny().depth_text == "2"
    # replace(num_layers=...) changes the shared depth; a stack's own depth stays given.
    assert (config.replace(num_layers=8).encoder_depth, config.replace(num_layers=8).decoder_depth) == (8, 2)
    # A preset or a Table 3 row sets num_layers; a stack's own depth still wins over it.
    row = TransformerConfig.preset("C/N=4", num_decoder_layers=1)
    assert (row.num_layers, row.encoder_depth, row.decoder_depth) == (4, 4, 1)


@pytest.mark.parametrize("name, value", [("num_encoder_layers", 0), ("num_decoder_layers", -1),
                                         ("num_decoder_layers", 1.5)])
def test_a_stack_depth_below_one_is_refused(name, value):
    with pytest.raises(ValueError, match=rf"^{name} must be a positive integer or None, got {value}$"):
        TransformerConfig.tiny(**{name: value})


# The model of a run's model_config.json written before the stacks had their own depths: the "model"
# of `python -m keras_transformer.train --flagfile=configs/tiny.flags` (tests/helpers/old_runs.py).
def test_a_config_of_one_depth_is_written_and_read_in_the_old_form():
    from tests.helpers.old_runs import OLD_MODEL_CONFIG  # pylint: disable=import-outside-toplevel

    old = json.loads(OLD_MODEL_CONFIG)["model"]
    config = TransformerConfig.from_dict(old)
    assert (config.encoder_depth, config.decoder_depth) == (2, 2)
    assert config.to_dict() == old  # a model of one depth writes num_layers alone, as before
    two = TransformerConfig.from_dict({**old, "num_decoder_layers": 1})
    assert two.to_dict() == {**old, "num_decoder_layers": 1} and TransformerConfig.from_dict(two.to_dict()) == two
    # Two spellings of one model compare equal where a resume and --init_from compare models.
    spelled = config.replace(num_layers=6, num_encoder_layers=2, num_decoder_layers=2)
    assert spelled != config and spelled.resolved_dict() == config.resolved_dict()
    assert "num_layers" not in config.resolved_dict()
    assert (two.resolved_dict()["num_encoder_layers"], two.resolved_dict()["num_decoder_layers"]) == (2, 1)


def test_parameters_per_stack_by_the_formula():
    """Golden values of `num_parameters`' formula at the base's widths (d_model 512, d_ff 2048, h 8,
    37,000 shared tokens): an encoder layer 4 (512 x 512 + 512) + (2 x 512 x 2048 + 2048 + 512)
    + 2 x 1024 = 3,152,384 weights; a decoder layer 8 (512 x 512 + 512) + 2,099,712 + 3 x 1024 =
    4,204,032; the shared embedding 37,000 x 512 = 18,944,000."""
    base = TransformerConfig.base()
    assert (base.encoder_parameters, base.decoder_parameters, base.embedding_parameters) == (
        6 * 3_152_384, 6 * 4_204_032, 18_944_000)
    deep_shallow = TransformerConfig.base(num_encoder_layers=12, num_decoder_layers=1)
    assert (deep_shallow.encoder_parameters, deep_shallow.decoder_parameters) == (37_828_608, 4_204_032)
    assert deep_shallow.num_parameters == 37_828_608 + 4_204_032 + 18_944_000 == 60_976_640
    pre = TransformerConfig.base(num_decoder_layers=1, layer_norm="pre")  # + a final LayerNorm per stack
    assert (pre.encoder_parameters, pre.decoder_parameters) == (6 * 3_152_384 + 1024, 4_204_032 + 1024)


@pytest.mark.parametrize("config", [
    TransformerConfig.tiny(num_encoder_layers=3, num_decoder_layers=1),
    TransformerConfig.tiny(num_encoder_layers=1, num_decoder_layers=3, layer_norm="pre", positional_encoding="learned"),
], ids=["deep_encoder", "deep_decoder_pre_ln_learned"])
def test_parameters_per_stack_count_the_built_models_stacks(config):
    from keras_transformer import Transformer  # pylint: disable=import-outside-toplevel  (TensorFlow)

    model = Transformer(config)
    model.build()
    assert (len(model.encoder_layers), len(model.decoder_layers)) == (config.encoder_depth, config.decoder_depth)
    norms = {stack: [] if norm is None else [norm] for stack, norm in (("encoder", model.encoder_norm),
                                                                        ("decoder", model.decoder_norm))}
    assert config.encoder_parameters == sum(layer.count_params() for layer in model.encoder_layers + norms["encoder"])
    assert config.decoder_parameters == sum(layer.count_params() for layer in model.decoder_layers + norms["decoder"])
    assert config.num_parameters == model.count_params()


def test_the_size_check_names_a_stacks_own_depth():
    with pytest.raises(ValueError, match=r"^the model \(num_layers=6, num_decoder_layers=1, d_model=512, d_ff="):
        TransformerConfig.base(num_decoder_layers=1, d_ff=10**12)
