"""Table 3 of "Attention Is All You Need" (section 6.2, "Model Variations") at a recipe's size:
the rows scaled to the recipe's model, each trained by the training command, scored on the dev
split. `python -m keras_transformer.variations` runs it; `keras_transformer.tasks.variations_table` writes the table.

    rows = select_rows("A,C/N=4", seeds=2)   # ["base", "A/h=1", ..., "C/N=4", "base/seed+1"]
    records = run_table(out, rows, recipe_args, bleu_sentences=None)

The scaling rule
----------------
The paper varies its base model (N=6, d_model=512, d_ff=2048, h=8, d_k=d_v=64, P_drop=0.1,
eps_ls=0.1) one group of settings at a time (Table 3). A recipe's model is usually smaller, so
each row changes the recipe's model (the "base" row, trained exactly as the recipe says) *the way
the paper's row changes the paper's base*:

- sizes change by the paper's ratio: N, d_model and d_ff are multiplied by the row's value over
  the base's (C/N=2 on a 2-layer recipe: 2 x 2/6, rounded, at least 1 layer; a recipe whose
  encoder and decoder depths differ has each scaled alike; C/d_model=256: d_model x 1/2, rounded
  to a multiple of h; big: d_model, d_ff and h x 2);
- row (A) changes h by the same ratio (at least 1 head: "h=1" stays single-head attention) at
  constant computation, h x d_k = h x d_v as in the recipe (the paper keeps h x d_k = d_model =
  512): d_k = d_v = (recipe's h x d_k) / new h. A row that changes d_model without giving d_k
  (C/d_model, big) keeps d_k = d_model / h, as the paper's rows do;
- row (B) changes only d_k, by the row's ratio to 64 (d_k=16: the recipe's d_k / 4); d_v stays;
- rates and kinds are not sizes: (D) sets P_drop or eps_ls to the paper's value, (E) uses learned
  positions, big sets P_drop=0.3, whatever the recipe's.

All rows share the recipe's data, tokenizer (trained once, by the base row, and copied into every
other row's directory before it starts), seed and update budget: the updates the base row made (the
recipe's --train_steps, or fewer where its --max_train_minutes or early stopping ended it first) are
every other row's --train_steps, with no time limit and no early stopping (the paper trains every
row 100k updates, big 300k; here big makes the same updates as the others). A row whose scaled model is
the model of a row before it (a tiny recipe's h=2 gives A/h=1 and A/h=4 the same single head; a
recipe without dropout is its own D/P_drop=0.0) is not trained again: it is listed with that
row's run and scores, and says so.

The seed rows
-------------
One run a row leaves open how much of a row's change is the row's and how much is the seed's: the
paper reports one run a row, on a dev set (newstest2013, 3,000 sentences) three times Multi30k's.
`select_rows(..., seeds=K)` adds K-1 rows "base/seed+1", ...: the base row again, its model and
budget unchanged, with the recipe's seed + 1, ... (the training command's --seed). Their change
from the base is the table's noise: a row whose change is inside it shows no effect at this size.
They come last, so that an interrupted table has Table 3's rows first.

Running, resuming
-----------------
Each row is one run of `python -m keras_transformer.train` (a child process; its flags are the
recipe's followed by the row's changes and --model_dir=OUT/<row>), so a row resumes as any run
does. When a row's run has ended, its model is scored here with `keras_transformer.tasks.dev_evaluation.evaluate`
(what `--evaluate_only` runs: the averaged checkpoint, else the best, else the newest; beam 4,
alpha 0.6, section 6.1) and OUT/rows/<row>.json is written: a row with that record is finished
and never trained again. SIGINT or SIGTERM reach the row's run (which saves and stops) and then
stop the table (exit 130 / 143); if this process is killed outright, its child gets SIGTERM
(Linux). The same command goes on where it stopped.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from typing import Callable, Optional, Sequence

from keras_transformer.config import STACK_DEPTHS, TABLE3, DecodingConfig, TransformerConfig
from keras_transformer.tasks import training_process

_print = functools.partial(print, flush=True)

GROUPS = ("A", "B", "C", "D", "E", "big")
SEED_ROW = "base/seed+"  # "base/seed+1": the base row trained with the recipe's seed + 1
ROWS_DIR = "rows"  # OUT/rows/<row>.json: a finished row's record
PAPER_BASE = TransformerConfig.base()
# Table 3's column names for the fields a row can change.
COLUMNS = {"num_layers": "N", "d_model": "d_model", "d_ff": "d_ff", "num_heads": "h", "d_k": "d_k", "d_v": "d_v",
           "dropout_rate": "P_drop", "label_smoothing": "eps_ls", "positional_encoding": "positions"}
# The training command's flag for each field (keras_transformer/train.py).
_FLAGS = ("num_layers", "num_encoder_layers", "num_decoder_layers", "d_model", "d_ff", "num_heads", "dropout_rate",
          "label_smoothing", "positional_encoding")


class TableStopped(Exception):
    """A row's training run ended without finishing (an error, or a signal): the table stops,
    with the run's exit status (`exit_code`). `reported`: the run printed the `error:` line
    itself (bad input, exit 2; SIGINT before its training loop, "error: interrupted", exit 130),
    so the table's command prints none of its own."""

    def __init__(self, message: str, exit_code: int, reported: bool = False):
        super().__init__(message)
        self.exit_code = exit_code
        self.reported = reported


