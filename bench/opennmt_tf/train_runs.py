"""Training runs of both toolkits, and the three parts measured on them: speed, start-up, quality.

    run = train(space, "ours", "speed-ours-float32-1", training, precision="float32")
    speed(space, rounds=2, steps=600, warmup=100, log_every=50, seed=1)  # -> {"float32": {...}, "recommended": {...}}
    startup(space, seed=1)                                               # -> seconds to the first update
    quality(space, [1, 2], training)                                     # -> dev BLEU in both conventions,
                                                                         #    at equal updates and wall-clock

Every run is a fresh process of its own (`Workspace.run`), the toolkits alternating. A run of
the project is `python -m keras_transformer.train` on a new training directory holding the
shared tokenizer; a run of the peer `onmt-main ... train` with the files `peer_config.write`
made from the same `TrainingConfig`. Each run's parameters are checked against the counts from
the sizes alone: the project's against `TransformerConfig.num_parameters`, the peer's against
`peer_config.parameter_count` of the written model.py and vocab.txt (a mismatch stops the
measurement: the formula the tests check the shape with must be the real thing).

Speed runs: --speed_steps updates of the recipe without its cool-down, without dev evaluation or
checkpoints until the end, a progress line every --log_every updates; target tokens/s over the
intervals after --speed_warmup updates (`training_logs.throughput`). The project's training switches
to its XLA-compiled loss after update `OURS_COMPILE_LOSS_AFTER`; the part says which loss ours ran
over its window (`ours_loss`). A speed round the journal holds must have been measured over the
measurement's window (`check_window`). Start-up: a run logging every update (`startup_training`:
ours' --log_every_steps=1, the peer's save_summary_steps: 1), stopped at its progress line of update
1; the seconds from the command's start to that line (`training_logs.first_update`). Quality: the
recipe's whole run per seed, each toolkit's own averaging of its last (the peer) or best (ours)
checkpoints, then the whole validation split translated with beam search by each toolkit's own
command and scored here in both conventions (`keras_transformer.metrics`); per seed once both its
runs are done, test2016 translated once by each averaged model and scored likewise (`_test_run`);
every checkpoint of a quality run is kept (`wallclock.keep_every_checkpoint`: the same averaging).
Quality at equal wall-clock, per seed once both its runs are done: the faster toolkit's last
checkpoint against the slower's newest at that time T, single checkpoints, both translated and
scored likewise (`opennmt_tf.wallclock` has the rule).

Each run and what is measured on it is one unit of the measurement's journal (`opennmt_tf.journal`,
`unit`): a unit a session finished is not run again, its result and run folder are the journal's
(`speed_units`, `startup_units`, `quality_units` list them in the order they run), and a unit
cut short is run again in a fresh folder.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import statistics
from typing import Any, Callable, Optional

from keras_transformer import metrics

from opennmt_tf import journal, peer_config, processes, training_logs, wallclock
from opennmt_tf.workspace import Workspace

TOOLKITS = ("ours", "peer")
PEER_PRECISION = "float32"  # OpenNMT-tf's documentation: mixed precision (float16) needs a Volta GPU or later
RECOMMENDED = {"ours": "auto", "peer": PEER_PRECISION}
# keras_transformer.training.trainer.COMPILE_LOSS_AFTER, read here without importing TensorFlow (a test keeps them
# equal): ours trains with TensorFlow's kernels up to this update and with its XLA-compiled loss after it.
OURS_COMPILE_LOSS_AFTER = 200
# A round of the speed part, and the start-up part: (toolkit, precision) in the order they run.
PLAN = (("ours", "float32"), ("peer", PEER_PRECISION), ("ours", RECOMMENDED["ours"]))


@dataclasses.dataclass
class Run:
    """One finished training run: its toolkit, folder (ours: the training directory), the peer's
    files, its process record and what its console said."""

    toolkit: str
    name: str
    folder: str
    finished: Any
    peer_files: Optional[peer_config.PeerFiles] = None
    precision: Optional[str] = None

    @property
    def lines(self):
        return self.finished.lines

    def to_journal(self) -> dict:
        """What a later session needs of this run to serve its model (its console is in its log)."""
        return {"toolkit": self.toolkit, "name": self.name, "folder": self.folder, "precision": self.precision,
                "peer_files": dataclasses.asdict(self.peer_files) if self.peer_files else None}

    @classmethod
    def from_journal(cls, values: dict) -> "Run":
        """A run an earlier session finished (`to_journal`), without its process record."""
        files = values["peer_files"]
        return cls(values["toolkit"], values["name"], values["folder"], None,
                   peer_config.PeerFiles(**files) if files else None, values["precision"])


def unit(space: Workspace, key: str, make: Callable[[], tuple]) -> tuple[Any, Optional[Run]]:
    """The unit `key`'s (result, run): the journal's if a session finished it, else `make()`'s
    (a (result, `Run` or None) pair), recorded in the journal as soon as it ends."""
    entry = space.journal.entry(key)
    if entry is not None:
        space.log(f"[{key}] done in session {entry['session']} ({entry['date']}): taken from the journal")
        return entry["result"], Run.from_journal(entry["run"]) if entry.get("run") else None
    result, run = make()
    result = space.journal.record(key, result, run=run.to_journal() if run else None, processes=space.processes,
                                  parameters=space.parameters)
    return result, run


def _summary(run: Run) -> dict:
    """The project's `done:` line (updates, minutes), or the peer's last progress line's update."""
    if run.toolkit == "ours":
        for _, line in reversed(run.lines):
            if line.startswith("done: "):
                return json.loads(line[len("done: "):])
        return {}
    progress = training_logs.peer_points(run.lines)
    return {"step": progress[-1].step if progress else None}


