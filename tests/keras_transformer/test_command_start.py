"""`keras_transformer.command_start`: Ctrl-C while a `python -m` command imports its modules."""

import os
import signal
import subprocess
import sys

from tests.helpers.paths import REPO

# A command package whose `__init__` imports the project and is interrupted while Python is still locating
# `python -m interrupted_command` (as `python -m keras_transformer.train` imports keras_transformer/__init__.py).
INTERRUPTED_WHILE_IMPORTING = """
import os, signal, time
import keras_transformer
os.kill(os.getpid(), signal.SIGINT)
time.sleep(5)
print("not interrupted")
"""

# A command that reaches `cli.run`: SIGINT raises KeyboardInterrupt again (recorded), turned into one line.
INTERRUPTED_IN_MAIN = """
import os, signal, time
from keras_transformer import cli, command_start

def main(argv):
    print("recording handler:", signal.getsignal(signal.SIGINT) is command_start.raise_interrupt, flush=True)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)

cli.run(main)
"""

# TensorFlow's C++ code swallowing the KeyboardInterrupt and raising an error of its own, unrelated to it.
INTERRUPT_SWALLOWED = """
import os, signal, time
from keras_transformer import cli

def main(argv):
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        pass
    raise TypeError("could not convert the list to a tensor")

cli.run(main)
"""


def _run_module(tmp_path, name, source, args=(), init=""):
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text(init, encoding="utf-8")
    (package / "__main__.py").write_text(source, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO}")
    return subprocess.run([sys.executable, "-m", name, *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120, check=False,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_ctrl_c_while_a_command_imports_is_one_line_and_130(tmp_path):
    result = _run_module(tmp_path, "interrupted_command", "", init=INTERRUPTED_WHILE_IMPORTING)
    # The SIG_DFL of preexec_fn is replaced by Python's own handler at start-up, which `guard` takes over.
    assert result.returncode == 130, result.stderr
    assert result.stderr == "error: interrupted\n" and "not interrupted" not in result.stdout


def test_cli_run_turns_sigint_into_a_recorded_keyboard_interrupt(tmp_path):
    result = _run_module(tmp_path, "interrupted_main", INTERRUPTED_IN_MAIN)
    assert result.stdout == "recording handler: True\n"
    assert result.returncode == 130 and result.stderr.strip().splitlines() == ["error: interrupted"], result.stderr


def test_an_error_that_follows_ctrl_c_is_reported_as_the_interrupt(tmp_path):
    result = _run_module(tmp_path, "swallowed", INTERRUPT_SWALLOWED)
    assert result.returncode == 130 and result.stderr.strip().splitlines() == ["error: interrupted"], result.stderr


def test_importing_the_packages_from_python_changes_no_signal_handler():
    """Whatever SIGINT's handler is when a program imports the packages (Python's, or SIG_IGN that a
    shell gives a background job), it stays."""
    code = ("import signal\n"
            "before = signal.getsignal(signal.SIGINT)\n"
            "import keras_transformer, keras_transformer.export, keras_transformer.pipelines\n"
            "assert signal.getsignal(signal.SIGINT) is before, (before, signal.getsignal(signal.SIGINT))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr


def test_ctrl_c_while_the_flags_are_parsed_is_one_line(tmp_path):
    """A SIGINT between `cli.run`'s start and the command's main (absl parsing the flags)."""
    source = ("import os, signal\n"
              "from absl import flags\n"
              "from keras_transformer import cli\n"
              "class Interrupting(flags.ArgumentParser):\n"
              "    def parse(self, argument):\n"
              "        os.kill(os.getpid(), signal.SIGINT)\n"
              "        return argument\n"
              "flags.DEFINE(Interrupting(), 'word', None, 'a flag whose parsing is interrupted')\n"
              "cli.run(lambda argv: print('main ran'))\n")
    result = _run_module(tmp_path, "interrupted_flags", source, args=("--word=x",))
    assert result.returncode == 130 and result.stderr.strip().splitlines() == ["error: interrupted"], result.stderr
    assert "main ran" not in result.stdout
