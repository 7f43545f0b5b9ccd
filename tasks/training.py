"""Training a model on a data set (sections 5 and 6.1): what `python -m keras_transformer.train` does.

    state = train(model_dir, data, model, training, decoding)

`train` wires `pipelines/` (pairs -> tokenizer -> token-budget batches) to the custom loop
of `keras_transformer.training.trainer` and the dev evaluation of `keras_transformer.tasks.dev_evaluation`, and
averages the last checkpoints at the end (section 6.1).

Running `train` again on the same directory resumes: the tokenizer saved in
MODEL_DIR/tokenizer on the first run is reused, never retrained (a run whose tokenizer is
lost is refused, not given a new one), and the model must match MODEL_DIR/model_config.json.
The data order after a resume is a fresh deterministic shuffle seeded by (seed, step), not
the exact continuation of the interrupted epoch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
from typing import Callable, Optional

from keras_transformer.config import DecodingConfig, TransformerConfig
from keras_transformer.run_dir import layout
from keras_transformer.pipelines import corpora
from keras_transformer.pipelines.data_config import DataConfig, check_batch_tokens
from keras_transformer.tasks.dev_evaluation import build_evaluator
from keras_transformer.tasks.disk_cache import prepare_disk_cache
from keras_transformer.tasks.fine_tuning import InitSource, ignored_on_resume, recorded_init
from keras_transformer.tasks import registry as task_registry
from keras_transformer.training_directory import TrainingDirectory
from keras_transformer.training_directory.vocabulary import sized_model

_print = functools.partial(print, flush=True)


def train(model_dir: str, data: DataConfig, model: TransformerConfig, training, decoding: DecodingConfig,
          *, bleu_sentences: Optional[int] = None, num_gpus: int = -1, cpu_replicas: int = 0,
          init_from: Optional[str] = None, log: Callable[[str], None] = _print):
    """Trains (or resumes) a model of `data`'s task in `model_dir` (its model_config.json records the
    task's name: `keras_transformer.tasks.registry.of_run`); returns the final `LoopState`.

    Args:
        model_dir: the training directory (`keras_transformer.run_dir.layout` layout).
        data: the data set, tokenizer and batching (section 5.1); its training corpora may be
            several, mixed by weight (`data.train_files`), and `data.cache` says where the
            tokenized pairs are kept between epochs (the log says what "auto" chose).
        model: the architecture; its vocabulary sizes are replaced by the tokenizer's.
        training: a `keras_transformer.config.TrainingConfig`; precision "auto" is resolved
            for the devices used, the same on every worker (`distribution.resolve_precision`,
            which on a CPU with native bfloat16 times its matrix products; the log says why).
        decoding: the dev translations' search (section 6.1).
        bleu_sentences: dev sentences translated for BLEU (None: all; 0: none).
        num_gpus, cpu_replicas: the devices (`keras_transformer.training.distribution.create_strategy`).
        init_from: start a new run from another run's model (a training directory or a
            checkpoint prefix, `InitSource`): its weights and its tokenizer, a fresh optimizer
            and step 0. When `model_dir` already has checkpoints, that run resumes from them: it
            must name the run it started from, and is not read again (`ignored_on_resume`).
        log: where console lines go.

    The command checks `data`'s files before it calls this (`DataConfig.check_inputs`, a pass
    over parallel text files), and `keras_transformer.pipelines.sources.load_pairs` checks them again on reading.

    The chief holds `run_lock.RunLock(model_dir)` throughout (a second trainer on the directory
    gets a one-line error) and first removes what a killed run left half-written. A run that
    has checkpoints must still have its tokenizer and config (`TrainingDirectory.check_resumable`); the
    tokenizer's fingerprint is recorded in model_config.json and checked on every resume.
    SIGINT or SIGTERM end the loop after the current update with a checkpoint, and stop the
    dev evaluation (the final one too) and the average at once (`state.stop_reason ==
    "interrupted"`, `state.signal`); then nothing is averaged. The end of a run (the final
    evaluation, the average) happens once: started again after its last update, a run only
    does what a kill left undone.

    Nothing is saved before every check of the start has passed: the tokenizer is trained in
    memory and saved with model_config.json, and a new run whose start fails before its first
    update leaves nothing behind (not even the folder, when the start made it), so the next start
    does not take a tokenizer trained under refused flags for the run's. A resume keeps the run's
    data set and moving average (`TrainingDirectory.check_resume`).

    Raises:
        ValueError, FileNotFoundError: bad input, before any work is written (a mismatched
            `init_from` included: neither directory is touched).
        keras_transformer.training.trainer.TrainingDiverged: the loss became NaN or infinite.
    """
    from keras_transformer.training import distribution, run_lock  # pylint: disable=g-import-not-at-top
    from keras_transformer.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import batching, tokenizers  # pylint: disable=g-import-not-at-top

    strategy = distribution.create_strategy(num_gpus, cpu_replicas)
    replicas = strategy.num_replicas_in_sync
    auto = training.precision == "auto"
    training = dataclasses.replace(training, precision=distribution.resolve_precision(
        training.precision, use_gpus=num_gpus != 0, strategy=strategy, log=log))
    check_batch_tokens(data.batch_tokens, data.max_length, replicas, training.accumulation_steps)
    layout.check_layout(model_dir)  # no file where a folder belongs (checkpoints/, eval/, .lock, ...)
    run = TrainingDirectory(model_dir)
    data = data.for_run(model_dir)  # predicted source tags: the tagger saved in the run (trained once)
    init = None
    if not run.has_checkpoints():
        init = InitSource.resolve(init_from, model_dir) if init_from else recorded_init(model_dir)
        if init is not None:
            init.check(model_dir, model, data)
    elif init_from:
        log(ignored_on_resume(init_from, model_dir))  # or a one-line error: another run than it started from
    chief = distribution.is_chief(strategy)
    made = _missing_folders(model_dir)  # the RunLock makes them
    had_lock = os.path.lexists(os.path.join(model_dir, run_lock.LOCK_FILE))
    with run_lock.RunLock(model_dir) if chief else contextlib.nullcontext():
        if chief:
            run_lock.remove_stale_temporaries(model_dir, log)
        with _undone_if_first_start_fails(run, made, had_lock) if chief else contextlib.nullcontext():
            run.check_resumable()
            source_tok, target_tok = _tokenizers(run, data, init, log)
            model = sized_model(model, source_tok, target_tok)
            fingerprint = tokenizers.fingerprint(source_tok, target_tok)
            run.check_resume(model, fingerprint, starts_from_another_run=init is not None, data=data,
                             training=training.to_dict(), log=log)
            check_can_batch(data, source_tok, target_tok)  # before the config: else no step finds a batch
            if chief:
                _save_tokenizers(run, source_tok, target_tok)  # every check passed: the run's from now on
                origin = init.record() if init else run.settings().get("init_from") if run.has_settings() else None
                run.write_settings(model, task=task_registry.of_dataset(data.dataset).name,
                                   training=training.to_dict(), data=dataclasses.asdict(data),
                                   decoding=decoding.to_dict(), tokenizer={"sha256": fingerprint},
                                   **({"init_from": origin} if origin else {}))  # a resume keeps its origin
            trainer = trainer_lib.build_trainer(model, training, model_dir, strategy,
                                                batch_tokens=data.batch_tokens, log=log)
            start = trainer.restore()
            if start == 0 and init is not None:
                init.load_weights(trainer.model)  # a run with --ema_decay: its moving average
                if trainer.ema is not None:
                    trainer.ema.reset()  # the new run's average starts from the weights it starts from
            params = sum(int(v.shape.num_elements()) for v in trainer.model.trainable_variables)
            log(f"{type(strategy).__name__} with {replicas} replica(s); {params:,} parameters; vocabulary "
                f"{source_tok.vocab_size}; {training.precision}" + (" (auto)" if auto else "") + "; "
                + (f"resumed at step {start}" if start else "starting at step 0")
                + (f" from the weights of {init.checkpoint} (fresh optimizer)" if start == 0 and init else ""))
            cache, why = data.cache_mode()
            cache_path = (prepare_disk_cache(model_dir, data, fingerprint, log, clean=chief) if cache == "disk"
                          else None)
            pairs = data.training_pairs()
            mixture = pairs if isinstance(pairs, corpora.Mixture) else None
            log(f"input: cache {cache} ({why}), shuffle buffer {data.shuffle_buffer:,}"
                + (f"; BPE-dropout {data.bpe_dropout:g} (a new segmentation each epoch, not seeded)"
                   if data.bpe_dropout else "")
                + (f"; corpora {', '.join(f'{n} {100 * w:.1f}%' for n, w in zip(mixture.names, mixture.weights))}"
                   if mixture else ""))
            input_fn = batching.make_input_fn(
                (lambda: pairs) if mixture else (lambda: data.training_pairs()), source_tok,
                data.batch_tokens // training.accumulation_steps, target_tokenizer=target_tok,
                max_length=data.max_length, shuffle=True, seed=data.seed * 1_000_003 + start, repeat=True,
                shuffle_buffer=data.shuffle_buffer, cache=cache, cache_path=cache_path,
                bpe_dropout=data.bpe_dropout)
            evaluator = build_evaluator(data, decoding, model, source_tok, target_tok, bleu_sentences)
            if mixture:
                evaluator = _logging_shares(evaluator, mixture, log)
        state = trainer.train(input_fn, evaluator)
        if mixture and state.stop_reason == "interrupted":  # else the last evaluation logged them
            log(f"sampled pairs: {mixture.counter.summary()}")
        if training.average_last and chief and state.stop_reason != "interrupted":
            _average_unless_interrupted(state, model_dir, training, log)
    return state


def _tokenizers(run: TrainingDirectory, data: DataConfig, init: Optional[InitSource], log: Callable[[str], None]):
    """`(source, target)`: the run's saved tokenizer; else, on a new run, that of the run it starts
    from (`init`), or one trained on the training split. Nothing is saved here (`_save_tokenizers`
    does, once every check has passed), so a start refused by a check leaves no tokenizer that the
    next start, with other flags, would take for the run's."""
    from keras_transformer.pipelines import tokenizers  # pylint: disable=g-import-not-at-top

    if tokenizers.is_saved(run.tokenizer_dir):
        source, target = run.load_tokenizers()
        if not run.has_settings() and init is None:
            _check_found_tokenizer(run, data, source, target)
        return source, target
    if init is not None:
        return TrainingDirectory(init.run_dir).load_tokenizers()
    return run.load_or_train_tokenizers(data, save=False, log=log)