def check_parameters(space: Workspace, run: Run) -> dict:
    """The run's parameter count as its console says it, against the count from the sizes; raises
    RuntimeError if they differ."""
    said = training_logs.parameters(run.toolkit, run.lines)
    if run.toolkit == "ours":
        expected = dataclasses.replace(space.recipe.model, vocab_size=len(space.tokenizer.pieces())).num_parameters
        source = "TransformerConfig.num_parameters"
    else:
        settings = peer_config.read_model_settings(run.peer_files.model)
        expected = peer_config.parameter_count(settings, peer_config.vocabulary_size(run.peer_files.vocabulary))
        source = "peer_config.parameter_count"
    if said is None:
        raise RuntimeError(f"{run.name}: its console gave no parameter count ({run.finished.log_path})")
    if said != expected:
        raise RuntimeError(f"{run.name}: {said:,} parameters, but {source} of its settings gives {expected:,}")
    space.parameters[run.toolkit] = said
    return {"said": said, "expected": expected, "by": source}


def train(space: Workspace, toolkit: str, name: str, training, precision: str, with_eval: bool = False,
          extra: tuple = (), stop_when=None) -> Run:
    """One training run of `toolkit` with `training` (a `TrainingConfig`) at `precision`
    ("float32", "auto", ...; the peer: float32 only), in a fresh folder runs/NAME (a run cut short
    in an earlier session leaves one)."""
    folder = space.fresh_folder("runs", name)
    training = dataclasses.replace(training, precision=precision if toolkit == "ours" else "float32")
    if toolkit == "ours":
        space.copy_tokenizer(folder)
        command = space.commands.ours_train(folder, training, extra)
        finished = space.run(name, command, "ours", "training", stop_when=stop_when)
        run = Run("ours", name, folder, finished, precision=training_logs.auto_precision(finished.lines) or precision)
    else:
        if precision != PEER_PRECISION:
            raise ValueError(f"the peer trains in {PEER_PRECISION} on a CPU, not {precision}")
        files = peer_config.write(folder, space.recipe.model, training, space.recipe.batch_tokens, space.peer_data(),
                                  space.tokenizer.path, space.tokenizer.pieces(), space.peer_options)
        command = space.commands.peer_train(files, training.seed, with_eval=with_eval)
        finished = space.run(name, command, "peer", "training", env=space.commands.peer_environment(),
                             stop_when=stop_when)
        run = Run("peer", name, folder, finished, files, PEER_PRECISION)
    return run