# The rows ------------------------------------------------------------------------------------


def select_rows(spec: str, seeds: int = 1) -> list[str]:
    """The rows of `spec`, comma-separated groups ("A", ..., "E", "big") or rows ("C/N=4"), in
    Table 3's order, the base first, then the base's `seeds` - 1 seed rows ("base/seed+1", ...);
    a one-line `ValueError` for a name that is neither, or for fewer than 1 seed."""
    if seeds < 1:
        raise ValueError(f"--seeds={seeds}: the base row needs at least its own seed (1)")
    names = [name.strip() for name in spec.split(",") if name.strip()]
    if not names:
        raise ValueError(f"--rows={spec}: names no row; give groups ({', '.join(GROUPS)}) or rows such as C/N=4")
    wanted = set()
    for name in names:
        rows = [r for r in TABLE3 if r == name or r.split("/")[0] == name]
        if not rows:
            raise ValueError(f"--rows: unknown row {name!r}; choose groups {', '.join(GROUPS)} or rows "
                             f"{', '.join(r for r in TABLE3 if r != 'base')}")
        wanted.update(rows)
    return ["base"] + [r for r in TABLE3 if r in wanted and r != "base"] + [f"{SEED_ROW}{k}" for k in range(1, seeds)]


def seed_offset(row: str) -> Optional[int]:
    """k for a seed row "base/seed+k", else None."""
    return int(row[len(SEED_ROW):]) if row.startswith(SEED_ROW) else None


def is_base_seed(row: str) -> bool:
    """True for the base row and its seed rows: the runs whose spread is the table's noise."""
    return row == "base" or row.startswith(SEED_ROW)


def scale_row(row: str, base: TransformerConfig) -> TransformerConfig:
    """The recipe's model `base` changed as Table 3's `row` changes the paper's base (the module's
    docstring gives the rule)."""
    if row == "base":
        return base
    paper = TransformerConfig.preset(row)
    changed = {f.name for f in dataclasses.fields(paper) if getattr(paper, f.name) != getattr(PAPER_BASE, f.name)}
    values = {}
    heads = base.num_heads
    if "num_heads" in changed:
        heads = max(1, round(base.num_heads * paper.num_heads / PAPER_BASE.num_heads))
        values["num_heads"] = heads
    d_model = base.d_model
    if "d_model" in changed:
        d_model = max(1, round(base.d_model * paper.d_model / PAPER_BASE.d_model / heads)) * heads
        values["d_model"] = d_model
    for name in ("num_layers", "d_ff"):
        if name in changed:
            values[name] = max(1, round(getattr(base, name) * getattr(paper, name) / getattr(PAPER_BASE, name)))
    if "num_layers" in changed:  # a recipe's own stack depths scale alike (C/N=2 on 6/2: 2/1)
        for name in STACK_DEPTHS:
            if getattr(base, name) is not None:
                values[name] = max(1, round(getattr(base, name) * paper.num_layers / PAPER_BASE.num_layers))
    if "num_heads" in changed or "d_model" in changed:  # constant h x d_k, scaled with d_model
        for name, width in (("d_k", base.key_dim), ("d_v", base.value_dim)):
            values[name] = max(1, round(width * base.num_heads / heads * d_model / base.d_model))
    elif "d_k" in changed:  # row (B)
        values["d_k"] = max(1, round(base.key_dim * paper.key_dim / PAPER_BASE.key_dim))
        values["d_v"] = base.value_dim
    for name in ("dropout_rate", "label_smoothing", "positional_encoding"):
        if name in changed:
            values[name] = getattr(paper, name)
    return _implicit_widths(base.replace(**values))


def _implicit_widths(config: TransformerConfig) -> TransformerConfig:
    """`config` with d_k and d_v None where they are d_model / h (the default they would get)."""
    derived = config.d_model // config.num_heads if config.d_model % config.num_heads == 0 else None
    return config.replace(d_k=None if config.key_dim == derived else config.key_dim,
                          d_v=None if config.value_dim == derived else config.value_dim)


