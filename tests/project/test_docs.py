"""The documentation site (docs/): it builds strictly, its command reference lists every flag, and the
commands it tells a new user to run work.

The site is built once per test module, as `make docs` builds it (docs/conf.py, `-W -n`: every
warning an error, every cross-reference resolved) but into a temporary folder and with the notebooks
shown without outputs (`-D kt_notebooks=stored`; tests/project/test_notebooks.py runs them). The
command reference's flags are compared with those each command's `--helpfull` lists under the
project's modules, a check independent of docs/_ext/command_reference.py, which writes the page.

Tested blocks: in docs/getting-started.md, a fenced `bash` or `python` block right after a line
`<!-- tested -->` or `<!-- tested: NAME -->` (an HTML comment: invisible on the site and on GitHub)
is run, all such blocks in order as one bash script, from the repository root, with WORK set to a
new empty folder (the blocks write only below "$WORK"), `.venv/bin/python` and `python` meaning
this interpreter, and the repository on PYTHONPATH.
"""

import html
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.helpers.paths import REPO

DOCS = REPO / "docs"
GETTING_STARTED = DOCS / "getting-started.md"
TESTED_MARK = re.compile(r"<!-- tested(?::\s*[\w-]+)?\s*-->")  # the line before a tested block
PROJECT_PACKAGES = ("keras_transformer",)  # the one import namespace
README_SETUP_TARGETS = ("demo", "test", "docs")


def _extension(name: str):
    """A module of docs/_ext/, imported from its file."""
    spec = importlib.util.spec_from_file_location(f"docs_ext_{name}", DOCS / "_ext" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONDONTWRITEBYTECODE": "1",
            **extra}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> pathlib.Path:
    """The site built strictly into a temporary folder (its html/ folder)."""
    if importlib.util.find_spec("sphinx") is None or importlib.util.find_spec("myst_nb") is None:
        pytest.skip("sphinx and myst-nb are not installed: pip install -e '.[docs]' (the test extra has them)")
    out = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-n", "-q", "-b", "html",
               "-D", "kt_notebooks=stored", "-d", str(out / "doctrees"), str(DOCS), str(out / "html")]
    result = subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=900, check=False)
    warnings = [line for line in result.stderr.splitlines() if re.search(r"\b(WARNING|ERROR|CRITICAL)\b", line)
                and "absl::InitializeLog" not in line]
    assert result.returncode == 0 and not warnings, (
        "the documentation site does not build strictly (make docs shows the same):\n"
        + "\n".join(warnings or result.stderr.splitlines()[-40:]))
    return out / "html"


def test_the_site_builds_strictly(site):
    for page in ("index", "getting-started", "guide/index", "notebooks", "reference/commands", "reference/api",
                 "reference/errors", "results", "speed", "experiments", "architecture", "contributing"):
        assert (site / f"{page}.html").is_file(), page
    for notebook in sorted((REPO / "notebooks").glob("*.ipynb")):
        assert (site / "notebooks" / f"{notebook.stem}.html").is_file(), f"{notebook.name} has no page"


# The command reference ------------------------------------------------------------------------


def _helpfull_flags(module: str) -> set[str]:
    """The flags `python -m MODULE --helpfull` lists under the project's modules (absl's own left out)."""
    result = subprocess.run([sys.executable, "-m", module, "--helpfull"], cwd=REPO, env=_env(),
                            capture_output=True, text=True, timeout=300, check=False)
    lines = result.stdout.splitlines()
    assert "flags:" in lines, f"python -m {module} --helpfull printed no flags:\n{result.stderr[-2000:]}"
    found, project = set(), False
    for line in lines[len(lines) - 1 - lines[::-1].index("flags:") + 1:]:
        header = re.fullmatch(r"(\S.*):", line)
        if header:
            name = header.group(1)
            project = (name.startswith(str(REPO) + os.sep)
                       or name.split(".")[0] in PROJECT_PACKAGES)
            continue
        flag = re.match(r"\s+(?:-\S+,)?--(?:\[no\])?(\w+)[:=]?", line)
        if flag and project:
            found.add(flag.group(1))
    return found


def _reference_sections(site: pathlib.Path) -> dict[str, set[str]]:
    """{command section (its `##` heading): the --flags its section of the built page shows}."""
    page = (site / "reference" / "commands.html").read_text(encoding="utf-8")
    parts = re.split(r"<h2>(.*?)<a class=\"headerlink\"", page)
    sections = {}
    for title, body in zip(parts[1::2], parts[2::2]):
        body = body.split("<h2>")[0]
        codes = re.findall(r'<code class="docutils literal notranslate">(.*?)</code>', body, flags=re.DOTALL)
        texts = [html.unescape(re.sub(r"<[^>]+>", "", code)) for code in codes]
        sections[html.unescape(re.sub(r"<[^>]+>", "", title)).strip()] = {
            t[2:] for t in texts if re.fullmatch(r"--\w+", t)}
    return sections