def speed_training(space: Workspace, steps: int, log_every: int):
    """The recipe's `TrainingConfig` for a speed run: `steps` updates, no cool-down, no evaluation
    or checkpoint before the end, nothing averaged."""
    return dataclasses.replace(space.recipe.training, train_steps=steps, cooldown_steps=0, checkpoint_every_steps=0,
                               eval_every_steps=0, early_stopping_patience=0, keep_best_checkpoints=0, average_last=0,
                               log_every_steps=log_every)


SPEED_EXTRA = ("--eval_max_sentences=-1",)  # ours: the end-of-run evaluation computes the dev loss only


def speed_units(rounds: int) -> list[str]:
    """The journal's keys of the speed part's runs, in the order they run."""
    return [journal.speed_key(toolkit, precision, round_) for round_ in range(1, rounds + 1)
            for toolkit, precision in PLAN]


def ours_loss(from_update: int, to_update: int) -> str:
    """Which loss ours trains with over the updates after `from_update` up to `to_update`:
    "uncompiled", "compiled" (XLA, after `OURS_COMPILE_LOSS_AFTER`) or "both"."""
    if to_update <= OURS_COMPILE_LOSS_AFTER:
        return "uncompiled"
    return "compiled" if from_update >= OURS_COMPILE_LOSS_AFTER else "both"


def check_window(key: str, measured: dict, steps: int, warmup: int, log_every: int) -> None:
    """Raises RuntimeError unless the speed round `measured` (a unit's result, perhaps the
    journal's) spans the window of a run of `steps` updates after `warmup`, as `throughput`
    measures it: from its first progress line at or after update `warmup` to its last line (each
    within one log interval of those updates)."""
    first, last = measured["from_update"], measured["to_update"]
    if not (warmup <= first < warmup + log_every and steps - log_every < last <= steps):
        raise RuntimeError(f"{key}: measured over updates {first}-{last}, not the window of this measurement "
                           f"({steps} updates, the first {warmup} left out, a progress line every {log_every})")


def _speed_run(space: Workspace, key: str, toolkit: str, precision: str, round_: int, training,
               warmup: int) -> tuple[dict, Run]:
    run = train(space, toolkit, key, training, precision, extra=SPEED_EXTRA if toolkit == "ours" else ())
    measured = training_logs.throughput(training_logs.points(toolkit, run.lines), warmup)
    measured.update(round=round_, precision=run.precision, parameters=check_parameters(space, run),
                    seconds=run.finished.seconds, peak_rss_bytes=run.finished.peak_rss_bytes)
    space.log(f"[{run.name}] {measured['tokens_per_second']:,.0f} target tokens/s over updates "
              f"{measured['from_update']}-{measured['to_update']}")
    return measured, run


def speed(space: Workspace, rounds: int, steps: int, warmup: int, log_every: int, seed: int) -> dict:
    """Target tokens/s of both toolkits in float32 and in each one's recommended precision,
    `rounds` times, alternating: per round ours float32, the peer float32, ours auto (the
    peer's recommended precision is float32: its float32 runs stand for both)."""
    training = dataclasses.replace(speed_training(space, steps, log_every), seed=seed)
    results: dict[tuple, list] = {}
    last: dict[str, Run] = {}
    for round_ in range(1, rounds + 1):
        for toolkit, precision in PLAN:
            key = journal.speed_key(toolkit, precision, round_)
            entry = space.journal.entry(key)
            if entry is not None:  # measured by an earlier session: over this measurement's window?
                check_window(key, entry["result"], steps, warmup, log_every)
            measured, run = unit(space, key, functools.partial(_speed_run, space, key, toolkit, precision, round_,
                                                               training, warmup))
            results.setdefault((toolkit, precision), []).append(measured)
            if precision == "float32":
                last[toolkit] = run

    def summary(rows: list) -> dict:
        best = max(rows, key=lambda r: r["tokens_per_second"])
        return {"tokens_per_second": best["tokens_per_second"],
                "median_tokens_per_second": statistics.median(r["tokens_per_second"] for r in rows),
                "updates_per_second": best["updates_per_second"], "tokens_per_update": best["tokens_per_update"],
                "precision": best["precision"], "rounds": rows}

    float32 = {toolkit: summary(results[(toolkit, "float32")]) for toolkit in TOOLKITS}
    recommended = {"ours": summary(results[("ours", RECOMMENDED["ours"])]),
                   "peer": dict(float32["peer"], same_runs_as="float32")}
    windows = {(r["from_update"], r["to_update"]) for (toolkit, _), rows in results.items() if toolkit == "ours"
               for r in rows}
    return {"steps": steps, "warmup": warmup, "log_every": log_every, "float32": float32,
            "recommended": recommended, "ours_loss": "/".join(sorted({ours_loss(*w) for w in windows})),
            "models": last}