def _check_found_tokenizer(run: TrainingDirectory, data: DataConfig, source, target) -> None:
    """A new run (no model_config.json yet) that finds a tokenizer in MODEL_DIR/tokenizer trains
    with it (Table 3's rows get the base row's there): a one-line `ValueError` unless these flags
    could have trained it (its type, case, sharing, and no more ids than --vocab_size)."""
    settings = source.settings()
    found = {"tokenizer": settings["type"], "lowercase": settings["lowercase"], "shared_vocab": source is target}
    wanted = {"tokenizer": data.tokenizer, "lowercase": data.lowercase, "shared_vocab": data.shared_vocab}
    diff = [f"--{k}={str(found[k]).lower()}" for k in found if found[k] != wanted[k]]
    ids = max(source.vocab_size, target.vocab_size)
    if ids > data.vocab_size:
        diff.append(f"{ids} ids, more than --vocab_size={data.vocab_size}")
    if diff:
        raise ValueError(f"{run.tokenizer_dir}: a tokenizer these flags did not train ({'; '.join(diff)}), and "
                         f"{run.path} holds no run that uses it ({layout.CONFIG_FILE} is missing): remove the folder "
                         "to train a new one, or give the flags it was trained with")


def _save_tokenizers(run: TrainingDirectory, source, target) -> None:
    """Saves the tokenizers as the run's (MODEL_DIR/tokenizer), unless they are saved already."""
    from keras_transformer import cli  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import tokenizers  # pylint: disable=g-import-not-at-top

    if not tokenizers.is_saved(run.tokenizer_dir):
        with cli.silence_native_stderr():  # sentencepiece's C++ INFO lines
            tokenizers.save_pair(source, target, run.tokenizer_dir)


