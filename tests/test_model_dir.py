"""The training-directory layout: config and checkpoint round trips."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer, TransformerConfig, create_optimizer
from keras_transformer import model_dir as model_dir_lib


def test_checkpoint_round_trip_restores_equal_weights(tmp_path):
    config = TransformerConfig.tiny(layer_norm="pre")
    model = Transformer(config)
    model.build()
    optimizer = create_optimizer(config.d_model, warmup_steps=10)
    optimizer.build(model.trainable_variables)
    model_dir_lib.write_config(str(tmp_path), config, training={"train_steps": 5})
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model, optimizer=optimizer, step=tf.Variable(7, dtype=tf.int64)),
        str(tmp_path / model_dir_lib.CHECKPOINT_DIR),
        max_to_keep=2,
    )
    manager.save(checkpoint_number=7)
    restored, path = model_dir_lib.restore_model(str(tmp_path))
    assert path.endswith("ckpt-7")
    assert restored.config == config
    for a, b in zip(model.weights, restored.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert model_dir_lib.read_settings(str(tmp_path))["training"] == {"train_steps": 5}


def test_missing_pieces_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="model_config.json: not found"):
        model_dir_lib.read_config(str(tmp_path))
    model_dir_lib.write_config(str(tmp_path), TransformerConfig.tiny())
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        model_dir_lib.restore_model(str(tmp_path))
