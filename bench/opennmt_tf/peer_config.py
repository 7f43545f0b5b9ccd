"""The peer's files, written from the project's recipe, and OpenNMT-tf's Transformer parameter count.

    files = write(folder, recipe.model, run, tokenizer_model, pieces, data, options)
    files.config, files.model, files.vocabulary            # config.yml, model.py, vocab.txt
    parameter_count(read_model_settings(files.model), vocabulary_size(files.vocabulary))

What each toolkit is given, and where the peer differs (the harness's docstring lists why):

* Data: the same sentence files (plain UTF-8, each line stripped), tokenized in the peer's graph
  by the project run's own SentencePiece model (`SentencePieceTokenizer`, OpenNMT-tf's
  tensorflow-text tokenizer, on both sides).
* Vocabulary: that model's pieces in OpenNMT-tf's format (`vocabulary_lines`): its special tokens
  first (<blank>, <s>, </s>), then every piece but the model's four special ones (pad, unk, bos,
  eos, at the project's special ids); OpenNMT-tf adds <unk> as its one out-of-vocabulary id, so
  the peer's vocabulary has as many ids as the model has pieces.
  (`onmt-build-vocab --from_format sentencepiece` would keep the model's <pad> as a word: one id
  more that no text ever produces.)
* Model (`model_settings`, model.py): `opennmt.models.Transformer` with the recipe's N, d_model,
  heads, d_ff, P_drop on sub-layer outputs and embeddings, its attention and ReLU dropout, one
  embedding matrix shared by source, target and the softmax (`EmbeddingsSharingLevel.ALL`);
  OpenNMT-tf's own defaults otherwise: pre-LN (`pre_norm=True`) and a bias on the output layer.
* Optimisation (config.yml): Adam(0.9, 0.98, 1e-9), equation (3) (`NoamDecay`: the same
  curve, `learning_rate` its scale) with the recipe's warm-up and scale, and the recipe's linear
  cool-down over its last updates as a schedule registered through OpenNMT-tf's own
  `opennmt.schedules.register_learning_rate_schedule` (model.py's `NoamCooldown`); label
  smoothing; the loss averaged over target tokens; batches of the recipe's tokens
  (`batch_type: tokens`, no gradient accumulation: `effective_batch_size: null`), pairs longer
  than the recipe's max_length dropped.
* Checkpoints: every `checkpoint_every_steps`, the last `keep_checkpoints` kept, the last
  `average_last` averaged at the end (OpenNMT-tf's `average_last_checkpoints`; the recipe
  averages its best by dev loss, which in its cool-down are its last).
* Decoding (a second config file, `decoding_overlay`): beam width, GNMT length penalty
  (OpenNMT-tf's `length_penalty` is Wu et al.'s ((5 + |Y|) / 6) ** alpha, the project's too), and
  a fixed output limit (OpenNMT-tf has no per-sentence limit).

The configuration is written as JSON, which YAML reads as it is, with one care: PyYAML (YAML
1.1) reads a number such as 1e-09 as a string, so floats are written with a decimal point and a
signed exponent (1.0e-09), which both read as the number (`to_text`).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
from typing import Any, Optional, Sequence

from keras_transformer.config import TrainingConfig, TransformerConfig
from keras_transformer.special_ids import SPECIAL_IDS

# OpenNMT-tf's special tokens (opennmt/constants.py) in the order its vocabulary files begin with.
PEER_SPECIAL_TOKENS = ("<blank>", "<s>", "</s>")
PEER_OOV_IDS = 1  # OpenNMT-tf's num_oov_buckets: <unk>, appended after the file's tokens
SCHEDULE = "NoamDecay"
COOLDOWN_SCHEDULE = "NoamCooldown"  # model.py registers it
CONFIG_FILE, MODEL_FILE, VOCABULARY_FILE = "config.yml", "model.py", "vocab.txt"

MODEL_TEMPLATE = '''"""OpenNMT-tf model definition written by bench/opennmt_tf/peer_config.py."""

import opennmt
import tensorflow as tf

MODEL_SETTINGS = {settings}


@opennmt.schedules.register_learning_rate_schedule
class {cooldown}(opennmt.schedules.NoamDecay):
    """NoamDecay times a line from 1 down to 1 / cooldown_steps over the last cooldown_steps of
    total_steps updates (keras_transformer.training.schedules.learning_rate)."""

    def __init__(self, scale, model_dim, warmup_steps, total_steps, cooldown_steps):
        super().__init__(scale, model_dim, warmup_steps)
        self.total_steps = float(total_steps)
        self.cooldown_steps = float(cooldown_steps)

    def __call__(self, step):
        step_num = tf.cast(step + 1, tf.float32)  # NoamDecay's step: the update being made
        ramp = tf.clip_by_value((self.total_steps + 1.0 - step_num) / self.cooldown_steps, 0.0, 1.0)
        return super().__call__(step) * ramp


def model():
    settings = dict(MODEL_SETTINGS)
    settings["share_embeddings"] = getattr(opennmt.models.EmbeddingsSharingLevel, settings["share_embeddings"])
    return opennmt.models.Transformer(**settings)
'''


@dataclasses.dataclass(frozen=True)
class PeerOptions:
    """The peer's settings that are choices, not the recipe's.

    Attributes:
        pre_norm: OpenNMT-tf's default pre-LN Transformer (True) or the paper's post-LN.
        output_layer_bias: OpenNMT-tf's default bias on the softmax layer.
        cooldown: give the peer the recipe's cool-down (`COOLDOWN_SCHEDULE`); False: plain NoamDecay.
    """

    pre_norm: bool = True
    output_layer_bias: bool = True
    cooldown: bool = True


@dataclasses.dataclass(frozen=True)
class DataFiles:
    """Plain-text files, one sentence a line."""

    train_source: str
    train_target: str
    dev_source: str
    dev_target: str


@dataclasses.dataclass(frozen=True)
class PeerFiles:
    config: str
    model: str
    vocabulary: str
    model_dir: str


def vocabulary_lines(pieces: Sequence[str]) -> list[str]:
    """OpenNMT-tf's vocabulary of a SentencePiece model's `pieces` (id order): its special tokens,
    then the pieces but those at the project's special ids."""
    special = set(SPECIAL_IDS)
    return [*PEER_SPECIAL_TOKENS, *(piece for index, piece in enumerate(pieces) if index not in special)]


