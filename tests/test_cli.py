"""What every entry point shares: `cli.start_tensorflow` (in a fresh process, since it configures TF's start-up)."""

import subprocess
import sys

import pytest

from conftest import REPO

PROBE = """
from keras_transformer import cli
tf = cli.start_tensorflow()
from tensorflow.python.util import _pywrap_util_port
print("onednn", _pywrap_util_port.IsMklEnabled())
x = tf.ones((512, 512))
try:
    print("pool", tf.config.experimental.get_memory_info("CPU:0")["peak"] >= x.shape.num_elements() * 4)
except ValueError:  # malloc keeps no statistics
    print("malloc")
"""


@pytest.mark.parametrize("setting, expected", [(None, "pool True"), ("false", "malloc")])
def test_start_tensorflow_pools_cpu_memory_unless_told_not_to(setting, expected):
    env = {"PATH": "/usr/bin:/bin", "KERAS_BACKEND": "tensorflow"}
    if setting is not None:
        env["TF_CPU_ALLOCATOR_USE_BFC"] = setting
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO, env=env,
                            timeout=120, check=True)
    lines = result.stdout.strip().splitlines()
    if lines[-2] == "onednn True":  # oneDNN's kernels (on by default on AVX-512 hosts) pool CPU memory themselves
        expected = "pool True"
    assert lines[-1] == expected
