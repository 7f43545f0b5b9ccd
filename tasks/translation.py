"""The translation task: train on a data set, evaluate on a split, translate files.

Sections 5 and 6.1 of "Attention Is All You Need" as three calls, each what one command does:

    state = train(model_dir, data, model, training, decoding)     # python -m keras_transformer.train
    results = evaluate(model_dir, data, decoding)                  # ... --evaluate_only
    translate_file("test.en", "test.hyp", model_dir=model_dir)     # python -m keras_transformer.translate

`train` wires `pipelines/` (pairs -> tokenizer -> token-budget batches) to the custom loop
of `keras_transformer.trainer` and the dev evaluation of `keras_transformer.evaluation`;
`translate_file` runs the export's `Translator` (built in process from a training directory)
or a SavedModel, so a file is translated by the same graph TF Serving runs.

Running `train` again on the same directory resumes: the tokenizer saved in
MODEL_DIR/tokenizer on the first run is reused, never retrained (a run whose tokenizer is
lost is refused, not given a new one), and the model must match MODEL_DIR/model_config.json. The data order after a resume is a fresh deterministic shuffle
seeded by (seed, step), not the exact continuation of the interrupted epoch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import hashlib
import json
import os
import sys
import time
from typing import Callable, Optional

from export import client
from keras_transformer import atomic_files, cli
from keras_transformer import model_dir as model_dir_lib
from keras_transformer.config import DecodingConfig, TransformerConfig
from pipelines import corpora, sources
from pipelines.data_config import DataConfig, check_batch_tokens


def _print(line: str) -> None:
    print(line, flush=True)


# Tokenizers and evaluation --------------------------------------------------------------


def load_tokenizers(model_dir: str, data: DataConfig, save: bool = True, log: Callable[[str], None] = _print):
    """MODEL_DIR/tokenizer if saved (ids stay stable across resumes), else trained on the
    training split (section 5.1) and saved there when `save`. Returns (source, target)."""
    from pipelines import tokenizers  # pylint: disable=g-import-not-at-top

    started = time.time()
    with cli.silence_native_stderr():  # sentencepiece's C++ INFO lines
        source, target, trained = tokenizers.load_or_train_pair(
            os.path.join(model_dir, model_dir_lib.TOKENIZER_DIR), lambda: data.load_pairs("train"),
            data.tokenizer_config(), save=save)
    if trained:
        log(f"tokenizer: {data.tokenizer}, {source.vocab_size} ids, trained in {time.time() - started:.1f} s")
    return source, target


def build_evaluator(data: DataConfig, decoding: DecodingConfig, label_smoothing: float, source_tokenizer,
                    target_tokenizer, bleu_sentences: Optional[int] = None):
    """Dev loss and perplexity on `data.dev_split`, and BLEU on its first `bleu_sentences`
    sentences (None: all; 0: no BLEU)."""
    from keras_transformer.evaluation import Evaluator  # pylint: disable=g-import-not-at-top
    from pipelines import batching  # pylint: disable=g-import-not-at-top

    pairs = data.load_pair_list(data.dev_split)
    loss_batches = batching.make_dataset(pairs, source_tokenizer, data.batch_tokens, data.max_length,
                                         target_tokenizer=target_tokenizer, shuffle=False, cache="memory")
    if bleu_sentences == 0:
        return Evaluator(loss_batches, decoding=decoding, label_smoothing=label_smoothing)
    pairs = pairs[:bleu_sentences]
    with cli.silence_native_stderr():
        rows = source_tokenizer.tokenize([s for s, _ in pairs], add_eos=True).to_list()
    task_scores = None
    if sources.spec(data.dataset).task == "parsing":  # section 6.3: EVALB F1 of the dev trees too
        from tasks import parsing  # pylint: disable=g-import-not-at-top

        task_scores = parsing.Gold.from_treebank(data.data_dir, data.dev_split).take(len(pairs)).dev_scores
    return Evaluator(loss_batches, [row[: data.max_length] for row in rows], [t for _, t in pairs],
                     target_tokenizer.detokenize, decoding, label_smoothing, task_scores=task_scores)


# Training ------------------------------------------------------------------------------


def check_run_files(model_dir: str) -> bool:
    """Whether `model_dir` holds a run to resume; a one-line `ValueError` if that run has lost a
    file it cannot go on without. Checked before any tokenizer is trained.

    A run with checkpoints must keep its tokenizer (the embedding rows index its subwords: a new
    tokenizer would silently give them other meanings) and its model_config.json.
    """
    from pipelines import tokenizers  # pylint: disable=g-import-not-at-top

    checkpoints = sorted(glob.glob(os.path.join(glob.escape(model_dir), model_dir_lib.CHECKPOINT_DIR, "ckpt-*.index")))
    has_config = os.path.isfile(os.path.join(model_dir, model_dir_lib.CONFIG_FILE))
    tokenizer_dir = os.path.join(model_dir, model_dir_lib.TOKENIZER_DIR)
    if checkpoints and not has_config:
        raise ValueError(f"{model_dir} has checkpoints ({os.path.basename(checkpoints[-1])[:-6]}) but no "
                         f"{model_dir_lib.CONFIG_FILE}: restore it from a backup, or use another --model_dir")
    if (checkpoints or has_config) and not tokenizers.is_saved(tokenizer_dir):
        raise ValueError(f"{tokenizer_dir}: missing or incomplete, but the run in {model_dir} was trained with "
                         "it (a new tokenizer would give its embeddings other subwords): restore the folder, "
                         "or use another --model_dir")
    return bool(checkpoints or has_config)


def check_resume(model_dir: str, config: TransformerConfig, tokenizer_fingerprint: Optional[str] = None,
                 init: Optional["InitSource"] = None) -> None:
    """The command's model (and tokenizer) must be the saved one: a mismatch is a one-line `ValueError`.
    A run started from another model (`init`) and not yet saved may change its training settings."""
    if not os.path.isfile(os.path.join(model_dir, model_dir_lib.CONFIG_FILE)):
        return
    settings = model_dir_lib.read_settings(model_dir)
    if init is not None:
        return
    saved = TransformerConfig.from_dict(settings["model"]).to_dict()
    wanted = config.to_dict()
    diff = [f"{k}={saved[k]!r} (saved) vs {wanted[k]!r} (flags)" for k in sorted(saved) if saved[k] != wanted.get(k)]
    if diff:
        raise ValueError(f"{model_dir} holds a different model: {'; '.join(diff)}; use another --model_dir")
    recorded = settings.get("tokenizer", {}).get("sha256")
    if tokenizer_fingerprint and recorded and recorded != tokenizer_fingerprint:
        raise ValueError(f"{os.path.join(model_dir, model_dir_lib.TOKENIZER_DIR)}: not the tokenizer the run was "
                         f"trained with (sha256 {tokenizer_fingerprint[:12]}, recorded {recorded[:12]}); restore "
                         "the original folder, or use another --model_dir")


def sized_model(model: TransformerConfig, source_tokenizer, target_tokenizer) -> TransformerConfig:
    """`model` with the trained vocabulary's sizes (section 3.4: one matrix when shared)."""
    shared = model.share_embeddings
    return dataclasses.replace(model, vocab_size=source_tokenizer.vocab_size,
                               target_vocab_size=None if shared else target_tokenizer.vocab_size)


