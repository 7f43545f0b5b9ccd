"""bench/opennmt_tf/wallclock.py: quality at equal wall-clock, from both toolkits' consoles and checkpoints.

The checkpoint at T is chosen from log lines of both formats as the harness writes them (a save
whose update's line came at exactly T counts, one a millisecond later does not); a checkpoint
rotated away is recorded with the update needed and those kept, not raised; the unit is planned
right after both quality runs of its seed; a journal begun before the unit existed resumes (its
flags unchanged) and runs it from its finished runs' folders and logs; the table's rows. The
child processes are the fakes of test_opennmt_tf_journal.py: no TensorFlow, no training.
"""

import dataclasses
import json
import pathlib
import sys
import types

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from opennmt_tf import journal, peer_config, peer_venv, processes, recipe, report  # noqa: E402
from opennmt_tf import train_runs, training_logs, wallclock  # noqa: E402
from opennmt_tf.toolkits import Commands  # noqa: E402

from tests.bench import test_opennmt_tf_journal as fakes  # noqa: E402

RECIPE = BENCH.parent / "configs" / "multi30k_en_de.flags"
MODEL_DIR = "/work/runs/quality-peer-seed1/run"


def ours_line(step: int, of: int = 6) -> str:
    return f"step {step}/{of} loss 3.0000 lr 1.00e-03 |g| 0.500 9,000 tok/s ETA 0:00:10"


def peer_step(step: int) -> str:
    return (f"2026-11-29 11:00:00.000000: I runner.py:310] Step = {step} ; steps/s = 2.00, tokens/s = 3000 "
            "(1400 source, 1600 target) ; Learning rate = 0.000100 ; Loss = 3.000000")


def peer_saved(step: int) -> str:
    return f"2026-11-29 11:00:00.200000: I training.py:176] Saved checkpoint {MODEL_DIR}/ckpt-{step}"


OURS = [(5.0, "_DefaultDistributionStrategy with 1 replica(s); 2,349,056 parameters; float32"),
        (10.0, ours_line(2)), (12.5, "eval step 2: dev loss 4.0 nll 3.9 ppl 50.00 [2 s]"),
        (20.0, ours_line(4)), (22.5, "eval step 4: dev loss 3.5 nll 3.4 ppl 30.00 [2 s]"),
        (30.0, ours_line(6)), (32.5, "eval step 6: dev loss 3.2 nll 3.1 ppl 22.00 [2 s]"),
        (34.0, "averaged the best 3 checkpoints, steps 2, 4, 6, into .../averaged/ckpt-6"),
        (34.1, 'done: {"step": 6, "stop_reason": "train_steps", "train_minutes": 0.57}')]


def peer_console(step_4_at: float) -> list:
    """The peer's console of 6 updates (a checkpoint every 2) whose update 4 came at `step_4_at`."""
    return [(4.0, "2026-11-29 10:59:00.000000: I runner.py:310] Number of model parameters: 2357568"),
            (4.3, peer_saved(1)),  # after its first update: no progress line of update 1
            (14.0, peer_step(2)), (14.2, peer_saved(2)),
            (step_4_at, peer_step(4)), (step_4_at + 0.2, peer_saved(4)),
            (44.0, peer_step(6)), (44.2, peer_saved(6)),
            (50.0, "2026-11-29 11:00:10.000000: I checkpoint.py:233] Saved averaged checkpoint to "
                   f"{MODEL_DIR}/avg/ckpt-6")]


def through_the_log(tmp_path, name: str, lines: list) -> list:
    """The lines as a later session reads them: written as `processes.run` writes a log, read back."""
    path = tmp_path / f"{name}.log"
    path.write_text("".join(processes.log_line(at, line) for at, line in lines), encoding="utf-8")
    return processes.read_log(str(path))


def saves_of(tmp_path, peer_lines, ours_lines=OURS, every=2) -> dict:
    return {"ours": training_logs.checkpoint_saves("ours", through_the_log(tmp_path, "ours", ours_lines), every),
            "peer": training_logs.checkpoint_saves("peer", through_the_log(tmp_path, "peer", peer_lines), every)}