def startup_units() -> list[str]:
    """The journal's keys of the start-up part's runs, in the order they run."""
    return [journal.startup_key(toolkit, precision) for toolkit, precision in PLAN]


def startup_training(space: Workspace, seed: int):
    """A start-up run's `TrainingConfig`: a speed run of 3 updates logging every one (ours'
    --log_every_steps=1, the peer's save_summary_steps: 1), so that update 1 has its progress line."""
    return dataclasses.replace(speed_training(space, 3, 1), seed=seed)


def _startup_run(space: Workspace, key: str, toolkit: str, precision: str, training) -> tuple[dict, Run]:
    """A start-up run, stopped at its progress line of update 1 (after the lines that give its
    parameter count)."""
    run = train(space, toolkit, key, training, precision, extra=SPEED_EXTRA if toolkit == "ours" else (),
                stop_when=functools.partial(training_logs.is_first_update, toolkit))
    seconds = training_logs.first_update(toolkit, run.lines)
    if seconds is None:
        raise RuntimeError(f"{key}: no first update in its console ({run.finished.log_path})")
    space.log(f"[{key}] first update {seconds:.1f} s after the command started")
    return {"seconds": seconds, "precision": run.precision, "parameters": check_parameters(space, run)}, run


def startup(space: Workspace, seed: int) -> dict:
    """Seconds from each training command's start to its first update: ours in float32 and with
    --precision=auto (its start-up timing of bfloat16 included), the peer in float32."""
    training = startup_training(space, seed)
    result = {}
    for toolkit, precision in PLAN:
        key = journal.startup_key(toolkit, precision)
        result[f"{toolkit}_{precision}"], _ = unit(space, key, functools.partial(_startup_run, space, key, toolkit,
                                                                                 precision, training))
    return result


def translate(space: Workspace, run: Run, split: str = "dev_translation", checkpoint: Optional[str] = None,
              output: Optional[str] = None, name: Optional[str] = None) -> str:
    """The source side of `split` (a key of `Workspace.data`: "dev_translation", the validation
    split, or "test", test2016) translated by the run's toolkit with beam search: its averaged
    model, or the checkpoint prefix `checkpoint`; into `output` (default RUN/validation.hyp; the
    peer's decoding settings beside it) by the process `name` (default RUN-translate). Returns
    the translations' file."""
    source = space.data[split][0]
    output = output or os.path.join(run.folder, "validation.hyp")
    name = name or f"{run.name}-translate"
    if run.toolkit == "ours":
        command = space.commands.ours_translate(run.folder, source, output, space.decoding, checkpoint)
        space.run(name, command, "ours", "translation")
    else:
        longest = max(len(p) for p in space.tokenizer.tokenize(_lines(source)))
        overlay = peer_config.write_json(os.path.join(os.path.dirname(output), "decode.yml"),
                                         peer_config.decoding_overlay(space.decoding.beam_size, space.decoding.alpha,
                                                                      longest + space.decoding.max_extra_length))
        command = space.commands.peer_infer(run.peer_files, overlay, source, output, checkpoint)
        space.run(name, command, "peer", "translation", env=space.commands.peer_environment())
    return output


def _lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as file:
        return [line.rstrip("\n") for line in file]


