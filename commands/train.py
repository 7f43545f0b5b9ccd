"""Trains a Transformer for translation or parsing (section 5): `python -m keras_transformer.train`.

The flags become frozen configs (`DataConfig`, `TransformerConfig`, `TrainingConfig`,
`DecodingConfig`) for `keras_transformer.tasks.training.train`, or for `keras_transformer.tasks.dev_evaluation.evaluate` with
--evaluate_only. A run lives in --model_dir: its settings (model_config.json), its tokenizer
(trained on the first run, then reused), checkpoints, dev evaluations and TensorBoard summaries.
The same command run again resumes from the latest checkpoint; `--init_from=OTHER_RUN` starts a
new run from another run's model (fine-tuning). Recipes are in configs/*.flags.

Typical command lines:

    python -m keras_transformer.train --flagfile=configs/demo.flags --model_dir=runs/demo
    python -m keras_transformer.train --flagfile=configs/multi30k_en_de.flags \\
        --data_dir=../shared/data/multi30k --model_dir=runs/multi30k
    python -m keras_transformer.train --flagfile=configs/multi30k_en_de.flags --dataset=files \\
        --source_file=data/{split}.en --target_file=data/{split}.de --model_dir=runs/mine
    python -m keras_transformer.train --flagfile=configs/wmt14_en_de_base.flags --num_gpus=8 \\
        --model_dir=runs/base
    python -m keras_transformer.train --flagfile=configs/multi30k_en_de.flags \\
        --data_dir=../shared/data/multi30k --model_dir=runs/multi30k --evaluate_only --dev_split=test

Ctrl-C or SIGTERM finishes the current update and saves a checkpoint before it stops (exit 130 or
143). docs/guide/training.md explains recipes, precision, distribution, checkpoints and
fine-tuning; docs/reference/errors.md lists what it refuses and what a resume may not change;
docs/reference/commands.md every flag.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

from absl import app, flags, logging

from keras_transformer import cli, dev_metrics, position_encodings
from keras_transformer.files import command_files
from keras_transformer.run_dir import layout
from keras_transformer.tasks import flags as task_flags
from keras_transformer.tasks import registry as task_registry
from keras_transformer.training_directory import TrainingDirectory

FLAGS = flags.FLAGS

flags.DEFINE_string("model_dir", None, "Training directory: config, tokenizer, checkpoints, summaries.")
task_flags.define_data_flags()
flags.DEFINE_string("dev_split", "validation", "Split evaluated during training (never test when tuning).")
flags.DEFINE_string("init_from", None, "Start a new run from another run's model: a training directory "
                    "(its averaged, else latest checkpoint) or a checkpoint prefix. Its weights and tokenizer, a "
                    "fresh optimizer, step 0; the architecture flags must match. On a resume (MODEL_DIR has "
                    "checkpoints) it must name the run it started from, and is not read again.")
# Model (section 3, Table 3) --------------------------------------------------------------------
flags.DEFINE_string("preset", "base", "Model preset: tiny, base, big or a Table 3 row such as 'C/N=4'.")
task_flags.define_model_size_flags(stacks=True)
flags.DEFINE_integer("d_k", None, "d_k, each head's query and key width (unset: the preset's, d_model / h; "
                     "Table 3 row B).", lower_bound=1)
flags.DEFINE_integer("d_v", None, "d_v, each head's value width (unset: the preset's, d_model / h).", lower_bound=1)
flags.DEFINE_float("dropout_rate", None, "Override P_drop (section 5.4; base 0.1, big 0.3).")
flags.DEFINE_float("attention_dropout_rate", None, "Override the dropout on attention weights (paper: 0).")
flags.DEFINE_float("relu_dropout_rate", None, "Override the dropout after the feed-forward ReLU (paper: 0).")
flags.DEFINE_float("source_word_dropout_rate", None, "Zero each source token's embedding with this probability "
                   "before its position is added (word dropout, Sennrich & Zhang 2019; Marian's --dropout-src; "
                   "paper: 0).")
flags.DEFINE_float("bpe_dropout", 0.0, "Segment the training pairs anew each epoch, each BPE merge skipped with "
                   "this probability (BPE-dropout, Provilkov et al. 2020; 0: off, section 5.1's one segmentation). "
                   "--tokenizer=bpe only; sentencepiece draws the segmentations, not --seed.")
flags.DEFINE_float("label_smoothing", None, "Override epsilon_ls (section 5.4; paper 0.1).")
flags.DEFINE_enum("positional_encoding", None, list(position_encodings.names()), "Override the position encoding.")
flags.DEFINE_enum("layer_norm", None, ["post", "pre"], "Override the LayerNorm placement (paper: post).")
# Optimisation (section 5.3) -------------------------------------------------------------------
flags.DEFINE_integer("train_steps", 100000, "Updates in total (paper: 100k base, 300k big).")
flags.DEFINE_integer("warmup_steps", 4000, "warmup_steps of equation (3) (paper: 4000).")
flags.DEFINE_float("learning_rate_scale", 1.0, "Multiplier on equation (3) (paper: 1).")
flags.DEFINE_integer("cooldown_steps", 0, "The last N of --train_steps updates bring the learning rate linearly "
                     "down to about 0 (a budget-aware end of equation (3); 0: none, as in the paper). With "
                     "--early_stopping_patience, patience running out starts the cool-down instead of stopping the "
                     "run, which stops N updates later.", lower_bound=0)
flags.DEFINE_float("clip_norm", 0.0, "Clip the global gradient norm (0: none, as in the paper).")
flags.DEFINE_integer("accumulation_steps", 1, "Micro-batches per update (gradient accumulation).")
flags.DEFINE_enum("precision", "auto", ["auto", "float32", "mixed_bfloat16", "mixed_float16"],
                  "Compute precision; mixed_float16 adds dynamic loss scaling. auto: mixed_bfloat16 on "
                  "GPUs of compute capability >= 8.0 and on CPUs with AVX512_BF16/AMX whose bfloat16 matrix "
                  "products a start-up timing finds >= 1.15x as fast as float32's, mixed_float16 on 7.x GPUs, "
                  "else float32 (the paper's).")
flags.DEFINE_float("ema_decay", 0.0, "Keep an exponential moving average of the weights with this decay "
                   "(Marian's exponential smoothing, e.g. 0.9999; 0: none); dev evaluation, translate, export and "
                   "checkpoint averaging then use it. A resume keeps the run's moving average when the flag is left "
                   "out.")
flags.DEFINE_float("rdrop_alpha", 0.0, "R-Drop (Liang et al. 2021): each batch twice through the model, with this "
                   "times the symmetric KL of the two output distributions added to the loss (0: off; the paper: 5 "
                   "for translation). An update costs about two: halve --batch_tokens for the same work.",
                   lower_bound=0.0)
flags.DEFINE_boolean("xla", False, "Compile the forward and backward pass with XLA.")
flags.DEFINE_float("max_train_minutes", 0.0, "Stop cleanly, with a checkpoint, after this much training (0: none).")
# Distribution (section 5.2) -------------------------------------------------------------------
flags.DEFINE_integer("num_gpus", -1, "MirroredStrategy over this many local GPUs (-1: all; the paper: 8).",
                     lower_bound=-1)
flags.DEFINE_integer("cpu_replicas", 0, "MirroredStrategy over this many logical CPU devices (0/1: none).",
                     lower_bound=0)
# Checkpoints (section 6.1) ----------------------------------------------------------------------
flags.DEFINE_integer("checkpoint_every_steps", 1000, "Save every this many updates (0: not by count).")
flags.DEFINE_float("checkpoint_every_minutes", 0.0, "Also save every this many minutes (paper: 10).")
flags.DEFINE_integer("keep_checkpoints", 5, "Checkpoints kept (at least --average_checkpoints).")
flags.DEFINE_integer("average_checkpoints", 0, "At the end, average the last K checkpoints (with "
                     "--keep_best_checkpoints: the best K) into MODEL_DIR/averaged (paper: 5 base, 20 big; 0: none).")
flags.DEFINE_integer("keep_best_checkpoints", 0, "Keep the K best checkpoints by --best_checkpoint_metric in "
                     "MODEL_DIR/best (every evaluated step is saved); translate and export use their average "
                     "(--average_checkpoints) or the best one (0: none).", lower_bound=0)
flags.DEFINE_enum("best_checkpoint_metric", "bleu", list(dev_metrics.names()), "The dev metric that ranks "
                  f"checkpoints and that --early_stopping_patience watches: {dev_metrics.choices_help()}.")
# Evaluation (section 6.1) -----------------------------------------------------------------------
flags.DEFINE_integer("eval_every_steps", 1000, "Dev loss, perplexity and BLEU every this many updates (0: at the end).")
task_flags.define_decoding_flags(prefix="eval_")
flags.DEFINE_integer("eval_max_sentences", 0, "Translate only this many dev sentences for BLEU (0: all; -1: no BLEU).",
                     lower_bound=-1)
flags.DEFINE_integer("early_stopping_patience", 0, "Stop after this many evaluations without a better dev "
                     "--best_checkpoint_metric (0: never); with --cooldown_steps, cool down then stop.")
flags.DEFINE_boolean("evaluate_only", False, "Do not train: translate --dev_split with the averaged "
                     "checkpoint (else the latest), print loss, BLEU and signature, write the translations.")
flags.DEFINE_integer("log_every_steps", 100, "Console lines and TensorBoard scalars every this many updates.")

flags.mark_flag_as_required("model_dir")

MODEL_OVERRIDES = ("num_layers", "num_encoder_layers", "num_decoder_layers", "d_model", "d_ff", "num_heads", "d_k",
                   "d_v", "dropout_rate", "attention_dropout_rate", "relu_dropout_rate", "source_word_dropout_rate",
                   "label_smoothing", "positional_encoding", "layer_norm")


def model_config():
    """The preset plus the override flags that were given; its vocabulary is sized by the tokenizer.
    --num_layers sets both stacks' depth; --num_encoder_layers and --num_decoder_layers, when given,
    win for their stack (`TransformerConfig.encoder_depth`, `decoder_depth`)."""
    from keras_transformer.config import TransformerConfig  # pylint: disable=g-import-not-at-top

    overrides = {n: FLAGS[n].value for n in MODEL_OVERRIDES if FLAGS[n].value is not None}
    return TransformerConfig.preset(FLAGS.preset, max_length=FLAGS.max_length, vocab_size=FLAGS.vocab_size,
                                    share_embeddings=FLAGS.shared_vocab, **overrides)


def training_config():
    from keras_transformer.config import TrainingConfig  # pylint: disable=g-import-not-at-top

    return TrainingConfig(
        train_steps=FLAGS.train_steps, warmup_steps=FLAGS.warmup_steps,
        learning_rate_scale=FLAGS.learning_rate_scale, cooldown_steps=FLAGS.cooldown_steps, clip_norm=FLAGS.clip_norm,
        accumulation_steps=FLAGS.accumulation_steps, xla=FLAGS.xla, precision=FLAGS.precision,
        checkpoint_every_steps=FLAGS.checkpoint_every_steps,
        checkpoint_every_minutes=FLAGS.checkpoint_every_minutes, keep_checkpoints=FLAGS.keep_checkpoints,
        eval_every_steps=FLAGS.eval_every_steps, early_stopping_patience=FLAGS.early_stopping_patience,
        max_train_minutes=FLAGS.max_train_minutes, log_every_steps=FLAGS.log_every_steps,
        average_last=FLAGS.average_checkpoints, keep_best_checkpoints=FLAGS.keep_best_checkpoints,
        best_checkpoint_metric=FLAGS.best_checkpoint_metric, seed=FLAGS.seed, ema_decay=FLAGS.ema_decay,
        rdrop_alpha=FLAGS.rdrop_alpha)


def _resumed_training(training):
    """`training` with the moving average the run in --model_dir was trained with (its
    model_config.json) when --ema_decay is not given: a resume keeps the run's average, with one
    line that says so, rather than turning it off (`TrainingDirectory.check_resume` refuses an
    explicit --ema_decay=0 on such a run). Reads JSON only: no TensorFlow."""
    run = TrainingDirectory(FLAGS.model_dir)
    if FLAGS["ema_decay"].present or not run.has_settings():
        return training
    recorded = run.settings().get("training", {}).get("ema_decay")
    if not (isinstance(recorded, (int, float)) and not isinstance(recorded, bool) and 0 < recorded < 1) \
            or recorded == training.ema_decay:
        return training
    print(f"--ema_decay not given: {FLAGS.model_dir} goes on with the moving average it was trained with "
          f"(--ema_decay={recorded:g})", flush=True)
    return dataclasses.replace(training, ema_decay=float(recorded))


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    # Everything that can fail on a flag is checked before TensorFlow starts.
    data = task_flags.data_config(dev_split=FLAGS.dev_split, bpe_dropout=FLAGS.bpe_dropout)
    model = model_config()
    decoding = task_flags.decoding_config(prefix="eval_")
    training = training_config()
    bleu_sentences = {0: None, -1: 0}.get(FLAGS.eval_max_sentences, max(FLAGS.eval_max_sentences, 0))
    task_registry.of_dataset(data.dataset).check_training(training, data, bleu_sentences)  # what ranks checkpoints
    if FLAGS.evaluate_only:
        TrainingDirectory(FLAGS.model_dir).check_exists()
        command_files.check_writable_folder(FLAGS.model_dir, "model_dir")  # the translations are written there
        data.check_inputs(data.dev_split)
    else:
        new_run = not os.path.isdir(FLAGS.model_dir) or not os.listdir(FLAGS.model_dir)
        problem = FLAGS.init_from and new_run and layout.init_from_problem(FLAGS.init_from)
        if problem:  # a resumed run ignores --init_from: only a new one is refused here
            raise FileNotFoundError(f"--init_from={FLAGS.init_from}: {problem}")
        command_files.check_writable_folder(FLAGS.model_dir, "model_dir")
        if not os.environ.get("TF_CONFIG"):  # several machines: only the chief locks (known once TF runs)
            from keras_transformer.training import run_lock  # pylint: disable=g-import-not-at-top  (no TF)

            run_lock.check_free(FLAGS.model_dir)  # a second trainer refused at once, not after a model is built
        for split in dict.fromkeys(("train", data.dev_split)):
            data.check_inputs(split)
            data.check_can_batch(split)  # files whose every pair is longer than --max_length
        training = _resumed_training(training)
    cli.start_tensorflow(cpu_replicas=FLAGS.cpu_replicas)
    logging.set_verbosity(logging.WARNING)  # TF's per-save "Sharding callback" INFO lines
    from keras_transformer.tasks import dev_evaluation, training as training_task  # pylint: disable=g-import-not-at-top

    if FLAGS.evaluate_only:
        # The run's tokenizer is what evaluation loads, but tags in the source and placeholders in
        # the targets are data: a tagged parser evaluated on untagged sentences (or a placeholder
        # parser under the words' tree constraint) would score garbage without a word. (Reading the
        # run's settings imports TensorFlow: checked before the model loads.)
        TrainingDirectory(FLAGS.model_dir).check_tokenizer_flags(
            data, FLAGS.model_dir, advice=" (the dev sources must be what it was trained on)",
            names=("source_tags", "tree_targets"))
        dev_evaluation.evaluate(FLAGS.model_dir, data, decoding, bleu_sentences)
        return
    from keras_transformer.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top

    try:
        state = training_task.train(FLAGS.model_dir, data, model, training, decoding,
                                    bleu_sentences=bleu_sentences, num_gpus=FLAGS.num_gpus,
                                    cpu_replicas=FLAGS.cpu_replicas, init_from=FLAGS.init_from)
    except trainer_lib.TrainingDiverged as error:
        cli.fail(error, code=1)
    summary = {"step": state.step, "stop_reason": state.stop_reason,
               "train_minutes": round(state.train_seconds / 60, 2),
               f"best_{state.best_metric}": state.best_value, "best_step": state.best_step,
               **{k: v for k, v in state.evaluation.items() if k != "hypotheses"}}
    if state.signal is not None:
        from keras_transformer.training import interrupts  # pylint: disable=g-import-not-at-top

        print("interrupted: " + json.dumps(summary), flush=True)
        sys.exit(interrupts.exit_code(state.signal))
    print("done: " + json.dumps(summary), flush=True)

