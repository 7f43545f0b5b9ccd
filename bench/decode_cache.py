"""Decoding with the key/value cache against re-running the decoder over the whole prefix.

    python bench/decode_cache.py                         # Multi30k-size model, 50 output tokens
    python bench/decode_cache.py --beam_size=4 --batch_size=8

The model is `TransformerConfig.base(num_layers=3, d_model=256, d_ff=1024, num_heads=4,
vocab_size=8000)` with random weights (speed does not depend on them). A batch of
--batch_size random sources of --source_length tokens (EOS included) is decoded for exactly
--output_length tokens (EOS is never taken as the end, so both sides do the same steps):

* cached: `model.decode_step` over the buffers of `model.init_cache` (one new position per step),
  reading the encoder keys/values of `model.init_memory`, projected once per sentence;
* uncached: `search.step_fn(..., use_cache=False)`, which runs `model.decode` on the growing
  prefix at every step (what decoding costs without the cache).

Both run greedy search (or beam search with --beam_size > 1) under one `tf.function` each, after
a warm-up call that traces it; the best of --repeats timed calls is reported, alternating the
two sides. The outputs of both are checked to be identical.
"""

from __future__ import annotations

import os
import platform
import time

from absl import app, flags

from keras_transformer.tasks import flags as task_flags

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

FLAGS = flags.FLAGS
task_flags.define_model_size_flags(num_layers=3, d_model=256, d_ff=1024, num_heads=4)
flags.DEFINE_integer("vocab_size", 8000, "Shared vocabulary.")
flags.DEFINE_integer("batch_size", 32, "Sentences decoded together.")
flags.DEFINE_integer("source_length", 20, "Source tokens per sentence, EOS included.")
flags.DEFINE_integer("output_length", 50, "Output tokens decoded per sentence.")
task_flags.define_decoding_flags()  # --beam_size (here 1 by default: greedy search), --alpha
FLAGS.set_default("beam_size", 1)
flags.DEFINE_integer("repeats", 3, "Timed calls per side (alternating); the best is reported.")
flags.DEFINE_boolean(
    "last_logits_only", False,
    "Uncached side: project only the last position to the vocabulary (a leaner baseline than "
    "model.decode, which computes the logits of the whole prefix).",
)


def main(argv):
    del argv
    import numpy as np  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    from keras_transformer import Transformer, TransformerConfig  # pylint: disable=g-import-not-at-top
    from keras_transformer.decoding import beam_search, search
    from keras_transformer.special_ids import BOS_ID, EOS_ID  # pylint: disable=g-import-not-at-top

    config = TransformerConfig.base(
        num_layers=FLAGS.num_layers, d_model=FLAGS.d_model, d_ff=FLAGS.d_ff,
        num_heads=FLAGS.num_heads, vocab_size=FLAGS.vocab_size,
    )
    model = Transformer(config)
    model.build()
    rng = np.random.RandomState(0)
    source = rng.randint(4, FLAGS.vocab_size, size=(FLAGS.batch_size, FLAGS.source_length)).astype(np.int32)
    source[:, -1] = EOS_ID
    source = tf.constant(source)
    steps = FLAGS.output_length

    def lean_uncached_fn(encoder_outputs, source_mask):
        """Full decoder over the prefix, logits of the last position only."""
        memory = {"encoder_outputs": encoder_outputs, "source_mask": source_mask}  # the search expands it
        cache = {"prefix": tf.zeros([tf.shape(source_mask)[0], steps], tf.int32)}

        def last_only(ids, step, cache, memory):
            at_step = tf.one_hot(step, steps, dtype=tf.int32)[None, :]
            prefix = cache["prefix"] * (1 - at_step) + ids[:, None] * at_step  # (B, steps)
            x = model.target_embedding(prefix[:, : step + 1])  # (B, t, d_model); no dropout when decoding
            x = x + model.target_positions(x, start_index=0)
            for layer in model.decoder_layers:
                x = layer(x, memory["encoder_outputs"], source_mask=memory["source_mask"])
            if model.decoder_norm is not None:
                x = model.decoder_norm(x)
            logits = model.target_embedding.logits(x[:, -1:])[:, 0]  # (B, V)
            return logits, {"prefix": prefix}

        return last_only, cache, memory

    def make(use_cache):
        @tf.function
        def decode(source_ids):
            encoder_outputs, source_mask = model.encode(source_ids)
            if not use_cache and FLAGS.last_logits_only:
                fn, cache, memory = lean_uncached_fn(encoder_outputs, source_mask)
            else:
                fn, cache, memory = search.step_fn(model, encoder_outputs, source_mask, steps, use_cache=use_cache)
            start = tf.fill(tf.shape(source_ids)[:1], BOS_ID)
            if FLAGS.beam_size == 1:
                return beam_search.greedy_search(fn, start, cache, steps, eos_id=-1, memory=memory)
            return beam_search.beam_search(
                fn, start, cache, config.output_vocab_size, beam_size=FLAGS.beam_size, alpha=FLAGS.alpha,
                max_decode_length=steps, eos_id=-1, n_best=1, memory=memory,
            )
        return decode

    sides = {"cached": make(True), "uncached": make(False)}
    outputs, times = {}, {name: [] for name in sides}
    for name, fn in sides.items():
        outputs[name] = fn(source)  # trace + warm-up
    for _ in range(FLAGS.repeats):
        for name, fn in sides.items():
            start = time.perf_counter()
            result = fn(source)
            result[0].numpy()
            times[name].append(time.perf_counter() - start)
    same = np.array_equal(outputs["cached"][0], outputs["uncached"][0])
    assert outputs["cached"][0].shape[-1] == steps, outputs["cached"][0].shape

    search = "greedy" if FLAGS.beam_size == 1 else f"beam {FLAGS.beam_size}"
    print(f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; TF {tf.__version__}")
    print(f"model: N={config.num_layers} d_model={config.d_model} d_ff={config.d_ff} h={config.num_heads} "
          f"vocab={config.vocab_size} ({model.count_params() / 1e6:.1f}M parameters), float32")
    print(f"decoding: {search}, batch {FLAGS.batch_size}, source {FLAGS.source_length} tokens, "
          f"{steps} output tokens, tf.function, best of {FLAGS.repeats}; uncached side: "
          f"{'last-position logits only' if FLAGS.last_logits_only else 'model.decode (logits of every position)'}")
    for name in sides:
        best = min(times[name])
        print(f"  {name:9s} {best * 1000:8.1f} ms per batch  {FLAGS.batch_size * steps / best:9.0f} tokens/s")
    print(f"speed-up of the cache: {min(times['uncached']) / min(times['cached']):.1f}x; "
          f"identical outputs: {same}")


if __name__ == "__main__":
    app.run(main)