def test_log_lines_round_trip(tmp_path):
    lines = [(0.0004, ""), (3.1416, "Step = 5 ; x"), (123456.789, "[bracketed] text  with  spaces ")]
    assert through_the_log(tmp_path, "x", lines) == [(0.0, ""), (3.142, "Step = 5 ; x"),
                                                     (123456.789, "[bracketed] text  with  spaces ")]


def test_each_console_times_its_checkpoints(tmp_path):
    saves = saves_of(tmp_path, peer_console(30.0))
    assert saves["ours"] == training_logs.Saves({2: 10.0, 4: 20.0, 6: 30.0}, (), 6)
    # the peer: each saved update at its progress line; ckpt-1 (no such line) at its save line;
    # the averaged checkpoint is not one of the run's
    assert saves["peer"] == training_logs.Saves({1: 4.3, 2: 14.0, 4: 30.0, 6: 44.0}, (), 6)
    # ours saves every `checkpoint_every` and at its last update, whatever its lines say
    odd = [*OURS[:-1], (40.0, ours_line(7, 7)), (40.1, 'done: {"step": 7}')]
    assert training_logs.checkpoint_saves("ours", odd, 2) == training_logs.Saves({2: 10.0, 4: 20.0, 6: 30.0,
                                                                                  7: 40.0}, (), 7)
    sparse = [(10.0, ours_line(3)), (20.0, ours_line(6)), (20.1, 'done: {"step": 6}')]  # a line every 3
    assert training_logs.checkpoint_saves("ours", sparse, 2) == training_logs.Saves({6: 20.0}, (2, 4), 6)
    assert training_logs.checkpoint_saves("peer", [(1.0, peer_step(2))], 2).last is None


def test_the_checkpoint_at_t_a_save_at_exactly_t_counts(tmp_path):
    timing = wallclock.choose(saves_of(tmp_path, peer_console(30.0)))
    assert (timing["faster"], timing["slower"], timing["t_seconds"]) == ("ours", "peer", 30.0)
    assert timing["ours"] == {"update": 6, "seconds": 30.0, "last_update": 6}
    assert timing["peer"] == {"update": 4, "seconds": 30.0, "last_update": 6}  # its update 4 came at exactly T
    later = wallclock.choose(saves_of(tmp_path, peer_console(30.001)))  # a millisecond after T: not yet
    assert later["peer"] == {"update": 2, "seconds": 14.0, "last_update": 6}


def test_the_peer_faster(tmp_path):
    slow_ours = [(t * 3, line) for t, line in OURS]  # ours' last checkpoint at 90 s, the peer's at 44 s
    timing = wallclock.choose(saves_of(tmp_path, peer_console(30.0), slow_ours))
    assert (timing["faster"], timing["slower"], timing["t_seconds"]) == ("peer", "ours", 44.0)
    assert timing["peer"]["update"] == 6 and timing["ours"] == {"update": 2, "seconds": 30.0, "last_update": 6}


def test_what_cannot_be_timed_is_not_measured(tmp_path):
    sparse = [(10.0, ours_line(3)), (50.0, ours_line(6)), (50.1, 'done: {"step": 6}')]  # ours the slower
    with pytest.raises(wallclock.NotMeasured, match=r"ours' console has no progress line of update\(s\) 2, 4,"):
        wallclock.choose(saves_of(tmp_path, peer_console(30.0), sparse))
    with pytest.raises(wallclock.NotMeasured, match="OpenNMT-tf's training console shows no checkpoint"):
        wallclock.choose(saves_of(tmp_path, [(14.0, peer_step(2))]))
    early = [(50.0, ours_line(2)), (60.0, ours_line(4)), (70.0, ours_line(6)), (70.1, 'done: {"step": 6}')]
    quick = [(1.0, peer_step(2)), (1.1, peer_saved(2)), (2.0, peer_step(6)), (2.1, peer_saved(6))]
    with pytest.raises(wallclock.NotMeasured, match=r"ours had saved no checkpoint by T = 2.0 s") as raised:
        wallclock.choose(saves_of(tmp_path, quick, early))
    assert raised.value.details == {"reason": str(raised.value), "faster": "peer", "slower": "ours",
                                    "t_seconds": 2.0}


def checkpoint(folder, step, data=True):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"ckpt-{step}.index").write_text("i")
    if data:
        (folder / f"ckpt-{step}.data-00000-of-00001").write_text("d")


