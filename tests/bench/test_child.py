"""bench/child.py: a benchmark's child process run to its end, its reply, its failure, its peak RSS."""

import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))

import child  # noqa: E402  pylint: disable=wrong-import-position


def test_a_reply_is_the_last_line_as_json():
    done = child.run_python("-c", "print('loading'); print('{\"seconds\": 1.5}')")
    assert child.json_reply(done, "the worker") == {"seconds": 1.5}


def test_a_failed_child_is_an_error_naming_it_its_status_and_its_stderr():
    done = child.run_python("-c", "import sys; sys.stderr.write('x' * 5000 + 'the cause'); sys.exit(3)")
    with pytest.raises(child.ChildFailed, match=r"the worker failed \(exit 3\):\nx+the cause$") as raised:
        child.json_reply(done, "the worker")
    assert len(str(raised.value).splitlines()[-1]) == child.TAIL_CHARACTERS


def test_the_peak_rss_counts_a_short_peak_after_it_is_gone():
    process = subprocess.Popen([sys.executable, "-c", "block = bytearray(200 * 2**20); del block; import time; "
                                                      "time.sleep(0.2)"])
    returncode, peak = child.wait_peak_rss(process.pid)
    assert returncode == 0
    assert peak > 200 * 2**20
