"""Trains a Transformer: `python -m keras_transformer.train --flagfile=configs/demo.flags`.

The entry point of section 5 of "Attention Is All You Need": it reads the flags (and
only here), turns them into frozen dataclasses (`TransformerConfig`, `TrainingConfig`,
`EvalConfig`, `DataConfig`) and wires `pipelines/` (text -> id batches) to
`keras_transformer.trainer` (the custom loop) and `keras_transformer.evaluation`
(dev loss, perplexity, sacreBLEU).

    python -m keras_transformer.train --flagfile=configs/demo.flags --model_dir=/tmp/demo
    python -m keras_transformer.train --flagfile=configs/multi30k_en_de.flags \\
        --data_dir=../shared/data/multi30k --model_dir=runs/multi30k

Running the same command again resumes from the latest checkpoint (model, optimizer,
step, learning-rate position); the tokenizer saved in MODEL_DIR/tokenizer on the first
run is reused, never retrained, and the model flags must match MODEL_DIR/model_config.json.
The data order after a resume is a fresh deterministic shuffle seeded by (seed, step),
not the exact continuation of the interrupted epoch.

Distribution (section 5.2: one machine, 8 P100 GPUs): `--num_gpus=8` mirrors over 8
local GPUs; `--cpu_replicas=N` over N logical CPU devices; with `TF_CONFIG` set,
`MultiWorkerMirroredStrategy` over several machines. `--batch_tokens` is the budget of
one update over all replicas; `--accumulation_steps=k` splits it into k micro-batches.

Bad flags end with one line `error: ...` and exit code 2; a NaN or infinite loss ends
with `error: loss became NaN at step N; the last good checkpoint is ckpt-M` and exit code 1.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

from absl import app, flags, logging

from keras_transformer import cli

FLAGS = flags.FLAGS
DATASET_KINDS = ("embedded", "multi30k", "wmt14", "files")

# Run ---------------------------------------------------------------------------------------
flags.DEFINE_string("model_dir", None, "Training directory: config, tokenizer, checkpoints, summaries.")
flags.DEFINE_integer("seed", 0, "Seed of the initial weights, dropout, the data order and the embedded corpus.")
# Model (section 3, Table 3) --------------------------------------------------------------------
flags.DEFINE_string("preset", "base", "Model preset: tiny, base, big or a Table 3 row such as 'C/N=4'.")
flags.DEFINE_integer("num_layers", None, "Override N, the layers of the encoder and of the decoder.")
flags.DEFINE_integer("d_model", None, "Override d_model.")
flags.DEFINE_integer("d_ff", None, "Override the feed-forward inner width d_ff.")
flags.DEFINE_integer("num_heads", None, "Override h, the attention heads.")
flags.DEFINE_float("dropout_rate", None, "Override P_drop (section 5.4; base 0.1, big 0.3).")
flags.DEFINE_float("attention_dropout_rate", None, "Override the dropout on attention weights (paper: 0).")
flags.DEFINE_float("label_smoothing", None, "Override epsilon_ls (section 5.4; paper 0.1).")
flags.DEFINE_enum("positional_encoding", None, ["sinusoidal", "learned"], "Override the position encoding.")
flags.DEFINE_enum("layer_norm", None, ["post", "pre"], "Override the LayerNorm placement (paper: post).")
flags.DEFINE_integer("max_length", 256, "Longest pair (tokens incl. EOS, either side) trained on; "
                     "also the model's max_length.")
# Data (section 5.1) ---------------------------------------------------------------------------
flags.DEFINE_string("dataset", "embedded", "embedded, multi30k, wmt14, files, or a full "
                    "pipelines.sources name such as multi30k_en_de.")
flags.DEFINE_string("source_lang", "en", "Source language (multi30k, wmt14).")
flags.DEFINE_string("target_lang", "de", "Target language (multi30k, wmt14).")
flags.DEFINE_string("data_dir", None, "multi30k: folder of the original .gz files; wmt14: the "
                    "tensorflow-datasets folder; files: folder the file names are relative to.")
flags.DEFINE_string("tfds_dir", None, "Where tensorflow-datasets prepares multi30k (default ~/tensorflow_datasets).")
flags.DEFINE_string("source_file", None, "files: source text, '{split}' replaced by train/validation/test.")
flags.DEFINE_string("target_file", None, "files: target text, '{split}' replaced likewise.")
flags.DEFINE_string("dev_split", "validation", "Split evaluated during training (never test when tuning).")
flags.DEFINE_enum("tokenizer", "bpe", ["bpe", "unigram", "wordpiece"], "Subword model, trained on the "
                  "training data on the first run (paper: BPE).")
flags.DEFINE_integer("vocab_size", 37000, "Vocabulary size, an upper bound (paper: about 37,000 shared).")
flags.DEFINE_boolean("shared_vocab", True, "One vocabulary and embedding for both sides (section 3.4).")
flags.DEFINE_integer("batch_tokens", 25000, "Source (and target) token budget of one update, padding "
                     "included, over all replicas and micro-batches (paper: about 25,000).")
# Optimisation (section 5.3) -------------------------------------------------------------------
flags.DEFINE_integer("train_steps", 100000, "Updates in total (paper: 100k base, 300k big).")
flags.DEFINE_integer("warmup_steps", 4000, "warmup_steps of equation (3) (paper: 4000).")
flags.DEFINE_float("learning_rate_scale", 1.0, "Multiplier on equation (3) (paper: 1).")
flags.DEFINE_float("clip_norm", 0.0, "Clip the global gradient norm (0: none, as in the paper).")
flags.DEFINE_integer("accumulation_steps", 1, "Micro-batches per update (gradient accumulation).")
flags.DEFINE_enum("precision", "auto", ["auto", "float32", "mixed_bfloat16", "mixed_float16"],
                  "Compute precision; mixed_float16 adds dynamic loss scaling. auto: mixed_bfloat16 on "
                  "GPUs of compute capability >= 8.0 and CPUs with AVX512_BF16/AMX, mixed_float16 on "
                  "7.x GPUs, else float32 (the paper's).")
flags.DEFINE_boolean("xla", False, "Compile the forward and backward pass with XLA.")
flags.DEFINE_float("max_train_minutes", 0.0, "Stop cleanly, with a checkpoint, after this much training (0: none).")
# Distribution (section 5.2) -------------------------------------------------------------------
flags.DEFINE_integer("num_gpus", -1, "MirroredStrategy over this many local GPUs (-1: all; the paper: 8).")
flags.DEFINE_integer("cpu_replicas", 0, "MirroredStrategy over this many logical CPU devices (0/1: none).")
# Checkpoints (section 6.1) ----------------------------------------------------------------------
flags.DEFINE_integer("checkpoint_every_steps", 1000, "Save every this many updates (0: not by count).")
flags.DEFINE_float("checkpoint_every_minutes", 0.0, "Also save every this many minutes (paper: 10).")
flags.DEFINE_integer("keep_checkpoints", 5, "Checkpoints kept (at least --average_checkpoints).")
flags.DEFINE_integer("average_checkpoints", 0, "At the end, average the last K checkpoints into "
                     "MODEL_DIR/averaged (paper: 5 base, 20 big; 0: none).")
# Evaluation (section 6.1) -----------------------------------------------------------------------
flags.DEFINE_integer("eval_every_steps", 1000, "Dev loss, perplexity and BLEU every this many updates (0: at the end).")
flags.DEFINE_integer("eval_beam_size", 4, "Beam size of dev decoding; 1 = greedy (paper: 4).")
flags.DEFINE_float("eval_alpha", 0.6, "Length penalty alpha (paper: 0.6).")
flags.DEFINE_integer("eval_max_sentences", 0, "Translate only this many dev sentences for BLEU (0: all; -1: no BLEU).")
flags.DEFINE_integer("early_stopping_patience", 0, "Stop after this many evaluations without a better dev BLEU (0: never).")
flags.DEFINE_boolean("evaluate_only", False, "Do not train: translate --dev_split with the averaged "
                     "checkpoint (else the latest), print loss, BLEU and signature, write the translations.")
flags.DEFINE_integer("log_every_steps", 100, "Console lines and TensorBoard scalars every this many updates.")

flags.mark_flag_as_required("model_dir")
flags.register_multi_flags_validator(
    ["batch_tokens", "max_length"], lambda f: f["batch_tokens"] >= f["max_length"],
    "--batch_tokens is smaller than one sentence: it must be at least --max_length, the longest allowed pair")
flags.register_multi_flags_validator(
    ["keep_checkpoints", "average_checkpoints"], lambda f: f["keep_checkpoints"] >= f["average_checkpoints"],
    "--average_checkpoints needs --keep_checkpoints at least as large")


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Where the sentence pairs come from and how they are tokenized and batched (section 5.1)."""

    dataset: str = "embedded"
    data_dir: str | None = None
    tfds_dir: str | None = None
    source_file: str | None = None
    target_file: str | None = None
    dev_split: str = "validation"
    tokenizer: str = "bpe"
    vocab_size: int = 37000
    shared_vocab: bool = True
    batch_tokens: int = 25000
    max_length: int = 256
    seed: int = 0

    def source_kwargs(self) -> dict:
        """Keyword arguments of `pipelines.sources.load_pairs` for this data set."""
        kind = self.dataset.split("_")[0]
        if kind == "files":
            join = (lambda p: os.path.join(self.data_dir, p)) if self.data_dir else (lambda p: p)
            return dict(source_file=join(self.source_file), target_file=join(self.target_file))
        if kind == "multi30k":
            return dict(manual_dir=self.data_dir, data_dir=self.tfds_dir)
        if kind == "wmt14":
            return dict(data_dir=self.data_dir or self.tfds_dir)
        return dict(seed=self.seed)