def score(hypotheses_path: str, references_path: str, lang: str) -> dict:
    """Cased sacreBLEU and the lowercased Moses-tokenized BLEU of a translation file."""
    hypotheses, references = _lines(hypotheses_path), _lines(references_path)
    cased, moses = metrics.corpus_bleu(hypotheses, references), metrics.moses_bleu(hypotheses, references, lang)
    return {"bleu": cased.score, "bleu_signature": cased.signature, "bleu_lc_moses": moses.score,
            "bleu_lc_moses_signature": moses.signature}


def quality_training(training, steps: int):
    """`training` (the recipe's `TrainingConfig`), or with `steps` updates (not 0) its warm-up,
    cool-down, evaluation, checkpoint and log intervals scaled to the same shares of the run."""
    if not steps or steps == training.train_steps:
        return training

    def share(value: int) -> int:
        return max(1, round(value * steps / training.train_steps)) if value else 0

    return dataclasses.replace(training, train_steps=steps, warmup_steps=share(training.warmup_steps),
                               cooldown_steps=share(training.cooldown_steps),
                               checkpoint_every_steps=share(training.checkpoint_every_steps),
                               eval_every_steps=share(training.eval_every_steps),
                               log_every_steps=share(training.log_every_steps))


def quality_units(seeds: list[int]) -> list[str]:
    """The journal's keys of the quality part's units, in the order they run: per seed each
    toolkit's run, the seed's comparison at equal wall-clock, then its test2016 scores."""
    return [key for seed in seeds
            for key in (*(journal.quality_key(toolkit, seed) for toolkit in TOOLKITS),
                        journal.quality_wallclock_key(seed), journal.quality_test_key(seed))]


def _quality_run(space: Workspace, key: str, toolkit: str, training) -> tuple[dict, Run]:
    """One quality run, its translation of the dev split and its scores: a row of the part."""
    run = train(space, toolkit, key, training, RECOMMENDED[toolkit], with_eval=True)
    scores = score(translate(space, run), space.data["dev_translation"][1], space.recipe.flags["target_lang"])
    summary = _summary(run)
    row = {"seed": training.seed, "precision": run.precision, "updates": summary.get("step"),
           "train_minutes": run.finished.seconds / 60, "peak_rss_bytes": run.finished.peak_rss_bytes,
           "keep_checkpoints": training.keep_checkpoints, "parameters": check_parameters(space, run), **scores}
    space.log(f"[{run.name}] dev BLEU {row['bleu']:.2f} (lowercased Moses-tokenized {row['bleu_lc_moses']:.2f}) "
              f"after {row['updates']} updates, {row['train_minutes']:.1f} min")
    return row, run


def training_log(space: Workspace, run: Run) -> str:
    """The harness's log of a training run's console (WORK/logs/NAME.log, kept with the work folder)."""
    return os.path.join(space.work, "logs", f"{run.name}.log")


def _wallclock_run(space: Workspace, key: str, seed: int, runs: dict, training) -> tuple[dict, None]:
    """The seed's comparison at equal wall-clock (`opennmt_tf.wallclock`): from both finished
    quality runs' logs and checkpoints, the faster toolkit's last checkpoint and the slower's at T,
    each translated (beam search, the whole dev split) and scored in both conventions. What cannot
    be measured (a checkpoint rotated away, a log gone) is recorded with its reason, not raised."""
    result: dict[str, Any] = {"seed": seed, "rule": wallclock.RULE, "measured": False}
    try:
        saves = {}
        for toolkit in TOOLKITS:
            path = training_log(space, runs[toolkit])
            if not os.path.isfile(path):
                raise wallclock.NotMeasured(f"{wallclock.OF[toolkit]} training log {path} is gone")
            saves[toolkit] = training_logs.checkpoint_saves(toolkit, processes.read_log(path),
                                                            training.checkpoint_every_steps)
        timing = wallclock.choose(saves)
        prefixes = wallclock.locate(timing, {toolkit: wallclock.kept(wallclock.checkpoint_folders(toolkit, run))
                                             for toolkit, run in runs.items()})
    except wallclock.NotMeasured as missing:
        result.update(missing.details)
        space.log(f"[{key}] not measured: {missing}")
        return result, None
    folder = space.fresh_folder("runs", key)
    result.update(measured=True, faster=timing["faster"], slower=timing["slower"], t_seconds=timing["t_seconds"],
                  t_minutes=timing["t_seconds"] / 60)
    for toolkit in TOOLKITS:
        chosen = timing[toolkit]
        output = os.path.join(folder, f"{toolkit}-ckpt-{chosen['update']}.hyp")
        translate(space, runs[toolkit], "dev_translation", prefixes[toolkit], output, f"{key}-{toolkit}-translate")
        scores = score(output, space.data["dev_translation"][1], space.recipe.flags["target_lang"])
        result[toolkit] = {**chosen, "checkpoint": os.path.relpath(prefixes[toolkit], space.work), **scores}
    slower = timing["slower"]
    space.log(f"[{key}] T = {timing['t_seconds'] / 60:.1f} min ({wallclock.OF[timing['faster']]} last "
              f"checkpoint); {wallclock.NAMES[slower]} at T: update {timing[slower]['update']}; dev BLEU ours "
              f"{result['ours']['bleu']:.2f}, OpenNMT-tf {result['peer']['bleu']:.2f}")
    return result, None


