"""Tokens per second the input pipeline delivers, against what a training step consumes.

The pipeline must never starve training: this measures `keras_transformer.pipelines.batching.make_dataset`
on Multi30k train (or the embedded corpus when ../shared/data is absent) at a token
budget, then, if `keras_transformer` imports, times a training step (forward,
backward and Adam under `tf.function`) at the same budget on batches from that
pipeline, and prints both rates and their ratio. Tokens are non-padding source
plus target ids (EOS included) in both numbers.

  .venv/bin/python bench/pipeline_throughput.py --batch_tokens=4096
  .venv/bin/python bench/pipeline_throughput.py --batch_tokens=25000 --steps=3

Pipeline figures: "first epoch" includes reading and tokenizing (tensorflow-text
ops, no cache yet); "cached" is a later epoch from the in-memory cache.
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from keras_transformer.tasks import flags as task_flags  # noqa: E402

FLAGS = flags.FLAGS
DEFAULT_SHARED_DATA = os.environ.get(
    "KT_SHARED_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))


def define_flags():
    """This benchmark's flags, defined when it runs (bench/input_scale.py imports its functions)."""
    flags.DEFINE_string("shared_data", DEFAULT_SHARED_DATA,
                        "Folder holding multi30k/; the embedded corpus is used if it is missing.")
    flags.DEFINE_integer("batch_tokens", 4096, "Token budget per batch and side, padding included.")
    flags.DEFINE_integer("max_length", 256, "Longest pair kept.")
    flags.DEFINE_integer("vocab_size", 8000, "Shared BPE vocabulary size.")
    flags.DEFINE_integer("epochs", 2, "Cached epochs timed after the first.")
    flags.DEFINE_integer("steps", 8, "Training steps timed (after 2 warm-up steps); 0 skips the step.")
    task_flags.define_model_size_flags(num_layers=3, d_model=256, d_ff=1024, num_heads=4)


def load_pairs():
    from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top
    folder = os.path.join(FLAGS.shared_data, "multi30k")
    if os.path.isdir(folder):
        pairs = text_files.read_parallel_pairs(os.path.join(folder, "train.en.gz"),
                                               os.path.join(folder, "train.de.gz"))
        return "multi30k train en-de", pairs
    from keras_transformer.pipelines import sources  # pylint: disable=g-import-not-at-top
    return "embedded train", sources.load_pair_list("embedded", "train")


def count(batch):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    source, target = batch
    return int(tf.math.count_nonzero(source)) + int(tf.math.count_nonzero(target))


def time_pipeline(pairs, tokenizer):
    from keras_transformer.pipelines import batching  # pylint: disable=g-import-not-at-top
    ds = batching.make_dataset(pairs, tokenizer, FLAGS.batch_tokens, FLAGS.max_length,
                               shuffle=True, seed=0, repeat=False, cache="memory")
    seconds = []
    for _ in range(1 + FLAGS.epochs):  # epoch 0 fills the cache
        start = time.perf_counter()
        for _ in ds:  # the batches as a training loop would receive them
            pass
        seconds.append(time.perf_counter() - start)
    stats = batching.batch_stats(ds)
    per_epoch = stats.source_tokens + stats.target_tokens
    return stats, [per_epoch / t for t in seconds]


def time_step(batches, vocab_size, steps, *, num_layers, d_model, d_ff, num_heads):
    """Times `steps` training steps (forward, backward, Adam) on `batches` after 2 warm-up steps.

    Returns (tokens/s, pairs/s, parameters); the timed steps cycle through `batches[2:]`.
    """
    import keras  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from keras_transformer import Transformer, TransformerConfig  # pylint: disable=g-import-not-at-top
    from keras_transformer.losses import decoder_inputs, label_smoothed_cross_entropy  # pylint: disable=g-import-not-at-top

    config = TransformerConfig.base(vocab_size=vocab_size, num_layers=num_layers,
                                    d_model=d_model, d_ff=d_ff, num_heads=num_heads)
    model = Transformer(config)
    optimizer = keras.optimizers.Adam(1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-9)

    signature = [tf.TensorSpec([None, None], tf.int32)] * 2  # bucketed shapes: one trace

    @tf.function(input_signature=signature)
    def step(source, target):
        decoder_input = decoder_inputs(target)  # (B, T), shifted right behind BOS
        with tf.GradientTape() as tape:
            logits = model((source, decoder_input), training=True)  # (B, T, V)
            loss_sum, num_tokens = label_smoothed_cross_entropy(target, logits)
            loss = loss_sum / num_tokens
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for source, target in batches[:2]:  # trace and warm up
        step(source, target).numpy()
    tokens, pairs, start = 0, 0, time.perf_counter()
    for i in range(steps):
        source, target = batches[2 + i % (len(batches) - 2)]
        step(source, target).numpy()
        tokens += count((source, target))
        pairs += int(source.shape[0])
    elapsed = time.perf_counter() - start
    return tokens / elapsed, pairs / elapsed, model.count_params()


def main(argv):
    del argv
    from keras_transformer.pipelines import tokenizers  # pylint: disable=g-import-not-at-top
    name, pairs = load_pairs()
    tokenizer, _ = tokenizers.train_pair(
        pairs, tokenizers.TokenizerConfig(type="bpe", vocab_size=FLAGS.vocab_size))
    print(f"data: {name}, {len(pairs)} pairs; shared BPE vocab {tokenizer.vocab_size}; "
          f"batch_tokens={FLAGS.batch_tokens}; CPU: {os.cpu_count()} cores")
    stats, rates = time_pipeline(pairs, tokenizer)
    print(f"pipeline: {stats.batches} batches/epoch, padding share {stats.padding_share:.2%}")
    print(f"pipeline tokens/s: first epoch {rates[0]:,.0f} (tokenizing); cached "
          + ", ".join(f"{r:,.0f}" for r in rates[1:]))
    if FLAGS.steps <= 0:
        return
    try:
        import keras_transformer  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
    except ImportError as e:
        print(f"training step: pending (keras_transformer does not import: {e})")
        return
    from keras_transformer.pipelines import batching  # pylint: disable=g-import-not-at-top
    ds = batching.make_dataset(pairs, tokenizer, FLAGS.batch_tokens, FLAGS.max_length,
                               shuffle=True, seed=1)
    batches = list(ds.take(2 + FLAGS.steps))
    step_rate, _, params = time_step(batches, tokenizer.vocab_size, FLAGS.steps,
                                     num_layers=FLAGS.num_layers, d_model=FLAGS.d_model,
                                     d_ff=FLAGS.d_ff, num_heads=FLAGS.num_heads)
    print(f"training step tokens/s: {step_rate:,.0f} (float32, {FLAGS.num_layers} layers, "
          f"d_model {FLAGS.d_model}, d_ff {FLAGS.d_ff}, {FLAGS.num_heads} heads, "
          f"{params / 1e6:.1f}M parameters, Adam, tf.function)")
    worst = min(rates)
    print(f"ratio pipeline/step: {worst / step_rate:.1f}x (slowest pipeline epoch; "
          f"cached {max(rates[1:] or rates) / step_rate:.1f}x)")


if __name__ == "__main__":
    define_flags()
    app.run(main)
