"""The K best checkpoints by a dev metric: ranking, files, the list on disk, kills and resumes."""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.run_dir import best_checkpoints, layout
from keras_transformer.run_dir.best_checkpoints import BestCheckpoints
from tests.helpers.checkpoints import save_checkpoints


def value_of(prefix):
    return float(tf.train.load_variable(prefix, "value/.ATTRIBUTES/VARIABLE_VALUE"))


def files_in(directory):
    return sorted(os.listdir(directory))


@pytest.fixture
def run(tmp_path):
    prefixes = save_checkpoints(str(tmp_path / "checkpoints"), [100, 200, 300, 400, 500])
    return tmp_path, prefixes


def test_the_k_best_by_bleu_are_kept_best_first_with_their_files(run):
    root, prefixes = run
    best = BestCheckpoints(str(root / "best"), keep=2, metric="bleu", log=lambda _: None)
    kept = [best.offer(step, {"bleu": bleu, "loss": 2.0}, prefixes[step])
            for step, bleu in [(100, 10.0), (200, 14.0), (300, 12.0), (400, 13.0), (500, 9.0)]]
    assert kept == [True, True, True, True, False]
    assert [os.path.basename(p) for p in best.prefixes()] == ["ckpt-200", "ckpt-400"]
    assert [value_of(p) for p in best.prefixes()] == [200.0, 400.0]  # the weights of those steps
    assert files_in(root / "best") == ["best.json", "ckpt-200.data-00000-of-00001", "ckpt-200.index",
                                       "ckpt-400.data-00000-of-00001", "ckpt-400.index"]
    saved = json.loads((root / "best" / "best.json").read_text())
    assert saved == {"metric": "bleu", "checkpoints": [{"step": 200, "value": 14.0, "name": "ckpt-200"},
                                                       {"step": 400, "value": 13.0, "name": "ckpt-400"}]}


def test_loss_ranks_lower_first_and_ties_keep_the_earlier_step(run):
    root, prefixes = run
    best = BestCheckpoints(str(root / "best"), keep=2, metric="loss", log=lambda _: None)
    for step, loss in [(100, 3.0), (200, 2.5), (300, 2.5), (400, 2.7)]:
        best.offer(step, {"bleu": 1.0, "loss": loss}, prefixes[step])
    assert [os.path.basename(p) for p in best.prefixes()] == ["ckpt-200", "ckpt-300"]
    assert not best.offer(200, {"loss": 0.1}, prefixes[200])  # a step is offered once
    assert not best.offer(500, {"bleu": 50.0}, prefixes[500])  # no loss in the results: nothing to rank
    assert [os.path.basename(p) for p in best.prefixes()] == ["ckpt-200", "ckpt-300"]


def test_f1_ranks_higher_first_and_the_config_accepts_it(run):
    """A parsing run's dev EVALB F1 (section 6.3): higher is better, like BLEU; the config accepts
    it, as every metric of the registry that gives the direction (`keras_transformer.dev_metrics`)."""
    from keras_transformer.config import TrainingConfig

    root, prefixes = run
    best = BestCheckpoints(str(root / "best"), keep=2, metric="f1", log=lambda _: None)
    for step, f1 in [(100, 40.0), (200, 55.5), (300, 38.0), (400, 51.0)]:
        best.offer(step, {"bleu": 90.0 - f1, "loss": f1, "f1": f1, "repaired": 0.0}, prefixes[step])
    assert [os.path.basename(p) for p in best.prefixes()] == ["ckpt-200", "ckpt-400"]
    assert not best.offer(500, {"bleu": 99.0, "loss": 0.1}, prefixes[500])  # no F1 (not a parsing run)
    assert json.loads((root / "best" / "best.json").read_text())["metric"] == "f1"
    with pytest.raises(ValueError, match="ranks the run's checkpoints by f1, not bleu"):
        BestCheckpoints(str(root / "best"), keep=2, metric="bleu")
    assert TrainingConfig(best_checkpoint_metric="f1").best_checkpoint_metric == "f1"
    with pytest.raises(ValueError, match="the selection metric must be one of"):
        best_checkpoints.metric_value({}, "chrf")  # not registered


