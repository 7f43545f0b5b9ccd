"""Training speed: tokens/s and model FLOP utilisation, side by side with PyTorch's nn.Transformer.

    python bench/train_speed.py                      # the Multi30k configuration, fp32 and bf16
    python bench/train_speed.py --d_model=512 --num_layers=6 --d_ff=2048 --num_heads=8   # base

Both sides train the same encoder-decoder (same N, d_model, h, d_ff, vocabulary,
shared embeddings, post-LN, dropout, label smoothing, Adam) on the same random
batch of token ids, one full step (forward, backward, Adam update) at a time,
after warm-up. Each run is a fresh subprocess (one framework's thread pools never
compete with the other's), and runs alternate between the frameworks so that
the machine's state affects both alike. Model FLOP utilisation = the model's matmul FLOPs per
step (counted analytically; a training step is 3x the forward pass) x steps/s,
over the matmul ceiling measured in the same run (the faster of TensorFlow's and
PyTorch's 2048^2 matmul, per precision).

Needs `pip install -e .[bench]` (torch==2.13.0). Every figure is a CPU figure.
"""

from __future__ import annotations

import os
import platform
import time

from absl import app, flags

import child
from keras_transformer.tasks import flags as task_flags

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

FLAGS = flags.FLAGS
task_flags.define_model_size_flags(num_layers=3, d_model=256, d_ff=1024, num_heads=4)
flags.DEFINE_integer("vocab_size", 8000, "Shared vocabulary.")
flags.DEFINE_integer("batch_size", 128, "Sentences per batch.")
flags.DEFINE_integer("source_length", 16, "Source tokens per sentence.")
flags.DEFINE_integer("target_length", 16, "Target tokens per sentence.")
flags.DEFINE_float("dropout_rate", 0.1, "P_drop.")
flags.DEFINE_integer("steps", 10, "Timed steps per run.")
flags.DEFINE_integer("warmup", 3, "Untimed steps before each run.")
flags.DEFINE_integer("repeats", 2, "Alternating runs per framework and precision; the best is reported.")
flags.DEFINE_list("precisions", ["float32", "bfloat16"], "float32 and/or bfloat16.")
flags.DEFINE_list("frameworks", ["keras_transformer", "torch"], "Which sides to run.")
flags.DEFINE_bool("xla", False, "jit_compile the keras_transformer step.")
flags.DEFINE_integer("threads", 0, "Threads for both frameworks (0: all cores).")
flags.DEFINE_string("worker", None, "Internal: run one 'framework:precision' (or 'ceiling:precision') and print JSON.")


def training_flops(n, d, d_ff, h, d_k, vocab, batch, s, t) -> float:
    """Matmul FLOPs of one training step (3x forward; 2 FLOPs per multiply-add)."""
    hk = h * d_k
    encoder = 4 * s * d * hk + 2 * s * s * hk + 2 * s * d * d_ff
    decoder = 4 * t * d * hk + 2 * t * t * hk  # masked self-attention
    decoder += 2 * t * d * hk + 2 * s * d * hk + 2 * t * s * hk  # encoder-decoder attention
    decoder += 2 * t * d * d_ff
    logits = t * d * vocab
    forward_macs = batch * (n * (encoder + decoder) + logits)
    return 3 * 2 * forward_macs


def _matmul_rate(matmul, size, seconds) -> float:
    """FLOP/s of `matmul()`, one blocking size x size product, repeated for `seconds` after a warm-up."""
    matmul()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        matmul()
        count += 1
    return 2 * size**3 * count / (time.perf_counter() - start)


def matmul_ceiling(tf, dtype, size=2048, seconds=3.0) -> float:
    """Measured FLOP/s of a size x size matmul in TensorFlow."""
    a = tf.cast(tf.random.normal((size, size), dtype=tf.float32), dtype)
    matmul = tf.function(lambda x: tf.matmul(x, x))
    return _matmul_rate(lambda: matmul(a).numpy(), size, seconds)


