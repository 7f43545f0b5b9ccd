"""The peer's exported SavedModel as a serving worker, under the peer's own Python (TensorFlow 2.12).

    /work/onmt-venv/bin/python bench/opennmt_tf/peer_engine.py WORK/peer_saved_model.json

The same worker protocol as `bench/engine_process.py` (so `engine_process.EngineProcess`'s
handle drives it): the spec is a JSON object with "path" (the `onmt-main export` folder),
"batches" (sentences, batch by batch) and "threads" (TensorFlow's intra- and inter-op threads,
set before the runtime starts); one request a line on stdin ("warm_up", "translate"), one JSON
reply a line on a copy of the original stdout (fd 1 then points at stderr). The first reply, once
the model is loaded: pid, load seconds, TensorFlow and its threads.

The model is loaded as TF Serving and OpenNMT-tf's own serving example load it
(`tf.saved_model.load`, after `import tensorflow_text` for the in-graph SentencePiece ops) and
called through `serving_default` on a batch of strings (`text`); it returns `text` and
`log_probs` per hypothesis, the first (best) of which is kept. Imports the standard library,
TensorFlow and tensorflow-text only: no OpenNMT-tf, no project module.
"""

import json
import os
import sys
import time


def serve(spec_path: str) -> None:
    with open(spec_path, encoding="utf-8") as file:
        spec = json.load(file)
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # a print anywhere goes to stderr, never into the replies

    def reply(message):
        replies.write(json.dumps(message) + "\n")
        replies.flush()

    started = time.perf_counter()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(spec["threads"])
    import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

    serving_default = tf.saved_model.load(spec["path"]).signatures["serving_default"]
    inputs = [tf.constant([line.encode("utf-8") for line in batch], tf.string) for batch in spec["batches"]]

    def run(k):
        outputs = serving_default(text=inputs[k])
        return list(zip(outputs["text"][:, 0].numpy().tolist(), outputs["log_probs"][:, 0].numpy().tolist()))

    reply({"pid": os.getpid(), "load_seconds": time.perf_counter() - started, "tensorflow": True,
           "tensorflow_version": tf.__version__,
           "tensorflow_threads": [tf.config.threading.get_intra_op_parallelism_threads(),
                                  tf.config.threading.get_inter_op_parallelism_threads()],
           "compute_type": "float32", "ctranslate2": None, "CT2_USE_MKL": None})

    def translate():
        start = time.perf_counter()
        per_batch = [run(k) for k in range(len(inputs))]
        seconds = time.perf_counter() - start
        return {"seconds": seconds,
                "outputs": [[[text.decode("utf-8"), float(score)] for text, score in pairs] for pairs in per_batch]}

    handlers = {"warm_up": lambda: (run(0), {})[1], "translate": translate}
    for line in iter(sys.stdin.readline, ""):
        reply(handlers[line.strip()]())


if __name__ == "__main__":
    serve(sys.argv[1])
