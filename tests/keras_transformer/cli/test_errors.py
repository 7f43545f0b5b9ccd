"""`keras_transformer.cli.errors`: the flagfiles a command line names, checked as absl reads them
(`check_flagfiles`), and `cli.run`'s one line for a flagfile absl alone reads (a named pipe).
The commands' own refusals (a self-including or non-UTF-8 flagfile in every command, a full
output device) are tested through the commands in tests/faults/test_faults_commands.py."""

import os
import threading

import pytest

from keras_transformer.cli import errors
from tests.helpers.commands import assert_one_error_line, run_command

NOT_UTF8 = b"--model_dir=\xff\xfe\n"


@pytest.fixture
def here(tmp_path, monkeypatch):
    """The test's folder as the current one: flagfile paths are relative to it, as absl opens them."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("args", [
    ["--flagfile=rec.flags"], ["-flagfile=rec.flags"], ["--flagfile", "rec.flags"], ["-flagfile", "rec.flags"],
    ["--model_dir=run", "--flagfile= rec.flags "],  # absl strips the name after "="
])
def test_a_flagfile_that_includes_itself_is_refused_in_each_form_absl_reads(here, args):
    (here / "rec.flags").write_text("--flagfile=rec.flags\n")
    with pytest.raises(ValueError, match=r"^--flagfile=rec\.flags: rec\.flags includes itself; "):
        errors.check_flagfiles(args)


@pytest.mark.parametrize("line", ["--flagfile=./rec.flags", "-flagfile={here}/rec.flags", "--flagfile=link.flags"])
def test_a_flagfile_that_includes_itself_under_another_name_is_refused(here, line):
    (here / "link.flags").symlink_to(here / "rec.flags")
    (here / "rec.flags").write_text("--vocab_size=400\n" + line.format(here=here) + "\n")
    with pytest.raises(ValueError, match="rec.flags includes itself"):
        errors.check_flagfiles(["--flagfile=rec.flags"])


def test_a_cycle_through_other_flagfiles_is_named_whole(here):
    (here / "recipe.flags").write_text("# the run's recipe\n--flagfile=a.flags\n")
    (here / "a.flags").write_text("--flagfile=b.flags\n")
    (here / "b.flags").write_text("--vocab_size=400\n--flagfile=a.flags\n")
    with pytest.raises(ValueError) as raised:
        errors.check_flagfiles(["--model_dir=run", "--flagfile=recipe.flags"])
    assert str(raised.value).startswith("--flagfile=recipe.flags: flagfiles include each other in a cycle "
                                        "(a.flags -> b.flags -> a.flags); ")


def test_files_read_twice_without_a_cycle_comments_and_what_absl_skips_are_not_refused(here):
    (here / "common.flags").write_text("--vocab_size=400\n")
    (here / "a.flags").write_text("--flagfile=common.flags\n")
    (here / "b.flags").write_text("--flagfile=common.flags\n--flagfile=\n")  # an empty name: absl ignores it
    (here / "recipe.flags").write_text("# --flagfile=recipe.flags\n// --flagfile=recipe.flags\n"
                                       "--flagfile=a.flags\n--flagfile=b.flags\n --flagfile=recipe.flags\n")
    errors.check_flagfiles(["--flagfile=recipe.flags", "--flagfile=recipe.flags", "--flagfile=a.flags"])
    (here / "rec.flags").write_text("--flagfile=rec.flags\n")
    errors.check_flagfiles(["--model_dir=run", "--", "--flagfile=rec.flags"])  # absl reads nothing after "--"
    errors.check_flagfiles(["--flagfile=missing.flags", "--flagfile"])  # absl's own errors


def test_a_flagfile_under_the_home_folder_is_read_as_absl_expands_it(here, monkeypatch):
    monkeypatch.setenv("HOME", str(here))
    (here / "rec.flags").write_text("--flagfile=~/rec.flags\n")
    with pytest.raises(ValueError, match="includes itself"):
        errors.check_flagfiles(["--flagfile=~/rec.flags"])


def test_a_flagfile_that_is_not_utf8_is_refused_naming_it_and_the_line(here):
    (here / "bad.flags").write_bytes(b"# recipe\n" + NOT_UTF8)
    (here / "recipe.flags").write_text("--vocab_size=400\n--flagfile=bad.flags\n")
    with pytest.raises(ValueError, match=r"^--flagfile=bad\.flags: not UTF-8 text \(line 2 has the byte 0xff\)"):
        errors.check_flagfiles(["--flagfile=bad.flags"])
    with pytest.raises(ValueError, match=r"^bad\.flags \(included by recipe\.flags\): not UTF-8 text"):
        errors.check_flagfiles(["--flagfile", "recipe.flags"])


@pytest.mark.timeout(60)  # an open of the pipe would block: the test fails instead of hanging
def test_a_named_pipe_is_left_for_absl_to_read_once(here):
    os.mkfifo(here / "pipe.flags")
    errors.check_flagfiles(["--flagfile=pipe.flags"])  # returns without opening it (an open would block)


COMMAND = """
from absl import flags
from keras_transformer import cli
flags.DEFINE_string("model_dir", None, "")

def main(argv):
    print("model_dir", flags.FLAGS.model_dir)

cli.run(main)
"""


def test_a_flagfile_that_only_absl_reads_and_is_not_utf8_is_one_error_line(tmp_path):
    """A named pipe (`--flagfile=<(...)` in a shell) can be read once: absl's UnicodeDecodeError
    is the one line."""
    pipe = tmp_path / "pipe.flags"
    os.mkfifo(pipe)

    def feed():
        with open(pipe, "wb") as file:  # blocks until the command opens it
            file.write(NOT_UTF8)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    result = run_command("-c", COMMAND, f"--flagfile={pipe}", timeout=60)
    writer.join(10)
    assert_one_error_line(result, "--flagfile: not UTF-8 text (the byte 0xff); save it as UTF-8")


def test_an_error_raised_while_ctrl_c_unwinds_is_the_interrupt():
    """TensorFlow's graph stack, left mid-trace by Ctrl-C, raises AssertionError("Nesting violated")
    on its way out: one `error: interrupted` line and 130, not a traceback."""
    code = ("from keras_transformer import cli\n"
            "def main(argv):\n"
            "    try:\n"
            "        raise KeyboardInterrupt\n"
            "    finally:\n"
            "        raise AssertionError('Nesting violated for default stack')\n"
            "cli.run(main)\n")
    result = run_command("-c", code)
    assert result.returncode == 130 and result.stderr.splitlines() == ["error: interrupted"], result.stderr
    try:
        try:
            raise KeyboardInterrupt
        finally:
            raise AssertionError("x")  # pylint: disable=lost-exception
    except AssertionError as error:
        assert errors.raised_while_interrupted(error)
    assert not errors.raised_while_interrupted(ValueError("bad input"))
