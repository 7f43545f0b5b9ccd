"""Model and decoding settings, with the paper's names and its presets.

`TransformerConfig` is a frozen dataclass: every hyper-parameter of Table 3 of
"Attention Is All You Need" (Vaswani et al., 2017) has a field of the same name,
so each row of the table is a preset plus overrides:

    >>> TransformerConfig.base(num_heads=16, d_k=32, d_v=32)    # Table 3, row (A)
    >>> TransformerConfig.base(positional_encoding="learned")   # Table 3, row (E)
    >>> TransformerConfig.preset("C/d_model=256")             # base(d_model=256, d_k=32, d_v=32)

Variants are made with `dataclasses.replace` (or the presets' keyword overrides).
`DecodingConfig` holds the settings of section 6.1's search, shared by dev evaluation,
translation and export; `TrainingConfig` those of the training loop (section 5). Nothing below the entry points reads command-line flags, and
this module imports no TensorFlow, so a command can check its flags before TF starts.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Optional

from keras_transformer import dev_metrics
from keras_transformer import position_encodings
from keras_transformer.special_ids import PAD_ID

LAYER_NORMS = ("post", "pre")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
# The longest output beyond its source a search may make (section 6.3 uses 300): beyond this, a
# typo such as 1000000000 would run (and size the CTranslate2 export's position table) unbounded.
MAX_EXTRA_LENGTH = 4096
SEED_LIMIT = 2**32  # seeds are in [0, 2**32): sentencepiece's generator takes an unsigned 32-bit seed


def check_finite(config, names) -> None:
    """A one-line `ValueError` unless each field of `config` named in `names` is a finite
    number: NaN and infinity pass comparisons such as `value < 0` unnoticed."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")