def train(model_dir: str, data: DataConfig, model: TransformerConfig, training, decoding: DecodingConfig,
          *, bleu_sentences: Optional[int] = None, num_gpus: int = -1, cpu_replicas: int = 0,
          init_from: Optional[str] = None, log: Callable[[str], None] = _print):
    """Trains (or resumes) a translation model in `model_dir`; returns the final `LoopState`.

    Args:
        model_dir: the training directory (`keras_transformer.model_dir` layout).
        data: the data set, tokenizer and batching (section 5.1); its training corpora may be
            several, mixed by weight (`data.train_files`), and `data.cache` says where the
            tokenized pairs are kept between epochs (the log says what "auto" chose).
        model: the architecture; its vocabulary sizes are replaced by the tokenizer's.
        training: a `keras_transformer.config.TrainingConfig`; precision "auto" is resolved
            for the devices used.
        decoding: the dev translations' search (section 6.1).
        bleu_sentences: dev sentences translated for BLEU (None: all; 0: none).
        num_gpus, cpu_replicas: the devices (`keras_transformer.distribution.create_strategy`).
        init_from: start a new run from another run's model (a training directory or a
            checkpoint prefix, `InitSource`): its weights and its tokenizer, a fresh optimizer
            and step 0. Ignored when `model_dir` already has checkpoints (that run resumes).
        log: where console lines go.

    The command checks `data`'s files before it calls this (`DataConfig.check_inputs`, a pass
    over parallel text files), and `pipelines.sources.load_pairs` checks them again on reading.

    The chief holds `run_lock.RunLock(model_dir)` throughout (a second trainer on the directory
    gets a one-line error) and first removes what a killed run left half-written. A run that
    has checkpoints must still have its tokenizer and config (`check_run_files`); the
    tokenizer's fingerprint is recorded in model_config.json and checked on every resume.
    SIGINT or SIGTERM end the loop after the current update with a checkpoint
    (`state.stop_reason == "interrupted"`, `state.signal`); then nothing is averaged. The end
    of a run (the final evaluation, the average) happens once: started again after its last
    update, a run only does what a kill left undone.

    Raises:
        ValueError, FileNotFoundError: bad input, before any work is written (a mismatched
            `init_from` included: neither directory is touched).
        keras_transformer.trainer.TrainingDiverged: the loss became NaN or infinite.
    """
    from keras_transformer import distribution, run_lock  # pylint: disable=g-import-not-at-top
    from keras_transformer import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
    from pipelines import batching, tokenizers  # pylint: disable=g-import-not-at-top

    strategy = distribution.create_strategy(num_gpus, cpu_replicas)
    replicas = strategy.num_replicas_in_sync
    auto = training.precision == "auto"
    training = dataclasses.replace(
        training, precision=distribution.resolve_precision(training.precision, use_gpus=num_gpus != 0))
    check_batch_tokens(data.batch_tokens, data.max_length, replicas, training.accumulation_steps)
    init = None
    if not has_checkpoints(model_dir):
        init = InitSource.resolve(init_from, model_dir) if init_from else recorded_init(model_dir)
        if init is not None:
            init.check(model_dir, model, data)
    chief = distribution.is_chief(strategy)
    with run_lock.RunLock(model_dir) if chief else contextlib.nullcontext():
        if chief:
            run_lock.remove_stale_temporaries(model_dir, log)
        check_run_files(model_dir)
        if init is not None and chief:
            init.copy_tokenizer(model_dir)
        source_tok, target_tok = load_tokenizers(model_dir, data, save=chief, log=log)
        model = sized_model(model, source_tok, target_tok)
        fingerprint = tokenizers.fingerprint(source_tok, target_tok)
        check_resume(model_dir, model, fingerprint, init)
        if chief:
            model_dir_lib.write_config(model_dir, model, training=training.to_dict(), data=dataclasses.asdict(data),
                                       decoding=decoding.to_dict(), tokenizer={"sha256": fingerprint},
                                       **({"init_from": init.record()} if init else {}))
        trainer = trainer_lib.build_trainer(model, training, model_dir, strategy, batch_tokens=data.batch_tokens,
                                            log=log)
        start = trainer.restore()
        if start == 0 and init is not None:
            init.load_weights(trainer.model)
        params = sum(int(v.shape.num_elements()) for v in trainer.model.trainable_variables)
        log(f"{type(strategy).__name__} with {replicas} replica(s); {params:,} parameters; vocabulary "
            f"{source_tok.vocab_size}; {training.precision}" + (" (auto)" if auto else "") + "; "
            + (f"resumed at step {start}" if start else "starting at step 0")
            + (f" from the weights of {init.checkpoint} (fresh optimizer)" if start == 0 and init else ""))
        cache, why = data.cache_mode()
        cache_path = prepare_disk_cache(model_dir, data, fingerprint, log, clean=chief) if cache == "disk" else None
        pairs = data.training_pairs()
        mixture = pairs if isinstance(pairs, corpora.Mixture) else None
        log(f"input: cache {cache} ({why}), shuffle buffer {data.shuffle_buffer:,}"
            + (f"; corpora {', '.join(f'{n} {100 * w:.1f}%' for n, w in zip(mixture.names, mixture.weights))}"
               if mixture else ""))
        input_fn = batching.make_input_fn(
            (lambda: pairs) if mixture else (lambda: data.training_pairs()), source_tok,
            data.batch_tokens // training.accumulation_steps, target_tokenizer=target_tok,
            max_length=data.max_length, shuffle=True, seed=data.seed * 1_000_003 + start, repeat=True,
            shuffle_buffer=data.shuffle_buffer, cache=cache, cache_path=cache_path)
        evaluator = build_evaluator(data, decoding, model.label_smoothing, source_tok, target_tok, bleu_sentences)
        if mixture:
            evaluator = _logging_shares(evaluator, mixture, log)
        state = trainer.train(input_fn, evaluator)
        if mixture and state.stop_reason == "interrupted":  # else the last evaluation logged them
            log(f"sampled pairs: {mixture.counter.summary()}")
        if training.average_last and chief and state.stop_reason != "interrupted":
            average_once(model_dir, training.average_last, state.step, log)
    return state


