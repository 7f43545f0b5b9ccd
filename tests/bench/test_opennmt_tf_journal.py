"""bench/opennmt_tf/journal.py: a measurement spread over sessions gives the one-go run's results.

The journal survives a round trip through its file and is never half-written; a resumed
measurement refuses another host or other flags with one line naming the difference; a journal
holding 0 for the speed window keeps the window it was made with; and
`train_runs.speed`/`quality` on a workspace whose child processes are faked (`Workspace.run`
records each call and answers with a console of numbers fixed by the run's name) run only the
units the journal lacks, a unit cut short again in a fresh folder, and merge into the results of a
one-go run; serving, its short models and the workspace's data and tokenizer are taken from the
journal likewise; start-up runs stop at each toolkit's progress line of update 1. No TensorFlow,
no training.
"""

import dataclasses
import gzip
import json
import os
import pathlib
import re
import sys
import types

import pytest
import yaml

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from keras_transformer.config import DecodingConfig  # noqa: E402

from opennmt_tf import journal, peer_config, peer_venv, processes, recipe, serve_runs, train_runs  # noqa: E402
from opennmt_tf import workspace  # noqa: E402
from opennmt_tf.toolkits import Commands  # noqa: E402

RECIPE = BENCH.parent / "configs" / "multi30k_en_de.flags"
HOST = {"cpu": "Intel(R) Xeon(R) Platinum 8488C", "flags": ["avx2", "avx512f", "avx512_bf16", "amx_bf16"],
        "cores": 2, "load_average": [1.0, 1.0, 1.0], "python": "3.11.9"}
MEASUREMENT = journal.Measurement(
    recipe=str(RECIPE), shape="recipe", parts=("speed", "quality"), seeds=(1, 2), data_dir="/data/multi30k",
    quality_steps=0, dev_sentences=0, speed_steps=200, speed_warmup=100, log_every=50, speed_rounds=2,
    serving_sentences=1000, batch_size=32, repeats=3, threads=0, beam_size=4, alpha=0.6, max_extra_length=50,
    peer_pre_norm=True, peer_cooldown=True)
DEV = ["a man rides a horse on the beach", "two dogs play in the snow", "a child reads a book", "people walk"]


def started(work, measurement=MEASUREMENT):
    book = journal.Journal.start(str(work), measurement, HOST, {"batch_tokens": "4000"}, peer_venv.PINS)
    book.begin_session("bench/opennmt_tf_side_by_side.py --keep")
    return book


def test_round_trip_through_the_file(tmp_path):
    book = started(tmp_path)
    run = {"toolkit": "peer", "name": "quality-peer-seed1", "folder": str(tmp_path / "runs" / "quality-peer-seed1"),
           "precision": "float32", "peer_files": {"config": "c.yml", "model": "m.py", "vocabulary": "v.txt",
                                                   "model_dir": "run"}}
    process = {"name": "quality-peer-seed1", "toolkit": "peer", "kind": "training", "seconds": 60.5,
               "peak_rss_bytes": 2**30, "returncode": 0, "log": "x.log"}
    row = {"seed": 1, "bleu": 35.25, "updates": 7000, "parameters": {"said": 10, "expected": 10, "by": "formula"}}
    assert book.record("quality-peer-seed1", row, run=run, processes=[process], parameters={"peer": 10}) == row
    again = journal.Journal.read(str(tmp_path))
    assert again.measurement == MEASUREMENT and isinstance(again.measurement.seeds, tuple)
    entry = again.entry("quality-peer-seed1")
    assert (entry["result"], entry["run"], entry["session"]) == (row, run, 1)
    assert again.processes == [process] and again.parameters == {"peer": 10}
    assert [s["command"] for s in again.sessions] == ["bench/opennmt_tf_side_by_side.py --keep"]
    assert again.begin_session("--resume") == 2 and journal.Journal.read(str(tmp_path)).sessions[1]["session"] == 2
    assert train_runs.Run.from_journal(run).peer_files == peer_config.PeerFiles("c.yml", "m.py", "v.txt", "run")
    assert again.progress(["workspace", "quality-peer-seed1"]) == (["quality-peer-seed1"], ["workspace"])
    summary = again.summary(["quality-peer-seed1", "quality-ours-seed2"])
    assert list(summary["units"]) == ["quality-peer-seed1"] and summary["units"]["quality-peer-seed1"]["session"] == 1
    assert summary["resumed"][0]["units"] == ["quality-peer-seed1"] and summary["resumed"][1]["units"] == []


