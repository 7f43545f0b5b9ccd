"""One owner for every concept: the special ids and the decoding flags are defined once.

A new place that assigns BOS or defines --beam_size is a second owner; it must import the
first (`keras_transformer.special_ids`, `keras_transformer.tasks.flags.define_decoding_flags`).
"""

import re

from tests.helpers.modules import ENTRY_POINTS, MODULES, layer_package
from tests.helpers.paths import REPO

SOURCES = [p for folder in ("keras_transformer", "pipelines", "training_directory", "export", "tasks", "commands", "bench")
           for p in (REPO / folder).rglob("*.py")]


def _places(pattern: str) -> list[str]:
    regex = re.compile(pattern, re.MULTILINE)
    return [f"{path.relative_to(REPO)}:{text[:match.start()].count(chr(10)) + 1}"
            for path in SOURCES for text in [path.read_text(encoding="utf-8")] for match in regex.finditer(text)]


def test_each_special_id_is_assigned_once():
    for name in ("PAD_ID", "UNK_ID", "BOS_ID", "EOS_ID"):
        assert _places(rf"^[ \t]*{name}[ \t]*=") == [f"keras_transformer/special_ids.py:{_line_of(name)}"], name


def _line_of(name: str) -> int:
    lines = (REPO / "keras_transformer" / "special_ids.py").read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.startswith(f"{name} ="))


def test_no_literal_special_id_defaults():
    assert not _places(r"\b(eos_id|bos_id)\s*(:\s*int\s*)?=\s*\d"), "a literal default is a second owner"


def test_each_decoding_flag_is_defined_once():
    for name in ("beam_size", "alpha", "max_extra_length", "sampling_topk", "sampling_topp", "sampling_temperature"):
        places = _places(rf"DEFINE_\w+\(\s*f?\"(\{{prefix\}})?{name}\"")
        assert places and all(p.startswith("tasks/flags.py:") for p in places) and len(places) == 1, (name, places)


def test_the_library_defines_no_flags():
    """absl flags live in entry points and in `tasks/flags.py`, which only entry points call.

    Entry points are derived as in test_import_rules.py (a `__main__.py` or a top-level
    `if __name__ == "__main__":`), not by the string `__main__` anywhere in a file."""
    library = [path for name, path in MODULES.items() if name not in ENTRY_POINTS
               and layer_package(name) in ("keras_transformer", "keras_transformer.pipelines", "keras_transformer.export")]
    assert REPO / "keras_transformer" / "cli" / "errors.py" in library  # names __main__ in its text, still checked
    offenders = [str(p.relative_to(REPO)) for p in library if re.search(r"flags\.DEFINE_", p.read_text(encoding="utf-8"))]
    assert not offenders, offenders
