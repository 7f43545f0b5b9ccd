"""`keras_transformer.tasks.model_variations`: which rows, each row scaled to a recipe's model (section 6.2, Table 3), and
the base row's seed rows (the table's noise) trained with the next seeds and written under the table."""

import csv
import os

import pytest

from keras_transformer.config import TABLE3, TransformerConfig
from keras_transformer.run_dir import layout
from keras_transformer.tasks import model_variations, variations_table
from keras_transformer.tasks.model_variations import changes, row_flags, scale_row, select_rows

ARCHITECTURE = ("num_layers", "d_model", "d_ff", "num_heads", "key_dim", "value_dim", "dropout_rate",
                "label_smoothing", "positional_encoding")
DEMO = TransformerConfig.base(num_layers=2, d_model=128, d_ff=512, num_heads=4, dropout_rate=0.0, vocab_size=1000)


def test_rows_by_group_and_name_base_first_in_table_order():
    assert select_rows("E,A/h=4") == ["base", "A/h=4", "E/learned"]
    assert select_rows("A,B,C,D,E,big") == list(TABLE3)
    assert select_rows("big") == ["base", "big"]
    assert select_rows("E", seeds=3) == ["base", "E/learned", "base/seed+1", "base/seed+2"]  # seed rows last


@pytest.mark.parametrize("spec, fragment", [("F", "unknown row 'F'"), ("C/N=3", "unknown row 'C/N=3'"),
                                            (" , ", "names no row")])
