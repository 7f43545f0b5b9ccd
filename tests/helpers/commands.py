"""Running the project's commands in a fresh process, and the one shape of their bad-input errors."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers.paths import REPO


def run_command(*argv, env=None, cwd=REPO, stdin=None, timeout=300) -> subprocess.CompletedProcess:
    """`python ARGV...` in a child process (e.g. "-m", "keras_transformer.export", "--model_dir=..." or "-c", CODE).

    The child gets this interpreter, the repository as its working folder and on PYTHONPATH,
    TF_CPP_MIN_LOG_LEVEL=3 and the rest of this process's environment; `env` adds or overrides
    variables, a None value removes one (also one set here). `stdin` is fed as UTF-8 text;
    stdout and stderr come back as text decoded from UTF-8, without newline translation (a
    carriage return stays "\r", so tests can tell a progress bar from plain lines). The exit
    status is the caller's to check.
    """
    environment = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
    for name, value in (env or {}).items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    result = subprocess.run([sys.executable, *map(str, argv)], cwd=cwd, env=environment,
                            input=None if stdin is None else stdin.encode("utf-8"), capture_output=True,
                            timeout=timeout, check=False)
    result.stdout = result.stdout.decode("utf-8", errors="backslashreplace")
    result.stderr = result.stderr.decode("utf-8", errors="backslashreplace")
    return result


def assert_one_error_line(result: subprocess.CompletedProcess, *fragments: str) -> str:
    """A command refused its input: exit status 2, no traceback, one `error: ` line holding every
    fragment, the last line on stderr; any line before it is a `warning: `. Returns the line."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr + result.stdout, result.stderr[-3000:]
    assert lines and lines[-1].startswith("error: "), result.stderr[-3000:]
    assert all(line.startswith("warning: ") for line in lines[:-1]), result.stderr[-3000:]
    assert all(fragment in lines[-1] for fragment in fragments), (fragments, lines[-1])
    return lines[-1]