def vocabulary_size(path: str) -> int:
    """The ids of the peer's embedding for the vocabulary file `path`: its lines plus <unk>."""
    with open(path, encoding="utf-8") as file:
        return sum(1 for _ in file) + PEER_OOV_IDS


def model_settings(model: TransformerConfig, options: PeerOptions = PeerOptions()) -> dict[str, Any]:
    """`opennmt.models.Transformer`'s arguments for the project's `model` (JSON-able;
    share_embeddings by its `EmbeddingsSharingLevel` name)."""
    if model.key_dim * model.num_heads != model.d_model or model.value_dim * model.num_heads != model.d_model:
        raise ValueError(f"OpenNMT-tf's attention has d_k = d_v = d_model / h; the recipe has d_k={model.key_dim}, "
                         f"d_v={model.value_dim}, d_model={model.d_model}, h={model.num_heads}")
    if model.positional_encoding != "sinusoidal" or model.source_word_dropout_rate:
        raise ValueError("the harness compares the sinusoidal Transformer without source word dropout")
    return {
        "num_layers": model.num_layers,
        "num_units": model.d_model,
        "num_heads": model.num_heads,
        "ffn_inner_dim": model.d_ff,
        "dropout": model.dropout_rate,
        "attention_dropout": model.attention_dropout_rate,
        "ffn_dropout": model.relu_dropout_rate,
        "share_embeddings": "ALL" if model.share_embeddings else "NONE",
        "pre_norm": options.pre_norm,
        "output_layer_bias": options.output_layer_bias,
    }


def parameter_count(settings: dict[str, Any], vocabulary: int, target_vocabulary: Optional[int] = None) -> int:
    """The trainable weights of `opennmt.models.Transformer(**settings)` (OpenNMT-tf 2.32) with a
    `vocabulary`-id source embedding (and a target one, the same size unless given).

    From its source: each `MultiHeadAttention` has four `Dense(num_units)` (queries, keys, values,
    output), with biases (`mha_bias=True`); each `FeedForwardNetwork` `Dense(ffn_inner_dim)` and
    `Dense(num_units)` with biases; each sub-layer is wrapped by a `TransformerLayerWrapper` with one
    `LayerNorm` (gamma and beta), on its input with pre_norm, on its output without; an encoder
    layer has self-attention and FFN, a decoder layer self-attention, attention over the source
    and FFN; with pre_norm the encoder and the decoder each end with one more LayerNorm. The
    `WordEmbedder`s hold vocabulary x num_units, one matrix for both with
    `EmbeddingsSharingLevel.ALL`; the decoder's output `Dense` reuses the target embedding
    (ALL or TARGET) or has its own matrix, and has a bias of the target vocabulary with
    `output_layer_bias`. Sinusoidal positions have no weights.
    """
    d, d_ff, n = settings["num_units"], settings["ffn_inner_dim"], settings["num_layers"]
    encoder_layers, decoder_layers = (n, n) if isinstance(n, int) else tuple(n)
    target_vocabulary = target_vocabulary or vocabulary
    attention = 4 * (d * d + d)
    feed_forward = d * d_ff + d_ff + d_ff * d + d
    norm = 2 * d
    encoder = encoder_layers * (attention + feed_forward + 2 * norm)
    decoder = decoder_layers * (2 * attention + feed_forward + 3 * norm)
    final_norms = 2 * norm if settings.get("pre_norm", True) else 0
    sharing = settings["share_embeddings"]
    embeddings = vocabulary * d + (0 if sharing in ("ALL", "SOURCE_TARGET_INPUT") else target_vocabulary * d)
    output = (0 if sharing in ("ALL", "TARGET") else target_vocabulary * d)
    output += target_vocabulary if settings.get("output_layer_bias", True) else 0
    return encoder + decoder + final_norms + embeddings + output


