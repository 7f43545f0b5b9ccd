"""The flags the commands share, defined once, and the frozen configs they parse into.

    from keras_transformer.tasks import flags as task_flags
    task_flags.define_decoding_flags()          # --beam_size --alpha --max_extra_length
    ...
    decoding = task_flags.decoding_config()     # keras_transformer.config.DecodingConfig

Only entry points call these (the library never reads flags): training defines the
decoding flags with the prefix "eval_" (its dev translations), translation and export
without one; training and `python -m keras_transformer.pipelines` share the data flags. Invalid values end
as one `error:` line (absl's bounds, or the configs' `ValueError`).
"""

from __future__ import annotations

from typing import Optional

from absl import flags

from keras_transformer.pipelines import linearized_trees
from keras_transformer.pipelines import sources
from keras_transformer.tasks import registry as task_registry

FLAGS = flags.FLAGS

_DECODING_HELP = {
    "beam_size": "Beam size (paper: 4 for translation, section 6.1; 21 for parsing, 6.3); 1 = greedy search.",
    "alpha": "Length penalty exponent alpha (paper: 0.6 for translation; 0.3 for parsing).",
    "max_extra_length": "At most source tokens (EOS included) + this many output tokens (paper: 50 for "
                        "translation; 300 for parsing).",
    "tree_constraint": "Parsing: decode only linearized trees over the input's words (on by default for a "
                       "parsing model; its vocabulary must hold whole bracket pieces).",
}
DECODING_FLAGS = tuple(_DECODING_HELP)  # what `define_decoding_flags` defines (without a prefix)
# Flags that apply to a training directory only, not to an export (whose decoding is built in).
MODEL_DIR_ONLY = DECODING_FLAGS + ("checkpoint",)


def define_decoding_flags(prefix: str = "", defaults=None) -> None:
    """--{prefix}beam_size, --{prefix}alpha, --{prefix}max_extra_length, --{prefix}tree_constraint
    (`DecodingConfig`'s fields but n_best),
    whose defaults are `defaults` (a `DecodingConfig`; None: section 6.1's, 4, 0.6 and 50)."""
    from keras_transformer.config import MAX_EXTRA_LENGTH, DecodingConfig  # pylint: disable=g-import-not-at-top

    defaults = defaults or DecodingConfig()
    flags.DEFINE_integer(f"{prefix}beam_size", defaults.beam_size, _DECODING_HELP["beam_size"], lower_bound=1)
    flags.DEFINE_float(f"{prefix}alpha", defaults.alpha, _DECODING_HELP["alpha"], lower_bound=0.0)
    flags.DEFINE_integer(f"{prefix}max_extra_length", defaults.max_extra_length, _DECODING_HELP["max_extra_length"],
                         lower_bound=0, upper_bound=MAX_EXTRA_LENGTH)
    flags.DEFINE_bool(f"{prefix}tree_constraint", defaults.tree_constraint, _DECODING_HELP["tree_constraint"])


def decoding_flag_names(prefix: str = "") -> tuple[str, ...]:
    return tuple(f"{prefix}{name}" for name in _DECODING_HELP)


def decoding_config(prefix: str = "", base=None):
    """The `DecodingConfig` of the flags defined by `define_decoding_flags(prefix)`; with `base` (a
    `DecodingConfig`), `base` with only the flags given on the command line changed."""
    import dataclasses  # pylint: disable=g-import-not-at-top

    from keras_transformer.config import DecodingConfig  # pylint: disable=g-import-not-at-top

    values = {name: FLAGS[f"{prefix}{name}"].value for name in _DECODING_HELP
              if base is None or FLAGS[f"{prefix}{name}"].present}
    return DecodingConfig(**values) if base is None else dataclasses.replace(base, **values)


_SAMPLING_HELP = {
    "sampling_topk": "Sample instead of searching: draw each token among the K most probable; 0 = the whole "
                     "vocabulary, 1 = greedy (CTranslate2's sampling_topk). One translation per sentence.",
    "sampling_topp": "Sample among the smallest set of most probable tokens whose probability reaches P "
                     "(nucleus sampling), in (0, 1]; 1 = no cut.",
    "sampling_temperature": "Sample from p ** (1 / T), T >= 0; 0 = the most probable token (greedy search).",
}