def _logging_shares(evaluator, mixture, log: Callable[[str], None]):
    """`evaluator` that first logs each corpus' share of the pairs sampled so far."""

    def evaluate(model):
        log(f"sampled pairs: {mixture.counter.summary()}")
        return evaluator(model)

    return evaluate


def prepare_disk_cache(model_dir: str, data: DataConfig, fingerprint: str, log: Callable[[str], None] = _print,
                       clean: bool = True) -> str:
    """The file prefix of the training data's `tf.data` disk cache, MODEL_DIR/cache/train-<key>.

    The key hashes what the cached ids depend on (the tokenizer, the corpora with their files'
    sizes and times, `max_length`), so changed data never reads a stale cache; caches of other
    keys are removed (the caller holds the run lock), and so are the lock and temporary files
    a killed run left (tf.data refuses to write a cache while its lockfile exists).
    """
    from pipelines import text_files  # pylint: disable=g-import-not-at-top

    files = []
    for corpus in data.train_files:
        if not corpus.dataset:
            for pair in text_files.parallel_shards(*data.corpus_files(corpus)):
                files += [(p, os.path.getsize(p), os.path.getmtime(p)) for p in pair]
    inputs = {k: v for k, v in dataclasses.asdict(data).items()
              if k in ("dataset", "data_dir", "source_file", "target_file", "train_files", "max_length", "seed")}
    key = hashlib.sha256(json.dumps([fingerprint, inputs, files], sort_keys=True, default=str).encode()).hexdigest()
    folder = os.path.join(model_dir, model_dir_lib.CACHE_DIR)
    prefix = os.path.join(folder, f"train-{key[:16]}")
    name = os.path.basename(prefix)

    def is_stale(path):
        base = os.path.basename(path)
        ours = base[len(name):len(name) + 1] in (".", "-", "_") and base.startswith(name)
        return not ours or base.endswith(".lockfile") or ".tempstate" in base

    stale = [p for p in sorted(glob.glob(os.path.join(glob.escape(folder), "*"))) if clean and is_stale(p)]
    for path in stale:
        os.remove(path)
    if stale:
        log(f"removed {len(stale)} stale or half-written cache file(s) from {folder}")
    os.makedirs(folder, exist_ok=True)
    return prefix


