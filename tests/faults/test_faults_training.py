"""`python -m keras_transformer.train` when things break: nothing already written is lost.

Through the real command in subprocesses, on a tiny run of the embedded corpus: a lost or
replaced tokenizer, a run killed after its last save, leftovers of a killed save, Ctrl-C and
`kill`, two trainers on one directory, a --model_dir that is a file, invalid UTF-8 data.
Damaged checkpoints are in test_faults_checkpoints.py, translate and export in
test_faults_serving.py.
"""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import pytest

from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.paths import REPO
from tests.helpers.train_runs import FINISHED, TINY, latest_step, shared_tiny_run, train_args

LONG = ("--train_steps=100000", "--log_every_steps=1", "--checkpoint_every_steps=0", "--eval_every_steps=0",
        "--eval_max_sentences=-1")


def snapshot(directory):
    """{relative path: bytes} of every file below `directory`."""
    root = pathlib.Path(directory)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished tiny run: checkpoints at steps 6 and 12, evaluated and averaged at the end
    (test_faults_commands.py's: the same flags, trained once and copied)."""
    base = tmp_path_factory.mktemp("finished")
    flagfile = base / "tiny.flags"
    flagfile.write_text(TINY)
    model_dir = base / "run"
    shared_tiny_run(tmp_path_factory, model_dir, *FINISHED)
    return model_dir, flagfile


def copy_run(finished, tmp_path):
    model_dir, flagfile = finished
    shutil.copytree(model_dir, tmp_path / "run")
    return tmp_path / "run", flagfile


def test_a_run_that_lost_its_tokenizer_is_refused_and_left_as_it_was(finished, tmp_path):
    model_dir, flagfile = copy_run(finished, tmp_path)
    shutil.rmtree(model_dir / "tokenizer")
    before = snapshot(model_dir)
    result = run_command(*train_args(model_dir, *FINISHED, "--train_steps=20", flagfile=flagfile))
    assert_one_error_line(result, "tokenizer: missing or incomplete (no file tokenizer.json in it), but the run in")
    assert snapshot(model_dir) == before and not (model_dir / "tokenizer").exists()


def test_a_finished_run_started_again_ends_once_and_clears_a_killed_save(finished, tmp_path):
    model_dir, flagfile = copy_run(finished, tmp_path)
    settings = json.loads((model_dir / "model_config.json").read_text())
    assert len(settings["tokenizer"]["sha256"]) == 64  # checked on every resume
    umask = os.umask(0)
    os.umask(umask)
    for name in ("model_config.json", "eval/history.json", "tokenizer/tokenizer.json", "tokenizer/tokenizer.model",
                 "checkpoints/checkpoint", "averaged/ckpt-12.index"):  # readable by whom the umask allows
        assert (model_dir / name).stat().st_mode & 0o777 == 0o666 & ~umask, name
    assert (model_dir / "averaged" / "ckpt-12.index").is_file()
    # Killed after the last save, before the final evaluation; a save of another run was cut short.
    os.remove(model_dir / "eval" / "history.json")
    (model_dir / "checkpoints" / "ckpt-13_temp").mkdir()
    (model_dir / "checkpoints" / "ckpt-13_temp" / "part-00000-of-00001.index").write_bytes(b"half")
    (model_dir / ".tmp-abcd.json").write_text("{")
    again = run_command(*train_args(model_dir, *FINISHED, flagfile=flagfile))
    assert again.returncode == 0, again.stderr[-2000:]
    assert "ckpt-13_temp" in again.stdout and not (model_dir / "checkpoints" / "ckpt-13_temp").exists()
    assert not (model_dir / ".tmp-abcd.json").exists()
    assert "the run reached --train_steps=12 before; nothing to train" in again.stdout
    assert again.stdout.count("eval step 12:") == 1 and "were averaged before" in again.stdout
    done = json.loads(again.stdout.split("done: ")[1].splitlines()[0])
    assert done["step"] == 12 and done["best_bleu"] is not None
    history = json.loads((model_dir / "eval" / "history.json").read_text())["evaluations"]
    assert [record["step"] for record in history] == [12]
    # Started once more, it evaluates nothing: test_trainer.py checks that in process.


def start_long_run(model_dir, flagfile):
    """A training process with --log_every_steps=1, once it has printed its third step line."""
    process = subprocess.Popen([sys.executable, *train_args(model_dir, *LONG, flagfile=flagfile)], cwd=REPO,
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    lines = []
    for line in process.stdout:
        lines.append(line)
        if sum(seen.startswith("step ") for seen in lines) == 3:
            return process, lines
    process.wait()
    pytest.fail(f"training ended before its third step:\n{''.join(lines)}\n{process.stderr.read()[-2000:]}")


def stop(process, signum, lines):
    process.send_signal(signum)
    out, err = process.communicate(timeout=120)
    return "".join(lines) + out, err


@pytest.mark.slow
def test_ctrl_c_and_kill_save_the_step_a_second_trainer_is_refused_and_the_run_resumes(tmp_path, flagfile):
    model_dir = tmp_path / "run"
    process, lines = start_long_run(model_dir, flagfile)
    try:
        second = run_command(*train_args(model_dir, *LONG, flagfile=flagfile))
        assert_one_error_line(second, f"is in use by pid {process.pid} on")
    finally:
        out, err = stop(process, signal.SIGINT, lines)
    assert process.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    step = latest_step(model_dir)
    assert f"SIGINT at step {step}: saved ckpt-{step}; run the same command to resume" in out
    assert f"step {step}/" in out and f"step {step + 1}/" not in out  # saved at the update it stopped after

    # The same command resumes there; `kill` (SIGTERM) stops the resumed run the same way.
    process, lines = start_long_run(model_dir, flagfile)
    out, err = stop(process, signal.SIGTERM, lines)
    assert process.returncode == 143, err[-2000:]
    assert f"resumed at step {step}" in out and "Traceback" not in err
    resumed_step = latest_step(model_dir)
    assert resumed_step >= step + 3 and f"SIGTERM at step {resumed_step}: saved ckpt-{resumed_step}" in out
    assert not list((model_dir / "checkpoints").glob("*_temp"))


def test_bad_paths_and_data_are_refused_before_any_work(tmp_path, flagfile):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    assert_one_error_line(run_command(*train_args(a_file, flagfile=flagfile)), "is a file, not a folder")
    assert a_file.read_text() == "not a folder"

    (tmp_path / "train.en").write_bytes(b"A dog.\nA cat.\nA b\xe9d line.\n")
    (tmp_path / "train.de").write_text("Ein Hund.\nEine Katze.\nEine Zeile.\n")
    for split in ("validation", "test"):
        for lang in ("en", "de"):
            (tmp_path / f"{split}.{lang}").write_text("Ein Hund.\n")
    result = run_command(*train_args(tmp_path / "run", "--dataset=files", f"--data_dir={tmp_path}",
                               "--source_file={split}.en", "--target_file={split}.de", flagfile=flagfile))
    assert_one_error_line(result, f"{tmp_path / 'train.en'}: line 3: not UTF-8 text")
    assert not (tmp_path / "run").exists()  # checked before anything was written


# A first start that fails; a resume that would change the run (issue 60, groups 4 and 7) -------------


@pytest.mark.slow
def test_a_first_start_refused_after_its_tokenizer_leaves_nothing_and_the_next_trains_its_own(finished, tmp_path,
                                                                                              flagfile):
    """--max_length=1 is refused once the tokenizer exists (no pair fits); that start leaves no
    tokenizer (nor lock file, nor the folders it made), so the next start, with --vocab_size=400,
    trains a 400-id tokenizer and records it, not the refused start's 500-id one. A tokenizer
    found in a new run's folder that these flags did not train is refused, and left there."""
    model_dir = tmp_path / "new" / "run"
    short = ("--train_steps=1", "--eval_every_steps=0", "--eval_max_sentences=-1")
    refused = run_command(*train_args(model_dir, "--max_length=1", *short, flagfile=flagfile))
    assert_one_error_line(refused, "training corpus embedded: every pair has more than max_length=1 tokens")
    assert "tokenizer: bpe, 500 ids" in refused.stdout  # trained, then refused
    assert not (tmp_path / "new").exists()

    again = run_command(*train_args(model_dir, "--vocab_size=400", *short, flagfile=flagfile))
    assert again.returncode == 0, again.stderr[-2000:]
    assert "tokenizer: bpe, 400 ids" in again.stdout
    settings = json.loads((model_dir / "model_config.json").read_text())
    assert settings["data"]["vocab_size"] == 400 and settings["model"]["vocab_size"] <= 400

    left = tmp_path / "left"  # a tokenizer of 500 ids left in a folder without a run
    shutil.copytree(finished[0] / "tokenizer", left / "tokenizer")
    before = snapshot(left)
    found = run_command(*train_args(left, "--vocab_size=400", *short, flagfile=flagfile))
    assert_one_error_line(found, f"{left / 'tokenizer'}: a tokenizer these flags did not train (500 ids, more than "
                                 "--vocab_size=400)", "remove the folder to train a new one")
    assert snapshot(left) == before and sorted(os.listdir(left)) == ["tokenizer"]


def test_a_resume_keeps_its_data_set_and_the_run_it_started_from(finished, tmp_path):
    """Another --dataset on a resume is refused (training on it is fine-tuning: --init_from in a new
    --model_dir), as is an --init_from naming another run than the one the run started from; that
    one is not read again, and the run resumes (here: finished, it trains nothing) keeping its
    record."""
    model_dir, flagfile = copy_run(finished, tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "validation", "test"):
        (data / f"{split}.en").write_text("".join(f"a dog number {i} runs .\n" for i in range(20)))
        (data / f"{split}.de").write_text("".join(f"ein hund nummer {i} rennt .\n" for i in range(20)))
    before = snapshot(model_dir)
    other = run_command(*train_args(model_dir, *FINISHED, "--dataset=files", f"--data_dir={data}",
                                    "--source_file={split}.en", "--target_file={split}.de", flagfile=flagfile))
    assert_one_error_line(other, f"--dataset=files: {model_dir} was trained on --dataset=embedded",
                          f"in another --model_dir with --init_from={model_dir}")
    assert snapshot(model_dir) == before

    origin = finished[0]
    elsewhere = run_command(*train_args(model_dir, *FINISHED, f"--init_from={origin}", flagfile=flagfile))
    assert_one_error_line(elsewhere, f"--init_from={origin}: {model_dir} already holds a run not started from "
                                     "another one, with checkpoints; leave out --init_from to resume it")
    assert snapshot(model_dir) == before

    settings = json.loads((model_dir / "model_config.json").read_text())
    settings["init_from"] = {"run_dir": str(origin), "checkpoint": str(origin / "checkpoints" / "ckpt-12")}
    (model_dir / "model_config.json").write_text(json.dumps(settings))  # as if it had started from `origin`
    again = run_command(*train_args(model_dir, *FINISHED, f"--init_from={origin}", flagfile=flagfile))
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"--init_from={origin} is not read again: {model_dir} has checkpoints and resumes from them" in again.stdout
    assert "nothing to train" in again.stdout
    assert json.loads((model_dir / "model_config.json").read_text())["init_from"] == settings["init_from"]