def dataset_name(dataset: str, source_lang: str, target_lang: str) -> str:
    """--dataset=multi30k with en/de -> "multi30k_en_de"; full names pass through."""
    from pipelines import sources  # pylint: disable=g-import-not-at-top

    name = f"{dataset}_{source_lang}_{target_lang}" if dataset in ("multi30k", "wmt14") else dataset
    if name not in sources.DATASETS:
        raise ValueError(f"unknown --dataset {name!r}; choose {', '.join(DATASET_KINDS)} or one of "
                         f"{', '.join(sources.DATASETS)}")
    return name


def data_config_from_flags() -> DataConfig:
    if FLAGS.data_dir and not os.path.isdir(FLAGS.data_dir):
        raise FileNotFoundError(f"--data_dir={FLAGS.data_dir}: no such folder")
    name = dataset_name(FLAGS.dataset, FLAGS.source_lang, FLAGS.target_lang)
    if name.startswith("multi30k") and not FLAGS.data_dir:
        raise ValueError("--dataset=multi30k needs --data_dir, the folder of the original Multi30k .gz files")
    return DataConfig(
        dataset=name, data_dir=FLAGS.data_dir, tfds_dir=FLAGS.tfds_dir, source_file=FLAGS.source_file,
        target_file=FLAGS.target_file, dev_split=FLAGS.dev_split, tokenizer=FLAGS.tokenizer,
        vocab_size=FLAGS.vocab_size, shared_vocab=FLAGS.shared_vocab, batch_tokens=FLAGS.batch_tokens,
        max_length=FLAGS.max_length, seed=FLAGS.seed)