def test_the_command_reference_lists_every_flag_of_every_command(site):
    commands = _extension("command_reference").COMMANDS
    sections = _reference_sections(site)
    assert [c.name for c in commands] == [name for name in sections if name in {c.name for c in commands}]
    problems = []
    for command in commands:
        runnable = command.runnable
        expected = _helpfull_flags(runnable)
        assert expected, f"python -m {runnable} --helpfull lists no flag of the project's modules"
        missing = sorted(expected - sections.get(command.name, set()))
        if missing:
            problems.append(f"{command.name}: " + ", ".join(f"--{name}" for name in missing))
    assert not problems, "reference/commands.md lacks flags that --helpfull lists:\n  " + "\n  ".join(problems)


def test_every_command_has_a_section():
    """Every entry point of the packages (a command users run) is in the command reference's list, and every
    module of keras_transformer.commands."""
    from tests.helpers.modules import ENTRY_POINTS, MODULES  # pylint: disable=import-outside-toplevel

    commands = _extension("command_reference").COMMANDS
    listed = {c.runnable for c in commands} | {f"{c.runnable}.__main__" for c in commands}
    helpers = {"keras_transformer.export.servable_ops"}  # the export's own child process, not a user's command
    missing = sorted(m for m in ENTRY_POINTS if m not in listed | helpers)
    missing += sorted(m for m in MODULES if m.startswith("keras_transformer.commands.")
                      and m not in {c.module for c in commands})
    assert not missing, f"commands without a section in docs/_ext/command_reference.py's COMMANDS: {missing}"


def test_help_text_is_escaped_as_literal_markdown():
    reference = _extension("command_reference")
    text = "<b>bold</b> *not* a|b `x|y` --flag=1."
    assert reference.prose(text) == r"\<b\>bold\<\/b\> \*not\* a\|b `x|y` `--flag=1`\."
    assert reference.prose(text, table_cell=True) == r"\<b\>bold\<\/b\> \*not\* a\|b `x\|y` `--flag=1`\."
    flag = {"name": "cache", "short_name": None, "boolean": False, "type": "string enum", "default": "auto",
            "help": "<auto|none>: Where pairs are kept.", "choices": ["auto", "none"],
            "lower_bound": None, "upper_bound": None}
    assert reference.help_text(flag) == "Where pairs are kept."
    assert reference.type_cell(flag) == "one of `auto`, `none`"


# The README's set-up commands --------------------------------------------------------------------


def test_the_readme_set_up_commands_are_makefile_targets():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w.-]+):", (REPO / "Makefile").read_text(encoding="utf-8"), flags=re.MULTILINE))
    shown = set(re.findall(r"(?<![\w-])make ([a-z][\w-]*)", readme))
    assert set(README_SETUP_TARGETS) <= shown, f"the README does not show make {set(README_SETUP_TARGETS) - shown}"
    assert shown <= targets, f"the README shows make targets the Makefile lacks: {sorted(shown - targets)}"


# Tested blocks of getting-started.md ---------------------------------------------------------------


def blocks_marked_tested(text: str) -> list[tuple[str, str]]:
    """(language, code) of each fenced block right after a `<!-- tested -->` line, in order."""
    blocks = []
    pattern = re.compile(rf"^(?:{TESTED_MARK.pattern})[ \t]*\n(?:[ \t]*\n)*(`{{3,}})[ \t]*(\w+)[^\n]*\n(.*?)^\1[ \t]*$",
                         flags=re.MULTILINE | re.DOTALL)
    for match in pattern.finditer(text):
        blocks.append((match.group(2), match.group(3)))
    marks = len(re.findall(rf"^(?:{TESTED_MARK.pattern})", text, flags=re.MULTILINE))
    assert marks == len(blocks), f"{marks} <!-- tested --> lines but {len(blocks)} fenced blocks right after them"
    return blocks


def test_marked_blocks_are_found():
    text = ("a\n\n<!-- tested -->\n```bash\necho one\n```\n\n```bash\nuntested\n```\n"
            "<!-- tested: second -->\n\n```python\nprint(2)\n```\n")
    assert blocks_marked_tested(text) == [("bash", "echo one\n"), ("python", "print(2)\n")]


@pytest.mark.slow
def test_the_tested_blocks_of_getting_started_run(tmp_path):
    assert GETTING_STARTED.is_file(), f"{GETTING_STARTED.relative_to(REPO)} is missing"
    blocks = blocks_marked_tested(GETTING_STARTED.read_text(encoding="utf-8"))
    assert blocks, (f"{GETTING_STARTED.relative_to(REPO)} has no tested block: put a line <!-- tested --> right "
                    "before a quick ```bash or ```python block that a new user runs")
    script = ["set -euo pipefail", f'python() {{ "{sys.executable}" "$@"; }}']  # this environment's Python
    for number, (language, code) in enumerate(blocks):
        code = code.replace(".venv/bin/python", sys.executable)
        if language in ("bash", "sh", "shell"):
            script.append(code)
        elif language == "python":
            script.append(f"python - <<'TESTED_BLOCK_{number}'\n{code}TESTED_BLOCK_{number}")
        else:
            pytest.fail(f"a tested block is ```{language}; only bash and python blocks can be run")
    work = tmp_path / "work"
    work.mkdir()
    path = os.pathsep.join([str(pathlib.Path(sys.executable).parent), os.environ.get("PATH", "")])
    result = subprocess.run(["bash", "-c", "\n".join(script)], cwd=REPO, env=_env(PATH=path, WORK=str(work)),
                            capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, (f"the tested blocks of {GETTING_STARTED.relative_to(REPO)} failed "
                                    f"(exit {result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
