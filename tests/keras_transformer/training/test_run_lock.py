"""One trainer per training directory, and the removal of a killed writer's leftovers."""

import os
import socket
import subprocess
import sys

import pytest

from keras_transformer.training import run_lock
from tests.helpers.paths import REPO

HOLD = """
import sys, time
from keras_transformer.training import run_lock
with run_lock.RunLock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_a_second_holder_is_refused_with_the_first_ones_pid_and_host(tmp_path):
    model_dir = str(tmp_path / "run")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, model_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, cwd=REPO)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(ValueError) as error:
            run_lock.RunLock(model_dir).acquire()
        message = str(error.value)
        assert f"pid {holder.pid} on {socket.gethostname()}" in message and "\n" not in message
    finally:
        holder.communicate("\n", timeout=30)
    with run_lock.RunLock(model_dir):  # released when its holder ended
        assert run_lock.holder(model_dir).startswith(f"pid {os.getpid()} ")
    assert run_lock.holder(model_dir) == ""


def test_a_killed_holder_leaves_no_lock(tmp_path):
    model_dir = str(tmp_path / "run")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, model_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, cwd=REPO)
    assert holder.stdout.readline() == "held\n"
    holder.kill()
    holder.wait(timeout=30)
    with run_lock.RunLock(model_dir):  # the kernel released it; the file's old text does not matter
        pass


def test_stale_temporaries_are_removed_and_nothing_else(tmp_path):
    model_dir = tmp_path / "run"
    keep = ["checkpoints/ckpt-5.index", "checkpoints/checkpoint", "model_config.json", "tokenizer/tokenizer.json",
            "eval/history.json", "checkpoints/ckpt-5.data-00000-of-00001"]
    stale = ["checkpoints/ckpt-10_temp/part-00000-of-00001.index", ".tmp-abc.json", "eval/.tmp-x.json",
             "tokenizer/.tmp-q", "tokenizer/source/.tmp-r", "workers/worker-1/ckpt-10_temp/x"]
    for name in keep + stale:
        (model_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (model_dir / name).write_text(name)
    lines = []
    removed = run_lock.remove_stale_temporaries(str(model_dir), lines.append)
    assert sorted(os.path.relpath(p, model_dir) for p in removed) == sorted(
        ["checkpoints/ckpt-10_temp", ".tmp-abc.json", "eval/.tmp-x.json", "tokenizer/.tmp-q",
         "tokenizer/source/.tmp-r", "workers/worker-1/ckpt-10_temp"])
    assert all((model_dir / name).read_text() == name for name in keep)
    assert len(lines) == 1 and "ckpt-10_temp" in lines[0]
    assert run_lock.remove_stale_temporaries(str(model_dir), lines.append) == [] and len(lines) == 1
