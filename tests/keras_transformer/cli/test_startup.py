"""What every entry point shares: `cli.start_tensorflow` (in a fresh process, since it configures TF's start-up), and
the packages' `tf.function`s traced without AutoGraph."""

import ast

import pytest

from tests.helpers.commands import run_command
from tests.helpers.modules import MODULES

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


def _tf_function_uses(tree):
    """(line, the `tf.function` node: a call, or a bare decorator) of every `tf.function` in `tree`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "tf.function":
            yield node.lineno, node
        decorators = getattr(node, "decorator_list", [])
        for decorator in decorators:
            if ast.unparse(decorator) == "tf.function":
                yield decorator.lineno, decorator


def test_every_tf_function_of_the_packages_is_traced_without_autograph():
    """AutoGraph's conversion of the traced code only lengthened each command's start-up (export,
    translate, train; docs/speed.md#start-up): the code is plain TF, so every
    `tf.function` says `autograph=False`."""
    found, missing = 0, []
    for name, path in MODULES.items():
        for line, node in _tf_function_uses(ast.parse(path.read_text(encoding="utf-8"))):
            found += 1
            keywords = {k.arg: k.value for k in getattr(node, "keywords", [])}
            value = keywords.get("autograph")
            if not (isinstance(value, ast.Constant) and value.value is False):
                missing.append(f"{name}:{line}")
    assert found >= 10, found  # the rule reads the calls it is about
    assert not missing, missing