def define_sampling_flags() -> None:
    """--sampling_topk, --sampling_topp, --sampling_temperature and --seed (`SamplingConfig`)."""
    from keras_transformer.config import SamplingConfig  # pylint: disable=g-import-not-at-top

    defaults = SamplingConfig()
    flags.DEFINE_integer("sampling_topk", defaults.topk, _SAMPLING_HELP["sampling_topk"])
    flags.DEFINE_float("sampling_topp", defaults.topp, _SAMPLING_HELP["sampling_topp"])
    flags.DEFINE_float("sampling_temperature", defaults.temperature, _SAMPLING_HELP["sampling_temperature"])
    flags.DEFINE_integer("seed", defaults.seed, "With a --sampling_* flag: the random seed, in [0, 2**32); the "
                         "same seed, input and --batch_size give the same translations.")


def sampling_config():
    """The `SamplingConfig` of the flags of `define_sampling_flags`, None when no --sampling_* flag is
    given (search, not sampling). A one-line `ValueError` for a value out of range, or --seed alone."""
    from keras_transformer.config import SamplingConfig  # pylint: disable=g-import-not-at-top

    if not any(FLAGS[name].present for name in _SAMPLING_HELP):
        if FLAGS["seed"].present:
            raise ValueError("--seed: only with --sampling_topk, --sampling_topp or --sampling_temperature")
        return None
    values = {name[len("sampling_"):]: FLAGS[name].value for name in _SAMPLING_HELP}
    try:
        return SamplingConfig(**values, seed=FLAGS.seed)
    except ValueError as error:  # "sampling topk must ..." -> "--sampling_topk must ..."
        message = str(error).replace("sampling ", "--sampling_").replace("seed must", "--seed must")
        raise ValueError(message) from None


def check_model_dir_only(why: str) -> None:
    """Raises a one-line `ValueError` naming the `MODEL_DIR_ONLY` flags given (`why`: what is used
    instead, e.g. "an export has its decoding settings built in")."""
    given = [f"--{name}" for name in MODEL_DIR_ONLY if FLAGS[name].present]
    if given:
        raise ValueError(f"{', '.join(given)}: only with --model_dir ({why})")


def define_checkpoint_flag(help_text: str) -> None:
    """--checkpoint, a checkpoint prefix (e.g. MODEL_DIR/checkpoints/ckpt-1000) to read instead of the
    run's default one: one that names no checkpoint is refused as the flags are parsed, before
    TensorFlow starts (`keras_transformer.run_dir.layout.checkpoint_prefix_problem`)."""
    from keras_transformer.run_dir import layout  # pylint: disable=g-import-not-at-top  (no TensorFlow)

    def check(prefix):
        problem = prefix is not None and layout.checkpoint_prefix_problem(prefix)
        if problem:
            raise flags.ValidationError(problem)  # absl: "flag --checkpoint=PREFIX: <problem>"
        return True

    flags.DEFINE_string("checkpoint", None, help_text)
    flags.register_validator("checkpoint", check)


def define_ensemble_flag(more_help: str = "") -> None:
    """--ensemble_model_dirs: more training directories decoded with --model_dir's model as one
    ensemble (`keras_transformer.decoding.ensemble`); `more_help` ends its help (what a command
    adds, e.g. parsing's tagger)."""
    help_text = ("Comma-separated training directories of the same vocabulary as --model_dir: decode the ensemble "
                 "of their models and --model_dir's (each step the log of the mean of their probabilities); each "
                 "uses its averaged, else best, else latest checkpoint (--checkpoint applies to --model_dir only).")
    flags.DEFINE_string("ensemble_model_dirs", None, f"{help_text} {more_help}".strip())


def ensemble_model_dirs(model_dir: Optional[str]) -> list[str]:
    """The folders of --ensemble_model_dirs ([] without it), refused with one line before TensorFlow
    starts when one is missing or reads or writes otherwise than `model_dir`
    (`keras_transformer.export.ensemble_members.check_members`: vocabulary, a parsing run's source tags, tagger and
    tree targets), or when there is no `model_dir` (an export, a baseline)."""
    from keras_transformer.export import ensemble_members  # pylint: disable=g-import-not-at-top  (no TensorFlow)

    if not model_dir:
        if FLAGS.ensemble_model_dirs is not None:
            raise ValueError("--ensemble_model_dirs: only with --model_dir (an ensemble is of training directories; "
                             "an export holds the one it was exported with: python -m keras_transformer.export --ensemble_model_dirs)")
        return []
    dirs = ensemble_members.parse_dirs(FLAGS.ensemble_model_dirs)
    if dirs:
        ensemble_members.check_members(model_dir, dirs)
    return dirs