def torch_matmul_ceiling(torch, dtype, size=2048, seconds=3.0) -> float:
    """Measured FLOP/s of a size x size matmul in PyTorch (its own BLAS, not TensorFlow's)."""
    a = torch.randn(size, size).to(dtype)
    return _matmul_rate(lambda: torch.matmul(a, a), size, seconds)


def keras_step_runner(precision):
    import keras
    import tensorflow as tf

    from keras_transformer import Transformer, TransformerConfig, create_optimizer, label_smoothed_cross_entropy

    keras.mixed_precision.set_global_policy("mixed_bfloat16" if precision == "bfloat16" else "float32")
    config = TransformerConfig.base(
        num_layers=FLAGS.num_layers, d_model=FLAGS.d_model, d_ff=FLAGS.d_ff, num_heads=FLAGS.num_heads,
        vocab_size=FLAGS.vocab_size, dropout_rate=FLAGS.dropout_rate,
    )
    model = Transformer(config)
    model.build()
    optimizer = create_optimizer(config.d_model, warmup_steps=4000)
    optimizer.build(model.trainable_variables)
    rng = tf.random.Generator.from_seed(0)
    source = rng.uniform((FLAGS.batch_size, FLAGS.source_length), 4, FLAGS.vocab_size, tf.int32)
    target = rng.uniform((FLAGS.batch_size, FLAGS.target_length + 1), 4, FLAGS.vocab_size, tf.int32)

    @tf.function(jit_compile=FLAGS.xla)
    def step(source, target):
        with tf.GradientTape() as tape:
            logits = model((source, target[:, :-1]), training=True)
            loss_sum, count = label_smoothed_cross_entropy(target[:, 1:], logits, 0.1)
            loss = loss_sum / count
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    def run(steps):
        for _ in range(steps):
            loss = step(source, target)
        return float(loss.numpy())

    keras.mixed_precision.set_global_policy("float32")
    return run, model.count_params()


def torch_step_runner(precision):
    import torch
    from torch import nn

    torch.manual_seed(0)
    d, vocab = FLAGS.d_model, FLAGS.vocab_size

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, d)
            nn.init.normal_(self.embedding.weight, std=d**-0.5)  # as keras_transformer's SharedEmbedding
            self.transformer = nn.Transformer(
                d_model=d, nhead=FLAGS.num_heads, num_encoder_layers=FLAGS.num_layers,
                num_decoder_layers=FLAGS.num_layers, dim_feedforward=FLAGS.d_ff,
                dropout=FLAGS.dropout_rate, batch_first=True, norm_first=False,
            )
            self.register_buffer("positions", torch.randn(512, d))  # stand-in for sinusoids: same cost
            self.dropout = nn.Dropout(FLAGS.dropout_rate)

        def forward(self, source, target):
            scale = d**0.5
            src = self.dropout(self.embedding(source) * scale + self.positions[: source.shape[1]])
            tgt = self.dropout(self.embedding(target) * scale + self.positions[: target.shape[1]])
            mask = nn.Transformer.generate_square_subsequent_mask(target.shape[1])
            hidden = self.transformer(src, tgt, tgt_mask=mask, tgt_is_causal=True)
            return hidden @ self.embedding.weight.T  # shared pre-softmax projection

    model = Seq2Seq()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    generator = torch.Generator().manual_seed(0)
    source = torch.randint(4, vocab, (FLAGS.batch_size, FLAGS.source_length), generator=generator)
    target = torch.randint(4, vocab, (FLAGS.batch_size, FLAGS.target_length + 1), generator=generator)

    def run(steps):
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
                logits = model(source, target[:, :-1])
                loss = loss_fn(logits.float().reshape(-1, vocab), target[:, 1:].reshape(-1))
            loss.backward()
            optimizer.step()
        return float(loss.detach())

    return run, sum(p.numel() for p in model.parameters())


