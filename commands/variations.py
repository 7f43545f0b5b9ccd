"""Table 3 of the paper by one command: the model variations of section 6.2, trained and scored
side by side at a recipe's size.

Trains the recipe's model (row "base") and each row's variant of it (--rows: groups A-E and big,
or single rows such as C/N=4), scaled to the recipe's size the way the paper's row changes the
paper's base (the rule: `tasks/model_variations.py`), one training directory per row under --out,
all on the recipe's data, tokenizer, seed and updates. Then writes OUT/table.md, OUT/table.csv and
OUT/table.png: parameters, updates, minutes, dev perplexity and BLEU (beam 4, alpha 0.6), and each
row's BLEU change from the base beside the paper's. --seeds=N trains the base row N-1 more times
with the next seeds: their spread is the noise a row's change is read against. Flags not defined
here (e.g. --train_steps=1000) go to every row's training command. Run again, it keeps the
finished rows and resumes the unfinished one.

Typical command line:

    python -m keras_transformer.variations --flagfile=configs/multi30k_en_de.flags \\
        --data_dir=../shared/data/multi30k --rows=A,B,C,D,E,big --seeds=3 --out=runs/table3

docs/guide/table3.md reads the table and docs/results.md#table-3 gives one;
docs/reference/errors.md lists what it refuses; docs/reference/commands.md every flag.
"""

from __future__ import annotations

import os
import sys

from absl import app, flags

from keras_transformer import cli
from keras_transformer.files import command_files

FLAGS = flags.FLAGS

flags.DEFINE_string("rows", "A,B,C,D,E", "Table 3's rows to train besides the base: groups A, B, C, D, E, big "
                    "and rows such as C/N=4, comma-separated.")
flags.DEFINE_string("out", None, "The table's folder: a training directory per row, rows/ (each finished row's "
                    "record), table.md, table.csv, table.png.")
flags.DEFINE_integer("seeds", 1, "Seeds the base row is trained with: the recipe's, then rows base/seed+1, ... with "
                     "the next ones, after Table 3's rows. Their BLEU change from the base is the table's noise.",
                     lower_bound=1)
flags.DEFINE_integer("bleu_sentences", 0, "Dev sentences each row translates for BLEU (0: all).", lower_bound=0)
flags.mark_flag_as_required("out")


def main(argv):
    from keras_transformer.tasks import model_variations  # pylint: disable=g-import-not-at-top

    recipes = [arg.split("=", 1)[1] for arg in sys.argv[1:] if arg.startswith(("--flagfile=", "-flagfile="))]
    if not recipes:
        raise app.UsageError("--flagfile=RECIPE is required: the training recipe whose model is the base row "
                             "(e.g. configs/multi30k_en_de.flags)")
    rows = model_variations.select_rows(FLAGS.rows, seeds=FLAGS.seeds)
    command_files.check_writable_folder(FLAGS.out, "out")
    recipe_args = [arg for arg in argv[1:] if arg != "--"]
    cli.start_tensorflow()
    from keras_transformer.tasks import variations_table  # pylint: disable=g-import-not-at-top

    try:
        records = model_variations.run_table(FLAGS.out, rows, recipe_args,
                                             bleu_sentences=FLAGS.bleu_sentences or None)
    except model_variations.TableStopped as error:
        if error.reported:  # the training command printed the one error line
            sys.exit(error.exit_code)
        cli.fail(error, code=error.exit_code)
    for path in variations_table.write_table(FLAGS.out, records, recipe=" ".join(recipes)):
        print(f"wrote {os.path.abspath(path)}", flush=True)