def test_kept_checkpoints_and_a_rotated_one(tmp_path):
    for step in (5000, 5500, 6000, 6500, 7000):
        checkpoint(tmp_path / "peer", step)
    checkpoint(tmp_path / "peer", 4500, data=False)  # half a checkpoint: not kept
    for step in (6000, 6500, 7000):
        checkpoint(tmp_path / "ours" / "checkpoints", step)
    for step in (4000, 6500):
        checkpoint(tmp_path / "ours" / "best", step)  # a best one the rotation removed from checkpoints/
    ours = wallclock.kept([str(tmp_path / "ours" / "checkpoints"), str(tmp_path / "ours" / "best")])
    assert ours == {4000: str(tmp_path / "ours" / "best" / "ckpt-4000"),
                    6000: str(tmp_path / "ours" / "checkpoints" / "ckpt-6000"),
                    6500: str(tmp_path / "ours" / "checkpoints" / "ckpt-6500"),
                    7000: str(tmp_path / "ours" / "checkpoints" / "ckpt-7000")}
    peer = wallclock.kept([str(tmp_path / "peer")])
    assert list(peer) == [5000, 5500, 6000, 6500, 7000]
    timing = {"faster": "ours", "slower": "peer", "t_seconds": 3520.0,
              "ours": {"update": 7000, "seconds": 3520.0, "last_update": 7000},
              "peer": {"update": 4500, "seconds": 3300.5, "last_update": 7000}}
    with pytest.raises(wallclock.NotMeasured) as raised:
        wallclock.locate(timing, {"ours": ours, "peer": peer})
    assert raised.value.details["needed"] == {"toolkit": "peer", "update": 4500}
    assert raised.value.details["kept_updates"] == [5000, 5500, 6000, 6500, 7000]
    assert str(raised.value) == ("OpenNMT-tf's checkpoint at T (update 4500, made 3300.5 s after its start; "
                                 "T = 3520.0 s) is no longer on disk: its run keeps updates 5000, 5500, 6000, "
                                 "6500, 7000")
    timing["peer"]["update"] = 5500
    assert wallclock.locate(timing, {"ours": ours, "peer": peer}) == {"ours": ours[7000], "peer": peer[5500]}


def test_quality_runs_keep_every_checkpoint_and_average_the_same(tmp_path):
    the_recipe = recipe.read(str(RECIPE))
    training = the_recipe.training
    kept = wallclock.keep_every_checkpoint(training)
    assert (training.keep_checkpoints, kept.keep_checkpoints) == (5, 15)  # 14 saves every 500 of 7000, + ckpt-1
    assert dataclasses.replace(kept, keep_checkpoints=5) == training  # nothing else changes
    assert wallclock.keep_every_checkpoint(train_runs.quality_training(training, 700)).keep_checkpoints == 15
    speed = train_runs.speed_training(types.SimpleNamespace(recipe=the_recipe), 600, 50)
    assert wallclock.keep_every_checkpoint(speed) is speed  # no periodic checkpoint: as it was
    commands = Commands(str(tmp_path), sys.executable, "venv", the_recipe, "data", "tfds")
    ours = commands.ours_train("run", kept)
    assert "--keep_checkpoints=15" in ours and "--average_checkpoints=3" in ours
    assert "--keep_best_checkpoints=3" in ours  # ours averages its 3 best (MODEL_DIR/best), not its last
    data = peer_config.DataFiles("a", "b", "c", "d")
    pieces = ["<pad>", "<unk>", "<s>", "</s>", "a"]
    files = peer_config.write(str(tmp_path / "peer"), the_recipe.model, kept, 4000, data, "tok.model", pieces)
    train = json.loads(pathlib.Path(files.config).read_text(encoding="utf-8"))["train"]
    assert (train["keep_checkpoint_max"], train["average_last_checkpoints"]) == (15, 3)  # still its last 3