def test_a_failed_write_leaves_the_journal_as_it_was(tmp_path, monkeypatch):
    book = started(tmp_path)
    book.record("workspace", {"data": {}}, processes=[], parameters={})
    before = (tmp_path / journal.JOURNAL_FILE).read_bytes()
    with pytest.raises(TypeError):  # json cannot write the object: serialization stops halfway
        book.record("speed-ours-float32-1", {"tokens_per_second": 1.0, "bad": object()}, processes=[], parameters={})

    def crash(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        book.record("speed-ours-float32-1", {"tokens_per_second": 1.0}, processes=[], parameters={})
    monkeypatch.undo()
    assert (tmp_path / journal.JOURNAL_FILE).read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == [journal.JOURNAL_FILE]  # no temporary file left behind
    assert book.entry("speed-ours-float32-1") is None
    assert journal.Journal.read(str(tmp_path)).entry("speed-ours-float32-1") is None


def test_session_versions_and_the_base_shape_without_quality(tmp_path):
    book = journal.Journal.start(str(tmp_path), MEASUREMENT, HOST, {}, peer_venv.PINS)
    versions = {"python": "3.11.7", "tensorflow": "2.21.0"}
    book.begin_session("--keep", versions=versions)
    book.begin_session("--resume")  # a session recorded without them (as before they were recorded)
    assert [s.get("versions") for s in journal.Journal.read(str(tmp_path)).sessions] == [versions, None]
    with pytest.raises(ValueError) as raised:
        dataclasses.replace(MEASUREMENT, shape="base", parts=("speed", "quality"))
    assert str(raised.value) == ("--shape=base measures speed, start-up and serving; quality runs the recipe's "
                                 "shape (leave quality out of --parts, or give --shape=recipe)")
    assert dataclasses.replace(MEASUREMENT, shape="base", parts=("speed", "serving")).shape == "base"


ZEROS = {"speed_steps": 0, "speed_warmup": 0, "log_every": 0}


def test_a_journal_holding_0_keeps_the_speed_window_it_was_made_with(tmp_path):
    unresolved = dataclasses.replace(MEASUREMENT, **ZEROS)
    resolved = unresolved.with_speed_defaults(journal.SPEED_DEFAULTS)
    assert (resolved.speed_steps, resolved.speed_warmup, resolved.log_every) == (1000, 400, 50)
    base = dataclasses.replace(unresolved, shape="base", parts=("speed",)).with_speed_defaults()
    assert (base.speed_steps, base.speed_warmup, base.log_every) == (200, 50, 25)
    given = dataclasses.replace(unresolved, speed_steps=300).with_speed_defaults()
    assert (given.speed_steps, given.speed_warmup) == (300, 400)  # a number given is kept
    with pytest.raises(ValueError, match="not 0"):
        journal.Journal.start(str(tmp_path / "new"), unresolved, HOST, {}, peer_venv.PINS)
    book = journal.Journal.start(str(tmp_path / "new"), resolved, HOST, {}, peer_venv.PINS)
    assert journal.Journal.read(book.work).measurement == resolved
    # A journal written when 0 was stored and meant updates 100-600 of 600 (every flag as then).
    old = tmp_path / "old"
    started(old)
    path = old / journal.JOURNAL_FILE
    data = json.loads(path.read_text(encoding="utf-8"))
    data["measurement"].update(ZEROS)
    path.write_text(json.dumps(data), encoding="utf-8")
    book = journal.Journal.read(str(old))
    measurement = book.resume({}, HOST)
    assert (measurement.speed_steps, measurement.speed_warmup, measurement.log_every) == (600, 100, 50)
    assert book.resume({"speed_steps": 600, "log_every": 50}, HOST) == measurement
    with pytest.raises(ValueError, match="--speed_steps=1000 differs from the journal's --speed_steps=600"):
        book.resume({"speed_steps": 1000}, HOST)
    book.begin_session("--resume")
    book.record("speed-ours-float32-1", {"from_update": 100, "to_update": 600}, processes=[], parameters={})
    again = json.loads(path.read_text(encoding="utf-8"))
    assert {name: again["measurement"][name] for name in ZEROS} == ZEROS  # the file keeps what it held
    reread = journal.Journal.read(str(old)).measurement
    train_runs.check_window("speed-ours-float32-1", book.entry("speed-ours-float32-1")["result"], reread.speed_steps,
                            reread.speed_warmup, reread.log_every)  # its done speed units stay valid


def test_a_journal_made_before_the_serving_model_flags_reads_as_their_defaults(tmp_path):
    old = tmp_path / "old"
    started(old)
    path = old / journal.JOURNAL_FILE
    data = json.loads(path.read_text(encoding="utf-8"))
    for name in ("serving_steps", "serving_warmup"):
        del data["measurement"][name]
    path.write_text(json.dumps(data), encoding="utf-8")
    measurement = journal.Journal.read(str(old)).resume({}, HOST)
    assert (measurement.serving_steps, measurement.serving_warmup) == (0, 0)
    assert measurement == dataclasses.replace(MEASUREMENT, serving_steps=0, serving_warmup=0)
    with pytest.raises(ValueError, match="a measurement has the flags"):
        journal.Measurement.from_dict({**MEASUREMENT.to_dict(), "colour": 1})
    with pytest.raises(ValueError, match="a measurement has the flags"):
        journal.Measurement.from_dict({k: v for k, v in MEASUREMENT.to_dict().items() if k != "beam_size"})


def test_resume_refusals(tmp_path):
    book = started(tmp_path / "work")
    work = book.work
    book = journal.Journal.read(work)
    assert book.resume({}, {**HOST, "load_average": [9.0, 9.0, 9.0]}) == MEASUREMENT
    assert book.resume({"seeds": (1, 2), "shape": "recipe"}, HOST) == MEASUREMENT
    cases = [
        ({}, {**HOST, "cpu": "AMD EPYC 7B13"},
         f"--resume={work}: this host differs from the journal's (cpu AMD EPYC 7B13 here, Intel(R) Xeon(R) Platinum "
         "8488C in the journal); a measurement resumes only on the host it began on"),
        ({}, {**HOST, "flags": ["avx2"]},
         f"--resume={work}: this host differs from the journal's (flags avx2 here, avx2,avx512f,avx512_bf16,amx_bf16 "
         "in the journal); a measurement resumes only on the host it began on"),
        ({}, {**HOST, "cores": 8},
         f"--resume={work}: this host differs from the journal's (cores 8 here, 2 in the journal); a measurement "
         "resumes only on the host it began on"),
        ({"seeds": (1, 2, 3)}, HOST,
         f"--resume={work}: --seeds=1,2,3 differs from the journal's --seeds=1,2; a measurement resumes with its own "
         "flags (leave --seeds out to take the journal's)"),
        ({"peer_pre_norm": False}, HOST,
         f"--resume={work}: --peer_pre_norm=false differs from the journal's --peer_pre_norm=true; a measurement "
         "resumes with its own flags (leave --peer_pre_norm out to take the journal's)"),
    ]
    for given, host, message in cases:
        with pytest.raises(ValueError) as raised:
            book.resume(given, host)
        assert str(raised.value) == message
    with pytest.raises(ValueError) as raised:
        book.check_unchanged({"batch_tokens": "8000"}, peer_venv.PINS)
    assert str(raised.value) == (f"--resume={work}: the recipe {RECIPE} has changed since the journal began "
                                 "(--batch_tokens: 8000 now, 4000 then)")
    book.check_unchanged({"batch_tokens": "4000"}, peer_venv.PINS)
    with pytest.raises(ValueError) as raised:
        journal.Journal.read(str(tmp_path))
    assert str(raised.value) == (f"--resume={tmp_path}: no journal.json there; only a measurement's work folder "
                                 "(kept by --keep or by an earlier --resume) can be resumed")
    with pytest.raises(ValueError, match="no such folder"):
        journal.Journal.read(str(tmp_path / "absent"))


# A workspace whose child processes are faked ---------------------------------------------------


def _number(name: str, low: int, high: int) -> int:
    """A number fixed by a run's name (not by the order runs happen in)."""
    return low + sum(map(ord, name)) % (high - low)


def _console(space, toolkit: str, name: str) -> list:
    """A training console of either toolkit: its parameter count right, tokens/s fixed by `name`."""
    pieces = len(space.tokenizer.pieces())
    if toolkit == "ours":
        count = dataclasses.replace(space.recipe.model, vocab_size=pieces).num_parameters
        lines = [(1.0, f"_DefaultDistributionStrategy with 1 replica(s); {count:,} parameters; float32")]
        lines += [(10.0 * k, f"step {50 * k}/200 loss 5.0 lr 1.0e-04 |g| 1.000 {_number(name + str(k), 900, 1900):,} "
                             "tok/s ETA 0:00:10") for k in range(1, 5)]
        return lines + [(41.0, 'done: {"step": 200, "minutes": 0.7}')]
    settings = peer_config.model_settings(space.recipe.model, space.peer_options)
    count = peer_config.parameter_count(settings, pieces)
    return [(1.0, f"Number of model parameters: {count}")] + [
        (10.0 * k, f"Step = {50 * k} ; steps/s = 2.00, tokens/s = 3000 (1400 source, "
                   f"{_number(name + str(k), 900, 1900)} target) ; Learning rate = 0.000100 ; Loss = 5.000000")
        for k in range(1, 5)]


SECONDS_PER_UPDATE = {"ours": 0.5, "peer": 0.6}  # the quality runs' pace in the fakes: ours the faster


def run_settings(toolkit: str, command) -> tuple:
    """(updates, checkpoint interval, log interval, checkpoints kept, checkpoint folder) of a
    training command of either toolkit (ours: its flags; the peer: its config.yml)."""
    if toolkit == "ours":
        given = dict(a[2:].split("=", 1) for a in command if a.startswith("--") and "=" in a)
        numbers = (int(given[k]) for k in ("train_steps", "checkpoint_every_steps", "log_every_steps",
                                           "keep_checkpoints"))
        return (*numbers, os.path.join(given["model_dir"], "checkpoints"))
    config = json.loads(pathlib.Path(command[command.index("--config") + 1]).read_text(encoding="utf-8"))
    train = config["train"]
    return (train["max_step"], train["save_checkpoints_steps"], train["save_summary_steps"],
            train["keep_checkpoint_max"], config["model_dir"])


def quality_console(space, toolkit: str, name: str, command) -> list:
    """A quality run's console as each toolkit prints it (its progress line every log interval,
    then at a checkpoint update the save: the peer's `Saved checkpoint` line, ours silent; dev
    evaluations; ours' `done:`), its checkpoints written into its folder, the last `keep` kept."""
    steps, every, log_every, keep, folder = run_settings(toolkit, command)
    start, pace = 20.0 + _number(name, 0, 10), SECONDS_PER_UPDATE[toolkit]
    lines, saved = _console(space, toolkit, name)[:1], []
    if toolkit == "peer":  # OpenNMT-tf saves after its first update too
        lines.append((start + 0.4, f"2026-11-29 10:52:10.782000: I training.py:176] Saved checkpoint {folder}/ckpt-1"))
        saved.append(1)
    for step in range(log_every, steps + 1, log_every):
        at = start + pace * step
        lines.append((at, f"step {step}/{steps} loss 3.0 lr 1.0e-03 |g| 0.500 9,000 tok/s ETA 0:00:10"
                      if toolkit == "ours" else
                      f"2026-11-29 11:00:00.000000: I runner.py:310] Step = {step} ; steps/s = 2.00, tokens/s = 3000 "
                      "(1400 source, 1600 target) ; Learning rate = 0.000100 ; Loss = 3.000000"))
        if step % every == 0 or step == steps:
            saved.append(step)
            lines.append((at + 0.2, f"2026-11-29 11:00:00.200000: I training.py:176] Saved checkpoint "
                                     f"{folder}/ckpt-{step}" if toolkit == "peer"
                          else f"eval step {step}: dev loss 3.0 nll 2.9 ppl 18.17 [1 s]"))
    if toolkit == "ours":
        lines.append((start + pace * steps + 5.0, f'done: {{"step": {steps}, "minutes": 1.0}}'))
    os.makedirs(folder, exist_ok=True)
    for step in saved[-keep:]:
        for suffix in (".index", ".data-00000-of-00001"):
            pathlib.Path(folder, f"ckpt-{step}{suffix}").write_text("weights")
    return lines


def unit_of(process: str) -> str:
    """The unit (and run folder) a faked process belongs to: quality-peer-seed2-translate ->
    quality-peer-seed2, quality-wallclock-seed1-ours-translate -> quality-wallclock-seed1,
    quality-test-seed1-peer-translate -> quality-test-seed1."""
    return re.sub(r"(-(ours|peer))?-translate$", "", process) if "wallclock" in process or "-test-" in process \
        else process.removesuffix("-translate")


def faked_run(space, calls: list, cut_at=None):
    """`Workspace.run` that records each call: a training run prints `_console` (a quality run
    `quality_console`) into its log, a translation writes the dev references less the last word of
    one sentence chosen by the process's name; at `cut_at` the session ends (a KeyboardInterrupt)
    with a partial checkpoint in the unit's folder."""

    def run(name, command, toolkit, kind, env=None, stop_when=None, check=True):  # pylint: disable=unused-argument
        if name == cut_at:
            folder = pathlib.Path(space.work) / "runs" / unit_of(name)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "partial-checkpoint").write_text("half")
            raise KeyboardInterrupt
        calls.append(name)
        lines = []
        if kind == "training":
            lines = (quality_console(space, toolkit, name, command) if name.startswith("quality-")
                     else _console(space, toolkit, name))
        if kind == "translation":
            output = (next(a for a in command if a.startswith("--output=")).split("=", 1)[1] if toolkit == "ours"
                      else command[command.index("--predictions_file") + 1])
            cut = _number(name, 0, len(DEV))
            pathlib.Path(output).write_text("".join((s.rsplit(" ", 1)[0] if i == cut else s) + "\n"
                                                    for i, s in enumerate(DEV)), encoding="utf-8")
        log = os.path.join(space.folder("logs"), f"{name}.log")
        pathlib.Path(log).write_text("".join(processes.log_line(at, line) for at, line in lines), encoding="utf-8")
        finished = processes.Finished(tuple(command), 0, float(_number(name, 60, 120)), _number(name, 1, 9) * 2**30,
                                      tuple(lines), log)
        space.processes.append({"name": name, "toolkit": toolkit, "kind": kind, "seconds": finished.seconds,
                                "peak_rss_bytes": finished.peak_rss_bytes, "returncode": 0, "log": finished.log_path})
        return finished

    return run


