"""Two SavedModel exports (e.g. before and after a change of the search) on the same sentences:
the same outputs? how fast, each against the other?

    .venv/bin/python bench/exports_side_by_side.py --before=/tmp/old/1 --after=/tmp/new/1 \\
        --input=../shared/data/multi30k/val.en.gz --batch_size=32 --repeats=3

Both exports are loaded in this process (`keras_transformer.export.client.load_translate_fn`, `tf.saved_model.load`:
their `serving_default`, strings in, strings out) and translate every line of --input in the
same length-sorted batches (`keras_transformer.export.client.translate_lines`). Each warms up on one batch; then
in each of --repeats rounds both translate everything, the order swapped every round, and each
export's best round gives its sentences/s. Printed: how many translations are identical, the
largest score difference over them, the first differing sentences, the times and after's speed
over before's. Exit status 1 if any translation differs. CPU figures.

Each round also records the process's CPU seconds (`time.process_time`, all its threads): on
a host shared with other work, where wall times of a round swing by 2x, the CPU seconds an
export spends on the same sentences are the steadier measure of its work (they count what
TensorFlow's threads compute and spin, not the time they wait for a core). Printed: each
export's best round by both measures and the median over rounds of after's speed over
before's within a round (wall and CPU).

A float32 and a bfloat16 export of the same checkpoint (`python -m keras_transformer.export --precision`), each
export's precision printed from its export.json; their translations are expected to differ on
some sentences (exit status 1), and the share of identical ones is what to report:

    .venv/bin/python -m keras_transformer.export --model_dir=RUN --export_dir=/tmp/f32 --precision=float32
    .venv/bin/python -m keras_transformer.export --model_dir=RUN --export_dir=/tmp/bf16 --precision=bfloat16
    .venv/bin/python bench/exports_side_by_side.py --before=/tmp/f32 --after=/tmp/bf16 \\
        --input=../shared/data/multi30k/val.en.gz --batch_size=32 --repeats=3
"""

from __future__ import annotations

import statistics
import time

from absl import app, flags

from keras_transformer import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("before", None, "The reference export (a version folder or its base folder).")
flags.DEFINE_string("after", None, "The export compared with it.")
flags.DEFINE_string("input", None, "Source sentences, one per line, plain or gzipped.")
flags.DEFINE_integer("batch_size", 32, "Sentences per batch.", lower_bound=1)
flags.DEFINE_integer("repeats", 3, "Timed rounds per export; the best is reported.", lower_bound=1)
flags.mark_flags_as_required(["before", "after", "input"])


def _paired_median(seconds: dict) -> float:
    """The median over rounds of before's time over after's in the same round."""
    return statistics.median(b / a for b, a in zip(seconds["before"], seconds["after"]))


def main(argv):
    del argv
    cli.start_tensorflow()
    from keras_transformer.export import client, versions  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top

    lines = [line.encode("utf-8") for line in text_files.read_lines(FLAGS.input)]
    engines, precisions = {}, {}
    with cli.silence_native_stderr():
        for name in ("before", "after"):
            engines[name], source = client.load_translate_fn(export_dir=FLAGS[name].value)
            precisions[name] = versions.read_settings(source).get("precision", "float32")  # before --precision
            client.translate_lines(engines[name], lines[: FLAGS.batch_size], FLAGS.batch_size, progress=False)
    seconds = {name: [] for name in engines}
    cpu_seconds = {name: [] for name in engines}
    outputs = {}
    for round_ in range(FLAGS.repeats):
        for name in (("before", "after") if round_ % 2 == 0 else ("after", "before")):
            started, cpu_started = time.perf_counter(), time.process_time()
            outputs[name] = client.translate_lines(engines[name], lines, FLAGS.batch_size, progress=False)
            seconds[name].append(time.perf_counter() - started)
            cpu_seconds[name].append(time.process_time() - cpu_started)
        print(f"round {round_ + 1}/{FLAGS.repeats}: " + ", ".join(
            f"{n} {seconds[n][-1]:.2f} s ({cpu_seconds[n][-1]:.2f} s CPU)" for n in engines), flush=True)
    (before, before_scores), (after, after_scores) = outputs["before"], outputs["after"]
    same = [i for i in range(len(lines)) if before[i] == after[i]]
    differing = [i for i in range(len(lines)) if before[i] != after[i]]
    largest = max((abs(before_scores[i] - after_scores[i]) for i in same), default=0.0)
    print(f"{len(same):,} of {len(lines):,} translations identical ({len(same) / max(len(lines), 1):.1%}); "
          f"largest score difference over them {largest:.2g}")
    for i in differing[:5]:
        print(f"  line {i + 1}: before {before[i]!r} ({before_scores[i]:.4f})\n"
              f"          after  {after[i]!r} ({after_scores[i]:.4f})")
    best = {name: min(times) for name, times in seconds.items()}
    best_cpu = {name: min(times) for name, times in cpu_seconds.items()}
    for name in engines:
        print(f"{name}: {FLAGS[name].value} ({precisions[name]}): best of {FLAGS.repeats} rounds {best[name]:.2f} s, "
              f"{len(lines) / best[name]:.1f} sentences/s; {best_cpu[name]:.2f} CPU seconds")
    print(f"after over before: {best['before'] / best['after']:.3f}x the speed by best rounds, "
          f"{_paired_median(seconds):.3f}x by the median of the rounds' ratios; by CPU seconds "
          f"{best_cpu['before'] / best_cpu['after']:.3f}x and {_paired_median(cpu_seconds):.3f}x")
    return 1 if differing else 0


if __name__ == "__main__":
    app.run(main)