def read_model_settings(path: str) -> dict[str, Any]:
    """The `MODEL_SETTINGS` literal of a model.py this module wrote."""
    with open(path, encoding="utf-8") as file:
        tree = ast.parse(file.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MODEL_SETTINGS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"{path}: no MODEL_SETTINGS")


def schedule(model: TransformerConfig, training: TrainingConfig, options: PeerOptions) -> dict[str, Any]:
    """config.yml's params for the learning rate: equation (3), with the cool-down if the run has one."""
    params: dict[str, Any] = {"learning_rate": training.learning_rate_scale,
                              "decay_params": {"model_dim": model.d_model, "warmup_steps": training.warmup_steps}}
    if training.cooldown_steps and options.cooldown:
        params["decay_type"] = COOLDOWN_SCHEDULE
        params["decay_params"].update(total_steps=training.train_steps, cooldown_steps=training.cooldown_steps)
    else:
        params["decay_type"] = SCHEDULE
    return params


def config(model: TransformerConfig, training: TrainingConfig, batch_tokens: int, data: DataFiles,
           tokenizer_model: str, vocabulary: str, model_dir: str, options: PeerOptions = PeerOptions()) -> dict:
    """OpenNMT-tf's run configuration (config.yml) for one training run of the recipe."""
    tokenization = {"type": "SentencePieceTokenizer", "params": {"model": tokenizer_model}}
    return {
        "model_dir": model_dir,
        "data": {
            "train_features_file": data.train_source, "train_labels_file": data.train_target,
            "eval_features_file": data.dev_source, "eval_labels_file": data.dev_target,
            "source_vocabulary": vocabulary, "target_vocabulary": vocabulary,
            "source_tokenization": tokenization, "target_tokenization": tokenization,
        },
        "params": {
            "optimizer": "Adam", "optimizer_params": {"beta_1": 0.9, "beta_2": 0.98, "epsilon": 1e-9},
            **schedule(model, training, options),
            "label_smoothing": model.label_smoothing,
            "average_loss_in_time": True,
        },
        "train": {
            "batch_size": batch_tokens, "batch_type": "tokens", "effective_batch_size": None,
            "max_step": training.train_steps,
            "save_checkpoints_steps": training.checkpoint_every_steps or training.train_steps,
            "keep_checkpoint_max": training.keep_checkpoints,
            "average_last_checkpoints": training.average_last,
            "save_summary_steps": training.log_every_steps,
            "maximum_features_length": model.max_length, "maximum_labels_length": model.max_length,
        },
        "eval": {"steps": training.eval_every_steps or training.train_steps, "batch_size": 32},
        "infer": {"batch_size": 32, "length_bucket_width": 5},
    }


def decoding_overlay(beam_size: int, alpha: float, maximum_length: int) -> dict:
    """A second config file for `infer` and `export`: beam search as the project's flags say."""
    return {"params": {"beam_width": beam_size, "length_penalty": alpha, "maximum_decoding_length": maximum_length}}


def _float_text(value: float) -> str:
    """A float as JSON and YAML 1.1 both read it: 1e-09 -> 1.0e-09, 2.5 -> 2.5."""
    text = repr(float(value))
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent if exponent[0] in '+-' else '+' + exponent}"
    return text


def to_text(value: Any, indent: str = "") -> str:
    """`value` (dicts, lists, strings, numbers, booleans, None) as JSON that YAML reads alike."""
    inner = indent + " "
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(str(k))}: {to_text(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}" if items else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(to_text(v, inner) for v in value) + "]"
    if isinstance(value, float):
        return _float_text(value)
    return json.dumps(value)


def write_json(path: str, value: Any) -> str:
    """Writes `to_text(value)` to `path`."""
    with open(path, "w", encoding="utf-8") as file:
        file.write(to_text(value) + "\n")
    return path


def write(folder: str, model: TransformerConfig, training: TrainingConfig, batch_tokens: int, data: DataFiles,
          tokenizer_model: str, pieces: Sequence[str], options: PeerOptions = PeerOptions(),
          model_dir: Optional[str] = None) -> PeerFiles:
    """Writes vocab.txt, model.py and config.yml into `folder` (the run's model_dir: `model_dir`,
    default folder/run); returns their paths."""
    os.makedirs(folder, exist_ok=True)
    vocabulary = os.path.join(folder, VOCABULARY_FILE)
    with open(vocabulary, "w", encoding="utf-8") as file:
        file.write("".join(line + "\n" for line in vocabulary_lines(pieces)))
    model_file = os.path.join(folder, MODEL_FILE)
    with open(model_file, "w", encoding="utf-8") as file:
        file.write(MODEL_TEMPLATE.format(settings=repr(model_settings(model, options)), cooldown=COOLDOWN_SCHEDULE))
    model_dir = model_dir or os.path.join(folder, "run")
    settings = config(model, training, batch_tokens, data, tokenizer_model, vocabulary, model_dir, options)
    return PeerFiles(write_json(os.path.join(folder, CONFIG_FILE), settings), model_file, vocabulary, model_dir)