def define_model_size_flags(num_layers=None, d_model=None, d_ff=None, num_heads=None, stacks=False) -> None:
    """--num_layers --d_model --d_ff --num_heads (section 3, Table 3), and with `stacks`
    --num_encoder_layers --num_decoder_layers (`define_depth_flags`). Training leaves the defaults
    None (the preset's values) and takes each stack's depth; the benchmarks give a model size of
    their own, one depth for both stacks."""
    define_depth_flags(num_layers, stacks=stacks)
    flags.DEFINE_integer("d_model", d_model, "d_model, the width of every sub-layer output (unset: the preset's).")
    flags.DEFINE_integer("d_ff", d_ff, "d_ff, the feed-forward inner width (unset: the preset's).")
    flags.DEFINE_integer("num_heads", num_heads, "h, the attention heads (unset: the preset's).")


def define_depth_flags(num_layers=None, stacks=True) -> None:
    """--num_layers (both stacks), and with `stacks` --num_encoder_layers and --num_decoder_layers:
    a stack's own depth, when given, wins over --num_layers for that stack
    (`TransformerConfig.encoder_depth`, `decoder_depth`); `depth_flags` reads them."""
    flags.DEFINE_integer("num_layers", num_layers, "N, the layers of the encoder and of the decoder (unset: the "
                         "preset's)" + ("; --num_encoder_layers or --num_decoder_layers, when given, wins for its "
                                        "stack." if stacks else "."))
    if not stacks:
        return
    flags.DEFINE_integer("num_encoder_layers", None, "The encoder's layers (unset: --num_layers). Translation runs "
                         "them once per sentence.", lower_bound=1)
    flags.DEFINE_integer("num_decoder_layers", None, "The decoder's layers (unset: --num_layers). A search runs them "
                         "once per output token: a shallow decoder under a deep encoder decodes faster (Kasai et al. "
                         "2021, \"Deep Encoder, Shallow Decoder\").", lower_bound=1)


def depth_flags() -> dict:
    """The depth flags (`define_depth_flags`) that were given (not None), as `TransformerConfig`
    fields: {"num_layers": 6, "num_decoder_layers": 1}."""
    names = ("num_layers", "num_encoder_layers", "num_decoder_layers")
    return {name: FLAGS[name].value for name in names if name in FLAGS and FLAGS[name].value is not None}