def faked_space(tmp_path, book, calls, cut_at=None) -> workspace.Workspace:
    """A `Workspace` of the recipe on a tiny dev split, `faked_run` as its `run`, resuming `book`."""
    the_recipe = recipe.read(str(RECIPE))
    files = tmp_path / "files"
    files.mkdir(exist_ok=True)
    (files / "tokenizer").mkdir(exist_ok=True)
    (files / "tokenizer" / "tokenizer.model").write_text("model")
    for name in ("dev.en", "dev.de"):
        (files / name).write_text("".join(s + "\n" for s in DEV), encoding="utf-8")
    pieces = ["<pad>", "<unk>", "<s>", "</s>"] + [f"\u2581w{i}" for i in range(the_recipe.model.vocab_size - 4)]
    tokenizer = types.SimpleNamespace(path=str(files / "tokenizer" / "tokenizer.model"), pieces=lambda: pieces,
                                      tokenize=lambda lines: [line.split() for line in lines])
    data = {split: (str(files / "dev.en"), str(files / "dev.de")) for split in ("train", "validation",
                                                                                 "dev_translation", "test")}
    commands = Commands(str(tmp_path), sys.executable, str(tmp_path / "venv"), the_recipe, str(files),
                        str(tmp_path / "tfds"))
    space = workspace.Workspace(book.work, commands, the_recipe, data, tokenizer, peer_config.PeerOptions(),
                                DecodingConfig(), 1, book, lambda line: None, book.processes, book.parameters)
    space.run = faked_run(space, calls, cut_at)
    return space


