"""The Table 3 of a `keras_transformer.tasks.model_variations` run: OUT/table.csv, OUT/table.md and OUT/table.png.

    write_table(out, records, recipe="configs/multi30k_en_de.flags")

In Table 3's shape (section 6.2): each row, the values it changes, its parameters
(`model.count_params()` of the built model), updates and training minutes, dev perplexity per
subword and dev BLEU (beam 4, alpha 0.6), and its BLEU change from the base row beside the
paper's change from the paper's base. The plot puts dev perplexity and dev BLEU against the
parameters, rows labelled. Every file is written whole or not at all (`keras_transformer.files.atomic`).
"""

from __future__ import annotations

import csv
import io
import math
import os
from typing import Optional, Sequence

from keras_transformer.config import TABLE3, Table3Row, TransformerConfig
from keras_transformer.files import atomic
from keras_transformer.tasks.model_variations import depth_column, is_base_seed

CSV_FIELDS = ("row", "changes", "same_as", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls",
              "positions", "params", "train_updates", "train_minutes", "dev_ppl", "dev_bleu", "bleu_change",
              "paper_ppl", "paper_bleu", "paper_bleu_change", "paper_params_millions")


_NO_PAPER_ROW = Table3Row({}, None)


def table_rows(records: Sequence[dict]) -> list[dict]:
    """One dict of `CSV_FIELDS` per record (`keras_transformer.tasks.model_variations.read_record`), the base first."""
    base = next(r for r in records if r["row"] == "base")
    base_bleu = base["dev"].get("bleu")
    paper_base = TABLE3["base"].paper_bleu
    rows = []
    for record in records:
        model, dev = record["model"], record["dev"]
        paper = TABLE3.get(record["row"], _NO_PAPER_ROW)  # a seed row (base/seed+1) is not the paper's
        heads = model["num_heads"]
        bleu = dev.get("bleu")
        rows.append({
            "row": record["row"],
            "changes": " ".join(f"{k}={v}" for k, v in record["changes"].items()),
            "same_as": record.get("same_as") or "",
            "N": depth_column(TransformerConfig.from_dict(model)), "d_model": model["d_model"], "d_ff": model["d_ff"],
            "h": heads,
            "d_k": model["d_k"] or model["d_model"] // heads, "d_v": model["d_v"] or model["d_model"] // heads,
            "P_drop": model["dropout_rate"], "eps_ls": model["label_smoothing"],
            "positions": model["positional_encoding"],
            "params": record["params"], "train_updates": record["updates"],
            "train_minutes": round(record["train_minutes"], 2),
            "dev_ppl": round(dev["perplexity"], 3), "dev_bleu": _round(bleu, 2),
            "bleu_change": _round(None if bleu is None or base_bleu is None else bleu - base_bleu, 2),
            "paper_ppl": paper.paper_ppl, "paper_bleu": paper.paper_bleu,
            "paper_bleu_change": _round(paper.paper_bleu - paper_base, 1) if paper.paper_bleu is not None else None,
            "paper_params_millions": paper.paper_params_millions,
        })
    return rows


def _round(value: Optional[float], digits: int) -> Optional[float]:
    return None if value is None else round(value, digits)


def write_table(out: str, records: Sequence[dict], recipe: str = "") -> list[str]:
    """Writes OUT/table.csv, OUT/table.md and (with matplotlib) OUT/table.png; returns their paths."""
    rows = table_rows(records)
    paths = [_write_csv(os.path.join(out, "table.csv"), rows),
             _write_markdown(os.path.join(out, "table.md"), rows, recipe, records)]
    png = _write_plot(os.path.join(out, "table.png"), rows)
    return paths + ([png] if png else [])


def _write_csv(path: str, rows: Sequence[dict]) -> str:
    text = io.StringIO()
    writer = csv.DictWriter(text, CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)
    atomic.write_atomically(path, text.getvalue().encode("utf-8"))
    return path


def _cell(value, form: str = "{}") -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else form.format(value)