def depth_column(config: TransformerConfig):
    """Table 3's N of `config`: the depth of both stacks, or "6/1" (encoder/decoder) when they differ."""
    return config.encoder_depth if config.encoder_depth == config.decoder_depth else config.depth_text


def changes(variant: TransformerConfig, base: TransformerConfig) -> dict:
    """{Table 3 column: value} where `variant` differs from `base` (N, d_k, d_v as used)."""
    def value(config, name):
        used = {"d_k": config.key_dim, "d_v": config.value_dim, "num_layers": depth_column(config)}
        return used.get(name, getattr(config, name))

    return {column: value(variant, name) for name, column in COLUMNS.items()
            if value(variant, name) != value(base, name)}


def row_flags(variant: TransformerConfig, base: TransformerConfig) -> list[str]:
    """The training command's flags that turn the recipe's model `base` into `variant`."""
    given = {name: getattr(variant, name) for name in _FLAGS if getattr(variant, name) != getattr(base, name)}
    flags = [f"--{name}={value}" for name, value in given.items()]
    implied = base.replace(**given)
    if variant.d_k is None and variant.d_v is None and base.d_k is None and base.d_v is None:
        return flags
    for name, attribute in (("d_k", "key_dim"), ("d_v", "value_dim")):
        if getattr(variant, attribute) != getattr(implied, attribute) or getattr(base, name) is not None:
            flags.append(f"--{name}={getattr(variant, attribute)}")
    return flags


def run_dir(out: str, row: str) -> str:
    """OUT/<row>, "/" replaced by "-" (OUT/C-N=4)."""
    return os.path.join(out, row.replace("/", "-"))


def record_path(out: str, row: str) -> str:
    return os.path.join(out, ROWS_DIR, row.replace("/", "-") + ".json")


def read_record(out: str, row: str) -> Optional[dict]:
    """A row's record (OUT/rows/<row>.json), or None before its run started."""
    path = record_path(out, row)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as file:
        return json.load(file)


# The runs ------------------------------------------------------------------------------------


def run_table(out: str, rows: Sequence[str], recipe_args: Sequence[str], bleu_sentences: Optional[int] = None,
              log: Callable[[str], None] = _print) -> list[dict]:
    """Trains and scores each row of `rows` (`select_rows`: the base first) not finished before,
    in OUT/<row>; returns every row's record (`read_record`), in order.

    Args:
        out: the table's folder.
        rows: the rows, "base" first.
        recipe_args: the training command's flags of the recipe (and any given after it): each
            row's run gets them, then the base row's budget, its own changes and --model_dir.
        bleu_sentences: dev sentences translated for BLEU (None: all).
        log: where progress lines go (a row's run prints to this process' stdout).

    Raises:
        TableStopped: a row's run failed or was stopped by a signal.
    """
    from keras_transformer.files import json_files  # pylint: disable=g-import-not-at-top
    from keras_transformer.training_directory import TrainingDirectory  # pylint: disable=g-import-not-at-top

    os.makedirs(os.path.join(out, ROWS_DIR), exist_ok=True)
    records, minutes_per_row = [], []
    for index, row in enumerate(rows, 1):
        record = read_record(out, row)
        if record and record["finished"]:
            log(f"row {index} of {len(rows)}: {row} finished before ({_summary(record)})")
            records.append(record)
            if not record.get("same_as"):
                minutes_per_row.append(record["wall_minutes"])
            continue
        left = len(rows) - index + 1
        rows_left = f"{left} row{'s' if left > 1 else ''} left"
        eta = (f"table ETA {sum(minutes_per_row) / len(minutes_per_row) * left:.1f} min ({rows_left})"
               if minutes_per_row else f"{rows_left}, ETA after the first row")
        base = variant = seed = None
        change = {}
        offset = seed_offset(row)
        if row != "base":
            base = TrainingDirectory(run_dir(out, "base")).config()
            variant = base if offset else scale_row(row, base)
            if offset:
                seed = TrainingDirectory(run_dir(out, "base")).settings()["training"]["seed"] + offset
                change = {"seed": seed}
            else:
                change = changes(variant, base)
        log(f"row {index} of {len(rows)}: {row} " + (", ".join(f"{k}={v}" for k, v in change.items())
                                                     or "(the recipe's model)") + f"; {eta}")
        started, before = time.time(), (record or {}).get("wall_minutes", 0.0)  # minutes of attempts before
        same = next((r for r in records if variant is not None and not offset and r["model"] == variant.to_dict()),
                    None)
        if same:
            record = {**same, "row": row, "changes": change, "same_as": same["same_as"] or same["row"]}
            log(f"{row}: the same model as {record['same_as']} at this size; not trained again")
        else:
            budget = [] if row == "base" else [f"--train_steps={records[0]['updates']}", "--max_train_minutes=0",
                                               "--early_stopping_patience=0"]  # the base row's updates
            budget += [f"--seed={seed}"] if offset else []
            record = _train_and_score(out, row, variant, base, [*recipe_args, *budget], bleu_sentences, record, log)
            record["changes"] = change
        record["wall_minutes"] = 0.0 if same else before + (time.time() - started) / 60
        record["finished"] = True
        json_files.write_json_atomically(record_path(out, row), record)
        if not same:
            minutes_per_row.append(record["wall_minutes"])
        records.append(record)
    return records


