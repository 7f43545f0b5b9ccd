"""Where one training step of the Multi30k recipe spends its time: op types by share of op time.

    .venv/bin/python bench/profile_train_step.py                       # float32, the recipe's model
    .venv/bin/python bench/profile_train_step.py --precision=mixed_bfloat16 --group_by=node
    .venv/bin/python bench/profile_train_step.py --tokenizer_dir=runs/multi30k_en_de/tokenizer   # a run's own ids

The step profiled is the project's own: the trainer is built by
`keras_transformer.training.trainer.build_trainer` (model, Adam on equation (3), step counter,
checkpoints in a temporary folder that is never written to) as `keras_transformer.tasks.training.train` builds
it, and each step is `Trainer.train_step(iterator)`, the compiled `update` function the training
loop calls once per update (forward, label-smoothed loss by XLA as a run computes it after its
first `trainer.COMPILE_LOSS_AFTER` updates, backward, Adam), on the default
strategy, as on a CPU host. The batches are real Multi30k en-de training batches from the
project's input pipeline (`keras_transformer.pipelines.batching.make_input_fn` over the raw train.en.gz /
train.de.gz of --data_dir, the files the recipe's tensorflow-datasets builder reads; shuffled,
length-bucketed to --batch_tokens per side, cached in memory, repeated), fed through
`strategy.distribute_datasets_from_function` as `Trainer.train` feeds them. The tokenizer is
loaded from --tokenizer_dir (read only), or, without it, a shared BPE of --vocab_size is trained
on the training pairs in memory, as the recipe's first run trains it. The model is the recipe's
(configs/multi30k_en_de.flags): N=4, d_model=128, d_ff=256, h=4, shared embeddings, post-LN,
P_drop 0.3, no attention or ReLU dropout, label smoothing 0.1, max_length 128.

Measures, after --warmup steps (which also absorb the retracing that bucketed shapes cause):
the untraced wall time of each of --steps steps (each ends when its loss is on the host, as in
the training loop), printed as the median and the rate of non-padding target tokens per second
(the training log's tokens/s), and the 8,000 updates of the recipe at that rate (updates only,
no dev evaluations). Then --trace_steps more steps under `tf.profiler.experimental.start/stop`;
the trace's `*.xplane.pb` (parsed with `tensorflow.tsl.profiler.protobuf.xplane_pb2`) holds one
event per executed op kernel, named "node:OpType", on the thread that ran it. Their durations
are summed by op type (with --group_by=node, by node) and printed per step: total ms, share of
the summed op time, executions. Op types are the kernels that ran, after Grappler's and oneDNN's
rewrites (`_MklMatMul`, `_MklNativeFusedMatMul`, ...), not the ops the model wrote. Ops that
tf.data's own threads run (the bucketing, the batch's padding) are left out of the table: with
prefetch they overlap the step; a line before the table gives the op time of each kind of
thread, theirs included. --trace_dir keeps the trace for TensorBoard's profile plugin.

Op times overlap when two threads run ops at once (the inter-op pool runs independent ops side
by side, and an op that is waiting, e.g. for the next batch, counts its wait): the summed op
time can exceed the wall time, and the shares say where the op time goes, not how much wall
time removing an op would save. Tracing also slows small ops most; the wall time to compare
with is the untraced one. CPU figures.
"""

from __future__ import annotations

import collections
import glob
import os
import re
import statistics
import tempfile
import time

from absl import app, flags

from keras_transformer import cli
from keras_transformer.tasks import flags as task_flags

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", "../shared/data/multi30k", "The Multi30k raw .gz files (train.en.gz, train.de.gz).")
flags.DEFINE_string("source_lang", "en", "Source language.")
flags.DEFINE_string("target_lang", "de", "Target language.")
flags.DEFINE_string("tokenizer_dir", None, "A saved tokenizer to load (read only), e.g. a run's MODEL_DIR/tokenizer; "
                    "unset: a shared BPE of --vocab_size trained on the training pairs in memory.")
flags.DEFINE_integer("vocab_size", 8000, "Shared BPE vocabulary, when no --tokenizer_dir is given.", lower_bound=5)
flags.DEFINE_enum("precision", "float32", ["float32", "mixed_bfloat16"], "The trainer's compute precision.")
task_flags.define_model_size_flags(num_layers=4, d_model=128, d_ff=256, num_heads=4)
flags.DEFINE_float("dropout_rate", 0.3, "P_drop.", lower_bound=0.0, upper_bound=0.99)
flags.DEFINE_integer("batch_tokens", 4000, "Tokens per side of a batch, padding included.", lower_bound=128)
flags.DEFINE_integer("max_length", 128, "Longest pair kept (tokens with EOS, either side); the model's max_length.",
                     lower_bound=1)
