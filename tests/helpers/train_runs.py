"""Runs of the training command on the tiny recipe (configs/tiny.flags), as the train and fault tests start them."""

from __future__ import annotations

from tests.helpers.commands import run_command
from tests.helpers.paths import REPO
from tests.helpers.shared_folders import key_of, shared_copy

TINY = (REPO / "configs" / "tiny.flags").read_text(encoding="utf-8")
# A finished tiny run (checkpoints at 6 and 12, evaluated and averaged): the fault tests' common run,
# trained once per session by `shared_tiny_run` for every module that asks for it.
FINISHED = ("--train_steps=12", "--checkpoint_every_steps=6", "--eval_every_steps=0", "--eval_max_sentences=8",
            "--average_checkpoints=2", "--keep_checkpoints=2")


def train_args(model_dir, *flags, flagfile=None) -> list[str]:
    """`python`'s arguments for `-m keras_transformer.train`: for `run_command(*train_args(...))`,
    or after `sys.executable` in a Popen."""
    args = ["-m", "keras_transformer.train", f"--model_dir={model_dir}"]
    if flagfile:
        args.append(f"--flagfile={flagfile}")
    return args + list(flags)


def latest_step(model_dir):
    """The step of the checkpoint the state file names first, or None."""
    state = model_dir / "checkpoints" / "checkpoint"
    if not state.exists():
        return None
    first = state.read_text().splitlines()[0]  # model_checkpoint_path: "ckpt-N"
    return int(first.split("ckpt-")[1].rstrip('"'))


def shared_tiny_run(tmp_path_factory, model_dir, *flags, timeout=900) -> None:
    """A finished run of the tiny recipe with `flags` in `model_dir`: the training command's,
    trained once per test session for the same flags (`shared_folders.shared_copy`: under
    pytest-xdist, once for all workers) and copied there. A run names no path of its own (its
    checkpoint lists are relative), so the copy is that run. Fails the caller if training fails."""

    def build(folder):
        flagfile = folder.parent / "tiny.flags"
        flagfile.write_text(TINY)
        result = run_command(*train_args(folder, *flags, flagfile=flagfile), timeout=timeout)
        assert result.returncode == 0, result.stderr[-2000:]

    shared_copy(tmp_path_factory, key_of("tiny run", TINY, flags), build, model_dir)
