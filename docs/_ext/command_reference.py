"""Sphinx extension: the command reference, generated from the commands' absl flags at build time.

docs/reference/commands.md holds a block between the lines `<!-- command-reference -->` and
`<!-- /command-reference -->`; when Sphinx reads the page, the block is replaced with one `##`
section per command of COMMANDS (its command line, the first paragraph of its module docstring,
a table of its flags), written as MyST Markdown, so `commands.md#train` links to the training
command's section (`myst_heading_anchors`).

A command's flags are those its module and the project's modules it calls (`tasks/flags.py`'s
shared flags) define; absl's own (--helpfull, --flagfile, the logging flags) are left out. The
modules define their flags on absl's global FLAGS when imported, and several define the same
names (--preset, the shared flags), so each module is imported in a child process of its own
(`command_flags`), which imports no TensorFlow and takes a fraction of a second.

    python docs/_ext/command_reference.py            # the generated Markdown, on stdout
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import pathlib
import re
import string
import subprocess
import sys

from keras_transformer.commands import COMMANDS as PACKAGE_COMMANDS

REPO = pathlib.Path(__file__).resolve().parents[2]
PAGE = "reference/commands"
BEGIN, END = "<!-- command-reference -->", "<!-- /command-reference -->"
PROJECT_PACKAGES = ("keras_transformer",)  # the one import namespace


@dataclasses.dataclass(frozen=True)
class Command:
    """One command of the reference: its section name, its module and how it is called."""

    name: str  # the `##` heading, hence the anchor: commands.md#<name>
    module: str  # imported to read its flags and docstring
    usage: str  # the command line shown
    runnable: str = ""  # `python -m RUNNABLE` runs it (the same as the console script of the usage line)
    note: str = ""  # Markdown added after the docstring's first paragraph


# What each command's line shows after its name, and notes added after its docstring's first paragraph.
_USAGE = {"train": "[--flagfile=FILE] [--flag=value ...]", "variations": "[--flagfile=FILE] [--flag=value ...]",
          "pipelines": "{stats,train_tokenizer} [--flag=value ...]"}
_NOTES = {"variations": "Flags it does not define are the training command's (see [train](#train)): each row's "
                        "run of `python -m keras_transformer.train` gets them, then the row's changes."}

# The package's commands (keras_transformer.commands.COMMANDS), in its order.
COMMANDS = tuple(
    Command(c.name, c.module, f"{c.script} {_USAGE.get(c.name, '[--flag=value ...]')}\n"
                              f"python -m {c.runnable} {_USAGE.get(c.name, '[--flag=value ...]')}",
            runnable=c.runnable, note=_NOTES.get(c.name, ""))
    for c in PACKAGE_COMMANDS.values())

# Run in the child process: import one module, print its project flags as JSON, in definition order.
_DUMP_FLAGS = r"""
import importlib, json, sys
from absl import flags
importlib.import_module(sys.argv[1])
packages = tuple(sys.argv[2].split(","))
owners = {}
for module, module_flags in flags.FLAGS.flags_by_module_dict().items():
    if module.split(".")[0] in packages:
        for flag in module_flags:
            owners.setdefault(flag.name, module)
def plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return str(value)
found = []
for name in flags.FLAGS:
    flag = flags.FLAGS[name]
    if name != flag.name or name not in owners:
        continue  # a short name, or absl's own flag
    parser = flag.parser
    found.append({
        "name": flag.name, "module": owners[name], "type": flag.flag_type(), "default": plain(flag.default),
        "help": flag.help or "", "boolean": flag.boolean, "short_name": flag.short_name,
        "choices": list(getattr(parser, "enum_values", None) or []),
        "lower_bound": plain(getattr(parser, "lower_bound", None)),
        "upper_bound": plain(getattr(parser, "upper_bound", None)),
    })