def model_config_from_flags(vocab_size: int, target_vocab_size: int | None = None):
    """The preset plus the override flags that were given, sized to the trained vocabulary."""
    from keras_transformer.config import TransformerConfig  # pylint: disable=g-import-not-at-top

    names = ("num_layers", "d_model", "d_ff", "num_heads", "dropout_rate", "attention_dropout_rate",
             "label_smoothing", "positional_encoding", "layer_norm")
    overrides = {n: getattr(FLAGS, n) for n in names if getattr(FLAGS, n) is not None}
    return TransformerConfig.preset(
        FLAGS.preset, max_length=FLAGS.max_length, vocab_size=vocab_size, share_embeddings=FLAGS.shared_vocab,
        target_vocab_size=None if FLAGS.shared_vocab else target_vocab_size, **overrides)


def training_config_from_flags():
    from keras_transformer.trainer import TrainingConfig  # pylint: disable=g-import-not-at-top

    return TrainingConfig(
        train_steps=FLAGS.train_steps, warmup_steps=FLAGS.warmup_steps,
        learning_rate_scale=FLAGS.learning_rate_scale, clip_norm=FLAGS.clip_norm,
        accumulation_steps=FLAGS.accumulation_steps, xla=FLAGS.xla,
        precision="float32" if FLAGS.precision == "auto" else FLAGS.precision,  # "auto": resolved in main
        checkpoint_every_steps=FLAGS.checkpoint_every_steps,
        checkpoint_every_minutes=FLAGS.checkpoint_every_minutes, keep_checkpoints=FLAGS.keep_checkpoints,
        eval_every_steps=FLAGS.eval_every_steps, early_stopping_patience=FLAGS.early_stopping_patience,
        max_train_minutes=FLAGS.max_train_minutes, log_every_steps=FLAGS.log_every_steps,
        average_last=FLAGS.average_checkpoints, seed=FLAGS.seed)


def decoding_config_from_flags():
    from keras_transformer.evaluation import EvalConfig  # pylint: disable=g-import-not-at-top

    return EvalConfig(beam_size=FLAGS.eval_beam_size, alpha=FLAGS.eval_alpha,
                          max_sentences=max(FLAGS.eval_max_sentences, 0))


