"""bench/compute_robustness.py: issue 28's table of the recipe at 1x, 2x and 4x its budget.

One tiny chain (the tiny recipe with a budget of 10 updates, the last 5 cooled down, a checkpoint
and a dev loss every 5, the 2 best kept and averaged): the 40-update long run, the 1x and 2x
branches cut from it at updates 5 and 15, a fresh 2x run beside them, and the same command run
again. Checked: what a cut holds, that the runs share one path up to a branch point (to the last
digit), that each stops at its budget, that the rerun trains nothing, the table; and the plan
(branch points, the early-stopping case, refusals) without training.
"""

import json
import os
import pathlib
import shutil
import sys
import types

import pytest

from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.paths import REPO
from tests.helpers.train_runs import TINY, train_args

sys.path.insert(0, str(REPO / "bench"))

import compute_robustness  # noqa: E402  pylint: disable=wrong-import-position
from compute_robustness import Run  # noqa: E402  pylint: disable=wrong-import-position

SCRIPT = "bench/compute_robustness.py"
BUDGET = ("--train_steps=10", "--cooldown_steps=5", "--checkpoint_every_steps=5", "--eval_every_steps=5",
          "--eval_max_sentences=-1", "--keep_best_checkpoints=2", "--best_checkpoint_metric=loss",
          "--average_checkpoints=2", "--log_every_steps=5")
# What multi30k_scores.py writes (its facts line, a row a split), with made-up figures.
SCORES = {"x1": (40.0, 40.3, 39.0, 39.4), "x2": (40.2, 40.5, 39.3, 39.5), "x4": (40.1, 40.6, 39.4, 39.8)}


def _recipe(folder: pathlib.Path) -> pathlib.Path:
    path = folder / "recipe.flags"
    path.write_text(TINY + "\n".join(BUDGET) + "\n", encoding="utf-8")
    return path


def _history(model_dir):
    return json.loads((model_dir / "eval" / "history.json").read_text())["evaluations"]


def _steps(folder):
    return sorted(int(name[len("ckpt-"):-len(".index")]) for name in os.listdir(folder)
                  if name.startswith("ckpt-") and name.endswith(".index"))


def _snapshot(out):
    """What training writes (checkpoints, best and averaged ones, the dev history), with modification
    times. (Each start of the training command rewrites model_config.json and takes .lock.)"""
    return {str(path.relative_to(out)): path.stat().st_mtime_ns
            for name in ("x1", "x2", "x4") for path in (out / name).rglob("*") if path.is_file()
            and (path.parent.name in ("checkpoints", "best", "averaged") or path.name == "history.json")}


def _write_scores(out):
    for name, (val, val_lc, test, test_lc) in SCORES.items():
        rows = [{"updates": {"x1": 10, "x2": 20, "x4": 40}[name], "train_minutes": 0.5},
                {"split": "validation", "beam": 5, "alpha": 1.4, "bleu": val, "bleu_lc_moses": val_lc},
                {"split": "test_2016_flickr", "beam": 5, "alpha": 1.4, "bleu": test, "bleu_lc_moses": test_lc}]
        (out / f"{name}.test_scores").write_text("".join(json.dumps(r) + "\n" for r in rows) + "| table |\n")


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    root = tmp_path_factory.mktemp("compute_robustness")
    recipe, out = _recipe(root), root / "out"
    first = run_command(SCRIPT, f"--flagfile={recipe}", f"--out_dir={out}", "--seed=1", timeout=1800)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    shutil.copytree(out / "x4" / "tokenizer", root / "fresh_x2" / "tokenizer")  # the same one, not trained again
    fresh = run_command(*train_args(root / "fresh_x2", "--train_steps=20", "--seed=1", flagfile=recipe), timeout=600)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    before = _snapshot(out)
    _write_scores(out)
    again = run_command(SCRIPT, f"--flagfile={recipe}", f"--out_dir={out}", "--seed=1", timeout=1800)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    return types.SimpleNamespace(out=out, first=first.stdout, again=again.stdout, fresh=root / "fresh_x2",
                                 before=before, after=_snapshot(out))


@pytest.mark.slow
def test_each_run_stops_at_its_budget_and_the_long_run_keeps_every_checkpoint(chain):
    for name, last in (("x1", 10), ("x2", 20), ("x4", 40)):
        assert _history(chain.out / name)[-1]["step"] == last
        assert (chain.out / name / "averaged" / f"ckpt-{last}.index").is_file()
        log = (chain.out / f"{name}.log").read_text()
        assert log.startswith("command: python -m keras_transformer.train ")
        assert f'done: {{"step": {last}, "stop_reason": "train_steps"' in log
        assert f"--train_steps={last} " in log.splitlines()[0] and "--seed=1 " in log.splitlines()[0]
    assert _steps(chain.out / "x4" / "checkpoints") == list(range(5, 41, 5))  # the recipe keeps 5; the long run all
    assert "--keep_checkpoints=28 " in (chain.out / "x4.log").read_text().splitlines()[0]  # its 8 saves and 20 spares


