"""The decoding step's output projection: x E^T with E read transposed, against E^T stored.

    python bench/output_projection.py                     # d_model 256, vocabulary 8,000
    python bench/output_projection.py --rows=32,80,128 --steps=200 --repeats=5

Each beam-search step multiplies its live rows (rows = live sentences x beam, at most 128 for a
batch of 32 at beam 4) by the tied embedding matrix E (V, d_model) transposed, plus the bias
that rules PAD and BOS out (`SharedEmbedding.logits`):

* `transpose_b`: `tf.matmul(x, E, transpose_b=True)`, E as the variable stores it: what every
  step did before `Transformer.step_weights()` held E^T;
* `E^T stored`: `tf.matmul(x, E^T)` with E^T transposed once, outside the loop
  (`SharedEmbedding.output_kernel`): what a step does now.

Both run --steps matmuls (+ bias) in one `tf.while_loop` under `tf.function`, as the search's
loop does; the best of --repeats calls per side, the sides alternating, is reported in us per
product, and the two products are checked to be equal bit for bit at every row count. TensorFlow
with --threads intra- and inter-op threads. CPU figures.
"""

from __future__ import annotations

import time

from absl import app, flags

from keras_transformer import cli

FLAGS = flags.FLAGS
flags.DEFINE_list("rows", ["32", "80", "128"], "Rows multiplied per step (live hypotheses).")
flags.DEFINE_integer("d_model", 256, "Width of a row.", lower_bound=1)
flags.DEFINE_integer("vocab_size", 8000, "Rows of E.", lower_bound=2)
flags.DEFINE_integer("steps", 200, "Products per timed call (one while loop).", lower_bound=1)
flags.DEFINE_integer("repeats", 5, "Timed calls per side; the best is reported.", lower_bound=1)
flags.DEFINE_integer("threads", 2, "TensorFlow intra- and inter-op threads.", lower_bound=1)


def main(argv):
    del argv
    tf = cli.start_tensorflow(threads=FLAGS.threads)
    tf.random.set_seed(1)
    embeddings = tf.Variable(tf.random.normal([FLAGS.vocab_size, FLAGS.d_model]))
    bias = tf.Variable(tf.random.normal([FLAGS.vocab_size]))

    def looped(product):
        @tf.function
        def run(x):
            kernel = tf.transpose(embeddings) if product == "stored" else embeddings

            def body(i, total):
                logits = tf.nn.bias_add(tf.matmul(x, kernel, transpose_b=product == "transpose_b"), bias)
                return i + 1, total + logits[0, 0]

            return tf.while_loop(lambda i, _: i < FLAGS.steps, body, (0, 0.0), parallel_iterations=1)[1]
        return run

    sides = {"transpose_b": looped("transpose_b"), "E^T stored": looped("stored")}
    print(f"x (rows, {FLAGS.d_model}) times E^T ({FLAGS.d_model}, {FLAGS.vocab_size:,}) + bias, {FLAGS.steps} "
          f"products per call in a while loop, best of {FLAGS.repeats} calls, TensorFlow {tf.__version__}, "
          f"{FLAGS.threads} threads (CPU figures)")
    print("| rows | transpose_b (us) | E^T stored (us) | speed-up | equal bit for bit |")
    print("|---:|---:|---:|---:|---|")
    for rows in (int(r) for r in FLAGS.rows):
        x = tf.random.normal([rows, FLAGS.d_model])
        best = {name: float("inf") for name in sides}
        for run in sides.values():
            run(x)  # trace
        for _ in range(FLAGS.repeats):
            for name, run in sides.items():
                started = time.perf_counter()
                run(x)
                best[name] = min(best[name], (time.perf_counter() - started) / FLAGS.steps * 1e6)
        equal = bool(tf.reduce_all(tf.equal(tf.matmul(x, embeddings, transpose_b=True),
                                            tf.matmul(x, tf.transpose(embeddings)))))
        print(f"| {rows} | {best['transpose_b']:,.0f} | {best['E^T stored']:,.0f} | "
              f"{best['transpose_b'] / best['E^T stored']:.2f}x | {'yes' if equal else 'no'} |")


if __name__ == "__main__":
    app.run(main)
