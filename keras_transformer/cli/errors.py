"""How a command ends: one `error:` line and exit 2 for bad input, never a traceback.

    from keras_transformer import cli
    ...
    if __name__ == "__main__":
        cli.run(main)

Bad input (an unknown flag, a `ValueError` or `FileNotFoundError` raised for a user's
mistake) ends with `error: <one line>` on stderr and exit code 2. So does a file system that
refuses a write or a read (`os_error_message`: a full disk or quota, a read-only file system,
a permission, a folder where a file belongs or the reverse), raised by Python or by
TensorFlow's own file code: one line naming the path, whichever command and step hit it.
A `--flagfile` that is not UTF-8 text, or that includes itself (directly or through others,
which absl would skip with a warning), is one line naming it (`check_flagfiles`).
Ctrl-C outside the training loop (which saves first, see `keras_transformer.training.interrupts`)
ends with `error: interrupted` and exit code 130; an interruption that carries an `exit_code`
(a second SIGTERM: 143) exits with it. Set KT_DEBUG=1 to see the traceback.
"""

from __future__ import annotations

import errno
import os
import re
import sys
from typing import Optional, Sequence

from absl import app, flags

from keras_transformer import command_start
from keras_transformer.cli.startup import NativeStderrSilencer


USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, flags.Error, app.UsageError)
# What a file system says when it refuses (not a bug of ours): full, read-only, not permitted,
# a folder where a file belongs or the reverse, a name too long, a missing file.
FILE_SYSTEM_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM,
                      errno.EISDIR, errno.ENOTDIR, errno.ENAMETOOLONG, errno.ENOENT)
_STRERRORS = tuple(os.strerror(number) for number in FILE_SYSTEM_ERRNOS)


def os_error_message(error: BaseException) -> Optional[str]:
    """"PATH: No space left on device" for a file system's refusal, else None.

    Python's `OSError` with one of `FILE_SYSTEM_ERRNOS` (its path, and the rename target if
    any), or a TensorFlow `OpError` whose message ends in one of their texts (TensorFlow's file
    code reports "{{function_node ...}} PATH; No space left on device [Op:SaveV2]").
    """
    if isinstance(error, OSError):
        if error.errno not in FILE_SYSTEM_ERRNOS:
            return None
        paths = [str(p) for p in (error.filename, error.filename2) if p is not None]
        where = f"{paths[0]}{f' -> {paths[1]}' if len(paths) > 1 else ''}: " if paths else ""
        return f"{where}{error.strerror or os.strerror(error.errno)}"
    tf = sys.modules.get("tensorflow")
    if tf is None or not isinstance(error, tf.errors.OpError):
        return None
    text = re.sub(r"\{\{[^}]*\}\}|\[Op:[^\]]*\]", "", str(error.message)).strip()
    text = " ".join(text.splitlines()[0].split()) if text else ""
    for strerror in _STRERRORS:
        where, separator, _ = text.partition(f"; {strerror}")
        if separator:
            return f"{where.strip()}: {strerror}"
        if text.endswith(strerror):
            return text
    return None


# Flags that name a file or folder: given empty (--model_dir=, an unset shell variable), a command
# would work in the current folder, or trip over None; refused as the flags are parsed.
PATH_FLAGS = ("checkpoint", "init_from", "input", "output", "reference", "source", "target", "out")
PATH_FLAG_SUFFIXES = ("_dir", "_file")


def empty_path_flags(flag_values) -> list[str]:
    """The path flags (`PATH_FLAGS`, names ending in `PATH_FLAG_SUFFIXES`) given as an empty string."""
    return [name for name in sorted(flag_values) if (name in PATH_FLAGS or name.endswith(PATH_FLAG_SUFFIXES))
            and flag_values[name].present and flag_values[name].value == ""]


# absl's flagfile directives (`FlagValues.read_flags_from_files`): "--flagfile=PATH" or "--flagfile PATH" on
# the command line, a line "--flagfile=PATH" in a flagfile; one dash works too.
FLAGFILE_PREFIXES = ("--flagfile=", "-flagfile=")