def measure(space, seeds=(1, 2)) -> dict:
    """The speed and quality parts as the harness runs them; each part's models by name and folder."""
    results = {}
    for part, call in (("speed", lambda: train_runs.speed(space, 2, 200, 100, 50, seeds[0])),
                       ("quality", lambda: train_runs.quality(space, list(seeds), space.recipe.training))):
        results[part] = call()
        results[part]["models"] = {t: (run.name, os.path.relpath(run.folder, space.work), run.peer_files and
                                       os.path.relpath(run.peer_files.model_dir, space.work))
                                   for t, run in results[part]["models"].items()}
    return results


def resumed_session(tmp_path, work, calls, cut_at=None):
    book = journal.Journal.read(str(work))
    book.resume({}, HOST)
    book.begin_session("bench/opennmt_tf_side_by_side.py --resume")
    return faked_space(tmp_path, book, calls, cut_at)


PLANNED = train_runs.speed_units(2) + train_runs.quality_units([1, 2])


def trained(units):
    """The units of `units` that train (a comparison at equal wall-clock and the test scores only translate)."""
    return [k for k in units if not k.startswith(("quality-wallclock-", "quality-test-"))]


def test_one_go_runs_every_planned_unit(tmp_path):
    calls = []
    space = faked_space(tmp_path, started(tmp_path / "one-go"), calls)
    results = measure(space)
    trainings = [c for c in calls if not c.endswith("-translate")]
    assert trainings == trained(PLANNED) and space.journal.progress(PLANNED) == (PLANNED, [])
    assert results["speed"]["models"]["ours"][0] == "speed-ours-float32-2"
    assert results["quality"]["models"]["peer"][0] == "quality-peer-seed1"
    assert [row["seed"] for row in results["quality"]["ours"]] == [1, 2]
    assert [w["seed"] for w in results["quality"]["wallclock"]] == [1, 2]
    assert all(w["measured"] for w in results["quality"]["wallclock"])
    # quality runs keep every checkpoint (14 saves every 500 of 7000 updates, and the peer's ckpt-1)
    assert {row["keep_checkpoints"] for t in ("ours", "peer") for row in results["quality"][t]} == {15}
    peer_run = pathlib.Path(space.work) / "runs" / "quality-peer-seed1" / "run"
    assert len(list(peer_run.glob("ckpt-*.index"))) == 15
    # each seed's comparison translates right after the seed's two runs, one checkpoint per toolkit
    assert [c for c in calls if c.startswith("quality-")] == [
        "quality-ours-seed1", "quality-ours-seed1-translate", "quality-peer-seed1", "quality-peer-seed1-translate",
        "quality-wallclock-seed1-ours-translate", "quality-wallclock-seed1-peer-translate",
        "quality-test-seed1-ours-translate", "quality-test-seed1-peer-translate",
        "quality-ours-seed2", "quality-ours-seed2-translate", "quality-peer-seed2", "quality-peer-seed2-translate",
        "quality-wallclock-seed2-ours-translate", "quality-wallclock-seed2-peer-translate",
        "quality-test-seed2-ours-translate", "quality-test-seed2-peer-translate"]
    # test2016 once per seed by each averaged model, after as many updates as its dev row
    assert [t["seed"] for t in results["quality"]["test"]] == [1, 2]
    for tested, ours_row in zip(results["quality"]["test"], results["quality"]["ours"]):
        assert tested["ours"]["updates"] == ours_row["updates"] and tested["sentences"] == len(DEV)
        assert {"bleu", "bleu_lc_moses"} <= set(tested["peer"])
    peer_test = pathlib.Path(space.work) / "runs" / "quality-test-seed1"
    assert sorted(p.name for p in peer_test.iterdir()) == ["decode.yml", "ours.hyp", "peer.hyp"]


