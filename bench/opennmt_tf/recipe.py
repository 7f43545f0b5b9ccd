"""The project's run recipe (a configs/*.flags file) as the settings both toolkits are given.

    recipe = read("configs/multi30k_en_de.flags")            # the recipe's shape and schedule
    recipe = read("configs/multi30k_en_de.flags", shape="base")  # 6+6, 512, 8 heads, 2048, 32k
    recipe.model                     # a `TransformerConfig`: what `python -m keras_transformer.train` builds
    recipe.training                  # a `TrainingConfig` of the recipe's updates, schedule, checkpoints
    recipe.flags["batch_tokens"]     # every flag as the file writes it

A recipe file holds one `--name=value` a line (absl's flagfile format), `#` comments and blank
lines. Its model is `TransformerConfig.preset(--preset)` with the recipe's overrides and its
training `TrainingConfig` with the recipe's values, each the training command's own default where
the recipe says nothing (`keras_transformer.config` owns both; nothing here restates a default).
`SHAPES` are the sizes the harness can compare: "recipe" as written, "base" the paper's base
model (Table 3) with a shared 32k vocabulary, every other setting the recipe's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from keras_transformer.config import TrainingConfig, TransformerConfig

SHAPES = {
    "recipe": {},
    "base": {"num_layers": 6, "d_model": 512, "num_heads": 8, "d_ff": 2048, "vocab_size": 32000},
}
MODEL_FLAGS = ("num_layers", "d_model", "d_ff", "num_heads", "d_k", "d_v", "dropout_rate", "attention_dropout_rate",
               "relu_dropout_rate", "label_smoothing", "positional_encoding", "layer_norm", "max_length", "vocab_size")
TRAINING_FLAGS = ("train_steps", "warmup_steps", "learning_rate_scale", "cooldown_steps", "clip_norm",
                  "accumulation_steps", "precision", "checkpoint_every_steps", "keep_checkpoints", "eval_every_steps",
                  "early_stopping_patience", "log_every_steps", "keep_best_checkpoints", "best_checkpoint_metric")
TRAINING_RENAMES = {"average_checkpoints": "average_last"}  # flag -> TrainingConfig field
# The data flags of the recipe that `python -m keras_transformer.pipelines train_tokenizer` takes (tasks/flags.py
# `define_data_flags`): the tokenizer both toolkits share is trained with exactly these.
TOKENIZER_FLAGS = ("dataset", "source_lang", "target_lang", "tokenizer", "vocab_size", "shared_vocab", "lowercase",
                   "split_by_script", "max_length")


def parse_flags(text: str) -> dict[str, str]:
    """`--name=value` lines -> {name: value} (a later line wins, as absl reads a flagfile); a
    `--noname` line is name=false, a bare `--name` name=true. Raises ValueError on another line."""
    values = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not line.startswith("--"):
            raise ValueError(f"line {number}: {line!r} is not a --name=value flag")
        name, equals, value = line[2:].partition("=")
        if not equals:
            name, value = (name[2:], "false") if name.startswith("no") and len(name) > 2 else (name, "true")
        values[name] = value
    return values


def _typed(value: str, like: Any) -> Any:
    """`value` (flag text) as the type of the dataclass default `like`."""
    if isinstance(like, bool):
        if value.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"{value!r} is not a boolean")
        return value.lower() in ("true", "1")
    if isinstance(like, int):
        return int(value)
    if isinstance(like, float):
        return float(value)
    return value


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One recipe at one shape.

    Attributes:
        path: the recipe file.
        shape: a key of `SHAPES`.
        flags: every flag of the file, as text, with the shape's sizes written over them.
        model: the `TransformerConfig` the training command builds from them (its vocabulary
            the recipe's upper bound; the trained tokenizer's size replaces it).
        training: the `TrainingConfig` of the recipe.
    """

    path: str
    shape: str
    flags: dict
    model: TransformerConfig
    training: TrainingConfig

    @property
    def batch_tokens(self) -> int:
        return int(self.flags["batch_tokens"])

    @property
    def shared_vocab(self) -> bool:
        return _typed(self.flags.get("shared_vocab", "true"), True)

    def tokenizer_flags(self) -> dict[str, str]:
        """The recipe's flags that choose and train its tokenizer (`TOKENIZER_FLAGS`)."""
        return {name: self.flags[name] for name in TOKENIZER_FLAGS if name in self.flags}

    def shape_flags(self) -> dict[str, str]:
        """The flags the shape writes over the recipe's (none for "recipe")."""
        return {name: str(value) for name, value in SHAPES[self.shape].items()}


def from_flags(flags: dict[str, str], path: str = "<flags>", shape: str = "recipe") -> Recipe:
    """A `Recipe` of parsed flags (`parse_flags`) at `shape`."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, got {shape!r}")
    flags = {**flags, **{name: str(value) for name, value in SHAPES[shape].items()}}
    if "batch_tokens" not in flags:
        raise ValueError(f"{path}: the recipe sets no --batch_tokens (both toolkits batch by tokens)")
    defaults = TransformerConfig()
    overrides = {name: _typed(flags[name], getattr(defaults, name) if getattr(defaults, name) is not None else 0)
                 for name in MODEL_FLAGS if name in flags}
    overrides["share_embeddings"] = _typed(flags.get("shared_vocab", "true"), True)
    model = TransformerConfig.preset(flags.get("preset", "base"), **overrides)
    training_defaults = TrainingConfig()
    values = {name: _typed(flags[name], getattr(training_defaults, name)) for name in TRAINING_FLAGS if name in flags}
    values.update({field: _typed(flags[name], getattr(training_defaults, field))
                   for name, field in TRAINING_RENAMES.items() if name in flags})
    if "seed" in flags:
        values["seed"] = int(flags["seed"])
    return Recipe(path, shape, flags, model, TrainingConfig(**values))


def read(path: str, shape: str = "recipe") -> Recipe:
    """The recipe file at `path` at `shape`."""
    with open(path, encoding="utf-8") as file:
        return from_flags(parse_flags(file.read()), path, shape)
