"""`tasks.model_variations`: which rows, and each row scaled to a recipe's model (section 6.2, Table 3)."""

import pytest

from keras_transformer.config import TABLE3, TransformerConfig
from tasks.model_variations import changes, row_flags, scale_row, select_rows

ARCHITECTURE = ("num_layers", "d_model", "d_ff", "num_heads", "key_dim", "value_dim", "dropout_rate",
                "label_smoothing", "positional_encoding")
DEMO = TransformerConfig.base(num_layers=2, d_model=128, d_ff=512, num_heads=4, dropout_rate=0.0, vocab_size=1000)


def test_rows_by_group_and_name_base_first_in_table_order():
    assert select_rows("E,A/h=4") == ["base", "A/h=4", "E/learned"]
    assert select_rows("A,B,C,D,E,big") == list(TABLE3)
    assert select_rows("big") == ["base", "big"]


@pytest.mark.parametrize("spec, fragment", [("F", "unknown row 'F'"), ("C/N=3", "unknown row 'C/N=3'"),
                                            (" , ", "names no row")])
def test_unknown_rows_are_one_line_errors(spec, fragment):
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(")):
        select_rows(spec)


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