@pytest.mark.parametrize("cut_at, rerun", [
    ("speed-peer-float32-2", ["speed-peer-float32-2", "speed-ours-auto-2", *train_runs.quality_units([1, 2])]),
    ("quality-ours-seed2", train_runs.quality_units([2])),  # seed 1 done
    ("quality-peer-seed2-translate", train_runs.quality_units([2])[1:]),  # cut while translating
    ("quality-test-seed1-peer-translate", ["quality-test-seed1", *train_runs.quality_units([2])]),
    ("quality-wallclock-seed1-peer-translate", ["quality-wallclock-seed1", "quality-test-seed1",
                                                *train_runs.quality_units([2])]),
])
def test_a_resumed_measurement_runs_only_what_is_missing(tmp_path, cut_at, rerun):
    one_go = measure(faked_space(tmp_path / "a", started(tmp_path / "a" / "work"), []))
    first = []
    with pytest.raises(KeyboardInterrupt):
        measure(faked_space(tmp_path / "b", started(tmp_path / "b" / "work"), first, cut_at=cut_at))
    folder = tmp_path / "b" / "work" / "runs" / unit_of(cut_at)
    assert (folder / "partial-checkpoint").exists()
    second = []
    space = resumed_session(tmp_path / "b", tmp_path / "b" / "work", second)
    results = measure(space)
    assert [c for c in second if not c.endswith("-translate")] == trained(rerun)
    assert [c for c in second if c.startswith(("quality-wallclock-", "quality-test-"))] == [
        f"{key}-{toolkit}-translate" for key in rerun if key.startswith(("quality-wallclock-", "quality-test-"))
        for toolkit in ("ours", "peer")]
    assert not (folder / "partial-checkpoint").exists()  # the unit cut short ran again in a fresh folder
    assert results == one_go
    book = journal.Journal.read(str(tmp_path / "b" / "work"))
    assert book.progress(PLANNED) == (PLANNED, [])
    done_first = [k for k in PLANNED if book.entry(k)["session"] == 1]
    assert done_first == [k for k in PLANNED if k not in rerun]
    one_go_book = journal.Journal.read(str(tmp_path / "a" / "work"))
    assert [p["name"] for p in book.processes] == [p["name"] for p in one_go_book.processes]
    assert book.parameters == one_go_book.parameters