def test_the_copies_outlive_the_rotation_of_the_last_checkpoints(run):
    root, prefixes = run
    best = BestCheckpoints(str(root / "best"), keep=1, metric="bleu", log=lambda _: None)
    best.offer(100, {"bleu": 30.0}, prefixes[100])
    for path in tf.io.gfile.glob(prefixes[100] + ".*"):
        os.remove(path)  # what CheckpointManager's rotation does
    assert value_of(best.prefixes()[0]) == 100.0


def test_a_resumed_run_reads_its_list_and_removes_what_a_kill_left_half_copied(run):
    root, prefixes = run
    lines = []
    best = BestCheckpoints(str(root / "best"), keep=2, metric="bleu", log=lines.append)
    best.offer(100, {"bleu": 10.0}, prefixes[100])
    assert lines == [f"best checkpoints: ckpt-100 (bleu 10) is number 1 of 1 in {root / 'best'}"]
    (root / "best" / "ckpt-300.index").write_bytes(b"cut short")  # a copy the kill interrupted
    again = BestCheckpoints(str(root / "best"), keep=2, metric="bleu", log=lambda _: None)
    assert [os.path.basename(p) for p in again.prefixes()] == ["ckpt-100"]
    assert "ckpt-300.index" not in files_in(root / "best")
    assert again.offer(300, {"bleu": 11.0}, prefixes[300])  # and the step can enter the list whole
    assert [value_of(p) for p in again.prefixes()] == [300.0, 100.0]


def test_another_metric_or_a_damaged_list_is_one_line_error(run):
    root, prefixes = run
    BestCheckpoints(str(root / "best"), keep=2, metric="bleu", log=lambda _: None).offer(
        100, {"bleu": 10.0}, prefixes[100])
    with pytest.raises(ValueError, match="ranks the run's checkpoints by bleu, not loss"):
        BestCheckpoints(str(root / "best"), keep=2, metric="loss")
    (root / "best" / "best.json").write_text("{\"checkpoints\": 3}")
    with pytest.raises(ValueError, match="best.json: not a list of best checkpoints"):
        best_checkpoints.read_list(str(root / "best"))
    with pytest.raises(ValueError, match="metric must be one of"):
        BestCheckpoints(str(root / "other"), keep=2, metric="chrf")


def test_rebuild_writes_at_once_the_list_the_offers_one_by_one_leave(run):
    """A run copied from another at update 400 (bench/compute_robustness.py): its best/ as the run's
    own offers would have left it there, only the kept checkpoints copied."""
    root, prefixes = run
    evaluations = [(100, {"loss": 3.0}), (200, {"loss": 2.5}), (300, {"loss": 2.7}), (400, {"loss": 2.5}),
                   (500, {"bleu": 9.0})]  # no loss at 500: never offered
    offered = BestCheckpoints(str(root / "offered"), keep=2, metric="loss", log=lambda _: None)
    for step, results in evaluations:
        offered.offer(step, results, prefixes[step])
    kept = best_checkpoints.rebuild(str(root / "rebuilt"), 2, "loss",
                                    [(step, results, prefixes[step]) for step, results in evaluations])
    assert kept == offered.entries == [{"step": 200, "value": 2.5, "name": "ckpt-200"},
                                       {"step": 400, "value": 2.5, "name": "ckpt-400"}]  # a tie: the earlier first
    assert (root / "rebuilt" / "best.json").read_text() == (root / "offered" / "best.json").read_text()
    assert files_in(root / "rebuilt") == files_in(root / "offered")
    assert [value_of(p) for p in best_checkpoints.listed_prefixes(str(root / "rebuilt"))] == [200.0, 400.0]
    assert os.path.samefile(root / "rebuilt" / "ckpt-200.index", prefixes[200] + ".index")  # a link where it can
    with pytest.raises(ValueError, match="already holds a list"):
        best_checkpoints.rebuild(str(root / "rebuilt"), 2, "loss", [(100, {"loss": 1.0}, prefixes[100])])