# Starting from another run's model (fine-tuning) ----------------------------------------------

# What may differ between a run and the model it starts from: training settings, not shapes.
TRAINING_ONLY_FIELDS = ("dropout_rate", "attention_dropout_rate", "relu_dropout_rate", "label_smoothing")


def has_checkpoints(model_dir: str) -> bool:
    return bool(glob.glob(os.path.join(glob.escape(model_dir), model_dir_lib.CHECKPOINT_DIR, "ckpt-*.index")))


@dataclasses.dataclass(frozen=True)
class InitSource:
    """The model a new run starts from (`--init_from`): a training directory's averaged (else
    newest readable) checkpoint, or a given checkpoint prefix in one.

    Attributes:
        run_dir: the training directory the weights and the tokenizer come from.
        checkpoint: the checkpoint prefix read.
    """

    run_dir: str
    checkpoint: str

    @classmethod
    def resolve(cls, path: str, model_dir: str) -> "InitSource":
        """The run and checkpoint `path` names; a one-line error if it is neither a training
        directory with a readable checkpoint nor a readable checkpoint prefix in one."""
        from keras_transformer import checkpoint_files  # pylint: disable=g-import-not-at-top

        if os.path.isfile(path + ".index"):
            checkpoint_files.check_readable(path)
            run_dir, checkpoint = os.path.dirname(os.path.dirname(os.path.abspath(path))), path
        elif os.path.isdir(path):
            run_dir, checkpoint = path, model_dir_lib.latest_checkpoint(path)
            if checkpoint is None:
                raise ValueError(f"--init_from={path}: no checkpoint in {model_dir_lib.CHECKPOINT_DIR}/ or "
                                 f"{model_dir_lib.AVERAGED_DIR}/")
        else:
            raise FileNotFoundError(f"--init_from={path}: no such training directory or checkpoint prefix "
                                    "(e.g. RUN/checkpoints/ckpt-1000)")
        if os.path.abspath(run_dir) == os.path.abspath(model_dir):
            raise ValueError(f"--init_from={path} is in --model_dir itself; to go on with that run, leave "
                             "out --init_from (the same command resumes it)")
        for name, test in ((model_dir_lib.CONFIG_FILE, os.path.isfile), (model_dir_lib.TOKENIZER_DIR, os.path.isdir)):
            if not test(os.path.join(run_dir, name)):
                raise FileNotFoundError(f"--init_from={path}: {os.path.join(run_dir, name)} not found (a model "
                                        "is started from together with its run's config and tokenizer)")
        return cls(run_dir=run_dir, checkpoint=checkpoint)

    def record(self) -> dict:
        return {"run_dir": os.path.abspath(self.run_dir), "checkpoint": os.path.abspath(self.checkpoint)}

    def check(self, model_dir: str, model: TransformerConfig, data: DataConfig) -> None:
        """A one-line `ValueError` unless this run's flags ask for the architecture and vocabulary
        of the model it starts from. Reads only; writes nothing in either directory."""
        from pipelines import tokenizers  # pylint: disable=g-import-not-at-top

        tokenizer_dir = os.path.join(self.run_dir, model_dir_lib.TOKENIZER_DIR)
        if not tokenizers.is_saved(tokenizer_dir):
            raise FileNotFoundError(f"--init_from: {tokenizer_dir} is incomplete")
        source, target = tokenizers.load_pair(tokenizer_dir)
        settings = source.settings()
        wanted = {"type": data.tokenizer, "lowercase": data.lowercase, "shared": data.shared_vocab}
        have = {"type": settings["type"], "lowercase": settings["lowercase"], "shared": source is target}
        diff = [f"{k}={have[k]!r} (there) vs {wanted[k]!r} (flags)" for k in wanted if have[k] != wanted[k]]
        if diff:
            raise ValueError(f"--init_from={self.run_dir}: its vocabulary differs: {'; '.join(diff)}")
        ours = os.path.join(model_dir, model_dir_lib.TOKENIZER_DIR)
        if tokenizers.is_saved(ours) and tokenizers.fingerprint(*tokenizers.load_pair(ours)) != \
                tokenizers.fingerprint(source, target):
            raise ValueError(f"{ours} is not the tokenizer of --init_from={self.run_dir}; use another --model_dir")
        there = model_dir_lib.read_config(self.run_dir).to_dict()
        ours_model = sized_model(model, source, target).to_dict()
        skip = set(TRAINING_ONLY_FIELDS) | ({"max_length"} if there["positional_encoding"] == "sinusoidal" else set())
        diff = [f"{k}={there[k]!r} (there) vs {ours_model[k]!r} (flags)" for k in sorted(there)
                if k not in skip and there[k] != ours_model.get(k)]
        if diff:
            raise ValueError(f"--init_from={self.run_dir}: a different architecture: {'; '.join(diff)}")

    def copy_tokenizer(self, model_dir: str) -> None:
        """Saves the tokenizer of the run started from as this run's (unless already there)."""
        from pipelines import tokenizers  # pylint: disable=g-import-not-at-top

        ours = os.path.join(model_dir, model_dir_lib.TOKENIZER_DIR)
        if not tokenizers.is_saved(ours):
            with cli.silence_native_stderr():
                tokenizers.save_pair(*tokenizers.load_pair(os.path.join(self.run_dir, model_dir_lib.TOKENIZER_DIR)),
                                     ours)

    def load_weights(self, model) -> None:
        """Reads the model's weights (not the optimizer's state, not the step) from the checkpoint."""
        import tensorflow as tf  # pylint: disable=g-import-not-at-top

        tf.train.Checkpoint(model=model).read(self.checkpoint).expect_partial().assert_existing_objects_matched()