def define_data_flags() -> None:
    """The flags of `keras_transformer.pipelines.data_config.DataConfig` (section 5.1), and --seed."""
    short_names = [task_registry.dataset_label(name)  # the registries' (`sources.register_source`, `register_task`)
                   for name in sources.short_names()]
    flags.DEFINE_string("dataset", "embedded", f"{', '.join(short_names)}, or a full pipelines.sources name "
                        "such as multi30k_en_de.")
    flags.DEFINE_string("source_lang", "en", "Source language (multi30k, wmt14).")
    flags.DEFINE_string("target_lang", "de", "Target language (multi30k, wmt14).")
    flags.DEFINE_string("data_dir", None, "Where the data set's files are: multi30k: the original .gz "
                        "files; wmt14: the tensorflow-datasets folder; ptb: treebank.zip (NLTK's sample) or "
                        "the WSJ .mrg files; files: the folder --source_file and "
                        "--target_file are relative to.")
    flags.DEFINE_string("tfds_dir", None, "Where tensorflow-datasets prepares multi30k (default ~/tensorflow_datasets).")
    flags.DEFINE_string("source_file", None, "files: source text, '{split}' replaced by train/validation/test.")
    flags.DEFINE_string("target_file", None, "files: target text, '{split}' replaced likewise.")
    flags.DEFINE_enum("tokenizer", "bpe", ["bpe", "unigram", "wordpiece"], "Subword model, trained on the "
                      "training data when none is saved yet (paper: BPE).")
    flags.DEFINE_integer("vocab_size", 37000, "Vocabulary size, an upper bound, special ids included "
                         "(paper: about 37,000 shared).")
    flags.DEFINE_boolean("shared_vocab", True, "One vocabulary and embedding for both sides (section 3.4).")
    flags.DEFINE_boolean("lowercase", False, "Lowercase text before tokenizing, both sides (Unicode "
                         "lowercase, as lowercased references are written: German ß stays ß).")
    flags.DEFINE_boolean("split_by_script", True, "SentencePiece: no subword joins characters of two Unicode "
                         "scripts (punctuation is one); false for parse trees, so that '(NP' is one piece.")
    flags.DEFINE_integer("batch_tokens", 25000, "Source (and target) token budget of one batch, padding "
                         "included; in training, of one update over all replicas and micro-batches "
                         "(paper: about 25,000).")
    flags.DEFINE_integer("max_length", 256, "Longest pair (tokens incl. EOS, either side) kept; in training "
                         "also the model's max_length.")
    flags.DEFINE_integer("seed", 0, "The run's seed: the embedded corpus, the tokenizer's sampling, the data "
                         "order and, in training, the initial weights and dropout.")
    flags.DEFINE_multi_string("train_files", [], "Training corpora instead of --dataset's train split (dev and "
                              "test still come from --dataset), mixed by weight: [NAME:]CORPUS[:WEIGHT], comma-"
                              "separated or repeated; CORPUS is a path pattern with a {SOURCE,TARGET} pair "
                              "(globs select shards), e.g. web:data/web-*.{en,de}.gz:0.3, or a registered data "
                              "set, e.g. embedded:0.7 (pipelines/corpora.py).")
    flags.DEFINE_enum("cache", "auto", ["auto", "memory", "disk", "none"], "Where tokenized training pairs are "
                      "kept between epochs: memory (fastest, grows with the corpus), disk (a tf.data cache in "
                      "MODEL_DIR/cache), none (re-read each epoch; flat memory); auto: memory up to 256 MiB "
                      "of training text, else none.")
    flags.DEFINE_enum("source_tags", "none", ["none", "predicted", "gold"], "ptb: each source word followed by "
                      "its part-of-speech tag as a token <TAG> (Vinyals et al. 2015): predicted by a tagger trained "
                      "on the training split (saved as MODEL_DIR/tagger.json; parse tags raw text with it), or the "
                      "treebank's gold tags (an upper bound only). The targets stay trees over the words.")
    flags.DEFINE_enum("tree_targets", "words", list(linearized_trees.TREE_TARGETS), "ptb: what stands for a word in the target trees: the word "
                        "itself (words), or the placeholder XX (placeholders, Vinyals et al. 2015; one piece of the "
                        "tokenizer, one token a word, the input's words put back in the output trees).")
    flags.DEFINE_integer("shuffle_buffer", 200_000, "Training pairs shuffled at a time, per corpus (held in "
                         "memory whatever --cache is).", lower_bound=1)


def data_config(dev_split: str = "validation", bpe_dropout: float = 0.0):
    """The `DataConfig` of the flags defined by `define_data_flags` (training adds its --bpe_dropout)."""
    from keras_transformer.pipelines import corpora  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import data_config as data_config_lib  # pylint: disable=g-import-not-at-top

    return data_config_lib.DataConfig(
        dataset=data_config_lib.dataset_name(FLAGS.dataset, FLAGS.source_lang, FLAGS.target_lang),
        data_dir=FLAGS.data_dir, tfds_dir=FLAGS.tfds_dir, source_file=FLAGS.source_file,
        target_file=FLAGS.target_file, dev_split=dev_split, tokenizer=FLAGS.tokenizer,
        vocab_size=FLAGS.vocab_size, shared_vocab=FLAGS.shared_vocab, lowercase=FLAGS.lowercase,
        split_by_script=FLAGS.split_by_script,
        batch_tokens=FLAGS.batch_tokens, max_length=FLAGS.max_length, seed=FLAGS.seed,
        train_files=corpora.parse_train_files(FLAGS.train_files), cache=FLAGS.cache,
        shuffle_buffer=FLAGS.shuffle_buffer, source_tags=FLAGS.source_tags, tree_targets=FLAGS.tree_targets,
        bpe_dropout=bpe_dropout)