def test_the_unit_comes_after_both_runs_of_its_seed():
    assert train_runs.quality_units([1, 2]) == [
        "quality-ours-seed1", "quality-peer-seed1", "quality-wallclock-seed1", "quality-test-seed1",
        "quality-ours-seed2", "quality-peer-seed2", "quality-wallclock-seed2", "quality-test-seed2"]
    assert journal.quality_wallclock_key(3) == "quality-wallclock-seed3"
    assert journal.quality_test_key(3) == "quality-test-seed3"
    source = (BENCH / "opennmt_tf_side_by_side.py").read_text(encoding="utf-8")
    assert "units += train_runs.quality_units(list(measurement.seeds))" in source  # the harness's plan


def old_harness_quality(space, seeds):
    """The quality part as the harness ran it before the comparison at equal wall-clock: each
    seed's two runs with the recipe's checkpoint keeping (the last 5), no other unit."""
    for seed in seeds:
        seeded = dataclasses.replace(space.recipe.training, seed=seed)
        for toolkit in train_runs.TOOLKITS:
            key = journal.quality_key(toolkit, seed)
            train_runs.unit(space, key, lambda key=key, toolkit=toolkit, seeded=seeded: train_runs._quality_run(
                space, key, toolkit, seeded))  # pylint: disable=protected-access


def test_a_journal_from_before_resumes_and_runs_the_new_units(tmp_path, monkeypatch):
    measurement = dataclasses.replace(fakes.MEASUREMENT, parts=("quality",))
    book = fakes.started(tmp_path / "work", measurement)
    space = fakes.faked_space(tmp_path, book, [])
    old_harness_quality(space, [1])
    monkeypatch.setitem(fakes.SECONDS_PER_UPDATE, "peer", 0.9)  # seed 2: the peer much slower
    old_harness_quality(space, [2])
    monkeypatch.undo()
    before = journal.Journal.read(str(tmp_path / "work"))
    assert before.progress(train_runs.quality_units([1, 2]))[1] == ["quality-wallclock-seed1", "quality-test-seed1",
                                                                       "quality-wallclock-seed2", "quality-test-seed2"]
    peer_two = tmp_path / "work" / "runs" / "quality-peer-seed2" / "run"
    assert sorted(p.name for p in peer_two.glob("*.index")) == [f"ckpt-{s}.index" for s in (5000, 5500, 6000, 6500,
                                                                                            7000)]

    calls = []
    space = fakes.resumed_session(tmp_path, tmp_path / "work", calls)  # the same host, no flag given
    assert space.journal.resume({"seeds": (1, 2), "parts": ("quality",)}, fakes.HOST) == measurement
    space.journal.check_unchanged({"batch_tokens": "4000"}, peer_venv.PINS)  # no refusal
    result = train_runs.quality(space, [1, 2], space.recipe.training)
    assert calls == ["quality-wallclock-seed1-ours-translate", "quality-wallclock-seed1-peer-translate",
                     "quality-test-seed1-ours-translate", "quality-test-seed1-peer-translate",
                     "quality-test-seed2-ours-translate", "quality-test-seed2-peer-translate"]
    one, two = result["wallclock"]
    assert one["measured"] and (one["faster"], one["slower"]) == ("ours", "peer")
    assert (one["ours"]["update"], one["peer"]["update"]) == (7000, 5500)  # seed 1's peer at T: update 5500, kept
    assert one["ours"]["checkpoint"] == "runs/quality-ours-seed1/checkpoints/ckpt-7000"
    assert one["peer"]["checkpoint"] == "runs/quality-peer-seed1/run/ckpt-5500"
    assert 0 <= one["ours"]["bleu"] <= 100 and "bleu_lc_moses" in one["peer"]
    ours_log = processes.read_log(str(tmp_path / "work" / "logs" / "quality-ours-seed1.log"))
    assert one["t_seconds"] == next(at for at, line in ours_log if line.startswith("step 7000/7000"))
    # seed 2: the peer's checkpoint at T was rotated away by the recipe's keeping: recorded, not raised
    assert not two["measured"] and two["needed"] == {"toolkit": "peer", "update": 3500}
    assert two["kept_updates"] == [5000, 5500, 6000, 6500, 7000]
    assert "is no longer on disk" in two["reason"]
    book = journal.Journal.read(str(tmp_path / "work"))
    assert book.progress(train_runs.quality_units([1, 2]))[1] == []
    assert [book.entry(k)["session"] for k in train_runs.quality_units([1, 2])] == [1, 1, 2, 2, 1, 1, 2, 2]
    assert book.entry("quality-wallclock-seed2")["result"] == two

    calls.clear()  # a third session takes both from the journal
    space = fakes.resumed_session(tmp_path, tmp_path / "work", calls)
    again = train_runs.quality(space, [1, 2], space.recipe.training)
    assert again["wallclock"] == [one, two] and again["test"] == result["test"] and calls == []


