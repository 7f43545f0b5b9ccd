"""`python -m keras_transformer.variations`: bad input, and a tiny table (the base and C/N=2 on the tiny
recipe) stopped by SIGTERM in its second row and run again to the end without retraining the first."""

import csv
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.paths import REPO

# A few updates a row, BLEU on 2 dev sentences, none during training (the table scores each row once).
# SIGTERM goes to the second row's run at its first save (ckpt-10): 20 of its 30 updates are left.
TINY_TABLE = ("--train_steps=30", "--checkpoint_every_steps=10", "--eval_max_sentences=-1", "--bleu_sentences=2")


def _table_args(flagfile, out, *flags):
    return ["-m", "keras_transformer.variations", f"--flagfile={flagfile}", f"--out={out}", *flags]


@pytest.mark.parametrize("flags, fragment", [
    (["--rows=C,F"], "unknown row 'F'"),
    (["--rows=C/N=3"], "unknown row 'C/N=3'"),
    (["--seeds=0"], "--seeds=0"),
])
def test_unknown_rows_end_with_one_error_line(tmp_path, flagfile, flags, fragment):
    assert_one_error_line(run_command(*_table_args(flagfile, tmp_path / "table", *flags)), fragment)
    assert not (tmp_path / "table").exists()


def test_an_out_that_cannot_be_written_and_a_missing_recipe(tmp_path, flagfile):
    (tmp_path / "file").write_text("")
    assert_one_error_line(run_command(*_table_args(flagfile, tmp_path / "file" / "table")), "--out=", "is a file")
    assert_one_error_line(run_command(*_table_args(tmp_path / "none.flags", tmp_path / "table")), "none.flags")
    result = run_command("-m", "keras_transformer.variations", f"--out={tmp_path / 'table'}")
    assert_one_error_line(result, "--flagfile=RECIPE is required")
    assert not (tmp_path / "table").exists()


def _training_child(pid):
    """The pid of `pid`'s child running the training command once it is inside `cli.run` (its
    stderr silenced until its work starts: a Ctrl-C now ends it with "error: interrupted"), else None."""
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as file:
                children = file.read().split()
        except OSError:  # the thread ended meanwhile
            continue
        for child in children:
            try:
                with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                    command = cmdline.read()
                stderr = os.readlink(f"/proc/{child}/fd/2")
            except OSError:  # ended meanwhile
                continue
            if b"keras_transformer.train" in command and stderr == os.devnull:
                return int(child)
    return None


def test_ctrl_c_while_a_rows_run_starts_is_one_error_line(tmp_path, flagfile):
    """Ctrl-C (SIGINT to the process group) reaches the row's run (forwarded) before its training
    loop: the run ends with its own `error: interrupted`; the table prints no second one (its
    line, how to go on, goes to stdout) and exits 130."""
    args = [sys.executable, *_table_args(flagfile, tmp_path / "table", "--rows=C/N=2", *TINY_TABLE)]
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
    table = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        first = table.stdout.readline()
        assert first.startswith("row 1 of 2: base"), first + table.stderr.read()
        deadline = time.time() + 120
        while _training_child(table.pid) is None and table.poll() is None and time.time() < deadline:
            time.sleep(0.01)
        os.killpg(table.pid, signal.SIGINT)
        stdout, stderr = table.communicate(timeout=120)
    finally:
        if table.poll() is None:
            table.kill()
    assert table.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr
    assert [line for line in stderr.splitlines() if line.startswith("error: ")] == ["error: interrupted"], stderr
    assert stdout.splitlines()[-1] == "row base: its run stopped by SIGINT; run the same command to go on", stdout
    assert not (tmp_path / "table" / "rows" / "base.json").exists()


def _mtimes(folder):
    return {p: os.stat(os.path.join(folder, p)).st_mtime_ns for p in sorted(os.listdir(folder))}


@pytest.mark.slow
def test_tiny_table_stopped_in_its_second_row_finishes_without_retraining_the_first(tmp_path, flagfile):
    out = tmp_path / "table"
    args = [sys.executable, *_table_args(flagfile, out, "--rows=C/N=2", *TINY_TABLE)]
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
    first = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    second_row = out / "C-N=2" / "checkpoints"
    for line in first.stdout:  # the second row's first checkpoint, then SIGTERM to the table
        lines.append(line)
        if line.startswith("row 2 of 2"):
            break
    deadline = time.time() + 600
    while not (second_row / "ckpt-10.index").exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGTERM)
    lines += first.stdout.readlines()
    assert first.wait(60) == 143, "".join(lines[-30:])
    assert any(line.startswith("row 1 of 2: base (the recipe's model)") for line in lines)
    assert (out / "rows" / "base.json").is_file() and not (out / "table.csv").exists()
    assert "C/N=2: its run stopped by SIGTERM" in lines[-1]
    base_checkpoints = _mtimes(out / "base" / "checkpoints")
    base_record = os.stat(out / "rows" / "base.json").st_mtime_ns

    second = run_command(*args[1:], timeout=1200)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "row 1 of 2: base finished before" in second.stdout
    assert "resumed at step" in second.stdout  # the second row went on from its checkpoint
    assert _mtimes(out / "base" / "checkpoints") == base_checkpoints
    assert os.stat(out / "rows" / "base.json").st_mtime_ns == base_record

    rows = list(csv.DictReader((out / "table.csv").open(encoding="utf-8")))
    assert [r["row"] for r in rows] == ["base", "C/N=2"]
    assert [r["N"] for r in rows] == ["2", "1"] and rows[1]["changes"] == "N=1"
    assert [r["train_updates"] for r in rows] == ["30", "30"]
    assert all(float(r["dev_ppl"]) > 1 and r["dev_bleu"] != "" for r in rows)
    assert rows[0]["bleu_change"] == "0.0" and rows[1]["paper_bleu_change"] == "-2.1"
    assert (out / "C-N=2" / "tokenizer").is_dir()  # the base's, copied (the same ids)
    assert "| C/N=2 | N=1 |" in (out / "table.md").read_text(encoding="utf-8")
    assert (out / "table.png").read_bytes()[:4] == b"\x89PNG"

    from keras_transformer.model import Transformer  # pylint: disable=g-import-not-at-top
    from keras_transformer.run_dir import layout  # pylint: disable=g-import-not-at-top

    for row, name in zip(rows, ("base", "C-N=2")):
        model = Transformer(layout.read_config(str(out / name)))
        model.build()
        assert int(row["params"]) == model.count_params()
