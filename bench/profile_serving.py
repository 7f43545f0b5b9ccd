"""Where the SavedModel's beam search spends its time: op types by total time, one traced batch.

    .venv/bin/python bench/profile_serving.py --export_dir=/tmp/serving/transformer \\
        --input=../shared/data/multi30k/test_2016_flickr.en.gz --batch_size=32 --batches=4

Loads the export with the TF1 Session loader (TF Serving's), runs `serving_default` once on
each of --batches length-sorted batches of --batch_size sentences (the first lines of
--input, longest first, as `keras_transformer.export.client.translate_lines` batches them) to warm up, then
again with `RunOptions.FULL_TRACE`, and adds up the executed nodes' times (`StepStats`, which
also records the nodes of the functions and loops inside the signature) by op type, or with
--group_by=node by node name (which MatMul, which gather: summed over the loop's iterations). Prints
the wall time of the traced runs, the op types by share of the summed node time, and the loop
steps (`while` body iterations) they took. Node times overlap when two threads run nodes at
once, and tracing slows small ops most: read the shares as where the time goes, the wall time
as what one batch costs untraced (printed too). CPU figures.
"""

from __future__ import annotations

import collections
import time

from absl import app, flags

from keras_transformer import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("export_dir", None, "A SavedModel from `python -m keras_transformer.export` (version or base folder).")
flags.DEFINE_string("input", None, "Source sentences, one per line, plain or gzipped.")
flags.DEFINE_integer("batch_size", 32, "Sentences per batch.", lower_bound=1)
flags.DEFINE_integer("batches", 4, "Batches traced (the longest first).", lower_bound=1)
flags.DEFINE_integer("top", 25, "Op types (or nodes) listed.", lower_bound=1)
flags.DEFINE_enum("group_by", "op", ["op", "node"], "Add node times up by op type, or by node name "
                  "(each node of the graph summed over the loop's iterations: which MatMul, which gather).")
flags.mark_flags_as_required(["export_dir", "input"])


def main(argv):
    del argv
    tf = cli.start_tensorflow()
    import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import

    from keras_transformer.export import versions  # pylint: disable=g-import-not-at-top
    from keras_transformer.decoding import sorted_batches  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top

    lines = [line.encode("utf-8") for line in text_files.read_lines(FLAGS.input)]
    order = sorted_batches.length_sorted_batches([(len(line.split()), len(line)) for line in lines],
                                                 FLAGS.batch_size, descending=True)
    batches = [[lines[i] for i in batch] for batch in order[: FLAGS.batches]]
    path = versions.saved_model_path(FLAGS.export_dir)
    with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as session:
        with cli.silence_native_stderr():
            meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
        signature = meta_graph.signature_def["serving_default"]
        fetch = signature.outputs["translations"].name
        feed = signature.inputs["sentences"].name
        for batch in batches:  # warm-up
            session.run(fetch, {feed: batch})
        started = time.perf_counter()
        for batch in batches:
            session.run(fetch, {feed: batch})
        untraced = time.perf_counter() - started
        by_type: collections.Counter = collections.Counter()
        counts: collections.Counter = collections.Counter()
        started = time.perf_counter()
        for batch in batches:
            metadata = tf.compat.v1.RunMetadata()
            session.run(fetch, {feed: batch}, options=tf.compat.v1.RunOptions(
                trace_level=tf.compat.v1.RunOptions.FULL_TRACE), run_metadata=metadata)
            for device in metadata.step_stats.dev_stats:
                for node in device.node_stats:
                    op = node.timeline_label.split("(")[0].split(" = ")[-1].strip() or node.node_name
                    if FLAGS.group_by == "node":
                        op = f"{node.node_name} ({op})"
                    by_type[op] += node.all_end_rel_micros
                    counts[op] += 1
        traced = time.perf_counter() - started
        # Row-steps of the best hypotheses against those the batch's loop runs at least (every
        # row until the longest output of the batch), over every batch of --input: the order of
        # what a search whose done sentences leave the batch would skip.
        attention = meta_graph.signature_def["translate_with_attention"]
        best_steps = batch_steps = 0
        for batch in order:
            lengths = session.run(attention.outputs["target_lengths"].name,
                                  {attention.inputs["sentences"].name: [lines[i] for i in batch]})
            best_steps += int(lengths.sum())
            batch_steps += len(batch) * int(lengths.max(initial=0))
    total = sum(by_type.values())
    print(f"{path}: {len(batches)} batches of up to {FLAGS.batch_size} sentences; wall {untraced:.2f} s "
          f"untraced, {traced:.2f} s traced; summed node time {total / 1e6:.2f} s over {sum(counts.values()):,} "
          f"executed nodes")
    print(f"all {len(lines):,} sentences of --input in batches of {FLAGS.batch_size}: the best hypotheses hold "
          f"{best_steps:,} tokens (EOS included) of the {batch_steps:,} row-steps the batches' loops run to their "
          f"longest output ({100 * best_steps / max(batch_steps, 1):.1f}%)")
    print(f"| {'op type' if FLAGS.group_by == 'op' else 'node (op type)'} | share | summed time (s) | executions "
          "| mean (us) |")
    print("|---|---:|---:|---:|---:|")
    for op, micros in by_type.most_common(FLAGS.top):
        print(f"| {op} | {100 * micros / total:.1f}% | {micros / 1e6:.3f} | {counts[op]:,} | "
              f"{micros / counts[op]:.1f} |")


if __name__ == "__main__":
    app.run(main)