def test_quality_alone_over_two_sessions(tmp_path):
    """--parts=quality --seeds=1,2: the first session is cut off after seed 1's two runs."""
    book = started(tmp_path / "work", dataclasses.replace(MEASUREMENT, parts=("quality",)))
    space = faked_space(tmp_path, book, [], cut_at="quality-ours-seed2")
    with pytest.raises(KeyboardInterrupt):
        train_runs.quality(space, [1, 2], space.recipe.training)
    calls = []
    space = resumed_session(tmp_path, tmp_path / "work", calls)
    result = train_runs.quality(space, [1, 2], space.recipe.training)
    assert [c for c in calls if not c.endswith("-translate")] == ["quality-ours-seed2", "quality-peer-seed2"]
    assert [row["seed"] for row in result["ours"]] == [1, 2] == [row["seed"] for row in result["peer"]]
    models = result["models"]  # seed 1's, from the journal: what serving exports
    assert models["ours"].name == "quality-ours-seed1" and models["ours"].finished is None
    assert models["peer"].peer_files.model_dir == os.path.join(space.work, "runs", "quality-peer-seed1", "run")
    summary = space.journal.summary(train_runs.quality_units([1, 2]))
    assert [s["units"] for s in summary["resumed"]] == [train_runs.quality_units([1]), train_runs.quality_units([2])]