def check_flagfiles(args: Sequence[str]) -> None:
    """Refuses, with a one-line `ValueError`, a flagfile that absl would misread.

    Walks every flagfile the command line `args` (without the program) names, and the ones they
    include, as absl reads them (`FlagValues.read_flags_from_files`): directives up to a "--",
    paths with "~" expanded and relative to the current folder, lines starting with "#" or "//"
    skipped. Refuses a flagfile that is not UTF-8 text (absl raises `UnicodeDecodeError`) and one
    that includes itself, directly or through others: absl skips the repeated file with a warning
    and goes on without its flags (a recipe that includes itself trains the defaults). A file that
    cannot be opened is left to absl to report; one that is not a regular file (a pipe,
    `--flagfile=<(...)`) is not read here, as it can be read only once.
    """
    finished = set()  # real paths walked whole: a cycle through one would have been found there

    def visit(name: str, chain: list[tuple[str, str]]) -> None:
        real = os.path.realpath(name)
        for index, (_, seen) in enumerate(chain):
            if seen == real:
                files = [n for n, _ in chain[index:]] + [name]
                cycle = (f"{files[0]} includes itself" if len(files) == 2 else
                         f"flagfiles include each other in a cycle ({' -> '.join(files)})")
                raise ValueError(f"--flagfile={chain[0][0]}: {cycle}; a flagfile cannot include itself, "
                                 f"directly or through another")
        if real in finished or not os.path.isfile(real):
            return
        try:
            with open(real, "rb") as file:
                data = file.read()
        except OSError:
            return
        what = f"--flagfile={name}" if not chain else f"{name} (included by {chain[-1][0]})"
        try:
            lines = data.decode("utf-8").splitlines(keepends=True)
        except UnicodeDecodeError as error:
            line = data.count(b"\n", 0, error.start) + 1
            raise ValueError(f"{what}: not UTF-8 text (line {line} has the byte 0x{data[error.start]:02x}); "
                             f"save it as UTF-8") from None
        for line in lines:  # a directive starts its line (a comment, "#" or "//", or " --flagfile=" is none)
            if line.startswith(FLAGFILE_PREFIXES):
                included = os.path.expanduser(line.split("=", 1)[1].strip())
                if included:  # absl ignores an empty one
                    visit(included, chain + [(name, real)])
        finished.add(real)

    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            break
        if arg in ("--flagfile", "-flagfile") and rest:
            visit(os.path.expanduser(rest.pop(0)), [])
        elif arg.startswith(FLAGFILE_PREFIXES):
            name = os.path.expanduser(arg.split("=", 1)[1].strip())
            if name:
                visit(name, [])


def raised_while_interrupted(error: BaseException) -> bool:
    """True if `error` was raised while a KeyboardInterrupt unwound the stack (one is in its
    `__context__` chain): e.g. TensorFlow's graph stack, left mid-trace by Ctrl-C, raising
    "Nesting violated" on its way out. That is the interrupt, not a fault of its own."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, KeyboardInterrupt):
            return True
        error = error.__context__
    return False


def fail(message: str, code: int = 2):
    """Prints `error: message` (one line) to stderr and exits."""
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr)
    sys.exit(code)


def _adopt_key_flags(module: str) -> None:
    """`--help` lists the program's key flags (absl: those of `sys.argv[0]`'s module); a command whose `main`
    lives in an imported module (a console script, `python -m keras_transformer.train`) lends them its own."""
    if module != "__main__" and sys.argv[:1]:
        for flag in flags.FLAGS.get_key_flags_for_module(module):
            flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)


def run(main, known_only: bool = False):
    """`absl.app.run(main)` with one-line errors and exit code 2 for bad input.

    Native stderr stays silenced until `main` starts: absl's start-up flushes
    TensorFlow's buffered C++ log lines. With `known_only`, flags this command does not define
    (a --flagfile's included) are not an error: `main` gets them in its argv, in order, to hand
    to another command (`keras_transformer.variations` passes a recipe to the training command).
    """
    silencer = NativeStderrSilencer()
    _adopt_key_flags(getattr(main, "__module__", "__main__"))

    def parse_flags(argv):
        try:
            check_flagfiles(argv[1:])
        except ValueError as error:
            silencer.stop()
            fail(error)
        try:
            remaining = flags.FLAGS(argv, known_only=known_only)
        except flags.Error as error:
            silencer.stop()
            fail(f"{error}. Pass --helpfull to see every flag.")
        except UnicodeDecodeError as error:  # a flagfile check_flagfiles could not read first (a pipe)
            silencer.stop()
            fail(f"--flagfile: not UTF-8 text (the byte 0x{error.object[error.start]:02x}); save it as UTF-8")
        empty = empty_path_flags(flags.FLAGS)
        if empty:
            silencer.stop()
            fail(f"{', '.join(f'--{name}=' for name in empty)}: an empty path; give a file or folder")
        return remaining

    def guarded(argv):
        silencer.stop()
        try:
            return main(argv)
        except KeyboardInterrupt as error:  # Ctrl-C where no handler of its own saves work
            if os.environ.get("KT_DEBUG"):
                raise
            fail(f"interrupted{f' ({error})' if str(error) else ''}", code=getattr(error, "exit_code", 130))
        except Exception as error:  # pylint: disable=broad-except  (re-raised unless bad input or the file system)
            if os.environ.get("KT_DEBUG"):
                raise
            if command_start.interrupted() or raised_while_interrupted(error):  # what Ctrl-C left behind
                fail("interrupted", code=130)
            if isinstance(error, USER_ERRORS):
                fail(error)
            message = os_error_message(error)
            if message is None:
                raise
            fail(message)

    try:
        command_start.release()  # from here on, Ctrl-C is a KeyboardInterrupt (recorded), turned into one line here
        silencer.start()
        app.run(guarded, flags_parser=parse_flags)
    except KeyboardInterrupt:  # Ctrl-C while absl parses the flags, before `guarded` runs
        silencer.stop()
        if os.environ.get("KT_DEBUG"):
            raise
        fail("interrupted", code=130)
    finally:
        silencer.stop()