def machine_memory() -> Optional[int]:
    """The machine's physical memory in bytes (`os.sysconf`), None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def format_bytes(count: float) -> str:
    """A size as people read it: "512 B", "3.5 MB", "4.0 TB" (powers of 1024)."""
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if count < 1024 or unit == "PB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def check_seed(seed) -> None:
    """A one-line `ValueError` unless `seed` is an integer in [0, `SEED_LIMIT`)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """Hyper-parameters of the encoder-decoder Transformer (section 3, Table 3).

    Attributes:
        num_layers: N, the number of identical layers in the encoder and in the
            decoder (section 3.1), unless a stack's own depth below is given. Base: 6.
        num_encoder_layers: the encoder's depth, or `None` for `num_layers`.
        num_decoder_layers: the decoder's depth, or `None` for `num_layers`. Not in the
            paper: a deep encoder with a shallow decoder decodes faster at a similar
            quality (Kasai et al., 2021, "Deep Encoder, Shallow Decoder"), since a search
            runs the decoder once per output token and the encoder once per sentence.
            fairseq's --encoder-layers/--decoder-layers, Marian's --enc-depth/--dec-depth.
            `encoder_depth` and `decoder_depth` are the depths as used; a given depth wins
            over `num_layers`, also in `replace(num_layers=...)`.
        d_model: width of every sub-layer output and of the embeddings. Base: 512.
        d_ff: inner width of the position-wise feed-forward networks
            (section 3.3). Base: 2048.
        num_heads: h, the number of parallel attention heads (section 3.2.2).
            Base: 8.
        d_k: width of each head's queries and keys. `None` means
            `d_model // num_heads` (64 in the base model).
        d_v: width of each head's values. `None` means `d_model // num_heads`.
        dropout_rate: P_drop, applied to each sub-layer output before the
            residual sum and to the sums of embeddings and positional encodings
            (section 5.4). Base: 0.1, big: 0.3.
        attention_dropout_rate: dropout on the attention weights. The paper does
            not use it (0.0); tensor2tensor does.
        relu_dropout_rate: dropout after the feed-forward ReLU; 0.0 in the paper.
        source_word_dropout_rate: dropout of whole source tokens: each source position's
            embedding is zeroed with this probability (the kept ones scaled by 1 / (1 - rate))
            before its positional encoding is added, so the encoder still sees that a token was
            there but not which (Sennrich & Zhang 2019's word dropout for small data; Marian's
            --dropout-src). Not in the paper: 0.0.
        label_smoothing: epsilon_ls of the training loss (section 5.4). Base: 0.1.
        vocab_size: size of the (shared) vocabulary. The paper's WMT en-de
            vocabulary has about 37,000 byte-pair tokens (section 5.1).
        target_vocab_size: size of a separate target vocabulary, or `None` for
            one vocabulary. Only allowed with `share_embeddings=False`.
        max_length: longest sequence the model is built for (learned position
            tables are this long; sinusoids are computed for any length).
        share_embeddings: one weight matrix for the source embedding, the
            target embedding and the pre-softmax projection (section 3.4). With
            `False` the source embedding is separate and the target embedding
            stays tied to the pre-softmax projection.
        positional_encoding: the name of a registered position encoding
            (`keras_transformer.position_encodings`; `positions` is its kind): "sinusoidal"
            (section 3.5) or "learned" (Table 3, row (E)).
        layer_norm: "post", the paper's LayerNorm(x + Dropout(Sublayer(x))), or
            "pre", x + Dropout(Sublayer(LayerNorm(x))) with a final LayerNorm.
        layer_norm_epsilon: epsilon of every LayerNormalization.
        pad_id: the id of the padding token; positions holding it are masked.

    Every field is checked on construction, and so is the size: a config whose float32 weights
    (`num_parameters`, counted without TensorFlow) need more than the machine's memory is a
    one-line `ValueError` naming its sizes (`check_fits_memory`), raised before any model is built.
    """

    num_layers: int = 6
    num_encoder_layers: Optional[int] = None
    num_decoder_layers: Optional[int] = None
    d_model: int = 512
    d_ff: int = 2048
    num_heads: int = 8
    d_k: Optional[int] = None
    d_v: Optional[int] = None
    dropout_rate: float = 0.1
    attention_dropout_rate: float = 0.0
    relu_dropout_rate: float = 0.0
    source_word_dropout_rate: float = 0.0
    label_smoothing: float = 0.1
    vocab_size: int = 37000
    target_vocab_size: Optional[int] = None
    max_length: int = 512
    share_embeddings: bool = True
    positional_encoding: str = "sinusoidal"
    layer_norm: str = "post"
    layer_norm_epsilon: float = 1e-6
    pad_id: int = PAD_ID

    def __post_init__(self):
        for name in ("num_layers", "d_model", "d_ff", "num_heads", "vocab_size", "max_length"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_k is None and self.d_model % self.num_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads}) "
                "unless d_k and d_v are given"
            )
        for name in (*STACK_DEPTHS, "d_k", "d_v", "target_vocab_size"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
        rates = ("dropout_rate", "attention_dropout_rate", "relu_dropout_rate", "source_word_dropout_rate",
                 "label_smoothing")
        check_finite(self, rates + ("layer_norm_epsilon",))
        for name in rates:
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        if self.layer_norm_epsilon <= 0:
            raise ValueError(f"layer_norm_epsilon must be positive, got {self.layer_norm_epsilon!r}")
        position_encodings.lookup(self.positional_encoding)  # a ValueError naming the registered kinds
        if self.layer_norm not in LAYER_NORMS:
            raise ValueError(f"layer_norm must be one of {LAYER_NORMS}, got {self.layer_norm!r}")
        if self.share_embeddings and self.target_vocab_size not in (None, self.vocab_size):
            raise ValueError(
                f"share_embeddings=True needs one vocabulary, but vocab_size={self.vocab_size} "
                f"and target_vocab_size={self.target_vocab_size}"
            )
        self.check_fits_memory()

    def check_fits_memory(self, memory: Optional[int] = None) -> None:
        """A one-line `ValueError` naming the sizes when the model's float32 weights
        (`weight_bytes`) need more than `memory` bytes (default: the machine's,
        `machine_memory`): such a model cannot be built here, and building it would end in an
        out-of-memory error from deep inside TensorFlow. Checked on construction, so a command
        refuses such flags or model_config.json before a model is built."""
        memory = machine_memory() if memory is None else memory
        if memory is None or self.weight_bytes <= memory:
            return
        sizes = ["num_layers", *STACK_DEPTHS, "d_model", "d_ff", "num_heads", "d_k", "d_v", "vocab_size"]
        if self.target_vocab_size is not None:
            sizes.append("target_vocab_size")
        if self.positions.fixed_max_length:
            sizes.append("max_length")
        given = ", ".join(f"{name}={getattr(self, name)}" for name in sizes
                          if getattr(self, name) is not None)
        raise ValueError(f"the model ({given}) needs about {format_bytes(self.weight_bytes)} for its "
                         f"{self.num_parameters:,} float32 weights, but this machine has "
                         f"{format_bytes(memory)} of memory")

    # Derived sizes -------------------------------------------------------------

    @property
    def encoder_depth(self) -> int:
        """The encoder's layers as built, `num_encoder_layers` when given, else `num_layers`."""
        return self.num_encoder_layers if self.num_encoder_layers is not None else self.num_layers

    @property
    def decoder_depth(self) -> int:
        """The decoder's layers as built, `num_decoder_layers` when given, else `num_layers` (the
        layers each search step runs, and the layers of its cache)."""
        return self.num_decoder_layers if self.num_decoder_layers is not None else self.num_layers

    @property
    def depth_text(self) -> str:
        """The depths as people read them, "6" for both stacks or "6/1" for 6 encoder and 1 decoder layers."""
        if self.encoder_depth == self.decoder_depth:
            return str(self.encoder_depth)
        return f"{self.encoder_depth}/{self.decoder_depth}"

    @property
    def key_dim(self) -> int:
        """d_k as used, the explicit value or d_model / h."""
        return self.d_k if self.d_k is not None else self.d_model // self.num_heads

    @property
    def value_dim(self) -> int:
        """d_v as used, the explicit value or d_model / h."""
        return self.d_v if self.d_v is not None else self.d_model // self.num_heads

    @property
    def output_vocab_size(self) -> int:
        """Size of the target vocabulary (the softmax)."""
        return self.target_vocab_size or self.vocab_size

    @property
    def positions(self) -> position_encodings.PositionEncoding:
        """The registered kind of `positional_encoding` (section 3.5): its layers, its length
        limit, its weights (`keras_transformer.position_encodings.lookup`)."""
        return position_encodings.lookup(self.positional_encoding)

    @property
    def num_parameters(self) -> int:
        """The number of weights of `model.Transformer(self)` (its `count_params()` once built),
        counted from the sizes alone, without TensorFlow: `encoder_parameters` +
        `decoder_parameters` + `embedding_parameters`.

        Per attention layer W^Q, W^K (d_model x h d_k) and W^V (d_model x h d_v) with biases, and
        W^O (h d_v x d_model) with a bias (section 3.2.2); per feed-forward network d_model x d_ff
        and d_ff x d_model with biases (section 3.3); a gain and a bias of d_model per
        LayerNorm. An encoder layer has one attention, one feed-forward network and two
        LayerNorms; a decoder layer two attentions, one feed-forward network and three
        LayerNorms; pre-LN stacks end with one more LayerNorm each. One shared embedding matrix
        (section 3.4), or a source and a target matrix; the position encoding's weights
        (`PositionEncoding.num_parameters`: learned positions, Table 3 row E, add a
        max_length x d_model table per side).
        """
        return self.encoder_parameters + self.decoder_parameters + self.embedding_parameters

    def _layer_sizes(self) -> tuple[int, int, int]:
        """(attention, feed-forward network, LayerNorm) weights, as `num_parameters` counts them."""
        d, h, d_k, d_v, d_ff = self.d_model, self.num_heads, self.key_dim, self.value_dim, self.d_ff
        attention = 2 * (d * h * d_k + h * d_k) + (d * h * d_v + h * d_v) + (h * d_v * d + d)
        feed_forward = 2 * d * d_ff + d_ff + d
        return attention, feed_forward, 2 * d

    @property
    def encoder_parameters(self) -> int:
        """The encoder stack's weights, `encoder_depth` layers of one attention, one feed-forward
        network and two LayerNorms, and a pre-LN stack's final LayerNorm."""
        attention, feed_forward, norm = self._layer_sizes()
        final_norm = norm if self.layer_norm == "pre" else 0
        return self.encoder_depth * (attention + feed_forward + 2 * norm) + final_norm

    @property
    def decoder_parameters(self) -> int:
        """The decoder stack's weights, `decoder_depth` layers of two attentions, one feed-forward
        network and three LayerNorms, and a pre-LN stack's final LayerNorm (the pre-softmax
        projection is the shared embedding: `embedding_parameters`)."""
        attention, feed_forward, norm = self._layer_sizes()
        final_norm = norm if self.layer_norm == "pre" else 0
        return self.decoder_depth * (2 * attention + feed_forward + 3 * norm) + final_norm

    @property
    def embedding_parameters(self) -> int:
        """The embedding matrices (one shared, or a source and a target one) and the position
        encoding's weights (learned position tables)."""
        d = self.d_model
        embeddings = self.output_vocab_size * d + (0 if self.share_embeddings else self.vocab_size * d)
        return embeddings + self.positions.num_parameters(self)

    @property
    def weight_bytes(self) -> int:
        """The memory the weights take as float32 variables (what every precision keeps)."""
        return 4 * self.num_parameters

    # Serialization ---------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The fields (what model_config.json and an export's settings hold). A stack depth that
        is not given is left out: a model with one depth is written with `num_layers` alone, the
        form every version of this package reads."""
        values = dataclasses.asdict(self)
        for name in STACK_DEPTHS:
            if values[name] is None:
                del values[name]
        return values

    def resolved_dict(self) -> dict[str, Any]:
        """`to_dict()` with each stack's depth as built (`num_encoder_layers`, `num_decoder_layers`)
        and no `num_layers`: two spellings of one model (`num_layers=2`; `num_layers=6,
        num_encoder_layers=2, num_decoder_layers=2`) give one dict. What a resume and
        --init_from compare with the saved model, field by field."""
        values = self.to_dict()
        del values["num_layers"]
        values.update(num_encoder_layers=self.encoder_depth, num_decoder_layers=self.decoder_depth)
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "TransformerConfig":
        """The config of `to_dict()`'s fields; a field left out takes its default (a model_config.json
        holding `num_layers` alone is a model of one depth)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown TransformerConfig fields: {', '.join(unknown)}")
        return cls(**values)

    def replace(self, **overrides) -> "TransformerConfig":
        return dataclasses.replace(self, **overrides)

    # Presets -------------------------------------------------------------------

    @classmethod
    def base(cls, **overrides) -> "TransformerConfig":
        """The base model of Table 3: N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1."""
        return cls(**overrides)

    @classmethod
    def big(cls, **overrides) -> "TransformerConfig":
        """Transformer (big) of Table 3: d_model=1024, d_ff=4096, h=16, P_drop=0.3."""
        values = dict(d_model=1024, d_ff=4096, num_heads=16, dropout_rate=0.3)
        values.update(overrides)
        return cls(**values)

    @classmethod
    def tiny(cls, **overrides) -> "TransformerConfig":
        """A model small enough for unit tests: 2 layers, d_model=16, 2 heads."""
        values = dict(
            num_layers=2, d_model=16, d_ff=32, num_heads=2, vocab_size=50, max_length=64,
            dropout_rate=0.0, label_smoothing=0.1,
        )
        values.update(overrides)
        return cls(**values)

    @classmethod
    def preset(cls, name: str, **overrides) -> "TransformerConfig":
        """A preset by name: "tiny", "base", "big" or a row of Table 3 (see TABLE3).

        >>> TransformerConfig.preset("B/d_k=16").key_dim
        16
        """
        if name in ("tiny", "base", "big"):
            return getattr(cls, name)(**overrides)
        if name not in TABLE3:
            raise ValueError(
                f"unknown preset {name!r}; choose tiny, base, big or one of: {', '.join(TABLE3)}"
            )
        values = dict(TABLE3[name].overrides)
        values.update(overrides)
        return cls.big(**values) if name == "big" else cls.base(**values)