def _train_and_score(out: str, row: str, variant: Optional[TransformerConfig], base: Optional[TransformerConfig],
                     recipe_args: Sequence[str], bleu_sentences: Optional[int], record: Optional[dict],
                     log: Callable[[str], None]) -> dict:
    """One row: its run trained (or resumed) to the end, then scored; its record (unfinished
    records keep the minutes of the attempts before)."""
    from keras_transformer.files import json_files  # pylint: disable=g-import-not-at-top

    model_dir = run_dir(out, row)
    record = record or {"row": row, "run_dir": os.path.basename(model_dir), "same_as": None, "train_minutes": 0.0,
                        "wall_minutes": 0.0, "finished": False}
    if variant is not None:
        _copy_tokenizer(run_dir(out, "base"), model_dir)
    args = [*recipe_args, *(row_flags(variant, base) if variant is not None else []), f"--model_dir={model_dir}"]
    started = time.time()
    summary, code = training_process.run_training(args, log)
    if summary is not None:
        record["train_minutes"] += summary["train_minutes"]
        record["updates"] = summary["step"]
    if code != 0:
        record["wall_minutes"] += (time.time() - started) / 60
        if summary is not None:
            json_files.write_json_atomically(record_path(out, row), record)
        stopped = {130: "SIGINT", 143: "SIGTERM"}.get(code)
        message = (f"row {row}: {f'its run stopped by {stopped}' if stopped else f'training failed (exit {code})'}"
                   f"; run the same command to go on")
        # A run stopped inside its training loop prints its summary and no error line; SIGINT
        # before the loop is Python's KeyboardInterrupt, which the command ends with its own
        # "error: interrupted" (SIGTERM there ends it silently: the table's line is the one).
        reported = code == 2 or (code == 130 and summary is None)
        if reported and code != 2:
            log(message)
        raise TableStopped(message, code, reported=reported)
    json_files.write_json_atomically(record_path(out, row), record)  # trained: a kill now only repeats the scoring
    return _score(model_dir, record, bleu_sentences, log)


def _copy_tokenizer(base_dir: str, model_dir: str) -> None:
    """The base row's tokenizer saved as `model_dir`'s, unless it has one (section 5.1: one vocabulary)."""
    from keras_transformer import cli  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import tokenizers  # pylint: disable=g-import-not-at-top
    from keras_transformer.training_directory import TrainingDirectory  # pylint: disable=g-import-not-at-top

    ours = TrainingDirectory(model_dir).tokenizer_dir
    if not tokenizers.is_saved(ours):
        with cli.silence_native_stderr():
            tokenizers.save_pair(*TrainingDirectory(base_dir).load_tokenizers(), ours)


def _score(model_dir: str, record: dict, bleu_sentences: Optional[int], log: Callable[[str], None]) -> dict:
    """The row's parameters (`model.count_params()`) and its dev perplexity and BLEU (beam 4,
    alpha 0.6), scored as `--evaluate_only` scores, on the data the run recorded."""
    from keras_transformer.model import Transformer  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines.data_config import DataConfig  # pylint: disable=g-import-not-at-top
    from keras_transformer.tasks import dev_evaluation  # pylint: disable=g-import-not-at-top
    from keras_transformer.training_directory import TrainingDirectory  # pylint: disable=g-import-not-at-top

    run = TrainingDirectory(model_dir)
    settings = run.settings()
    config = run.config()
    model = Transformer(config)
    model.build()
    data = DataConfig(**settings["data"])
    results = dev_evaluation.evaluate(model_dir, data, DecodingConfig(), bleu_sentences, log=log)
    return {**record, "model": config.to_dict(), "params": int(model.count_params()),
            "updates": record.get("updates", settings["training"]["train_steps"]),
            "dev": {k: results[k] for k in ("loss", "perplexity", "bleu", "signature") if k in results}}


def _summary(record: dict) -> str:
    dev = record.get("dev", {})
    return (f"{record['params']:,} parameters, dev perplexity {dev.get('perplexity', float('nan')):.2f}"
            + (f", BLEU {dev['bleu']:.2f}" if "bleu" in dev else ""))