def check_batch_tokens(batch_tokens: int, accumulation_steps: int, replicas: int, max_length: int) -> None:
    """Each replica's micro-batch must hold the longest allowed pair."""
    per_micro_batch = batch_tokens // (accumulation_steps * replicas)
    if per_micro_batch < max_length:
        raise ValueError(
            f"--batch_tokens={batch_tokens} is smaller than one sentence: split over {replicas} replica(s) "
            f"and {accumulation_steps} micro-batch(es) it leaves {per_micro_batch} tokens, but pairs of up to "
            f"--max_length={max_length} tokens are allowed")


def check_resume(model_dir: str, config) -> None:
    """The command's model must be the saved one: a mismatch is a one-line error."""
    from keras_transformer import model_dir as model_dir_lib  # pylint: disable=g-import-not-at-top

    if not os.path.isfile(os.path.join(model_dir, model_dir_lib.CONFIG_FILE)):
        return
    saved = model_dir_lib.read_config(model_dir).to_dict()
    wanted = config.to_dict()
    diff = [f"{k}={saved[k]!r} (saved) vs {wanted[k]!r} (flags)" for k in sorted(saved) if saved[k] != wanted.get(k)]
    if diff:
        raise ValueError(f"{model_dir} holds a different model: {'; '.join(diff)}; use another --model_dir")


def load_or_train_tokenizers(model_dir: str, data: DataConfig, save: bool):
    """MODEL_DIR/tokenizer if present (a resumed run: ids stay stable), else trained and saved."""
    from keras_transformer import model_dir as model_dir_lib  # pylint: disable=g-import-not-at-top
    from pipelines import sources, tokenizers  # pylint: disable=g-import-not-at-top

    directory = os.path.join(model_dir, model_dir_lib.TOKENIZER_DIR)
    # model_config.json is written after the tokenizer: its presence means the tokenizer is complete.
    if os.path.isfile(os.path.join(model_dir, model_dir_lib.CONFIG_FILE)) and os.path.isdir(directory):
        return tokenizers.load_pair(directory)
    started = time.time()
    config = tokenizers.TokenizerConfig(type=data.tokenizer, vocab_size=data.vocab_size,
                                        shared=data.shared_vocab, seed=data.seed)
    pairs = sources.load_pairs(data.dataset, "train", **data.source_kwargs())
    with cli.silence_native_stderr():  # sentencepiece's C++ INFO lines
        source, target = tokenizers.train_pair(pairs, config)
    if save:
        tokenizers.save_pair(source, target, directory)
    print(f"tokenizer: {data.tokenizer}, {source.vocab_size} ids, trained in {time.time() - started:.1f} s", flush=True)
    return source, target


def build_evaluator(data: DataConfig, decoding, label_smoothing: float, source_tok, target_tok):
    from keras_transformer.evaluation import Evaluator  # pylint: disable=g-import-not-at-top
    from pipelines import batching, sources  # pylint: disable=g-import-not-at-top

    pairs = sources.load_pair_list(data.dataset, data.dev_split, **data.source_kwargs())
    loss_batches = batching.make_dataset(pairs, source_tok, data.batch_tokens, data.max_length,
                                         target_tokenizer=target_tok, shuffle=False, cache=True)
    if FLAGS.eval_max_sentences < 0:
        return Evaluator(loss_batches, decoding=decoding, label_smoothing=label_smoothing)
    rows = source_tok.tokenize([s for s, _ in pairs], add_eos=True).to_list()
    source_ids = [row[: data.max_length] for row in rows]
    return Evaluator(loss_batches, source_ids, [t for _, t in pairs], target_tok.detokenize,
                     decoding, label_smoothing)