def test_unknown_rows_are_one_line_errors(spec, fragment):
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(")):
        select_rows(spec)
    with pytest.raises(ValueError, match="at least its own seed"):
        select_rows("A", seeds=0)


@pytest.mark.parametrize("row", list(TABLE3))
def test_on_the_paper_base_each_row_is_the_papers(row):
    scaled, paper = scale_row(row, TransformerConfig.base()), TransformerConfig.preset(row)
    assert [getattr(scaled, n) for n in ARCHITECTURE] == [getattr(paper, n) for n in ARCHITECTURE]


@pytest.mark.parametrize("row, expected", [
    ("A/h=1", {"h": 1, "d_k": 128, "d_v": 128}),  # single-head stays single-head; h x d_k = d_model
    ("A/h=4", {"h": 2, "d_k": 64, "d_v": 64}),  # half the recipe's heads, as 4 is half of 8
    ("A/h=32", {"h": 16, "d_k": 8, "d_v": 8}),
    ("B/d_k=16", {"d_k": 8}),  # d_k / 4, d_v as it was
    ("C/N=8", {"N": 3}),  # 2 x 8/6, rounded
    ("C/N=2", {"N": 1}),  # at least one layer
    ("C/d_model=256", {"d_model": 64, "d_k": 16, "d_v": 16}),  # h kept, d_k = d_model / h
    ("C/d_ff=4096", {"d_ff": 1024}),
    ("D/P_drop=0.2", {"P_drop": 0.2}),  # rates as the paper's, not scaled
    ("D/P_drop=0.0", {}),  # the recipe has no dropout: this row is its base
    ("E/learned", {"positions": "learned"}),
    ("big", {"d_model": 256, "d_ff": 1024, "h": 8, "P_drop": 0.3}),
])
def test_rows_scaled_to_the_demo_recipe(row, expected):
    assert changes(scale_row(row, DEMO), DEMO) == expected


def test_the_training_flags_make_the_scaled_model():
    assert row_flags(scale_row("A/h=1", DEMO), DEMO) == ["--num_heads=1"]
    assert row_flags(scale_row("B/d_k=32", DEMO), DEMO) == ["--d_k=16"]
    assert row_flags(scale_row("big", DEMO), DEMO) == ["--d_model=256", "--d_ff=1024", "--num_heads=8",
                                                       "--dropout_rate=0.3"]
    explicit = DEMO.replace(d_k=16, d_v=16)  # a recipe with its own d_k keeps it given
    assert row_flags(scale_row("A/h=16", explicit), explicit) == ["--num_heads=8", "--d_k=8", "--d_v=8"]


def test_a_recipe_whose_stacks_differ_in_depth_has_each_scaled_and_n_written_per_stack():
    deep_shallow = DEMO.replace(num_encoder_layers=6, num_decoder_layers=2)  # over the recipe's num_layers=2
    scaled = scale_row("C/N=2", deep_shallow)  # x 2/6 each: 6 -> 2, 2 -> 1 (at least one layer)
    assert (scaled.encoder_depth, scaled.decoder_depth) == (2, 1)
    assert changes(scaled, deep_shallow) == {"N": "2/1"} and changes(scale_row("C/N=8", DEMO), DEMO) == {"N": 3}
    flags = row_flags(scaled, deep_shallow)
    assert flags == ["--num_layers=1", "--num_encoder_layers=2", "--num_decoder_layers=1"]
    assert scale_row("A/h=4", deep_shallow).decoder_depth == 2  # other rows keep the depths
    record = {"row": "base", "changes": {}, "model": deep_shallow.to_dict(), "params": 1, "updates": 60,
              "train_minutes": 1.0, "dev": {"perplexity": 5.0, "bleu": 30.0}}
    assert variations_table.table_rows([record])[0]["N"] == "6/2"


def test_seed_rows_train_the_base_again_with_the_next_seeds_and_measure_the_noise(tmp_path, monkeypatch):
    """run_table with the training faked: each run "trains" by writing its settings; the seed rows
    get the recipe's seed + k, are trained (not taken as the base's model), and their BLEU range with
    the base's is the table's noise."""
    out, calls, bleus = str(tmp_path / "table"), [], {"base": 30.0, "D/P_drop=0.2": 31.0, "base/seed+1": 30.6,
                                                          "base/seed+2": 29.9}

    def fake_train_and_score(out_, row, variant, base, args, bleu_sentences, record, log):
        calls.append((row, [a for a in args if a.startswith(("--seed=", "--train_steps="))]))
        config = variant or DEMO
        layout.write_config(model_variations.run_dir(out_, row), config, training={"seed": 7})
        return {"row": row, "run_dir": row, "same_as": None, "train_minutes": 1.0, "updates": 60,
                "model": config.to_dict(), "params": 1, "dev": {"perplexity": 5.0, "bleu": bleus[row]}}

    monkeypatch.setattr(model_variations, "_train_and_score", fake_train_and_score)
    for row in bleus:
        os.makedirs(model_variations.run_dir(out, row))
    records = model_variations.run_table(out, select_rows("D/P_drop=0.2", seeds=3), ["--train_steps=60"],
                                         log=lambda line: None)
    assert calls == [("base", ["--train_steps=60"]), ("D/P_drop=0.2", ["--train_steps=60", "--train_steps=60"]),
                     ("base/seed+1", ["--train_steps=60", "--train_steps=60", "--seed=8"]),
                     ("base/seed+2", ["--train_steps=60", "--train_steps=60", "--seed=9"])]
    assert [r["changes"] for r in records] == [{}, {"P_drop": 0.2}, {"seed": 8}, {"seed": 9}]
    assert all(r["finished"] and not r.get("same_as") for r in records)

    rows = variations_table.table_rows(records)
    assert [r["bleu_change"] for r in rows] == [0.0, 1.0, 0.6, -0.1]
    assert rows[2]["paper_bleu_change"] is None and rows[1]["paper_bleu_change"] == -0.3  # 25.5 - 25.8
    assert variations_table.seed_noise(rows) == 0.7
    assert variations_table.seed_noise(rows[:2]) is None  # one seed: no noise measured
    variations_table.write_table(out, records)
    table = open(os.path.join(out, "table.md"), encoding="utf-8").read()
    assert "| base/seed+1 | seed=8 |" in table
    assert "over 3 seeds scores dev BLEU 30.00, 30.60, 29.90 (range 0.70)" in table
    assert "Two seeds are one draw" in "\n".join(variations_table.seed_noise_lines(rows[:3]))
    with open(os.path.join(out, "table.csv"), encoding="utf-8") as file:  # as notebook 06 reads it
        assert variations_table.seed_noise(list(csv.DictReader(file))) == 0.7