flags.DEFINE_integer("seed", 1, "Initial weights, dropout, tokenizer sampling and data order.", lower_bound=0)
flags.DEFINE_integer("threads", 0, "TensorFlow's intra- and inter-op threads (0: all cores).", lower_bound=0)
flags.DEFINE_integer("warmup", 10, "Untimed steps first.", lower_bound=1)
flags.DEFINE_integer("steps", 30, "Untraced steps timed.", lower_bound=1)
flags.DEFINE_integer("trace_steps", 10, "Steps traced by the profiler.", lower_bound=1)
flags.DEFINE_integer("top", 25, "Op types (or nodes) listed.", lower_bound=1)
flags.DEFINE_enum("group_by", "op", ["op", "node"], "Add op times up by op type, or by node name "
                  "(which MatMul, which gradient).")
flags.DEFINE_string("trace_dir", None, "Keep the trace here (TensorBoard's profile plugin reads it); unset: a "
                    "temporary folder, removed at the end.")

RECIPE_UPDATES = 8000  # configs/multi30k_en_de.flags --train_steps
# "node:OpType", as the executor's TraceMe names an op kernel; "ThreadpoolListener::Record",
# "EagerLocalExecute: __inference_f" and the like are not ops.
_OP_EVENT = re.compile(r"(?P<node>[^:\s][^:]*):(?P<type>[A-Za-z_][A-Za-z0-9_]*)")


def op_times(xplane_path: str, group_by: str):
    """(times, counts, threads) of a trace: picoseconds and executions per op type (or per
    "node (type)") of the host's op kernel events outside tf.data's threads, and the summed
    picoseconds of every op kernel event per kind of thread (its name without the trailing id),
    tf.data's included."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=g-import-not-at-top

    space = xplane_pb2.XSpace()
    with open(xplane_path, "rb") as f:
        space.ParseFromString(f.read())
    times: collections.Counter = collections.Counter()
    counts: collections.Counter = collections.Counter()
    threads: collections.Counter = collections.Counter()
    for plane in space.planes:
        if not plane.name.startswith("/host:"):
            continue
        for line in plane.lines:
            thread = re.sub(r"/-?\d+$", "", line.name)  # "tf_Compute/-4606...": its id dropped
            for event in line.events:
                match = _OP_EVENT.fullmatch(plane.event_metadata[event.metadata_id].name)
                if match is None:
                    continue
                threads[thread] += event.duration_ps
                if line.name.startswith("tf_data"):
                    continue
                key = match["type"] if group_by == "op" else f"{match['node']} ({match['type']})"
                times[key] += event.duration_ps
                counts[key] += 1
    return times, counts, threads


def build(model_dir: str):
    """(trainer, iterator, description): the recipe's trainer in `model_dir` and a distributed iterator of
    real batches."""
    from keras_transformer.config import TrainingConfig, TransformerConfig  # pylint: disable=g-import-not-at-top
    from keras_transformer.training import distribution, trainer as trainer_lib  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import batching, tokenizers  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines.data_config import DataConfig  # pylint: disable=g-import-not-at-top
    from keras_transformer.training_directory.vocabulary import sized_model  # pylint: disable=g-import-not-at-top

    data = DataConfig(dataset="files", data_dir=FLAGS.data_dir, source_file=f"train.{FLAGS.source_lang}.gz",
                      target_file=f"train.{FLAGS.target_lang}.gz", tokenizer="bpe", vocab_size=FLAGS.vocab_size,
                      batch_tokens=FLAGS.batch_tokens, max_length=FLAGS.max_length, seed=FLAGS.seed)
    data.check_inputs("train")
    started = time.perf_counter()
    with cli.silence_native_stderr():  # sentencepiece's C++ INFO lines
        source_tok, target_tok, trained = tokenizers.load_or_train_pair(
            FLAGS.tokenizer_dir, data.training_pairs, data.tokenizer_config(), save=False)
    what = "trained" if trained else f"loaded from {FLAGS.tokenizer_dir}"
    print(f"tokenizer: {source_tok.vocab_size} ids, {what} in {time.perf_counter() - started:.1f} s", flush=True)
    model = sized_model(TransformerConfig.preset(
        "base", num_layers=FLAGS.num_layers, d_model=FLAGS.d_model, d_ff=FLAGS.d_ff, num_heads=FLAGS.num_heads,
        dropout_rate=FLAGS.dropout_rate, attention_dropout_rate=0.0, relu_dropout_rate=0.0, label_smoothing=0.1,
        max_length=FLAGS.max_length, share_embeddings=True), source_tok, target_tok)
    # The recipe's schedule (so Adam's arithmetic is the run's); nothing is ever saved or evaluated.
    training = TrainingConfig(train_steps=RECIPE_UPDATES, warmup_steps=2000, learning_rate_scale=2.5,
                              precision=FLAGS.precision, seed=FLAGS.seed, checkpoint_every_steps=0,
                              eval_every_steps=0)
    strategy = distribution.create_strategy(num_gpus=0)
    # The step of a long run: the loss by XLA from the first update (the recipe's from its 201st).
    trainer = trainer_lib.build_trainer(model, training, model_dir, strategy, batch_tokens=data.batch_tokens,
                                        log=lambda line: None, compile_loss_after=0)
    cache, _ = data.cache_mode()
    input_fn = batching.make_input_fn(data.training_pairs, source_tok, data.batch_tokens, target_tokenizer=target_tok,
                                      max_length=data.max_length, shuffle=True, seed=data.seed * 1_000_003,
                                      repeat=True, shuffle_buffer=data.shuffle_buffer, cache=cache)
    iterator = iter(strategy.distribute_datasets_from_function(input_fn))
    params = sum(int(v.shape.num_elements()) for v in trainer.model.trainable_variables)
    description = (f"{type(strategy).__name__}; N={model.num_layers} d_model={model.d_model} d_ff={model.d_ff} "
                   f"h={model.num_heads} vocab={model.vocab_size}, {params:,} parameters; {training.precision}; "
                   f"P_drop {model.dropout_rate}; batches of {data.batch_tokens} tokens a side (cache {cache})")
    return trainer, iterator, description


def run_steps(trainer, iterator, steps: int):
    """Wall seconds and non-padding target tokens of each of `steps` updates."""
    seconds, tokens = [], []
    for _ in range(steps):
        started = time.perf_counter()
        loss, count, _ = trainer.train_step(iterator)
        loss.numpy()  # the training loop's sync point: the update is done
        seconds.append(time.perf_counter() - started)
        tokens.append(float(count.numpy()))
    return seconds, tokens


def trace(tf, trainer, iterator, steps: int, trace_dir: str):
    """Wall seconds of `steps` updates under the profiler, and the trace's `op_times`."""
    tf.profiler.experimental.start(trace_dir)
    try:
        seconds, _ = run_steps(trainer, iterator, steps)
    finally:
        tf.profiler.experimental.stop()
    paths = sorted(glob.glob(os.path.join(trace_dir, "plugins", "profile", "*", "*.xplane.pb")), key=os.path.getmtime)
    if not paths:
        raise RuntimeError(f"the profiler wrote no *.xplane.pb under {trace_dir}")
    return seconds, paths[-1], op_times(paths[-1], FLAGS.group_by)