@dataclasses.dataclass(frozen=True)
class DecodingConfig:
    """How to decode (section 6.1): "beam search with a beam size of 4 and length penalty
    alpha = 0.6 [...]. We set the maximum output length during inference to input length
    + 50, but terminate early when possible."

    The one definition of these settings: dev evaluation, `python -m
    keras_transformer.translate` and the export all take a `DecodingConfig`, and their
    command lines define its flags in one place (`tasks/flags.py`).

    Attributes:
        beam_size: hypotheses kept per sentence (paper: 4); 1 means greedy search.
        alpha: length penalty exponent (paper: 0.6).
        max_extra_length: a hypothesis may be this many tokens longer than its source
            (paper: 50; at most `MAX_EXTRA_LENGTH`).
        n_best: hypotheses returned per sentence, best first (1 <= n_best <= beam_size: the
            search keeps no more).
        tree_constraint: decode only linearized trees over the input's words (a parsing
            model's output, `keras_transformer.decoding.tree_constraint`); needs a vocabulary with
            whole bracket pieces.

    The settings are checked here, once: the commands (--n_best against --beam_size or an
    export's beam), `search.translate_ids` (its Python-valued overrides) and the export build a
    `DecodingConfig` (or `dataclasses.replace` one) rather than compare values themselves, and
    `beam_search` takes them as checked. A SavedModel request's per-sentence options are
    tensors, bounded in its graph (`keras_transformer.export.serving_module`).
    """

    beam_size: int = 4
    alpha: float = 0.6
    max_extra_length: int = 50
    n_best: int = 1
    tree_constraint: bool = False

    def __post_init__(self):
        if not isinstance(self.beam_size, int) or self.beam_size < 1:
            raise ValueError(f"beam_size must be a positive integer (1 = greedy), got {self.beam_size!r}")
        check_finite(self, ("alpha",))
        if not self.alpha >= 0.0:
            raise ValueError(f"alpha must be >= 0, got {self.alpha!r}")
        if not isinstance(self.max_extra_length, int) or not 0 <= self.max_extra_length <= MAX_EXTRA_LENGTH:
            raise ValueError(f"max_extra_length must be an integer in [0, {MAX_EXTRA_LENGTH}], "
                             f"got {self.max_extra_length!r}")
        if not isinstance(self.n_best, int) or not 1 <= self.n_best <= self.beam_size:
            raise ValueError(f"n_best must be an integer between 1 and beam_size ({self.beam_size}), "
                             f"got {self.n_best!r}")
        if not isinstance(self.tree_constraint, bool):
            raise ValueError(f"tree_constraint must be a bool, got {self.tree_constraint!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class SamplingConfig:
    """Random sampling instead of a search (`keras_transformer.decoding.sampling`): one output
    per sentence, each token drawn from the model's distribution reshaped by temperature,
    top-k and top-p, in that order. Not in the paper (section 6.1 searches); back-translation
    samples its synthetic sources (Edunov et al., 2018).

    Attributes:
        topk: draw among the k most probable tokens; 0 = the whole vocabulary, 1 = greedy.
        topp: draw among the smallest set of most probable tokens whose probability reaches
            topp (nucleus sampling), in (0, 1]; 1 = no such cut.
        temperature: p ** (1 / temperature), >= 0; 0 = the most probable token (greedy search).
        seed: in [0, 2**32): the same seed, sentences and batches give the same samples.

    The fields may also be tensors, one request's options in a SavedModel
    (`keras_transformer.export.serving_module`), which checks them in the graph; Python values are checked here.
    """

    topk: int = 0
    topp: float = 1.0
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self):
        if any(hasattr(getattr(self, field.name), "dtype") for field in dataclasses.fields(self)):
            return  # tensors: checked in the graph by their caller
        if isinstance(self.topk, bool) or not isinstance(self.topk, int) or self.topk < 0:
            raise ValueError(f"sampling topk must be an integer >= 0 (0 = the whole vocabulary), got {self.topk!r}")
        check_finite(self, ("topp", "temperature"))
        if not 0.0 < self.topp <= 1.0:
            raise ValueError(f"sampling topp must be in (0, 1], got {self.topp!r}")
        if self.temperature < 0.0:
            raise ValueError(f"sampling temperature must be >= 0 (0 = greedy), got {self.temperature!r}")
        check_seed(self.seed)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# Section 6.3, English constituency parsing: "We increased the maximum output length to input