json.dump(found, sys.stdout)
"""


def command_flags(module: str) -> list[dict]:
    """The flags `module` defines when imported, with those of the project's modules it calls.

    Each is a dict: name, module (the one defining it), type (absl's flag_type), default, help,
    boolean, short_name, choices (of an enum), lower_bound and upper_bound (of a number).
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run([sys.executable, "-c", _DUMP_FLAGS, module, ",".join(PROJECT_PACKAGES)],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"importing {module} to read its flags failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout)


def first_paragraph(module: str) -> str:
    """The first paragraph of the module's docstring (read from its source, nothing imported), one line."""
    parts = module.split(".")
    if (REPO / parts[1]).is_dir() and parts[1] != parts[0]:  # keras_transformer.export... lives in export/
        parts = parts[1:]
    base = REPO.joinpath(*parts)
    path = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(docstring.strip().split("\n\n")[0].split())


# Markdown --------------------------------------------------------------------------------------

_PUNCTUATION = set(string.punctuation)
_CODE = re.compile(r"(`[^`]*`)")
_FLAG = re.compile(r"(?<![\w`])(--[a-z][\w-]*(?:\*|=[^\s,;()]*[^\s,;().:])?)")  # --flag, --flag=value, --prefix_*


def escape(text: str) -> str:
    """Text as literal Markdown: every ASCII punctuation character backslash-escaped (CommonMark)."""
    return "".join("\\" + c if c in _PUNCTUATION else c for c in text)


def code(text: str) -> str:
    """An inline code span holding `text` as is."""
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def prose(text: str, table_cell: bool = False) -> str:
    """Help or docstring text as Markdown: its `code spans` kept, --flag names as code, the rest escaped.

    In a table cell, a pipe inside a code span is escaped too (GFM tables split cells on pipes).
    """
    out = []
    for part in _CODE.split(" ".join(text.split())):  # one line, single spaces
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(part)
        else:
            out += [code(piece) if _FLAG.fullmatch(piece) else escape(piece) for piece in _FLAG.split(part)]
    return "".join(p.replace("|", "\\|") if table_cell and p.startswith("`") else p for p in out)


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def type_cell(flag: dict) -> str:
    kind = flag["type"]
    if flag["choices"]:
        return "one of " + ", ".join(code(c) for c in flag["choices"])
    names = {"bool": "boolean", "int": "integer", "float": "float", "string": "string",
             "multi string": "string, repeatable", "list": "comma-separated list",
             "multi_int": "integer, repeatable"}
    text = names.get(kind, escape(kind))
    low, high = flag["lower_bound"], flag["upper_bound"]
    if low is not None and high is not None:
        text += f" in \\[{_number(low)}, {_number(high)}\\]"
    elif low is not None:
        text += f" ≥ {_number(low)}"
    elif high is not None:
        text += f" ≤ {_number(high)}"
    return text


def default_cell(flag: dict) -> str:
    value = flag["default"]
    if value is None:
        return "none"
    if isinstance(value, bool):
        return code("true" if value else "false")
    if isinstance(value, list):
        return code(",".join(str(v) for v in value)) if value else "empty"
    if value == "":
        return "empty"
    return code(_number(value))


def flag_cell(flag: dict) -> str:
    names = [code(f"--{flag['name']}")]
    if flag["short_name"]:
        names.append(code(f"-{flag['short_name']}"))
    if flag["boolean"]:
        names.append(code(f"--no{flag['name']}"))
    return ", ".join(names)


def help_text(flag: dict) -> str:
    """The flag's help without what absl adds to it (an enum's `<a|b|c>: `, a multi flag's `; repeat ...`),
    which the Type column says."""
    text = flag["help"]
    if flag["choices"]:
        text = text.removeprefix(f"<{'|'.join(flag['choices'])}>: ")
    return re.sub(r";\s*repeat this option to specify a list of values\s*$", "", text)


def command_section(command: Command, flags: list[dict]) -> str:
    lines = [f"## {command.name}", "", "```bash", command.usage, "```", "", prose(first_paragraph(command.module)), ""]
    if command.note:
        lines += [command.note, ""]
    lines += ["| Flag | Type | Default | Description |", "|---|---|---|---|"]
    for flag in flags:
        lines.append(f"| {flag_cell(flag)} | {type_cell(flag)} | {default_cell(flag)} | {prose(help_text(flag), table_cell=True)} |")
    return "\n".join(lines) + "\n"


def generate() -> str:
    """The generated block: one section per command, in COMMANDS' order."""
    return "\n".join(command_section(c, command_flags(c.module)) for c in COMMANDS)


def replace_block(text: str, generated: str) -> str:
    """`text` with its block between BEGIN and END replaced by `generated`."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{PAGE}.md: no {BEGIN} ... {END} block to fill")
    return text[:start] + generated + text[end + len(END):]


# Sphinx ----------------------------------------------------------------------------------------


def _source_read(app, docname, source):
    if docname == PAGE:
        source[0] = replace_block(source[0], generate())


def _always_outdated(app, env, added, changed, removed):
    """The page is read again on every build: the flags live in the code, not in the page."""
    return [PAGE] if PAGE in env.found_docs and PAGE not in added | changed else []


def setup(app):
    app.connect("source-read", _source_read)
    app.connect("env-get-outdated", _always_outdated)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    sys.stdout.write(generate())