def recorded_init(model_dir: str) -> Optional[InitSource]:
    """The `InitSource` model_config.json records for a run that has no checkpoint yet (a run
    started with --init_from and stopped before its first save starts from it again)."""
    if not os.path.isfile(os.path.join(model_dir, model_dir_lib.CONFIG_FILE)):
        return None
    record = model_dir_lib.read_settings(model_dir).get("init_from")
    return InitSource(record["run_dir"], record["checkpoint"]) if record else None


def average_once(model_dir: str, count: int, step: int, log: Callable[[str], None] = _print) -> None:
    """Averages the last `count` checkpoints into MODEL_DIR/averaged, unless the average of the
    checkpoints up to `step` is already there (a finished run started again)."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    from keras_transformer import averaging  # pylint: disable=g-import-not-at-top

    done = tf.train.latest_checkpoint(os.path.join(model_dir, model_dir_lib.AVERAGED_DIR))
    if done and averaging.checkpoint_step(done) == step:
        log(f"the last {count} checkpoints were averaged before: {done}")
        return
    path = averaging.average_last(model_dir, count)
    log(f"averaged the last {count} checkpoints into {path}")


# Evaluation of a trained model ---------------------------------------------------------------


def evaluate(model_dir: str, data: DataConfig, decoding: DecodingConfig, bleu_sentences: Optional[int] = None,
             log: Callable[[str], None] = _print) -> dict:
    """Scores a trained model on `data.dev_split` (e.g. the test split, once, at the end) with the
    averaged checkpoint (else the latest); writes the translations to MODEL_DIR/eval/.

    Returns:
        {"loss", "nll", "perplexity", "tokens"} and, with BLEU, {"bleu", "signature", "chrf", "chrf++"}
        and the chrF signatures.
    """
    from pipelines import tokenizers  # pylint: disable=g-import-not-at-top

    if not os.path.isfile(os.path.join(model_dir, model_dir_lib.CONFIG_FILE)):
        raise FileNotFoundError(f"{model_dir}: no {model_dir_lib.CONFIG_FILE}; train first")
    tokenizer_dir = os.path.join(model_dir, model_dir_lib.TOKENIZER_DIR)
    if not tokenizers.is_saved(tokenizer_dir):
        raise FileNotFoundError(f"{tokenizer_dir}: no saved tokenizer; the run cannot be evaluated")
    source_tok, target_tok = tokenizers.load_pair(tokenizer_dir)
    model, checkpoint = model_dir_lib.restore_model(model_dir)
    evaluator = build_evaluator(data, decoding, model.config.label_smoothing, source_tok, target_tok,
                                bleu_sentences)
    started = time.time()
    results = evaluator(model)
    name = f"{data.dev_split}-{os.path.basename(os.path.dirname(checkpoint))}-{os.path.basename(checkpoint)}"
    path = os.path.join(model_dir, model_dir_lib.EVAL_DIR, f"{name}-beam{decoding.beam_size}-alpha{decoding.alpha:g}.txt")
    if "hypotheses" in results:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as file:
            file.writelines(h + "\n" for h in results.pop("hypotheses"))
        log(f"translations: {path}")
    log(f"{data.dataset} [{data.dev_split}] with {checkpoint}, beam {decoding.beam_size}, alpha "
        f"{decoding.alpha:g}, {time.time() - started:.0f} s: " + json.dumps(results))
    return results


# Translating files ------------------------------------------------------------------------------


def translate_file(input_path: str, output_path: str = "-", *, model_dir: Optional[str] = None,
                   export_dir: Optional[str] = None, decoding: DecodingConfig = DecodingConfig(),
                   checkpoint: Optional[str] = None, reference: Optional[str] = None, batch_size: int = 32,
                   progress: Optional[bool] = None, n_best: int = 1) -> Optional[str]:
    """Translates a file (or stdin) line by line with a training directory or an export.

    From `model_dir` the export's `Translator` (tokenizer + beam search, `decoding`) is built in
    process from the averaged or latest checkpoint (or `checkpoint`); `export_dir` loads the
    SavedModel (a version folder, or a base folder whose highest version is used), whose
    decoding settings were fixed at export time.

    Bad input is found before the model loads: an `output_path` that is a folder or cannot be
    written (`cli.check_output_path`), a missing input or reference, a reference whose line count
    is not the input's. The output file is replaced at the end, atomically: a failure leaves
    an existing file as it was. `progress`: the progress bar on stderr (default: when stderr
    is a terminal, see `export.client.translate_lines`); the first and last lines on stderr (sentences and
    model, time and speed) are always written.

    With `n_best` > 1 (at most the beam size) each sentence gets up to `n_best` lines, best
    first, in the Moses n-best format Marian and fairseq also write, `i ||| translation ||| score`
    (i the sentence's 0-based line number, score log P(Y) / lp(|Y|)); a sentence with fewer
    hypotheses (an empty line has one, "") gets fewer lines. BLEU is then of the best ones.

    Returns:
        With `reference`, sacreBLEU's report as text (`metrics.corpus_scores`): BLEU (section 6.1),
        chrF and chrF++ (Popović 2015, 2017; not in the paper), each with its signature; else None.
    """
    from keras_transformer import metrics  # pylint: disable=g-import-not-at-top

    if (model_dir is None) == (export_dir is None):
        raise ValueError("give exactly one of model_dir and export_dir")
    cli.check_output_path(output_path)
    lines = cli.read_lines(input_path)
    references = None
    if reference:
        references = [line.decode("utf-8", errors="replace") for line in cli.read_lines(reference)]
        if len(references) != len(lines):
            raise ValueError(f"{reference} has {len(references)} lines but the input ({input_path}) has {len(lines)}")
    start = time.perf_counter()
    translate_fn, source = client.load_translate_fn(model_dir, export_dir, decoding, checkpoint, n_best=n_best)
    print(f"translating {len(lines)} sentences with {source}", file=sys.stderr)
    translations, scores = client.translate_lines(translate_fn, lines, batch_size, progress)
    if n_best > 1:
        text = n_best_lines(translations, scores)
        translations = [hypotheses[0] for hypotheses in translations]
    else:
        text = "".join(t + "\n" for t in translations)
    atomic_files.write_output(output_path, text)
    elapsed = time.perf_counter() - start
    print(f"{len(lines)} sentences in {elapsed:.1f} s ({len(lines) / max(elapsed, 1e-9):.1f} sentences/s)",
          file=sys.stderr)
    if references is None:
        return None
    return str(metrics.corpus_scores(translations, references))


def n_best_lines(translations: list[list[str]], scores: list[list[float]]) -> str:
    """Moses n-best lines, `i ||| translation ||| score`, of every filled slot (score above
    `serving_module.NO_HYPOTHESIS_SCORE`), best first. A translation never holds a line break:
    the tokenizer's normalization turns whitespace into spaces."""
    from export import serving_module  # pylint: disable=g-import-not-at-top

    return "".join(f"{i} ||| {text} ||| {score:.6f}\n"
                   for i, (texts, values) in enumerate(zip(translations, scores))
                   for text, score in zip(texts, values) if score > serving_module.NO_HYPOTHESIS_SCORE / 2)
