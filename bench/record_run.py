"""Records what a code version computes, so two versions can be compared bit for bit.

    python bench/record_run.py --out=/tmp/after.json            # in this checkout
    git worktree add /tmp/before <commit> && (cd /tmp/before && python /path/to/bench/record_run.py \\
        --out=/tmp/before.json)
    cmp /tmp/before.json /tmp/after.json

Through the command lines only (so any version of the project can be recorded), from the
current directory's code, it:

1. trains the demo recipe (`configs/demo.flags`, seed 0) for `--steps` updates, one
   TensorBoard scalar per update, and reads the training loss of every step back from
   the event files as float32 (exact, unlike the console's 4 decimals);
2. translates the embedded corpus' validation split greedily (`--evaluate_only
   --eval_beam_size=1`) and keeps the translations;
3. exports the run (`python -m keras_transformer.export`) and runs the SavedModel's `serving_default` on the
   same validation sources in a fresh process: translations and scores (float32, as hex).

Writes one JSON file; equal files mean equal per-step losses, greedy translations and
export outputs. Not a benchmark: it times nothing.
"""

from __future__ import annotations

import glob
import json
import os
import tempfile

from absl import app, flags

import child

FLAGS = flags.FLAGS
flags.DEFINE_string("out", None, "Where to write the JSON record.")
flags.DEFINE_integer("steps", 50, "Training updates to record.")
flags.DEFINE_string("work_dir", None, "Scratch folder (default: a new temporary one).")
flags.mark_flag_as_required("out")

_EXPORT_OUTPUTS = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the tokenizer ops)
path, sources = sys.argv[1], [line.rstrip("\\n") for line in open(sys.argv[2], encoding="utf-8")]
outputs = tf.saved_model.load(path).signatures["serving_default"](sentences=tf.constant(sources))
print(json.dumps({"translations": [t.decode("utf-8") for t in outputs["translations"].numpy()],
                  "scores": [float(s).hex() for s in outputs["scores"].numpy()]}))
"""


def _run(*args: str) -> str:
    return child.checked(child.run_python(*args), " ".join(args)).stdout


def _step_losses(event_dir: str) -> dict[str, str]:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    losses = {}
    for path in sorted(glob.glob(os.path.join(event_dir, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == "loss":
                    number = tf.make_ndarray(value.tensor) if value.HasField("tensor") else value.simple_value
                    losses[str(event.step)] = float(number).hex()
    return losses


def main(argv):
    del argv
    work = FLAGS.work_dir or tempfile.mkdtemp(prefix="record_run-")
    model_dir, export_dir = os.path.join(work, "run"), os.path.join(work, "export")
    common = ["--flagfile=configs/demo.flags", f"--model_dir={model_dir}", "--seed=0"]
    _run("-m", "keras_transformer.train", *common, f"--train_steps={FLAGS.steps}", "--log_every_steps=1",
         f"--eval_every_steps={FLAGS.steps}", "--eval_max_sentences=-1", f"--checkpoint_every_steps={FLAGS.steps}")
    _run("-m", "keras_transformer.train", *common, "--evaluate_only", "--eval_beam_size=1",
         "--eval_max_sentences=0")
    [greedy_file] = glob.glob(os.path.join(model_dir, "eval", "*beam1*.txt"))
    with open(greedy_file, encoding="utf-8") as file:
        greedy = file.read().splitlines()
    sources_file = os.path.join(work, "validation.en")
    _run("-c", "import sys; from keras_transformer.pipelines import sources; "
         "open(sys.argv[1], 'w', encoding='utf-8').writelines(s + '\\n' for s, _ in "
         "sources.load_pair_list('embedded', 'validation'))", sources_file)
    _run("-m", "keras_transformer.export", f"--model_dir={model_dir}", f"--export_dir={export_dir}", "--version=1")
    exported = json.loads(_run("-c", _EXPORT_OUTPUTS, os.path.join(export_dir, "1"), sources_file))
    record = {"steps": FLAGS.steps, "losses": _step_losses(os.path.join(model_dir, "train")),
              "greedy_validation": greedy, "export": exported}
    with open(FLAGS.out, "w", encoding="utf-8") as file:
        json.dump(record, file, indent=1, sort_keys=True, ensure_ascii=False)
        file.write("\n")
    print(f"{FLAGS.out}: {len(record['losses'])} losses, {len(greedy)} greedy translations, "
          f"{len(exported['translations'])} export outputs")


if __name__ == "__main__":
    app.run(main)
