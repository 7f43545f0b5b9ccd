"""Serving: each toolkit's exported SavedModel and its CTranslate2 conversion, each timed in a
fresh process of its own on the same batches.

    serving(space, models, sentences=1000, batch_size=32, repeats=3)

From one trained model per toolkit (`models`: the first quality seed's, else the float32 speed
runs', else a short run made here, `short_models`):

* exports, each a timed command in a process of its own: ours `python -m keras_transformer.export
  --signatures=serving_default` (a SavedModel, tokenizer and beam search in its graph; its
  `serving_default` alone, as OpenNMT-tf's export holds one signature) and `python -m keras_transformer.export --format=ctranslate2`; the
  peer's `onmt-main export` (`--format saved_model`, the in-graph SentencePiece tokenizer: strings
  in and out) and `onmt-main export --format ctranslate2` (CTranslate2's OpenNMT-tf converter in
  the peer's venv). Both SavedModels decode with the same beam size and alpha; the project's
  output limit is per sentence (source + max_extra_length), OpenNMT-tf's one number, here the
  longest source of the timed sentences + max_extra_length.
* the first `sentences` lines of the test split, tokenized once by the shared SentencePiece
  model and cut into the same length-sorted batches (`corpus.length_sorted_batches`) for every engine;
* four workers, each a fresh process loading one engine (the protocol of `bench/engine_process.py`):
  ours' SavedModel (`engine_process`'s "saved_model": `serving_default`, strings to strings), the
  peer's SavedModel (`peer_engine`, under the peer's Python and TensorFlow 2.12, strings to
  strings), and each CTranslate2 folder run by the project venv's CTranslate2 4.x on the source
  pieces (`engine_process`'s "plain": `translate_batch` with the same beam, length penalty and
  output limit for both, its defaults otherwise), so the two fast paths differ in their model
  only;
* each engine warms up on one batch, then in each of `repeats` rounds translates every batch, one
  engine at a time (the others wait on their pipe), their order rotated each round, after a
  pause of `engine_process`'s settle time; best and median round per engine. Output tokens: each
  translation tokenized again by the shared model, plus one EOS per sentence. Each worker's peak
  RSS is read when it exits.

The exports and the timed rounds are one unit of the measurement's journal
(`opennmt_tf.journal.SERVING`: the engines take turns, so they are timed in one session), and
each short model one more (`serving_model_units`); a unit cut short is run again, its exports
made afresh.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import statistics
import subprocess
import time
from typing import Any

import engine_process  # bench/, the entry point's folder
from opennmt_tf import corpus, journal, peer_config, peer_venv, processes, train_runs
from opennmt_tf.workspace import Workspace

PEER_ENGINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer_engine.py")
SETTLE_SECONDS = 1.0  # as bench/serving_vs_ctranslate2.py: the last engine's spinning threads fall asleep
ENGINES = ("ours_saved_model", "peer_saved_model", "ours_ctranslate2", "peer_ctranslate2")
OURS_LAYER_NORM = {True: "--layer_norm=pre", False: "--layer_norm=post"}  # the peer's pre_norm -> ours' flag


class PeerEngineProcess(engine_process.EngineProcess):
    """`engine_process.EngineProcess`'s handle on a `peer_engine` worker under the peer's Python."""

    def __init__(self, name: str, spec: dict[str, Any], work: str,  # pylint: disable=super-init-not-called
                 python: str):
        self.name, self.info = name, None
        spec_path = os.path.join(work, f"{name}.json")
        with open(spec_path, "w", encoding="utf-8") as file:
            json.dump(spec, file)
        environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        self.process = subprocess.Popen([python, PEER_ENGINE, spec_path], env=environment, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, encoding="utf-8")


def version_folder(export_dir: str) -> str:
    """The one numbered version folder `python -m keras_transformer.export` wrote into `export_dir`."""
    versions = [name for name in os.listdir(export_dir) if name.isdigit()]
    if len(versions) != 1:
        raise RuntimeError(f"{export_dir}: expected one version folder, found {versions}")
    return os.path.join(export_dir, versions[0])


def ctranslate2_folder(export_dir: str) -> str:
    """The folder holding model.bin in `export_dir` (itself or its one version folder)."""
    if os.path.isfile(os.path.join(export_dir, "model.bin")):
        return export_dir
    return version_folder(export_dir)


def export_all(space: Workspace, models: dict, maximum_length: int) -> tuple[dict, dict]:
    """Both toolkits' SavedModel and CTranslate2 exports (in a fresh WORK/exports); returns
    ({engine: path}, {engine: seconds})."""
    exports = space.fresh_folder("exports")
    ours, peer = models["ours"], models["peer"]
    paths, seconds = {}, {}
    for format_, engine in (("saved_model", "ours_saved_model"), ("ctranslate2", "ours_ctranslate2")):
        target = os.path.join(exports, engine)
        finished = space.run(f"export-{engine}", space.commands.ours_export(ours.folder, target, space.decoding,
                                                                            format_), "ours", "export")
        paths[engine] = version_folder(target) if format_ == "saved_model" else ctranslate2_folder(target)
        seconds[engine] = finished.seconds
    overlay = peer_config.write_json(os.path.join(peer.folder, "serve.yml"), peer_config.decoding_overlay(
        space.decoding.beam_size, space.decoding.alpha, maximum_length))
    for format_, engine in (("saved_model", "peer_saved_model"), ("ctranslate2", "peer_ctranslate2")):
        target = os.path.join(exports, engine)
        finished = space.run(f"export-{engine}", space.commands.peer_export(peer.peer_files, overlay, target, format_),
                             "peer", "export", env=space.commands.peer_environment())
        paths[engine], seconds[engine] = target, finished.seconds
    return paths, seconds


def _specs(space: Workspace, paths: dict, sentences: list, pieces: list) -> dict:
    decoding = space.decoding.to_dict()
    ct2 = dict(engine="plain", batches=pieces, threads=space.threads, compute_type="float32", inter_threads=1,
               ct2_use_mkl=None, decoding=decoding)
    return {
        "ours_saved_model": dict(engine="saved_model", path=paths["ours_saved_model"], batches=sentences,
                                 threads=space.threads, decoding=decoding),
        "peer_saved_model": dict(path=paths["peer_saved_model"], batches=sentences, threads=space.threads),
        "ours_ctranslate2": dict(ct2, path=paths["ours_ctranslate2"]),
        "peer_ctranslate2": dict(ct2, path=paths["peer_ctranslate2"]),
    }


def _start(space: Workspace, specs: dict) -> dict:
    work = space.fresh_folder("engines")
    python = peer_venv.python_of(space.commands.peer_venv)
    return {name: PeerEngineProcess(name, spec, work, python) if name == "peer_saved_model"
            else engine_process.EngineProcess(name, spec, work) for name, spec in specs.items()}


def _close(space: Workspace, workers: dict, started: float) -> dict:
    """Closes every worker (stdin closed: it exits) and returns {engine: peak RSS bytes}."""
    peaks = {}
    for name, worker in workers.items():
        try:
            worker.process.stdin.close()
        except OSError:
            pass
        peaks[name] = processes.reap(worker.process)
        toolkit = name.split("_", 1)[0]
        space.record_process(name, toolkit, "serving_" + name.split("_", 1)[1], worker.process.args,
                             time.monotonic() - started, peaks[name])
    return peaks


def _texts(space: Workspace, name: str, outputs: list) -> list[str]:
    """An engine's translations as text (CTranslate2's pieces detokenized by the shared model)."""
    flat = [output for batch in outputs for output, _ in batch]
    return space.tokenizer.detokenize(flat) if name.endswith("ctranslate2") else flat


def serving(space: Workspace, models: dict, sentences: int, batch_size: int, repeats: int) -> dict:
    """Exports, then times the four engines (module docstring): the journal's result if a session
    finished them."""

    def make():
        return _serve(space, models, sentences, batch_size, repeats), None

    return train_runs.unit(space, journal.SERVING, make)[0]


def _serve(space: Workspace, models: dict, sentences: int, batch_size: int, repeats: int) -> dict:
    lines = corpus.read_lines(space.data["test"][0])[:sentences or None]
    source_pieces = space.tokenizer.tokenize(lines)
    batches = corpus.length_sorted_batches(source_pieces, batch_size)
    maximum_length = max(len(p) for p in source_pieces) + space.decoding.max_extra_length
    paths, export_seconds = export_all(space, models, maximum_length)
    specs = _specs(space, paths, [[lines[i] for i in b] for b in batches], [[source_pieces[i] for i in b]
                                                                              for b in batches])
    started = time.monotonic()
    workers = _start(space, specs)
    seconds: dict[str, list] = {name: [] for name in workers}
    outputs: dict[str, list] = {}
    try:
        infos = {name: worker.ready() for name, worker in workers.items()}
        for name, worker in workers.items():
            worker.request("warm_up")
            space.log(f"[{name}] loaded in {infos[name]['load_seconds']:.1f} s (pid {infos[name]['pid']})")
        order = list(workers)
        for round_ in range(repeats):
            for name in order[round_ % len(order):] + order[:round_ % len(order)]:
                time.sleep(SETTLE_SECONDS)
                reply = workers[name].request("translate")
                seconds[name].append(reply["seconds"])
                outputs.setdefault(name, reply["outputs"])
                space.log(f"[{name}] round {round_ + 1}: {len(lines) / reply['seconds']:,.1f} sentences/s")
    finally:
        peaks = _close(space, workers, started)
    engines = {}
    for name in workers:
        texts = _texts(space, name, outputs[name])
        tokens = sum(len(p) + 1 for p in space.tokenizer.tokenize(texts))
        best, median = min(seconds[name]), statistics.median(seconds[name])
        engines[name] = {"best_seconds": best, "median_seconds": median, "rounds": seconds[name],
                         "sentences_per_second": len(lines) / best, "median_sentences_per_second": len(lines) / median,
                         "target_tokens_per_second": tokens / best, "output_tokens_per_sentence": tokens / len(lines),
                         "load_seconds": infos[name]["load_seconds"], "peak_rss_bytes": peaks[name],
                         "path": paths[name], "threads": infos[name].get("tensorflow_threads"),
                         "ctranslate2": infos[name].get("ctranslate2"), "export_seconds": export_seconds[name],
                         "sample": texts[:3]}
    return {"sentences": len(lines), "batch_size": batch_size, "batches": len(batches), "repeats": repeats,
            "peer_maximum_decoding_length": maximum_length, "decoding": space.decoding.to_dict(),
            "engines": engines, "models": {toolkit: run.name for toolkit, run in models.items()}}


def serving_model_units() -> list[str]:
    """The journal's keys of `short_models`' runs."""
    return [journal.serving_model_key(toolkit) for toolkit in train_runs.TOOLKITS]


def short_models(space: Workspace, steps: int, warmup: int, log_every: int, seed: int) -> dict:
    """A model of each toolkit trained `steps` updates with a learning-rate warm-up of `warmup`
    updates (0: the recipe's), each in the precision its documentation recommends (ours' weights
    are float32 either way), for serving without a quality or speed part; or the journal's where
    a session made it. Ours takes the peer's LayerNorm placement (`OURS_LAYER_NORM`): both then
    serve the same architecture, and a pre-LN model translates after far fewer updates (ours
    post-LN at the base shape wrote one sentence for every source after 300)."""
    training = dataclasses.replace(train_runs.speed_training(space, steps, log_every), seed=seed,
                                   warmup_steps=warmup or space.recipe.training.warmup_steps)
    models = {}
    for toolkit in train_runs.TOOLKITS:
        key = journal.serving_model_key(toolkit)
        _, models[toolkit] = train_runs.unit(space, key, functools.partial(_short_model, space, key, toolkit, training))
    return models


def _short_model(space: Workspace, key: str, toolkit: str, training) -> tuple[dict, train_runs.Run]:
    extra = (*train_runs.SPEED_EXTRA, OURS_LAYER_NORM[space.peer_options.pre_norm]) if toolkit == "ours" else ()
    run = train_runs.train(space, toolkit, key, training, train_runs.RECOMMENDED[toolkit], extra=extra)
    return {"seconds": run.finished.seconds}, run