def _write_markdown(path: str, rows: Sequence[dict], recipe: str, records: Sequence[dict]) -> str:
    base = rows[0]
    signature = records[0]["dev"].get("signature", "")
    lines = [
        "# Table 3 at the recipe's size",
        "",
        f"Recipe: `{recipe}`; base row: N={base['N']}, d_model={base['d_model']}, d_ff={base['d_ff']}, "
        f"h={base['h']}, d_k={base['d_k']}, d_v={base['d_v']}, P_drop={base['P_drop']}, eps_ls={base['eps_ls']}. "
        "Every row: the same data, tokenizer, seed and updates; rows scaled as `tasks/model_variations.py` says. "
        f"Dev BLEU with beam 4, alpha 0.6 ({signature}); perplexity per subword. The paper's columns: Table 3 "
        "(newstest2013, 100k updates; big 300k).",
        "",
        "| row | changes | params | updates | train min | dev PPL | dev BLEU | BLEU change | paper PPL "
        "| paper BLEU | paper BLEU change | paper params (M) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        changes = (row["changes"] or "(the recipe's model)") + (f" (the model of {row['same_as']})"
                                                                 if row["same_as"] else "")
        lines.append(" | ".join([
            f"| {row['row']}", changes, f"{row['params']:,}", str(row["train_updates"]),
            _cell(row["train_minutes"], "{:.1f}"), _cell(row["dev_ppl"], "{:.2f}"), _cell(row["dev_bleu"], "{:.2f}"),
            _cell(row["bleu_change"], "{:+.2f}"), _cell(row["paper_ppl"], "{:.2f}"), _cell(row["paper_bleu"], "{:.1f}"),
            _cell(row["paper_bleu_change"], "{:+.1f}"), _cell(row["paper_params_millions"], "{:g}") + " |"]))
    lines += seed_noise_lines(rows)
    atomic.write_atomically(path, ("\n".join(lines) + "\n").encode("utf-8"))
    return path


def seed_noise(rows: Sequence[dict]) -> Optional[float]:
    """The range of the base row's dev BLEU over its seeds (the base and its seed rows), or None
    with one seed: the change under which a row's change is not read as an effect.

    `rows`: `table_rows`' dicts, or table.csv's rows as `csv.DictReader` reads them (strings, "" for
    no value), as notebooks/06_table3.ipynb passes them."""
    bleus = [float(r["dev_bleu"]) for r in rows if is_base_seed(r["row"]) and r["dev_bleu"] not in (None, "")]
    return round(max(bleus) - min(bleus), 2) if len(bleus) > 1 else None


def seed_noise_lines(rows: Sequence[dict]) -> list[str]:
    """The Markdown sentence under the table on the base row's seeds, or none with one seed."""
    noise = seed_noise(rows)
    if noise is None:
        return []
    seeds = [r for r in rows if is_base_seed(r["row"])]
    bleus = ", ".join(_cell(r["dev_bleu"], "{:.2f}") for r in seeds)
    ppls = ", ".join(_cell(r["dev_ppl"], "{:.2f}") for r in seeds)
    few = (" Two seeds are one draw of the noise, likely below its typical size: --seeds=3 or more measures it."
           if len(seeds) == 2 else "")
    return ["", f"Seed noise: the base row over {len(seeds)} seeds scores dev BLEU {bleus} (range {noise:.2f}) and "
                f"perplexity {ppls}. A row's BLEU change within +-{noise:.2f} of the base is no effect at this "
                "size and budget." + few]


def _write_plot(path: str, rows: Sequence[dict]) -> Optional[str]:
    """Dev perplexity and dev BLEU against parameters, one labelled point per row; None without
    matplotlib (the `notebooks` and `test` extras install it)."""
    try:
        from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
    except ImportError:
        return None
    figure = Figure(figsize=(11, 4.5), layout="constrained")
    for axes, column, label in zip(figure.subplots(1, 2), ("dev_ppl", "dev_bleu"),
                                   ("dev perplexity per subword", "dev BLEU (beam 4, alpha 0.6)")):
        points = [(r["params"], r[column], r["row"]) for r in rows if r[column] is not None]
        axes.scatter([p for p, _, _ in points], [v for _, v, _ in points], s=18)
        for params, value, name in points:
            axes.annotate(name, (params, value), fontsize=7, xytext=(3, 3), textcoords="offset points")
        if points and max(p for p, _, _ in points) > 3 * min(p for p, _, _ in points):
            axes.set_xscale("log")  # rows C and big span 10x and more
        axes.set_xlabel("parameters")
        axes.set_ylabel(label)
        axes.grid(alpha=0.3)
    figure.suptitle("Table 3 at the recipe's size")
    data = io.BytesIO()
    figure.savefig(data, format="png", dpi=120)
    atomic.write_atomically(path, data.getvalue())
    return path
