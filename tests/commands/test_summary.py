"""`python -m keras_transformer.summary`: a preset's parameter count, per stack, with the depth flags."""

from keras_transformer import TransformerConfig
from tests.helpers.commands import run_command


def test_the_count_per_stack_with_each_stacks_own_depth():
    result = run_command("-m", "keras_transformer.summary", "--preset=tiny", "--vocab_size=50", "--num_layers=4",
                         "--num_decoder_layers=1")
    assert result.returncode == 0, result.stderr[-2000:]
    config = TransformerConfig.tiny(vocab_size=50, num_layers=4, num_decoder_layers=1)
    lines = result.stdout.splitlines()
    assert lines[-2] == f"tiny: {config.num_parameters:,} parameters"  # the built model's count_params()
    assert lines[-1] == (f"encoder (4 layers): {config.encoder_parameters:,}; decoder (1 layer): "
                         f"{config.decoder_parameters:,}; embeddings: {config.embedding_parameters:,}")
    assert "encoder_layer_3" in result.stdout and "decoder_layer_1" not in result.stdout
