"""Throughput of the exported SavedModel against in-process `tf.function` decoding.

    python bench/serving_throughput.py                   # beam 4, batch 32, Multi30k-size model
    python bench/serving_throughput.py --model_dir=/tmp/run   # a trained model instead

Same model, same sentences, same decoding settings (beam 4, alpha 0.6, source length + 50) on
three paths:

* in-process: `keras_transformer.export.serving_module.Translator.serving_default`, the `tf.function` that
  the export saves (strings in, strings out), called in the process that built it;
* SavedModel, `tf.saved_model.load`: the export reloaded, its `serving_default` signature;
* SavedModel, TF1 Session: `tf.compat.v1.saved_model.loader.load` + `Session.run`, the
  loader TF Serving uses (no HTTP or gRPC cost counted).

Without --model_dir the model is `TransformerConfig.base(num_layers=3, d_model=256, d_ff=1024,
num_heads=4)` with random weights and a SentencePiece vocabulary trained on the embedded
corpus; random weights seldom pick EOS, so most sentences run to the length limit (the
slowest case; all paths do the same work). Each path is warmed up once, then the paths take
turns over --repeats rounds of --batches batches of --batch_size sentences; the best round is
reported as sentences/s.
"""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
import time

from absl import app, flags

from keras_transformer.tasks import flags as task_flags

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A training directory; default: a random Multi30k-size model.")
task_flags.define_decoding_flags()
flags.DEFINE_integer("batch_size", 32, "Sentences per request.")
flags.DEFINE_integer("batches", 2, "Batches per round.")
flags.DEFINE_integer("repeats", 3, "Rounds per path (alternating); the best is reported.")
flags.DEFINE_integer("vocab_size", 8000, "Tokenizer vocabulary (an upper bound) for the random model.")


def random_translator(decoding_config):
    from keras_transformer.export import serving_module  # pylint: disable=g-import-not-at-top
    from keras_transformer import Transformer, TransformerConfig  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import grammar_corpus, tokenizers  # pylint: disable=g-import-not-at-top

    pairs = grammar_corpus.generate_pairs(20000, seed=0)
    tokenizer = tokenizers.train(
        [s for pair in pairs for s in pair], tokenizers.TokenizerConfig(vocab_size=FLAGS.vocab_size)
    )
    directory = tempfile.mkdtemp()
    tokenizer.save(directory)  # the asset file
    config = TransformerConfig.base(
        num_layers=3, d_model=256, d_ff=1024, num_heads=4, vocab_size=tokenizer.vocab_size
    )
    model = Transformer(config)
    model.build()
    return serving_module.Translator(model, tokenizer, None, decoding_config), directory


def main(argv):
    del argv
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    from keras_transformer.export import serving_module  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import grammar_corpus  # pylint: disable=g-import-not-at-top

    decoding_config = task_flags.decoding_config()
    scratch = None
    if FLAGS.model_dir:
        translator, _ = serving_module.from_model_dir(FLAGS.model_dir, decoding_config)
    else:
        translator, scratch = random_translator(decoding_config)
    export_root = tempfile.mkdtemp()
    path = serving_module.export_saved_model(translator, export_root)

    sentences = [s for s, _ in grammar_corpus.generate_pairs(FLAGS.batch_size * FLAGS.batches, seed=1)]
    batches = [
        tf.constant(sentences[i : i + FLAGS.batch_size]) for i in range(0, len(sentences), FLAGS.batch_size)
    ]

    loaded = tf.saved_model.load(path).signatures["serving_default"]
    graph = tf.Graph()
    with graph.as_default():
        session = tf.compat.v1.Session(graph=graph)
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
    signature = meta_graph.signature_def["serving_default"]
    fetches = {k: v.name for k, v in signature.outputs.items()}
    feed_name = signature.inputs["sentences"].name

    paths = {
        "in-process tf.function": lambda b: translator.serving_default(b)["translations"].numpy(),
        "SavedModel, tf.saved_model.load": lambda b: loaded(sentences=b)["translations"].numpy(),
        "SavedModel, TF1 Session (TF Serving's loader)": lambda b: session.run(
            fetches, {feed_name: b.numpy()})["translations"],
    }
    outputs = {name: [fn(b) for b in batches] for name, fn in paths.items()}  # warm-up
    reference = outputs["in-process tf.function"]
    same = all(all((o == r).all() for o, r in zip(out, reference)) for out in outputs.values())
    times = {name: [] for name in paths}
    for _ in range(FLAGS.repeats):
        for name, fn in paths.items():
            start = time.perf_counter()
            for b in batches:
                fn(b)
            times[name].append(time.perf_counter() - start)

    config = translator.model.config
    print(f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; TF {tf.__version__}")
    print(f"model: N={config.depth_text} d_model={config.d_model} d_ff={config.d_ff} h={config.num_heads} "
          f"vocab={config.vocab_size}, {'trained: ' + FLAGS.model_dir if FLAGS.model_dir else 'random weights'}")
    print(f"decoding: beam {FLAGS.beam_size}, alpha {FLAGS.alpha}, source length + {FLAGS.max_extra_length}; "
          f"{FLAGS.batches} batches of {FLAGS.batch_size} sentences per round, best of {FLAGS.repeats} rounds")
    base = len(sentences) / min(times["in-process tf.function"])
    for name in paths:
        rate = len(sentences) / min(times[name])
        print(f"  {name:46s} {rate:7.2f} sentences/s  ({rate / base:.2f}x in-process)")
    print(f"identical translations on all paths: {same}")
    session.close()
    shutil.rmtree(export_root, ignore_errors=True)
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    app.run(main)
