"""One serving engine alone on the machine: the second, independent check of
`bench/serving_vs_ctranslate2.py` (issue 29).

That bench keeps eight engine processes alive and asks them in turn. This script is another
harness and another process layout: each engine is timed in a process of its own started by the
shell, one after the other, with no other engine process alive; the batches are made here.

    # 1. Source pieces and the batches, once (TensorFlow: the export's tokenizer):
    .venv/bin/python bench/one_engine_alone.py --prepare --ctranslate2_dir=/tmp/ct2 \\
        --input=../shared/data/multi30k/val.en.gz --batches=/tmp/batches.json
    # 2. Each engine alone, in turn:
    .venv/bin/python bench/one_engine_alone.py --engine=ctranslate2 --ctranslate2_dir=/tmp/ct2 \\
        --batches=/tmp/batches.json
    .venv/bin/python bench/one_engine_alone.py --engine=saved_model --export_dir=/tmp/exp \\
        --batches=/tmp/batches.json

`--engine=ctranslate2` imports ctranslate2 only (no TensorFlow) and calls
`Translator(path, device="cpu", compute_type, intra_threads=--threads)` `.translate_batch` on the
pieces of each batch with CTranslate2's own options (beam, `length_penalty`, the batch's longest
source + --max_extra_length as `max_decoding_length`), as a user of CTranslate2 would; its JSON line
also says which GEMM backend CTranslate2 used, the CPU vendor it saw and the CT2_USE_MKL it ran with
(`engine_process.ctranslate2_system`: on an Intel CPU CTranslate2 defaults to Intel MKL, and
`CT2_USE_MKL=0 .venv/bin/python bench/one_engine_alone.py --engine=ctranslate2 ...` times its DNNL
backend).
`--engine=saved_model` loads the SavedModel (`tf.saved_model.load`, TensorFlow's intra- and
inter-op threads set to --threads) and calls `serving_default` on the sentences of each batch:
strings in, strings out, with its tokenization and detokenization. Each engine translates the first
batch to warm up, then all batches --repeats times; it prints one JSON line with its best and median
pass.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine_process  # noqa: E402  pylint: disable=wrong-import-position  (bench/, the script's folder)
from keras_transformer.tasks import flags as task_flags  # noqa: E402  pylint: disable=wrong-import-position  (no TensorFlow)

FLAGS = flags.FLAGS
flags.DEFINE_boolean("prepare", False, "Tokenize --input and write --batches, then exit.")
flags.DEFINE_enum("engine", None, ["ctranslate2", "saved_model"], "The engine to time alone.")
flags.DEFINE_string("input", None, "Source sentences (plain or gzipped UTF-8), for --prepare.")
flags.DEFINE_string("batches", None, "The JSON file of batches (--prepare writes it).")
flags.DEFINE_string("ctranslate2_dir", None, "A `python -m keras_transformer.export --format=ctranslate2` folder.")
flags.DEFINE_string("export_dir", None, "A SavedModel version folder (`python -m keras_transformer.export`).")
flags.DEFINE_string("compute_type", "float32", "CTranslate2's compute_type.")
flags.DEFINE_integer("batch_size", 32, "Sentences per batch (length-sorted, longest first).")
# CTranslate2's beam, length_penalty and output limit (longest source + max_extra_length); the
# SavedModel's are its export's.
task_flags.define_decoding_flags()  # --beam_size 4, --alpha 0.6, --max_extra_length 50 (section 6.1)
flags.DEFINE_integer("threads", 2, "Threads of the engine.")
flags.DEFINE_integer("repeats", 3, "Timed passes over all batches.")


def prepare():
    from keras_transformer.export import ctranslate2_model  # pylint: disable=g-import-not-at-top  (TensorFlow)
    from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top

    lines = [line.decode("utf-8") if isinstance(line, bytes) else line for line in text_files.read_lines(FLAGS.input)]
    translator = ctranslate2_model.Ctranslate2Translator(FLAGS.ctranslate2_dir)
    pieces = translator.tokenize(lines)
    order = sorted(range(len(lines)), key=lambda i: -len(pieces[i]))
    batches = [order[i:i + FLAGS.batch_size] for i in range(0, len(order), FLAGS.batch_size)]
    with open(FLAGS.batches, "w", encoding="utf-8") as file:
        json.dump({"batches": [{"sentences": [lines[i] for i in b], "pieces": [pieces[i] for i in b]}
                               for b in batches]}, file)
    print(f"{len(lines)} sentences in {len(batches)} batches -> {FLAGS.batches}")


def ctranslate2_fn():
    import ctranslate2  # pylint: disable=g-import-not-at-top

    translator, system = engine_process.ctranslate2_loaded(lambda: ctranslate2.Translator(
        FLAGS.ctranslate2_dir, device="cpu", compute_type=FLAGS.compute_type, intra_threads=FLAGS.threads))

    def translate(batch):
        pieces = batch["pieces"]
        limit = max(len(p) for p in pieces) + FLAGS.max_extra_length
        results = translator.translate_batch(pieces, beam_size=FLAGS.beam_size, length_penalty=FLAGS.alpha,
                                             max_decoding_length=limit)
        return sum(len(r.hypotheses[0]) for r in results)

    return translate, {"ctranslate2": ctranslate2.__version__, "compute_type": FLAGS.compute_type,
                       engine_process.USE_MKL: os.environ.get(engine_process.USE_MKL),
                       "cpu_vendor": system["cpu_vendor"], "gemm_backend": system["gemm_backend"]}


def saved_model_fn():
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import

    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
    signature = tf.saved_model.load(FLAGS.export_dir).signatures["serving_default"]

    def translate(batch):
        out = signature(sentences=tf.constant(batch["sentences"]))["translations"].numpy()
        return sum(len(t.split()) for t in out)

    return translate, {"tensorflow": tf.__version__}


def main(argv):
    del argv
    if FLAGS.prepare:
        prepare()
        return
    with open(FLAGS.batches, encoding="utf-8") as file:
        batches = json.load(file)["batches"]
    started = time.time()
    translate, versions = ctranslate2_fn() if FLAGS.engine == "ctranslate2" else saved_model_fn()
    load_seconds = time.time() - started
    translate(batches[0])  # warm-up
    passes = []
    for _ in range(FLAGS.repeats):
        started = time.perf_counter()
        for batch in batches:
            translate(batch)
        passes.append(time.perf_counter() - started)
    sentences = sum(len(b["sentences"]) for b in batches)
    print(json.dumps({"engine": FLAGS.engine, **versions, "threads": FLAGS.threads, "sentences": sentences,
                      "best_seconds": round(min(passes), 3), "median_seconds": round(statistics.median(passes), 3),
                      "sentences_per_second_best": round(sentences / min(passes), 1),
                      "load_seconds": round(load_seconds, 1), "pid": os.getpid(),
                      "passes": [round(p, 3) for p in passes]}))


if __name__ == "__main__":
    app.run(main)