def main(argv):
    del argv
    tf = cli.start_tensorflow(threads=FLAGS.threads)
    with tempfile.TemporaryDirectory(prefix="profile_train_step-") as scratch:
        trainer, iterator, description = build(os.path.join(scratch, "model"))  # the model folder: never written
        print(f"{os.cpu_count()} cores; {description}", flush=True)
        started = time.perf_counter()
        run_steps(trainer, iterator, FLAGS.warmup)
        print(f"warm-up: {FLAGS.warmup} steps in {time.perf_counter() - started:.1f} s (first batch, tracing)",
              flush=True)
        seconds, tokens = run_steps(trainer, iterator, FLAGS.steps)
        mean = sum(seconds) / len(seconds)
        print(f"untraced: {FLAGS.steps} steps, median {1e3 * statistics.median(seconds):.0f} ms per step (min "
              f"{1e3 * min(seconds):.0f}, max {1e3 * max(seconds):.0f}), {sum(tokens) / sum(seconds):,.0f} target "
              f"tokens/s (non-padding, {statistics.mean(tokens):,.0f} a step); {RECIPE_UPDATES:,} updates at the "
              f"mean step: {RECIPE_UPDATES * mean / 60:.1f} min", flush=True)
        traced, path, (times, counts, threads) = trace(tf, trainer, iterator, FLAGS.trace_steps,
                                                       FLAGS.trace_dir or os.path.join(scratch, "trace"))
    n, total = FLAGS.trace_steps, max(sum(times.values()), 1)
    print(f"traced: {n} steps, wall {1e3 * sum(traced) / n:.0f} ms per step; summed op time {total / 1e9 / n:.0f} ms "
          f"per step over {sum(counts.values()) / n:,.0f} op executions (threads overlap)"
          + (f"; trace in {path}" if FLAGS.trace_dir else ""))
    print("op time per step by thread (tf_data: the input pipeline's, not in the table): " + ", ".join(
        f"{thread} {ps / 1e9 / n:.1f} ms" for thread, ps in threads.most_common()))
    print(f"| {'op type' if FLAGS.group_by == 'op' else 'node (op type)'} | ms per step | share "
          "| executions per step |")
    print("|---|---:|---:|---:|")
    ranked = times.most_common()
    for key, ps in ranked[: FLAGS.top]:
        print(f"| {key} | {ps / 1e9 / n:.2f} | {100 * ps / total:.1f}% | {counts[key] / n:,.0f} |")
    rest = ranked[FLAGS.top:]
    if rest:
        ps = sum(ps for _, ps in rest)
        print(f"| {len(rest)} more | {ps / 1e9 / n:.2f} | {100 * ps / total:.1f}% | "
              f"{sum(counts[key] for key, _ in rest) / n:,.0f} |")


if __name__ == "__main__":
    app.run(main)
