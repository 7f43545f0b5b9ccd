"""The shortlist command: its inputs read once whatever they are (a file, a pipe, stdin), `--output=-` on stdout,
pairs longer than the model's max_length left out as training leaves them, and a memory bound checked before
the work."""

import re
import subprocess
import sys

import numpy as np
import pytest

from keras_transformer.commands import shortlist
from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.export_models import DEEP_ENCODER, shared_model_dir
from tests.helpers.paths import REPO


def _ids(*lengths):
    return [np.arange(4, 4 + n, dtype=np.int32) for n in lengths]


def test_pairs_longer_than_training_keeps_are_left_out():
    """Training keeps a pair when both sides, EOS included, have at most max_length tokens."""
    pairs, dropped = shortlist.within_length(_ids(3, 4, 5, 2), _ids(4, 3, 2, 6), max_length=5)
    assert [(len(s), len(t)) for s, t in pairs] == [(3, 4), (4, 3)] and dropped == 2


def test_the_memory_bound_counts_every_source_token_and_null_against_every_target_token():
    pairs = list(zip(_ids(3, 1), _ids(2, 5)))  # (3 + NULL) x 2 + (1 + NULL) x 5 = 18 combinations
    needed = 18 * shortlist.BYTES_PER_COMBINATION
    shortlist.check_memory(pairs, 7, available=2 * needed)  # exactly half: fits
    with pytest.raises(ValueError, match=r"^--max_pairs=7: these pairs make 18 source x target token combinations"):
        shortlist.check_memory(pairs, 7, available=2 * needed - 1)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("run")
    pairs = shared_model_dir(tmp_path_factory, path, **DEEP_ENCODER)[:40]
    data = tmp_path_factory.mktemp("data")
    (data / "train.en").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (data / "train.de").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return path, data


def _shortlist(run, *args, **kwargs):
    return run_command("-m", "keras_transformer.shortlist", f"--model_dir={run}", "--top_k=4", "--frequent=8",
                       *args, **kwargs)


@pytest.mark.slow
def test_pipes_stdin_and_stdout_give_the_files_shortlist(corpus, tmp_path):
    run, data = corpus
    from_files = _shortlist(run, f"--source={data / 'train.en'}", f"--target={data / 'train.de'}",
                            f"--output={tmp_path / 'files.vmap'}")
    assert from_files.returncode == 0, from_files.stderr[-2000:]
    expected = (tmp_path / "files.vmap").read_text(encoding="utf-8")
    # A shell's <(...) for both inputs, and the map on stdout.
    piped = subprocess.run(["bash", "-c", f"{sys.executable} -m keras_transformer.shortlist --model_dir={run} "
                            f"--top_k=4 --frequent=8 --source=<(cat {data / 'train.en'}) "
                            f"--target=<(gzip -c {data / 'train.de'}) --output=-"],
                           cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert piped.returncode == 0 and piped.stdout == expected, piped.stderr[-2000:]
    assert "wrote stdout:" in piped.stderr and not (REPO / "-").exists()
    from_stdin = _shortlist(run, "--source=-", f"--target={data / 'train.de'}", f"--output={tmp_path / 'stdin.vmap'}",
                            stdin=(data / "train.en").read_text(encoding="utf-8"))
    assert from_stdin.returncode == 0, from_stdin.stderr[-2000:]
    assert (tmp_path / "stdin.vmap").read_text(encoding="utf-8") == expected


@pytest.mark.slow
def test_over_long_pairs_are_left_out_and_none_left_is_one_line(corpus, tmp_path):
    run, data = corpus
    long_line = " ".join(["Haus"] * 150_000)
    (tmp_path / "s.txt").write_text((data / "train.en").read_text(encoding="utf-8") + long_line + "\n")
    (tmp_path / "t.txt").write_text((data / "train.de").read_text(encoding="utf-8") + long_line + "\n")
    kept = _shortlist(run, f"--source={tmp_path / 's.txt'}", f"--target={tmp_path / 't.txt'}",
                      f"--output={tmp_path / 'out.vmap'}")
    plain = _shortlist(run, f"--source={data / 'train.en'}", f"--target={data / 'train.de'}",
                       f"--output={tmp_path / 'plain.vmap'}")
    counts = [re.search(r"from (\d+) pairs(?: \((\d+) longer than the model's max_length=)?", r.stderr).groups("0")
              for r in (plain, kept)]
    assert kept.returncode == 0 and plain.returncode == 0, kept.stderr[-2000:]
    assert counts[1] == (counts[0][0], str(int(counts[0][1]) + 1))  # the same pairs kept, one more left out
    (tmp_path / "long.txt").write_text(long_line + "\n")
    none = _shortlist(run, f"--source={tmp_path / 'long.txt'}", f"--target={tmp_path / 'long.txt'}",
                      f"--output={tmp_path / 'none.vmap'}")
    assert_one_error_line(none, "no pair fits the model's max_length=")
    assert not (tmp_path / "none.vmap").exists()
