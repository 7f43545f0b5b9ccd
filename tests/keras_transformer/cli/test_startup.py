"""What every entry point shares: `cli.start_tensorflow` (in a fresh process, since it configures TF's start-up)."""

import pytest

from tests.helpers.commands import run_command

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
    result = run_command("-c", PROBE, env={"TF_CPU_ALLOCATOR_USE_BFC": setting}, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    if lines[-2] == "onednn True":  # oneDNN's kernels (on by default on AVX-512 hosts) pool CPU memory themselves
        expected = "pool True"
    assert lines[-1] == expected


ONEDNN_INT64 = """
from keras_transformer import cli
tf = cli.start_tensorflow()
print("started", flush=True)
tf.transpose(tf.constant([[1, 2]], tf.int64))  # as the tokenizers' ragged ops do, eagerly
print("done", flush=True)
"""


def test_no_onednn_data_type_line_after_start_up():
    """TensorFlow's one-time ERROR line "oneDNN supports DT_INT64 only on platforms with AVX-512"
    (printed on this AVX-512 host too, where oneDNN is on) is spent while stderr is silenced, so a
    command's own stderr never shows it; TF_CPP_MIN_LOG_LEVEL left as a user has it (unset)."""
    result = run_command("-c", ONEDNN_INT64, env={"TF_CPP_MIN_LOG_LEVEL": None}, timeout=180)
    assert result.returncode == 0 and result.stdout.split() == ["started", "done"], result.stderr[-2000:]
    assert "oneDNN supports" not in result.stderr, result.stderr