def test_serving_and_its_short_models_from_the_journal(tmp_path):
    calls = []
    space = faked_space(tmp_path, started(tmp_path / "work"), calls)
    commands, run = {}, space.run

    def recorded(name, command, *args, **kwargs):
        commands[name] = command
        return run(name, command, *args, **kwargs)

    space.run = recorded
    models = serve_runs.short_models(space, 200, 80, 50, 1)  # trained: two runs, each a unit
    assert calls == serve_runs.serving_model_units() and models["peer"].peer_files is not None
    ours = commands[journal.serving_model_key("ours")]  # its warm-up, in its recommended precision
    assert {"--train_steps=200", "--warmup_steps=80", "--precision=auto", "--layer_norm=pre"} <= set(ours)
    peer = yaml.safe_load(pathlib.Path(models["peer"].peer_files.config).read_text())
    assert peer["params"]["decay_params"]["warmup_steps"] == 80 and peer["train"]["max_step"] == 200
    served = {"sentences": 1000, "engines": {"ours_saved_model": {"sentences_per_second": 50.0}}}
    space.journal.record(journal.SERVING, served, processes=space.processes, parameters=space.parameters)
    calls.clear()
    space = resumed_session(tmp_path, tmp_path / "work", calls)
    again = serve_runs.short_models(space, 200, 80, 50, 1)
    assert calls == [] and {t: (r.name, r.folder, r.peer_files) for t, r in again.items()} == {
        t: (r.name, r.folder, r.peer_files) for t, r in models.items()}
    assert serve_runs.serving(space, again, 1000, 32, 3) == served and calls == []