@pytest.mark.slow
def test_a_branch_starts_from_the_long_runs_directory_as_it_stood_at_its_branch_point(chain):
    long_history = _history(chain.out / "x4")
    for name, at, last in (("x1", 5, 10), ("x2", 15, 20)):
        folder, long_folder = chain.out / name / "checkpoints", chain.out / "x4" / "checkpoints"
        assert _steps(folder) == [*range(5, at + 1, 5), last]  # the long run's up to the branch point, then its own
        for step in range(5, at + 1, 5):  # the long run's files (hard links), not new ones
            assert os.path.samefile(folder / f"ckpt-{step}.index", long_folder / f"ckpt-{step}.index")
        assert not os.path.samefile(folder / f"ckpt-{last}.index", long_folder / f"ckpt-{last}.index")
        before = [r for r in long_history if r["step"] <= at]
        best_then = [r["step"] for r in sorted(before, key=lambda r: (r["loss"], r["step"]))[:2]]
        assert (f"{name}: x4 as it stood at update {at}: checkpoints 5..{at} ({at // 5}), {len(before)} dev "
                f"evaluations, best {best_then}") in chain.first
        history = _history(chain.out / name)
        assert history[:-1] == before and history[-1]["step"] == last  # then its own evaluation
        best = json.loads((chain.out / name / "best" / "best.json").read_text())
        ranked = sorted(history, key=lambda r: (r["loss"], r["step"]))[:2]  # the 2 lowest of the long run's and its own
        assert [(e["step"], e["value"]) for e in best["checkpoints"]] == [(r["step"], r["loss"]) for r in ranked]
        assert json.loads((chain.out / f"{name}.branch.json").read_text()) == {
            "branch_of": "x4", "at_update": at, "train_steps": last, "seed": 1}
        assert f"resumed at step {at}" in (chain.out / f"{name}.log").read_text()
    assert not list(chain.out.glob(".*.partial"))


@pytest.mark.slow
def test_the_runs_follow_one_path_up_to_a_branch_point_to_the_last_digit(chain):
    """A fresh 2x run (no branch) has the long run's dev figures at 5, 10 and 15, where the 2x branch
    starts its cool-down: equation (3) does not depend on the budget, the cool-down does."""
    fresh, long = _history(chain.fresh), _history(chain.out / "x4")
    figures = ("step", "loss", "nll", "perplexity")
    assert [[r[k] for k in figures] for r in fresh[:3]] == [[r[k] for k in figures] for r in long[:3]]
    assert [r["step"] for r in fresh] == [5, 10, 15, 20] and fresh[-1]["loss"] != long[3]["loss"]  # cooled there


@pytest.mark.slow
def test_the_same_command_again_trains_nothing_and_keeps_the_branches(chain):
    assert chain.after == chain.before  # no file of x1, x2, x4 written again
    for name, last in (("x4", 40), ("x1", 10), ("x2", 20)):
        assert f"[{name}] the run reached --train_steps={last} before; nothing to train" in chain.again
    assert "x1: branched from x4 at update 5 before; its run goes on" in chain.again
    assert "x2: branched from x4 at update 15 before; its run goes on" in chain.again


@pytest.mark.slow
def test_the_table_reads_the_scores_and_checks_issue_28(chain):
    first_rows = [line for line in chain.first.splitlines() if line.startswith("| ") and "x" in line[2:4]]
    assert [row.split(" | ")[:3] for row in first_rows] == [["| 1x", "10", "-"], ["| 2x", "20", "-"],
                                                            ["| 4x", "40", "-"]]
    table = chain.again.split("| multiple |")[1]
    assert "| 1x | 10 | 0.5 | 40.00 | 40.30 | 39.00 | 39.40 | x4 to update 5, then its own cool-down |" in table
    assert "| 4x | 40 | 0.5 | 40.10 | 40.60 | 39.40 | 39.80 | x4: every checkpoint kept |" in table
    assert ("issue 28, validation cased: 40.00 -> 40.20 -> 40.10; the largest drop as compute grows 0.10 (within "
            "0.3); the 4x run is not the best") in table
    assert "issue 28, test LC-tok: 39.40 -> 39.50 -> 39.80; the largest drop as compute grows 0.00" in table
    assert (chain.out / "table.md").read_text() in chain.again


# The plan and the refusals, without training ----------------------------------------------------