def test_report_rows():
    def measured(seed, ours, peer, t_minutes, update):
        return {"seed": seed, "measured": True, "faster": "ours", "slower": "peer", "t_seconds": t_minutes * 60,
                "t_minutes": t_minutes,
                "ours": {"update": 7000, "last_update": 7000, "bleu": ours, "bleu_lc_moses": ours + 4},
                "peer": {"update": update, "last_update": 7000, "bleu": peer, "bleu_lc_moses": peer + 4}}

    quality = {"ours": [{"seed": s, "updates": 7000, "bleu": 40.0, "bleu_lc_moses": 44.0, "train_minutes": 58.0}
                        for s in (1, 2)],
               "peer": [{"seed": s, "updates": 7000, "bleu": 39.0, "bleu_lc_moses": 43.0, "train_minutes": 70.0}
                        for s in (1, 2)],
               "wallclock": [measured(1, 40.0, 38.0, 58.25, 5500), measured(2, 41.0, 37.0, 57.5, 6000)]}
    rows = {row.measure: row for row in report.rows({"quality": quality})}
    one = rows["dev BLEU at equal wall-clock, cased sacreBLEU, seed 1"]
    assert (one.ours, one.peer, one.unit, one.better) == (40.0, 38.0, "BLEU", "higher")
    assert one.note == ("T = 58.2 min, ours' last checkpoint (update 7000); OpenNMT-tf at T: update 5500 of 7000; "
                        "single checkpoints, beam search")
    mean = rows["dev BLEU at equal wall-clock, lowercased Moses-tok., mean of 2 seeds"]
    assert (mean.ours, mean.peer) == (44.5, 41.5) and mean.note == "T per seed: 58.2 min, 57.5 min"
    assert rows["dev BLEU, cased sacreBLEU, seed 2"].peer == 39.0  # the equal-updates rows as they were

    quality["wallclock"][1] = {"seed": 2, "measured": False, "reason": "OpenNMT-tf's checkpoint at T (update 3500, "
                               "...) is no longer on disk: its run keeps updates 5000, 5500, 6000, 6500, 7000",
                               "needed": {"toolkit": "peer", "update": 3500}}
    rows = {row.measure: row for row in report.rows({"quality": quality})}
    two = rows["dev BLEU at equal wall-clock, cased sacreBLEU, seed 2"]
    assert (two.ours, two.peer, two.ratio) == (None, None, None)
    assert two.note.startswith("not measured: OpenNMT-tf's checkpoint at T (update 3500")
    assert not any("wall-clock" in m and "mean" in m for m in rows)  # one seed measured: no mean
    table = report.markdown(list(rows.values()))
    assert ("| dev BLEU at equal wall-clock, cased sacreBLEU, seed 2 | BLEU | - | - | - | higher | not measured:"
            in table)
    assert not any(m.startswith("test2016") for m in rows)  # a record without test scores: no such rows
    quality["test"] = [{"seed": s, "sentences": 1000,
                        "ours": {"updates": 7000, "bleu": 39.5 + s, "bleu_lc_moses": 40.0},
                        "peer": {"updates": 7000, "bleu": 37.0, "bleu_lc_moses": 37.5 + s}} for s in (1, 2)]
    rows = {row.measure: row for row in report.rows({"quality": quality})}
    one = rows["test2016 BLEU, cased sacreBLEU, seed 1"]
    assert (one.ours, one.peer, one.unit, one.better) == (40.5, 37.0, "BLEU", "higher")
    assert one.note == "after 7000 / 7000 updates; the averaged models, 1,000 sentences translated once, beam search"
    mean = rows["test2016 BLEU, lowercased Moses-tok., mean of 2 seeds"]
    assert (mean.ours, mean.peer) == (40.0, 39.0)
    del quality["wallclock"]  # a record of the harness before the comparison: no such rows
    assert not any("wall-clock" in row.measure for row in report.rows({"quality": quality}))