@contextlib.contextmanager
def _undone_if_first_start_fails(run: TrainingDirectory, made: list[str], had_lock: bool):
    """Around a run's start up to its first update: on a new run (no model_config.json, no
    checkpoint), whatever the block wrote in the directory is removed if it raises (a refused
    flag, a full disk, Ctrl-C), and its lock file and the folders `made` for it too when this
    start made them (`had_lock`: the lock file was there before): the next start then begins
    afresh with its own flags. A run started before, and anything the directory held, are left
    as they are. Called holding the `RunLock`."""
    from keras_transformer.training import run_lock  # pylint: disable=g-import-not-at-top

    if run.has_settings() or run.has_checkpoints():
        yield
        return
    kept = set(os.listdir(run.path)) - (set() if had_lock else {run_lock.LOCK_FILE})
    try:
        yield
    except BaseException:
        for name in sorted(set(os.listdir(run.path)) - kept):
            path = run.join(name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
        for folder in made:  # innermost first
            try:
                os.rmdir(folder)
            except OSError:  # not empty: another process wrote there meanwhile
                break
        raise


def _missing_folders(path: str) -> list[str]:
    """The folders of `path` that do not exist yet, `path` first, then its missing parents."""
    missing, path = [], os.path.abspath(path)
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        missing.append(path)
        path = os.path.dirname(path)
    return missing


def _average_unless_interrupted(state, model_dir: str, training, log: Callable[[str], None]) -> None:
    """`average_once` at the end of a run; SIGINT or SIGTERM meanwhile stops it at once (the
    previous average, if any, stays what translation and export use) and marks `state`
    interrupted: the same command started again averages (`average_once`)."""
    from keras_transformer.training import interrupts  # pylint: disable=g-import-not-at-top

    with interrupts.StopSignals() as signals:
        try:
            with signals.at_once():
                average_once(model_dir, training.average_last, state.step, best=bool(training.keep_best_checkpoints),
                             log=log)
        except interrupts.Interrupted as stop:
            state.stop_reason, state.signal = "interrupted", stop.signum
            log(f"{interrupts.name(stop.signum)} while averaging the checkpoints of step {state.step}: stopped; "
                "run the same command to finish the average")


def check_can_batch(data: DataConfig, source_tokenizer, target_tokenizer) -> None:
    """A one-line `DataError` unless each training corpus and the dev split hold a pair of at most
    `data.max_length` tokens a side (`keras_transformer.pipelines.batching.check_can_batch`): else training finds
    no batch at its first step, or the dev evaluation none at the first evaluation. The command
    checks the text files first, by words (`DataConfig.check_can_batch`), before anything is written."""
    from keras_transformer.pipelines import batching  # pylint: disable=g-import-not-at-top

    mixture = data.training_mixture()
    for name, load in zip(mixture.names, mixture.loaders):
        batching.check_can_batch(load(), source_tokenizer, data.max_length, target_tokenizer,
                                 f"training corpus {name}")
    batching.check_can_batch(data.load_pairs(data.dev_split), source_tokenizer, data.max_length, target_tokenizer,
                             f"the {data.dev_split} split")


def _logging_shares(evaluator, mixture, log: Callable[[str], None]):
    """`evaluator` that first logs each corpus' share of the pairs sampled so far."""

    def evaluate(model):
        log(f"sampled pairs: {mixture.counter.summary()}")
        return evaluator(model)

    return evaluate


def average_once(model_dir: str, count: int, step: int, best: bool = False,
                 log: Callable[[str], None] = _print) -> None:
    """Averages the last `count` checkpoints (with `best`: the best `count` of MODEL_DIR/best)
    into MODEL_DIR/averaged/ckpt-<step>, unless that average is already there (a finished run
    started again). A run that made fewer checkpoints than `count` averages those it has and
    says so: a budget that ended the run early must not cost it its model."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    from keras_transformer.run_dir import averaging, best_checkpoints  # pylint: disable=g-import-not-at-top
    from keras_transformer.run_dir import readable_checkpoints  # pylint: disable=g-import-not-at-top

    which = "best" if best else "last"
    done = tf.train.latest_checkpoint(readable_checkpoints.tf_path(os.path.join(model_dir, layout.AVERAGED_DIR)))
    if done and averaging.checkpoint_step(done) == step:
        log(f"the {which} {count} checkpoints were averaged before: {done}")
        return
    if best:
        paths = best_checkpoints.listed_prefixes(os.path.join(model_dir, layout.BEST_DIR))[:count]
    else:
        paths = readable_checkpoints.listed_checkpoints(os.path.join(model_dir, layout.CHECKPOINT_DIR))[-count:]
    if not paths:
        log(f"no {which} checkpoints to average (the run made no {'dev evaluation' if best else 'checkpoint'})")
        return
    path = averaging.average_checkpoints(model_dir, paths, step)
    steps = ", ".join(str(s) for s in sorted(averaging.checkpoint_step(p) for p in paths))
    fewer = f" (the run has {len(paths)}, fewer than the {count} asked for)" if len(paths) < count else ""
    log(f"averaged the {which} {len(paths)} checkpoints{fewer}, steps {steps}, into {path}")