def test_the_recipes_branch_points_are_4000_and_11000():
    lines = [line.strip() for line in (REPO / "configs" / "multi30k_en_de.flags").read_text().splitlines()
             if line.startswith("--")]
    training = compute_robustness.recipe_settings(lines)
    runs = compute_robustness.plan_runs([1, 2, 4], training)
    assert runs == [Run(1, 7000, 4000), Run(2, 14000, 11000), Run(4, 28000, None)]
    assert compute_robustness.long_run_keep(training, 28000) == 56 + compute_robustness.SPARE_CHECKPOINTS


def test_a_long_run_whose_patience_ran_out_before_a_branch_point_is_that_run():
    """Patience out at 9,500 in the 4x run: it stops at 12,500. A 14,000-update run would have run out
    at 9,500 too and stopped at 12,500: it is the 4x run. A 7,000-update run cools from 4,000 on."""
    x1, x2 = Run(1, 7000, 4000), Run(2, 14000, 11000)
    assert compute_robustness.same_as_long_run(x2, 12500, 28000)
    assert not compute_robustness.same_as_long_run(x1, 12500, 28000)
    assert compute_robustness.same_as_long_run(x2, 14000, 28000)  # out at 11,000, the 2x run's own branch point
    assert not compute_robustness.same_as_long_run(x2, 14500, 28000)  # out at 11,500: the 2x run cools from 11,000
    assert not compute_robustness.same_as_long_run(x2, 28000, 28000)  # out within the 4x run's own cool-down
    assert not compute_robustness.same_as_long_run(x2, None, 28000)


@pytest.mark.parametrize("flags, fragment", [
    (["--multiples=4,1,2"], "--multiples=4,1,2: give multiples >= 1 that grow, the largest last"),
    (["--multiples=1,1"], "--multiples=1,1"),
    (["--cooldown_steps=0"], "the recipe has no cool-down"),
    (["--cooldown_steps=3"], "the 1x run branches at update 7 (10 - --cooldown_steps=3), where the long run saves no "
                             "checkpoint"),
    (["--cooldown_steps=10"], "the 1x run (10 updates) would cool down over all of them"),
    (["--max_train_minutes=5"], "--max_train_minutes=5: a time budget"),
    (["--model_dir=elsewhere"], "--model_dir: each run's directory is OUT_DIR/xN"),
    (["--average_checkpoints=3"], "average_last (3) needs keep_best_checkpoints >= it"),
])
def test_a_configuration_that_cannot_make_the_table_is_one_error_line_before_any_training(tmp_path, flags, fragment):
    result = run_command(SCRIPT, f"--flagfile={_recipe(tmp_path)}", f"--out_dir={tmp_path / 'out'}", *flags)
    assert_one_error_line(result, fragment)
    assert not (tmp_path / "out").exists()


def test_a_long_run_of_another_seed_or_budget_is_refused_before_it_is_resumed(tmp_path):
    out = tmp_path / "out"
    (out / "x4").mkdir(parents=True)
    (out / "x4" / "model_config.json").write_text(json.dumps({"model": {}, "training": {"seed": 0, "train_steps": 40}}))
    result = run_command(SCRIPT, f"--flagfile={_recipe(tmp_path)}", f"--out_dir={out}", "--seed=1")
    assert_one_error_line(result, "x4: a run of seed 0 and 40 updates, not seed 1 and 40: move it away")
    assert sorted(os.listdir(out)) == ["x4"]


def test_a_branch_is_kept_only_when_it_is_still_the_long_runs(tmp_path):
    """What the same command checks before it resumes a branch made before: its record, and its dev
    history up to the branch point against the long run's."""
    from keras_transformer.training.reporting import EvalHistory  # pylint: disable=import-outside-toplevel

    record = {"branch_of": "x4", "at_update": 10, "train_steps": 15, "seed": 1}
    marker = tmp_path / "x1.branch.json"
    marker.write_text(json.dumps(record))
    history = EvalHistory(str(tmp_path / "x1"))
    for step, loss in ((5, 3.0), (10, 2.5), (15, 2.4)):
        history.append(step, {"loss": loss})
    long = [{"step": 5, "loss": 3.0}, {"step": 10, "loss": 2.5}]
    compute_robustness.check_branch(str(tmp_path / "x1"), str(marker), record, long)  # its own evaluation at 15 after
    with pytest.raises(ValueError, match="x1: its dev history up to update 10 is not the long run's .first difference "
                                         "at update 10.: move it away"):
        compute_robustness.check_branch(str(tmp_path / "x1"), str(marker), record, [long[0], {"step": 10, "loss": 2.6}])
    with pytest.raises(ValueError, match="x1: not the branch this table makes"):
        compute_robustness.check_branch(str(tmp_path / "x1"), str(marker), {**record, "at_update": 5}, long[:1])