# length + 300. We used a beam size of 21 and alpha = 0.3". The paper says nothing of
# constraining the search; here it decodes only trees over the input (`tree_constraint`).
PARSING_DECODING = DecodingConfig(beam_size=21, alpha=0.3, max_extra_length=300, tree_constraint=True)


# The fields of a TransformerConfig that override `num_layers` for one stack (None: not given).
STACK_DEPTHS = ("num_encoder_layers", "num_decoder_layers")

# The fields of a TransformerConfig that fix what each id means: the models of an ensemble
# (`keras_transformer.decoding.ensemble`) must agree on them.
VOCABULARY_FIELDS = ("vocab_size", "target_vocab_size", "share_embeddings", "pad_id")


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """Optimisation, checkpointing and evaluation settings of one training run (section 5).

    Read by `keras_transformer.training.trainer`; kept here, without TensorFlow, so the training
    command checks it before TensorFlow starts.

    Attributes:
        train_steps: updates to make in total (paper: 100k base, 300k big).
        warmup_steps: linear warm-up of equation (3) (paper: 4000).
        learning_rate_scale: multiplier on equation (3) (paper: 1.0).
        cooldown_steps: the last this many of the `train_steps` updates bring the learning rate
            linearly down to about 0 (`training.schedules`; 0: none, as in the paper); with
            `early_stopping_patience`, patience running out at update S starts it there instead,
            and the run stops at S + `cooldown_steps`.
        clip_norm: clip the global gradient norm to this (0: no clipping, as in the paper).
        accumulation_steps: micro-batches per update (1: none).
        precision: "float32", "mixed_bfloat16" or "mixed_float16" (with dynamic loss scaling);
            or "auto", which `distribution.resolve_precision` turns into one of them for the
            devices used before the model is built (on a CPU with AVX512_BF16 or AMX, by timing
            its bfloat16 and float32 matrix products).
        xla: compile the forward and backward pass with XLA.
        checkpoint_every_steps: save every this many updates (0: never by count).
        checkpoint_every_minutes: also save when this much time passed since the last save
            (0: never by time; paper: 10).
        keep_checkpoints: how many recent checkpoints to keep.
        eval_every_steps: evaluate on the dev set every this many updates (0: only at the end).
        early_stopping_patience: stop after this many evaluations without a better dev
            `best_checkpoint_metric` (0: never), after a cool-down with `cooldown_steps`.
        keep_best_checkpoints: keep the K best checkpoints by `best_checkpoint_metric` in
            MODEL_DIR/best (0: none); the end of the run then averages the best
            `average_last` of them instead of the last ones, and translation and export use
            the best one when nothing is averaged (fairseq `--keep-best-checkpoints`).
        best_checkpoint_metric: the dev metric that ranks checkpoints and early stopping
            watches, a name of `keras_transformer.dev_metrics`: "bleu" (higher is better),
            "loss" (the dev loss, lower is better) or "f1" (a parsing run's labelled EVALB F1
            of its dev trees, section 6.3; higher is better).
        max_train_minutes: stop cleanly (and checkpoint) after this much training time in
            this process (0: no limit).
        log_every_steps: console lines and TensorBoard scalars every this many updates.
        average_last: after training, average the last this many checkpoints (section 6.1;
            paper: 5 base, 20 big; 0: none), or the best this many with
            `keep_best_checkpoints`. Fewer are averaged, with a line that says so, when the
            run made fewer. Done by the entry point.
        seed: seeds the initial weights, dropout and the data order (in [0, 2**32)).
        ema_decay: keep an exponential moving average of the weights with this decay, in [0, 1)
            (Marian's exponential smoothing, e.g. 0.9999; 0: none). Dev evaluation, translation,
            export and averaging then use the average (`keras_transformer.training.ema`).
        rdrop_alpha: R-Drop (Liang et al., 2021): each batch twice through the model, with alpha
            times the symmetric KL of the two output distributions added to the loss (0: off;
            the paper used 5 for translation). Each update then costs about two.

    Every number is checked on construction, NaN and infinity included (`check_finite`).
    """

    train_steps: int = 100_000
    warmup_steps: int = 4000
    learning_rate_scale: float = 1.0
    cooldown_steps: int = 0
    clip_norm: float = 0.0
    accumulation_steps: int = 1
    precision: str = "float32"
    xla: bool = False
    checkpoint_every_steps: int = 1000
    checkpoint_every_minutes: float = 0.0
    keep_checkpoints: int = 5
    eval_every_steps: int = 1000
    early_stopping_patience: int = 0
    keep_best_checkpoints: int = 0
    best_checkpoint_metric: str = "bleu"
    max_train_minutes: float = 0.0
    log_every_steps: int = 100
    average_last: int = 0
    seed: int = 0
    ema_decay: float = 0.0
    rdrop_alpha: float = 0.0

    def __post_init__(self):
        check_finite(self, ("learning_rate_scale", "clip_norm", "checkpoint_every_minutes", "max_train_minutes",
                            "ema_decay", "rdrop_alpha"))
        check_seed(self.seed)
        for name in ("train_steps", "warmup_steps", "accumulation_steps", "keep_checkpoints",
                     "log_every_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("checkpoint_every_steps", "checkpoint_every_minutes", "eval_every_steps",
                     "early_stopping_patience", "max_train_minutes", "clip_norm", "average_last",
                     "keep_best_checkpoints", "cooldown_steps", "rdrop_alpha"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1) (0: no moving average), got {self.ema_decay}")
        if self.cooldown_steps > self.train_steps:
            raise ValueError(f"cooldown_steps ({self.cooldown_steps}) must be at most train_steps "
                             f"({self.train_steps})")
        if self.learning_rate_scale <= 0:
            raise ValueError(f"learning_rate_scale must be positive, got {self.learning_rate_scale}")
        if self.precision not in PRECISIONS + ("auto",):
            raise ValueError(f"precision must be \"auto\" or one of {PRECISIONS}, got {self.precision!r}")
        dev_metrics.lookup(self.best_checkpoint_metric)  # "best_checkpoint_metric must be one of bleu, ..."
        kept, flag = ((self.keep_best_checkpoints, "keep_best_checkpoints") if self.keep_best_checkpoints
                      else (self.keep_checkpoints, "keep_checkpoints"))
        if self.average_last > kept:
            raise ValueError(f"average_last ({self.average_last}) needs {flag} >= it, got {flag}={kept}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Table3Row:
    """One row of Table 3: its changes to the base model and the paper's figures.

    Attributes:
        overrides: the row's values that differ from the base model's.
        paper_params_millions: the paper's parameter count (x 10^6), where it gives one.
        paper_ppl: the paper's perplexity per wordpiece on the dev set (newstest2013).
        paper_bleu: the paper's BLEU on the same dev set.
    """

    overrides: dict
    paper_params_millions: Optional[float]
    paper_ppl: Optional[float] = None
    paper_bleu: Optional[float] = None


# Table 3 of the paper, row by row, as changes to the base model. The paper lists
# no parameter count for rows (A), (D) and (E): their counts equal the base's (or
# differ by a position table), so they are given as the base's 65M here.
# Then the paper's dev perplexity (per wordpiece) and BLEU on newstest2013, as printed
# (the big model trained 300k updates, the others 100k).
TABLE3: dict[str, Table3Row] = {
    "base": Table3Row({}, 65, 4.92, 25.8),
    "A/h=1": Table3Row(dict(num_heads=1, d_k=512, d_v=512), 65, 5.29, 24.9),
    "A/h=4": Table3Row(dict(num_heads=4, d_k=128, d_v=128), 65, 5.00, 25.5),
    "A/h=16": Table3Row(dict(num_heads=16, d_k=32, d_v=32), 65, 4.91, 25.8),
    "A/h=32": Table3Row(dict(num_heads=32, d_k=16, d_v=16), 65, 5.01, 25.4),
    "B/d_k=16": Table3Row(dict(d_k=16), 58, 5.16, 25.1),
    "B/d_k=32": Table3Row(dict(d_k=32), 60, 5.01, 25.4),
    "C/N=2": Table3Row(dict(num_layers=2), 36, 6.11, 23.7),
    "C/N=4": Table3Row(dict(num_layers=4), 50, 5.19, 25.3),
    "C/N=8": Table3Row(dict(num_layers=8), 80, 4.88, 25.5),
    "C/d_model=256": Table3Row(dict(d_model=256, d_k=32, d_v=32), 28, 5.75, 24.5),
    "C/d_model=1024": Table3Row(dict(d_model=1024, d_k=128, d_v=128), 168, 4.66, 26.0),
    "C/d_ff=1024": Table3Row(dict(d_ff=1024), 53, 5.12, 25.4),
    "C/d_ff=4096": Table3Row(dict(d_ff=4096), 90, 4.75, 26.2),
    "D/P_drop=0.0": Table3Row(dict(dropout_rate=0.0), None, 5.77, 24.6),
    "D/P_drop=0.2": Table3Row(dict(dropout_rate=0.2), None, 4.95, 25.5),
    "D/eps_ls=0.0": Table3Row(dict(label_smoothing=0.0), None, 4.67, 25.3),
    "D/eps_ls=0.2": Table3Row(dict(label_smoothing=0.2), None, 5.47, 25.7),
    "E/learned": Table3Row(dict(positional_encoding="learned"), None, 4.92, 25.7),
    "big": Table3Row({}, 213, 4.33, 26.4),
}
