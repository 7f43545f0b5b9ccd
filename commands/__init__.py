"""The commands users run: flags in, one library call, one `error:` line for bad input.

This package sits on top of the others (installed as `keras_transformer.commands`, from the repository's
commands/ folder) and is the only one that imports every layer below it; no library module imports it.
Each module defines one command's flags and its `main(argv)`; `launch` starts one:

    python -m keras_transformer.train --flagfile=configs/demo.flags    (or: kt-train --flagfile=...)
    python -m keras_transformer.export --model_dir=runs/demo --export_dir=runs/demo_export    (kt-export)

The `python -m` forms are four-line modules beside the library (keras_transformer/train.py,
export/__main__.py, ...) that call `launch`; the console scripts (`kt-<command>`, setup.py) call it too.

Recipes: `--recipe=NAME` stands for the recipe configs/NAME.flags, which the package carries (installed as
keras_transformer/recipes/), so `kt-train --recipe=demo --model_dir=runs/demo` works without a clone; its flags
take the recipe's place on the command line (later flags override them, as after `--flagfile`).

Plugins: before a command's flags are defined, `launch` imports the modules named in the environment
variable KT_PLUGINS (comma-separated module names) and those of the entry-point group
`keras_transformer.plugins` of installed distributions, so a plugin's registrations (a position encoding,
a metric, a data source, an export format, a task) are among the flags' choices.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pathlib
import re
import sys

RECIPE_PREFIX = "--recipe="
_INCLUDE = re.compile(r"^--flagfile=configs/([\w.-]+)\.flags$")  # a recipe's include of another recipe
PLUGINS_VARIABLE = "KT_PLUGINS"
PLUGINS_GROUP = "keras_transformer.plugins"


@dataclasses.dataclass(frozen=True)
class Command:
    """One command: its name (`kt-<name>`, `python -m <runnable>`) and the module that defines it."""

    name: str
    runnable: str  # what `python -m` runs
    known_only: bool = False  # flags it does not define are handed to main (the variations table's recipe)

    @property
    def module(self) -> str:
        return f"{__name__}.{self.name}"

    @property
    def script(self) -> str:
        return "kt-" + self.name.replace("_", "-")


COMMANDS = {c.name: c for c in (
    Command("train", "keras_transformer.train"),
    Command("translate", "keras_transformer.translate"),
    Command("score", "keras_transformer.score"),
    Command("parse", "keras_transformer.parse"),
    Command("export", "keras_transformer.export"),
    Command("pipelines", "keras_transformer.pipelines"),
    Command("shortlist", "keras_transformer.shortlist"),
    Command("average_checkpoints", "keras_transformer.average_checkpoints"),
    Command("summary", "keras_transformer.summary"),
    Command("variations", "keras_transformer.variations", known_only=True),
)}


def recipes_folder() -> pathlib.Path:
    """Where the recipes are: keras_transformer/recipes/ when installed from a wheel, configs/ in a clone."""
    parent = pathlib.Path(__file__).resolve().parents[1]  # the package keras_transformer, or a clone's root
    installed = parent / "recipes"
    return installed if (parent / "__init__.py").is_file() and installed.is_dir() else parent / "configs"


def recipe_names() -> list[str]:
    """The recipes the package carries (configs/*.flags)."""
    return sorted(p.stem for p in recipes_folder().glob("*.flags"))


def recipe_args(name: str, _seen: tuple = ()) -> list[str]:
    """The flags of the recipe `name`, one argument each, in order (comments and blank lines left out); an
    include of another recipe (`--flagfile=configs/OTHER.flags`) is replaced by that recipe's flags."""
    path = recipes_folder() / f"{name}.flags"
    if not path.is_file():
        raise ValueError(f"--recipe={name}: no such recipe; choose from {', '.join(recipe_names())}")
    if name in _seen:
        raise ValueError(f"--recipe={name}: the recipe includes itself")
    args = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        include = _INCLUDE.match(line)
        args += recipe_args(include.group(1), (*_seen, name)) if include else [line]
    return args


def expand_recipes(argv: list[str]) -> list[str]:
    """`argv` with each `--recipe=NAME` replaced by the recipe's flags."""
    expanded = []
    for arg in argv:
        expanded += recipe_args(arg[len(RECIPE_PREFIX):]) if arg.startswith(RECIPE_PREFIX) else [arg]
    return expanded


def plugin_modules(environ=None) -> list[str]:
    """The plugin modules a command imports first: KT_PLUGINS's, then the installed entry points'."""
    environ = os.environ if environ is None else environ
    names = [name.strip() for name in environ.get(PLUGINS_VARIABLE, "").split(",") if name.strip()]
    from importlib import metadata  # pylint: disable=import-outside-toplevel

    names += [entry.value.split(":")[0] for entry in metadata.entry_points(group=PLUGINS_GROUP)]
    return list(dict.fromkeys(names))


def load_plugins(environ=None) -> list[str]:
    """Imports every plugin module (see the module docstring); a missing one is a ValueError naming it."""
    loaded = []
    for name in plugin_modules(environ):
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise ValueError(f"{PLUGINS_VARIABLE}: the plugin module {name!r} does not import ({error})") from error
        loaded.append(name)
    return loaded


def launch(name: str) -> None:
    """Runs the command `name` in this process: plugins, its flags, `cli.run(main)` (which exits)."""
    from keras_transformer import cli, command_start  # pylint: disable=import-outside-toplevel

    command_start.guard(starting=True)  # Ctrl-C while the modules import: one line
    command = COMMANDS[name]
    if "--version" in sys.argv[1:]:  # `--version=N` (export's version folder) is that command's own flag
        from keras_transformer import __version__  # pylint: disable=import-outside-toplevel

        print(f"keras_transformer {__version__} ({command.script})")
        sys.exit(0)
    try:
        sys.argv[1:] = expand_recipes(sys.argv[1:])
        load_plugins()
    except ValueError as error:
        cli.fail(error)
    module = importlib.import_module(command.module)
    sys.modules["__main__"].__doc__ = module.__doc__  # what --help prints above the flags (absl reads __main__'s)
    cli.run(module.main, known_only=command.known_only)


def _console_script(name: str):
    def run() -> None:
        launch(name)

    run.__name__ = run.__qualname__ = f"kt_{name}"
    run.__doc__ = f"The console script {COMMANDS[name].script}: `launch({name!r})`."
    return run


# The console scripts' functions (setup.py's entry points: kt-train = keras_transformer.commands:kt_train, ...).
for _name in COMMANDS:
    globals()[f"kt_{_name}"] = _console_script(_name)
del _name
