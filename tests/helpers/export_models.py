"""A tiny training directory for the export and translation tests.

`make_model_dir(path)` writes what training would: model_config.json, a SentencePiece
tokenizer (500 ids) trained on embedded-corpus sentences, and a checkpoint of a
TransformerConfig.tiny model trained for a few seconds, so that it ends its outputs with EOS
at varied lengths (random weights only repeat one token up to the length limit).
`shared_model_dir(tmp_path_factory, path, ...)`: the same, trained once per test session for the
same arguments and copied into `path` (the module fixtures of several files ask for one model).
"""

from __future__ import annotations

import inspect
import os
import textwrap

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.run_dir import layout
from keras_transformer.config import TransformerConfig
from keras_transformer.losses import decoder_inputs
from keras_transformer.model import Transformer
from keras_transformer.pipelines import grammar_corpus, tokenizers
from tests.helpers.shared_folders import key_of, shared_copy

VOCAB_SIZE = 500
MAX_LENGTH = 48
# `make_model_dir` arguments of a model whose encoder and decoder differ in depth (3 layers and 1),
# trained long enough that its greedy outputs vary with the input: the export tests' asymmetric model.
DEEP_ENCODER = dict(steps=400, num_encoder_layers=3, num_decoder_layers=1)
# `python -c FRESH_PROCESS PATH JSON_SENTENCES`: an export's serving_default through
# tf.saved_model.load and through the TF1 Session loader (TF Serving's), in a process that imports
# only tensorflow and tensorflow_text; prints {"load", "session": outputs, "signatures", "modules"}.
FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # registers the tokenizer ops
    path, sentences = sys.argv[1], json.loads(sys.argv[2])
    results = {}
    loaded = tf.saved_model.load(path)
    out = loaded.signatures["serving_default"](sentences=tf.constant(sentences))
    results["load"] = {k: v.numpy().tolist() for k, v in out.items()}
    with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
        results["signatures"] = sorted(k for k in meta_graph.signature_def if not k.startswith("__"))
        signature = meta_graph.signature_def["serving_default"]
        fetches = {k: v.name for k, v in signature.outputs.items()}
        out = session.run(fetches, {signature.inputs["sentences"].name: sentences})
        results["session"] = {k: v.tolist() for k, v in out.items()}
    results["modules"] = sorted(
        m for m in sys.modules if m.split(".")[0] in ("keras_transformer", "sentencepiece")
    )
    print(json.dumps(results, default=lambda b: b.decode("utf-8")))
    """
)


def _train_briefly(model, tokenizer, pairs, steps, seed):
    source = tokenizer.tokenize([s for s, _ in pairs], add_eos=True).to_tensor()[:, :MAX_LENGTH]
    target = tokenizer.tokenize([t for _, t in pairs], add_eos=True).to_tensor()[:, :MAX_LENGTH]
    inputs = decoder_inputs(target)  # (N, T): BOS + target[:, :-1]
    optimizer = keras.optimizers.Adam(3e-3)
    optimizer.build(model.trainable_variables)

    @tf.function
    def step(src, inputs, labels):
        with tf.GradientTape() as tape:
            logits = model((src, inputs), training=True)
            losses = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
            weights = tf.cast(tf.not_equal(labels, 0), tf.float32)
            loss = tf.reduce_sum(losses * weights) / tf.reduce_sum(weights)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    rng = np.random.RandomState(seed)
    for _ in range(steps):
        rows = rng.randint(0, source.shape[0], size=32)
        loss = step(tf.gather(source, rows), tf.gather(inputs, rows), tf.gather(target, rows))
    return float(loss)


def make_model_dir(path, *, steps: int = 150, seed: int = 0, num_pairs: int = 400, tokenizer_from=None,
                   **config_overrides) -> list[tuple[str, str]]:
    """Writes a tiny training directory into `path`; returns the (English, German) pairs used.

    `tokenizer_from`: another such directory whose tokenizer to reuse (an ensemble member of
    it); `config_overrides`: TransformerConfig fields (e.g. num_layers, d_model) to change."""
    pairs = grammar_corpus.generate_pairs(num_pairs, seed=seed)
    if tokenizer_from is None:
        tokenizer = tokenizers.train(
            [s for pair in pairs for s in pair], tokenizers.TokenizerConfig(vocab_size=VOCAB_SIZE, seed=seed)
        )
    else:
        tokenizer = tokenizers.load(os.path.join(tokenizer_from, layout.TOKENIZER_DIR))
    tokenizer.save(os.path.join(path, layout.TOKENIZER_DIR))
    config = TransformerConfig.tiny(vocab_size=tokenizer.vocab_size, max_length=MAX_LENGTH, dropout_rate=0.0)
    config = config.replace(**config_overrides)
    keras.utils.set_random_seed(seed)
    model = Transformer(config)
    model.build()
    if steps:
        _train_briefly(model, tokenizer, pairs, steps, seed)
    layout.write_config(str(path), config)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model), os.path.join(path, layout.CHECKPOINT_DIR), max_to_keep=1
    )
    manager.save(checkpoint_number=steps)
    return pairs


def shared_model_dir(tmp_path_factory, path, **kwargs) -> list[tuple[str, str]]:
    """`make_model_dir(path, **kwargs)`, trained once per test session for the same arguments
    (`shared_folders.shared_copy`: under pytest-xdist, once for all workers) and copied into `path`;
    returns the same pairs. Not with `tokenizer_from`: another caller's folder is not a key."""
    if kwargs.get("tokenizer_from") is not None:
        raise ValueError("shared_model_dir: tokenizer_from names a caller's folder; use make_model_dir")
    arguments = inspect.signature(make_model_dir).bind(path, **kwargs)
    arguments.apply_defaults()  # make_model_dir(p) and make_model_dir(p, steps=150) are one model
    settings = {name: value for name, value in arguments.arguments.items() if name != "path"}
    pairs = shared_copy(tmp_path_factory, key_of("make_model_dir", settings),
                        lambda folder: make_model_dir(folder, **kwargs), path)
    return [tuple(pair) for pair in pairs]