def worker(spec):
    """Runs one measurement in this process and prints it as JSON."""
    import json

    from keras_transformer import cli

    framework, precision = spec.split(":")
    tf = cli.start_tensorflow(threads=FLAGS.threads)  # before the runtime starts: TF refuses after
    if framework == "ceiling":
        print(json.dumps({"flops": matmul_ceiling(tf, tf.float32 if precision == "float32" else tf.bfloat16)}))
        return
    if framework == "ceiling_torch":
        import torch

        torch.set_num_threads(FLAGS.threads or os.cpu_count())
        print(json.dumps({"flops": torch_matmul_ceiling(torch, torch.float32 if precision == "float32"
                                                        else torch.bfloat16)}))
        return
    if framework == "torch":
        import torch

        torch.set_num_threads(FLAGS.threads or os.cpu_count())
    make = keras_step_runner if framework == "keras_transformer" else torch_step_runner
    run, params = make(precision)
    run(FLAGS.warmup)
    start = time.perf_counter()
    loss = run(FLAGS.steps)
    seconds = (time.perf_counter() - start) / FLAGS.steps
    print(json.dumps({"seconds": seconds, "params": params, "loss": loss}))


def _measure(spec):
    argv = [__file__, f"--worker={spec}"] + [
        FLAGS[name].serialize() if FLAGS[name].present else ""
        for name in ("num_layers", "d_model", "d_ff", "num_heads", "vocab_size", "batch_size", "source_length",
                     "target_length", "dropout_rate", "steps", "warmup", "xla", "threads")
    ]
    return child.json_reply(child.run_python(*[a for a in argv if a]), spec)


def main(argv):
    del argv
    if FLAGS.worker:
        return worker(FLAGS.worker)
    flops = training_flops(
        FLAGS.num_layers, FLAGS.d_model, FLAGS.d_ff, FLAGS.num_heads, FLAGS.d_model // FLAGS.num_heads,
        FLAGS.vocab_size, FLAGS.batch_size, FLAGS.source_length, FLAGS.target_length,
    )
    tokens = FLAGS.batch_size * (FLAGS.source_length + FLAGS.target_length)
    print(f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"N={FLAGS.num_layers} d_model={FLAGS.d_model} d_ff={FLAGS.d_ff} h={FLAGS.num_heads} "
          f"vocab={FLAGS.vocab_size} batch={FLAGS.batch_size}x({FLAGS.source_length}+{FLAGS.target_length}) "
          f"= {tokens} tokens, {flops / 1e9:.1f} GFLOP per training step", flush=True)
    # The machine's ceiling: the faster of the two frameworks' 2048^2 matmul (their BLAS differ:
    # on an AVX2-only CPU PyTorch's reads about 1.2x TensorFlow's).
    ceilings = {}
    for p in FLAGS.precisions:
        readings = {"tensorflow": _measure(f"ceiling:{p}")["flops"]}
        if "torch" in FLAGS.frameworks:
            readings["torch"] = _measure(f"ceiling_torch:{p}")["flops"]
        ceilings[p] = max(readings.values())
        print(f"matmul ceiling {p}: " + ", ".join(f"{k} {v / 1e9:.0f}" for k, v in readings.items())
              + " GFLOP/s", flush=True)
    best = {}
    for repeat in range(FLAGS.repeats):
        for precision in FLAGS.precisions:
            for framework in FLAGS.frameworks:
                result = _measure(f"{framework}:{precision}")
                key = (framework, precision)
                best[key] = min(best.get(key, float("inf")), result["seconds"])
                print(f"run {repeat + 1}: {framework} {precision}: {result['seconds'] * 1e3:.0f} ms/step, "
                      f"{result['params']:,} parameters, loss {result['loss']:.3f}", flush=True)

    print("\n| framework | precision | step (ms) | tokens/s | GFLOP/s | of matmul ceiling | vs torch |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (framework, precision), seconds in best.items():
        peer = best.get(("torch", precision))
        ratio = f"{peer / seconds:.2f}x" if peer else "-"
        print(f"| {framework} | {precision} | {seconds * 1e3:.0f} | {tokens / seconds:,.0f} | "
              f"{flops / seconds / 1e9:.0f} | {flops / seconds / ceilings[precision]:.0%} | {ratio} |")


if __name__ == "__main__":
    app.run(main)