def test_rebuild_needs_the_kept_checkpoints_and_writes_no_list_for_no_offer(run):
    root, prefixes = run
    os.remove(prefixes[200] + ".index")
    with pytest.raises(FileNotFoundError, match="ckpt-200.index: not found"):
        best_checkpoints.rebuild(str(root / "best"), 1, "loss", [(100, {"loss": 3.0}, prefixes[100]),
                                                                 (200, {"loss": 2.0}, prefixes[200])])
    assert not os.path.exists(root / "best")  # nothing written
    assert best_checkpoints.rebuild(str(root / "best"), 1, "loss", [(100, {"bleu": 3.0}, prefixes[100])]) == []
    assert not os.path.exists(root / "best" / "best.json")


def test_a_worker_that_is_not_the_chief_writes_nothing(run):
    root, prefixes = run
    best = BestCheckpoints(str(root / "best"), keep=2, metric="bleu", write=False)
    assert not best.offer(100, {"bleu": 10.0}, prefixes[100]) and not os.path.exists(root / "best")


def test_translation_takes_the_average_then_the_best_then_the_newest(tmp_path):
    """`layout.latest_checkpoint`: averaged/, else the best of best/, else the newest of checkpoints/."""
    save_checkpoints(str(tmp_path / layout.CHECKPOINT_DIR), [100, 200, 300])
    newest = layout.latest_checkpoint(str(tmp_path))
    assert os.path.basename(newest) == "ckpt-300"
    prefixes = {int(p.rsplit("-", 1)[1]): p for p in tf.train.get_checkpoint_state(
        str(tmp_path / layout.CHECKPOINT_DIR)).all_model_checkpoint_paths}
    best = BestCheckpoints(str(tmp_path / layout.BEST_DIR), keep=2, metric="bleu", log=lambda _: None)
    best.offer(100, {"bleu": 5.0}, prefixes[100])
    best.offer(200, {"bleu": 7.0}, prefixes[200])
    assert layout.latest_checkpoint(str(tmp_path)) == str(tmp_path / layout.BEST_DIR / "ckpt-200")
    save_checkpoints(str(tmp_path / layout.AVERAGED_DIR), [300])
    assert layout.latest_checkpoint(str(tmp_path)) == str(tmp_path / layout.AVERAGED_DIR / "ckpt-300")
    assert os.path.basename(layout.latest_checkpoint(str(tmp_path), prefer_averaged=False)) == "ckpt-300"
    np.testing.assert_equal(value_of(layout.latest_checkpoint(str(tmp_path), prefer_averaged=False)), 300.0)


def test_a_list_naming_a_checkpoint_outside_its_folder_is_refused_and_nothing_outside_is_removed(run):
    """best.json edited (or copied from another run) to name `../checkpoints/ckpt-100` or an
    absolute path: every reader refuses it with one line naming the file, and a run keeping 1
    best checkpoint refuses before an offer pushes that entry out (which removed its files)."""
    root, prefixes = run
    best = BestCheckpoints(str(root / "best"), keep=1, metric="bleu", log=lambda _: None)
    best.offer(200, {"bleu": 10.0}, prefixes[200])
    listed = root / "best" / "best.json"
    outside = sorted(tf.io.gfile.glob(prefixes[100] + ".*"))
    for name in ("../checkpoints/ckpt-100", prefixes[100]):
        listed.write_text(json.dumps({"metric": "bleu", "checkpoints": [{"step": 100, "value": 5.0, "name": name}]}))
        message = re.escape(f'{listed}: entry "{name}" is outside {root / "best"}; ')
        with pytest.raises(ValueError, match=message):
            BestCheckpoints(str(root / "best"), keep=1, metric="bleu", log=lambda _: None).offer(
                300, {"bleu": 20.0}, prefixes[300])
        for read in (best_checkpoints.listed_prefixes, lambda d: layout.latest_checkpoint(os.path.dirname(d))):
            with pytest.raises(ValueError, match=message):
                read(str(root / "best"))
    assert sorted(tf.io.gfile.glob(prefixes[100] + ".*")) == outside and len(outside) == 2