def test_workspace_data_and_tokenizer_are_a_unit(tmp_path, monkeypatch):
    data_dir = tmp_path / "release"
    data_dir.mkdir()
    for stem in ("train", "val", "test_2016_flickr"):
        for lang in ("en", "de"):
            with gzip.open(data_dir / f"{stem}.{lang}.gz", "wt", encoding="utf-8") as file:
                file.write("a b \nc d\n")
    calls = []

    def run(self, name, command, toolkit, kind, **kwargs):  # pylint: disable=unused-argument
        calls.append(name)
        assert not os.path.exists(self.work + "/tokenizer/stale")  # what a cut-short tokenizer run left
        self.processes.append({"name": name, "toolkit": toolkit, "kind": kind, "seconds": 1.0,
                               "peak_rss_bytes": 1, "returncode": 0, "log": None})

    monkeypatch.setattr(workspace.Workspace, "run", run)
    monkeypatch.setattr(workspace.corpus, "SentencePieceModel", lambda folder: types.SimpleNamespace(
        path=folder + "/tokenizer.model", settings={"type": "bpe"}, pieces=lambda: ["<pad>"]))
    the_recipe = recipe.read(str(RECIPE))
    commands = Commands(str(tmp_path), sys.executable, "venv", the_recipe, str(data_dir), str(tmp_path / "tfds"))
    book = started(tmp_path / "work")
    os.makedirs(book.work + "/tokenizer")
    pathlib.Path(book.work + "/tokenizer/stale").write_text("x")
    space = workspace.Workspace.create(book.work, commands, peer_config.PeerOptions(), DecodingConfig(), 1, book,
                                       dev_sentences=1, log=lambda line: None)
    assert calls == ["tokenizer"] and corpus_lines(space.data["dev_translation"][0]) == ["a b"]
    again = workspace.Workspace.create(book.work, commands, peer_config.PeerOptions(), DecodingConfig(), 1,
                                       journal.Journal.read(book.work), dev_sentences=1, log=lambda line: None)
    assert calls == ["tokenizer"] and again.data == space.data and again.processes == space.processes
    written = json.loads((pathlib.Path(book.work) / journal.JOURNAL_FILE).read_text(encoding="utf-8"))
    assert written["units"]["workspace"]["session"] == 1 and written["processes"][0]["name"] == "tokenizer"


def corpus_lines(path):
    return pathlib.Path(path).read_text(encoding="utf-8").splitlines()


def startup_console(space, toolkit: str) -> list:
    """A start-up run's console (3 updates, a progress line each): the parameter count, then
    update 1's progress line at 30 s (ours) or 40 s (the peer), then updates 2 and 3."""
    lines = _console(space, toolkit, "startup")[:1]
    if toolkit == "ours":
        return lines + [(20.0 + 10.0 * k, f"step {k}/3 loss 9.0 lr 1.0e-07 |g| 1.000 900 tok/s ETA 0:00:01")
                        for k in (1, 2, 3)]
    return lines + [(30.0 + 10.0 * k, f"2026-11-29 11:00:00.000000: I runner.py:310] Step = {k} ; steps/s = 1.00, "
                                      "tokens/s = 1700 (800 source, 900 target) ; Learning rate = 0.000001 ; "
                                      "Loss = 9.000000") for k in (1, 2, 3)]


def test_startup_runs_stop_at_the_progress_line_of_update_1(tmp_path):
    book = started(tmp_path / "work", dataclasses.replace(MEASUREMENT, parts=("startup",)))
    space = faked_space(tmp_path, book, [])
    commands = {}

    def run(name, command, toolkit, kind, env=None, stop_when=None, check=True):  # pylint: disable=unused-argument
        commands[toolkit] = command
        lines = startup_console(space, toolkit)
        kept = lines[:next(i for i, (_, line) in enumerate(lines) if stop_when(line)) + 1]
        return processes.Finished(tuple(command), -15, kept[-1][0], 2**30, tuple(kept), f"{name}.log", stopped=True)

    space.run = run
    result = train_runs.startup(space, seed=1)
    assert {key: row["seconds"] for key, row in result.items()} == {"ours_float32": 30.0, "peer_float32": 40.0,
                                                                     "ours_auto": 30.0}
    assert "--log_every_steps=1" in commands["ours"]  # every update logged, the peer's below
    config = json.loads(pathlib.Path(commands["peer"][commands["peer"].index("--config") + 1]).read_text(
        encoding="utf-8"))
    assert config["train"]["save_summary_steps"] == 1
    assert book.progress(train_runs.startup_units()) == (train_runs.startup_units(), [])
