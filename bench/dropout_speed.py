"""Dropout's cost in a training step: `keras_transformer.layers.Dropout` against `keras.layers.Dropout`.

    .venv/bin/python bench/dropout_speed.py --dtype=bfloat16     # the precision where they differ
    .venv/bin/python bench/dropout_speed.py --dtype=float32      # the same code path: a control

The Multi30k recipe (N=4, d_model=128, P_drop 0.3) calls dropout 22 times per step: on the sums of
embeddings and positions of both stacks and on the output of each of the 20 sub-layers, each on a
(B, T, d_model) tensor of about 4,000 tokens. This times exactly that: --calls dropout layers of
each kind, each on its own (--batch, --length, --width) input, inside one `tf.function` as in the
trainer's step, forward and backward (the gradient of every output, with a given upstream
gradient, with respect to its input).

On 16-bit inputs Keras draws its uniform numbers in that dtype (rate 0.3 keeps 0.6953 in
bfloat16); keras_transformer's layer draws them in float32 and multiplies by the cast mask
(`keras_transformer/layers/dropout.py`). On float32 inputs both run Keras' kernels.

The two kinds run in turn, one step each, --repeats times after --warmup steps each; the median
and quartiles of each and the ratio of medians are printed. CPU figures; figures of one machine
belong in docs/speed.md#training-step-design with this command.
"""

from __future__ import annotations

import statistics
import time

from absl import flags

from keras_transformer import cli

FLAGS = flags.FLAGS
flags.DEFINE_integer("calls", 22, "Dropout calls per step.", lower_bound=1)
flags.DEFINE_integer("batch", 125, "B of each input.", lower_bound=1)
flags.DEFINE_integer("length", 32, "T of each input.", lower_bound=1)
flags.DEFINE_integer("width", 128, "d_model of each input.", lower_bound=1)
flags.DEFINE_float("rate", 0.3, "P_drop.", lower_bound=0.01, upper_bound=0.99)
flags.DEFINE_enum("dtype", "bfloat16", ["float32", "bfloat16", "float16"], "The inputs' dtype.")
flags.DEFINE_integer("warmup", 5, "Untimed steps per kind first.", lower_bound=1)
flags.DEFINE_integer("repeats", 30, "Timed steps per kind, alternating.", lower_bound=1)


def step_function(tf, layers, inputs, upstream):
    """A `tf.function`: every layer's dropout of its input, and the inputs' gradients."""

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            outputs = [layer(x, training=True) for layer, x in zip(layers, inputs)]
        return tape.gradient(outputs, inputs, output_gradients=upstream)

    return step


def main(argv):
    del argv
    import keras
    import numpy as np
    import tensorflow as tf

    from keras_transformer.layers import Dropout

    shape = (FLAGS.batch, FLAGS.length, FLAGS.width)
    rng = np.random.default_rng(0)
    inputs = [tf.constant(rng.normal(size=shape), FLAGS.dtype) for _ in range(FLAGS.calls)]
    upstream = [tf.constant(rng.normal(size=shape), FLAGS.dtype) for _ in range(FLAGS.calls)]
    kinds = {"keras.layers.Dropout": keras.layers.Dropout, "keras_transformer Dropout": Dropout}
    steps = {name: step_function(tf, [cls(FLAGS.rate, seed=i, dtype=FLAGS.dtype) for i in range(FLAGS.calls)],
                                 inputs, upstream) for name, cls in kinds.items()}
    for step in steps.values():
        for _ in range(FLAGS.warmup):
            step()[0].numpy()
    times = {name: [] for name in steps}
    for _ in range(FLAGS.repeats):
        for name, step in steps.items():
            started = time.perf_counter()
            step()[-1].numpy()
            times[name].append(time.perf_counter() - started)
    print(f"{FLAGS.calls} dropout calls on {shape} {FLAGS.dtype}, rate {FLAGS.rate}, forward and backward; "
          f"{FLAGS.repeats} steps per kind, alternating (CPU)")
    medians = {}
    for name, seconds in times.items():
        q1, median, q3 = statistics.quantiles(seconds, n=4)
        medians[name] = median
        print(f"  {name:26s} median {1e3 * median:6.1f} ms (quartiles {1e3 * q1:.1f}-{1e3 * q3:.1f})")
    first, second = medians.values()
    print(f"  keras_transformer / keras: {second / first:.2f}x the time")


if __name__ == "__main__":
    cli.run(main)
