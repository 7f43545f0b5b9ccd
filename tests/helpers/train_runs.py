"""Runs of the training command on the tiny recipe (configs/tiny.flags), as the train and fault tests start them."""

from __future__ import annotations

from tests.helpers.paths import REPO

TINY = (REPO / "configs" / "tiny.flags").read_text(encoding="utf-8")


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