def _test_run(space: Workspace, key: str, seed: int, runs: dict, rows: dict) -> tuple[dict, None]:
    """The seed's test2016 scores at equal updates: each toolkit's averaged model of its quality
    run (the model its dev row scored; `rows`: toolkit -> that row) translates the whole test
    split once, with the same beam search, into runs/KEY/TOOLKIT.hyp; scored in both conventions."""
    folder = space.fresh_folder("runs", key)
    result: dict[str, Any] = {"seed": seed, "sentences": len(_lines(space.data["test"][0]))}
    for toolkit in TOOLKITS:
        output = translate(space, runs[toolkit], "test", output=os.path.join(folder, f"{toolkit}.hyp"),
                           name=f"{key}-{toolkit}-translate")
        result[toolkit] = {"updates": rows[toolkit]["updates"],
                           **score(output, space.data["test"][1], space.recipe.flags["target_lang"])}
    space.log(f"[{key}] test2016 BLEU ours {result['ours']['bleu']:.2f} ({result['ours']['bleu_lc_moses']:.2f}), "
              f"OpenNMT-tf {result['peer']['bleu']:.2f} ({result['peer']['bleu_lc_moses']:.2f}): cased "
              "(lowercased Moses-tokenized)")
    return result, None


def quality(space: Workspace, seeds: list[int], training) -> dict:
    """The run of `training` (the recipe's, or `quality_training`'s; every checkpoint kept:
    `wallclock.keep_every_checkpoint`) per seed and toolkit (alternating), each one's dev BLEU,
    then the seed's comparison at equal wall-clock ("wallclock") and its test2016 scores ("test":
    the averaged models, translated once); "models": the first seed's runs (the journal's where an
    earlier session made them)."""
    kept = wallclock.keep_every_checkpoint(training)
    result: dict[str, Any] = {"seeds": seeds, "train_steps": training.train_steps, "ours": [], "peer": [],
                              "wallclock": [], "test": [], "models": {}}
    for seed in seeds:
        seeded = dataclasses.replace(kept, seed=seed)
        runs, rows = {}, {}
        for toolkit in TOOLKITS:
            key = journal.quality_key(toolkit, seed)
            rows[toolkit], runs[toolkit] = unit(space, key, functools.partial(_quality_run, space, key, toolkit,
                                                                              seeded))
            result[toolkit].append(rows[toolkit])
            if seed == seeds[0]:
                result["models"][toolkit] = runs[toolkit]
        key = journal.quality_wallclock_key(seed)
        measured, _ = unit(space, key, functools.partial(_wallclock_run, space, key, seed, runs, seeded))
        result["wallclock"].append(measured)
        key = journal.quality_test_key(seed)
        tested, _ = unit(space, key, functools.partial(_test_run, space, key, seed, runs, rows))
        result["test"].append(tested)
    return result
