"""A run with `--ema_decay`, with and without its moving average: the trained weights of the same checkpoints.

    python bench/ema_against_trained_weights.py --model_dir=runs/seed2_ema --out=runs/seed2_trained
    python bench/multi30k_scores.py --model_dir=runs/seed2_ema --checkpoint=runs/seed2_trained/ckpt-8000 ...

A run with `--ema_decay` evaluates, keeps, averages, translates and exports its moving average of
the weights (`keras_transformer.training.ema`), but its checkpoints also hold the weights the
optimizer trained. This script averages the trained weights of the checkpoints the run itself
chose (MODEL_DIR/best's list, else the last ones of MODEL_DIR/checkpoints) into a
model-only checkpoint under --out (never inside MODEL_DIR, whose `averaged/` translation and export
prefer), so that the same run scores once with its average and once without: the same seed, data
order and updates, the average the only difference. With --num_checkpoints=1 it takes the single
best (or last) checkpoint's trained weights.
"""

from __future__ import annotations

import os

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A training directory of a run with --ema_decay.")
flags.DEFINE_string("out", None, "An empty or new folder for the averaged trained weights (outside --model_dir).")
flags.DEFINE_integer("num_checkpoints", 5, "Average this many of MODEL_DIR/best's list (best first), or of the "
                     "last checkpoints of a run that keeps no best ones (the recipe's --average_checkpoints).",
                     lower_bound=1)
flags.mark_flags_as_required(["model_dir", "out"])


def _chosen(model_dir: str, count: int) -> list[str]:
    """The checkpoints the run averages: its best ones (best first) or its last ones."""
    from keras_transformer.run_dir import averaging, best_checkpoints, layout  # pylint: disable=g-import-not-at-top
    best = best_checkpoints.listed_prefixes(os.path.join(model_dir, layout.BEST_DIR))
    return best[:count] if best else averaging.recent_checkpoints(model_dir, count)


def main(argv):
    del argv
    out = os.path.abspath(FLAGS.out)
    if out == os.path.abspath(FLAGS.model_dir) or out.startswith(os.path.abspath(FLAGS.model_dir) + os.sep):
        raise app.UsageError("--out must be outside --model_dir (its averaged/ is what translation prefers)")
    if os.path.isdir(out) and os.listdir(out):
        raise app.UsageError(f"--out {out} is not empty")
    from keras_transformer.run_dir import averaging, readable_checkpoints  # pylint: disable=g-import-not-at-top

    paths = _chosen(FLAGS.model_dir, FLAGS.num_checkpoints)
    if not any(readable_checkpoints.has_ema(readable_checkpoints.load_reader(p)) for p in paths):
        raise app.UsageError(f"{FLAGS.model_dir}: its checkpoints hold no moving average (a run without --ema_decay)")
    step = max(averaging.checkpoint_step(p) for p in paths)  # best first: the newest is not the last
    prefix = averaging.average_checkpoints(FLAGS.model_dir, paths, step, moving_average=False, directory=out)
    print(f"trained weights of {', '.join(os.path.basename(p) for p in paths)} averaged -> {prefix}")


if __name__ == "__main__":
    app.run(main)