def evaluate_only(model_dir: str, data: DataConfig, decoding) -> None:
    """Scores a trained model on `data.dev_split` (e.g. the test split, once, at the end)."""
    from keras_transformer import model_dir as model_dir_lib  # pylint: disable=g-import-not-at-top

    if not os.path.isfile(os.path.join(model_dir, model_dir_lib.CONFIG_FILE)):
        raise FileNotFoundError(f"{model_dir}: no {model_dir_lib.CONFIG_FILE}; train first")
    source_tok, target_tok = load_or_train_tokenizers(model_dir, data, save=False)
    model, checkpoint = model_dir_lib.restore_model(model_dir)
    evaluator = build_evaluator(data, decoding, model.config.label_smoothing, source_tok, target_tok)
    started = time.time()
    results = evaluator(model)
    name = f"{data.dev_split}-{os.path.basename(os.path.dirname(checkpoint))}-{os.path.basename(checkpoint)}"
    path = os.path.join(model_dir, "eval",
                        f"{name}-beam{decoding.beam_size}-alpha{decoding.alpha:g}.txt")
    if "hypotheses" in results:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as file:
            file.writelines(h + "\n" for h in results.pop("hypotheses"))
        print(f"translations: {path}")
    print(f"{data.dataset} [{data.dev_split}] with {checkpoint}, beam {decoding.beam_size}, alpha "
          f"{decoding.alpha:g}, {time.time() - started:.0f} s: " + json.dumps(results), flush=True)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    # Everything that can fail on a flag is checked before TensorFlow starts.
    data = data_config_from_flags()
    training = training_config_from_flags()
    decoding = decoding_config_from_flags()
    model_config_from_flags(vocab_size=1000)  # unknown preset, bad sizes
    from pipelines import sources  # pylint: disable=g-import-not-at-top

    sources.check_inputs(data.dataset, "train", **{k: v for k, v in data.source_kwargs().items()
                                                   if k in ("manual_dir", "source_file", "target_file")})
    if os.environ.get("TF_CONFIG"):  # collectives must be configured before devices are initialised
        with cli.silence_native_stderr():
            import tensorflow as tf  # pylint: disable=g-import-not-at-top

            strategy = tf.distribute.MultiWorkerMirroredStrategy()
    else:
        cli.start_tensorflow(cpu_replicas=FLAGS.cpu_replicas)
        strategy = None
    logging.set_verbosity(logging.WARNING)  # TF's per-save "Sharding callback" INFO lines
    if FLAGS.evaluate_only:
        return evaluate_only(FLAGS.model_dir, data, decoding)
    from keras_transformer import average_checkpoints  # pylint: disable=g-import-not-at-top
    from keras_transformer import model_dir as model_dir_lib  # pylint: disable=g-import-not-at-top
    from keras_transformer import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
    from pipelines import batching  # pylint: disable=g-import-not-at-top

    strategy = strategy or trainer_lib.create_strategy(FLAGS.num_gpus, FLAGS.cpu_replicas)
    replicas = strategy.num_replicas_in_sync
    training = dataclasses.replace(
        training, precision=trainer_lib.resolve_precision(FLAGS.precision, use_gpus=FLAGS.num_gpus != 0))
    check_batch_tokens(data.batch_tokens, training.accumulation_steps, replicas, data.max_length)
    chief = trainer_lib.is_chief(strategy)
    model_dir = FLAGS.model_dir
    source_tok, target_tok = load_or_train_tokenizers(model_dir, data, save=chief)
    model_config = model_config_from_flags(source_tok.vocab_size, target_tok.vocab_size)
    check_resume(model_dir, model_config)
    if chief:
        model_dir_lib.write_config(model_dir, model_config, training=training.to_dict(),
                                   data=dataclasses.asdict(data), decoding=dataclasses.asdict(decoding))
    trainer = trainer_lib.Trainer(model_config, training, model_dir, strategy, batch_tokens=data.batch_tokens)
    start = trainer.restore()
    params = sum(int(v.shape.num_elements()) for v in trainer.model.trainable_variables)
    print(f"{type(strategy).__name__} with {replicas} replica(s); {params:,} parameters; vocabulary "
          f"{source_tok.vocab_size}; {training.precision}"
          + (" (auto)" if FLAGS.precision == "auto" else "") + "; "
          + (f"resumed at step {start}" if start else "starting at step 0"), flush=True)
    input_fn = batching.make_input_fn(
        lambda: sources.load_pairs(data.dataset, "train", **data.source_kwargs()), source_tok,
        data.batch_tokens // training.accumulation_steps, target_tokenizer=target_tok,
        max_length=data.max_length, shuffle=True, seed=data.seed * 1_000_003 + start, repeat=True)
    evaluator = build_evaluator(data, decoding, model_config.label_smoothing, source_tok, target_tok)
    try:
        state = trainer.train(input_fn, evaluator)
    except trainer_lib.TrainingDiverged as error:
        cli.fail(error, code=1)
    if training.average_last and chief:
        path = average_checkpoints.average_last(model_dir, training.average_last)
        print(f"averaged the last {training.average_last} checkpoints into {path}", flush=True)
    summary = {"step": state.step, "stop_reason": state.stop_reason,
               "train_minutes": round(state.train_seconds / 60, 2), "best_bleu": state.best_bleu,
               **{k: v for k, v in state.evaluation.items() if k != "hypotheses"}}
    print("done: " + json.dumps(summary), flush=True)


if __name__ == "__main__":
    cli.run(main)
