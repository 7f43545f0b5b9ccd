"""The export formats: an `Exporter` per format and their registry.

A format is what `python -m keras_transformer.export --format=NAME` writes and what
`python -m keras_transformer.translate --export_dir` loads back. Each is an `Exporter` subclass
registered under its name; the command's --format choices, its refusal of an option a format
does not take, and the loader an export folder dispatches to are derived from the registry:

    exporter = lookup("ctranslate2")
    exporter.check({"quantization": "int8"})                  # before TensorFlow starts
    path = exporter.export("runs/demo", "/tmp/ct2", DecodingConfig(), {"quantization": "int8"})
    exporter, folder = locate("/tmp/ct2")                     # the highest version, by its format
    translate_fn = exporter.load(folder, Request())           # tf.string [N] -> translations, scores

An export folder says which format it holds: a SavedModel by its saved_model.pb (its settings
in assets.extra/export.json), every other format by the "format" field of the export.json at
its top. This module imports no TensorFlow: a command checks formats and options before it
starts.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Callable, Mapping, Optional, Type

from keras_transformer.config import DecodingConfig, SamplingConfig
from keras_transformer.export import versions
from keras_transformer.files import json_files
from keras_transformer.registry import Registry

# What each kind of request is called in a refusal: the option that asks for it.
_REQUEST_FLAGS = {"n_best": "--n_best above 1", "sampling": "sampling (--sampling_*)", "prefix": "--target_prefix_file"}


@dataclasses.dataclass(frozen=True)
class Request:
    """What a translate function is asked for, checked once for every command and the client.

    Args:
        n_best: int (1), hypotheses per sentence, best first.
        sampling: `SamplingConfig` or None: one random sample per sentence instead of a search.
        prefixed: bool (False), each sentence comes with a target prefix to continue.
        beam_size: int or None, a beam the user asked for explicitly (a command's --beam_size
            when given): a sample is one draw, so above 1 it is refused with `sampling`.

    Raises:
        ValueError: two of them asked together (one line, the same from every command).
    """

    n_best: int = 1
    sampling: Optional[SamplingConfig] = None
    prefixed: bool = False
    beam_size: Optional[int] = None

    def __post_init__(self):
        if self.sampling is not None and (self.n_best > 1 or (self.beam_size or 1) > 1):
            raise ValueError("sampling draws one translation per sentence: no --beam_size or --n_best above 1 with it")
        if self.sampling is not None and self.prefixed:
            raise ValueError("--target_prefix_file: not with sampling (--sampling_*)")
        if self.prefixed and self.n_best > 1:
            raise ValueError("--target_prefix_file: not with --n_best above 1")

    def kinds(self) -> tuple[str, ...]:
        """The kinds asked beyond plain translation, of "n_best", "sampling", "prefix"."""
        return tuple(kind for kind, asked in (("n_best", self.n_best > 1), ("sampling", self.sampling is not None),
                                              ("prefix", self.prefixed)) if asked)


class Exporter:
    """A format an export is written in and read back from.

    Class attributes:

    - `name` (str): --format's value and the "format" an export's export.json records.
    - `title` (str): how the command's lines name the format ("CTranslate2").
    - `help` (str): the format in --format's help.
    - `options` (tuple of str): the export command's format-specific options (flag names) it takes;
      the command refuses any other one given with this format.
    - `hints` (dict): an option it refuses -> what to say instead, in the refusal.
    - `accepts` (frozenset of `Request.kinds`): what its translate functions serve besides plain
      translation.

    Subclasses override `export` and `load`, and `check`, `holds`, `settings`,
    `check_request` when the defaults do not suit.
    """

    name: str = ""
    title: str = ""
    help: str = ""
    options: tuple[str, ...] = ()
    hints: Mapping[str, str] = {}
    accepts: frozenset = frozenset()

    def check(self, options: Mapping[str, Any]) -> None:
        """Refuses bad `options` values with a one-line `ValueError`, before TensorFlow starts."""

    def export(self, model_dir: str, export_dir: str, decoding: DecodingConfig, options: Mapping[str, Any], *,
               checkpoint: Optional[str] = None, version: Optional[int] = None,
               shortlist_file: Optional[str] = None, log: Callable[[str], None] = print) -> str:
        """Writes the training directory `model_dir`'s model as `export_dir/<version>/`, prints
        what it did through `log` and returns the version folder. `options` holds the values of
        `self.options`; a missing one means its flag's default."""
        raise NotImplementedError(f"the {self.name} format writes nothing")

    def holds(self, folder: str) -> bool:
        """Whether `folder` is an export of this format (default: its export.json records `name`)."""
        return recorded_format(folder) == self.name

    def settings(self, folder: str) -> dict:
        """What the export in `folder` was made with (default: its export.json)."""
        return read_settings(folder)

    def check_request(self, folder: str, request: Request) -> None:
        """A one-line `ValueError` unless the export in `folder` serves `request`; reads files
        only, so a command calls it before TensorFlow starts. Default: `accepts` decides."""
        refused = [_REQUEST_FLAGS[kind] for kind in request.kinds() if kind not in self.accepts]
        if refused:
            raise ValueError(f"{refused[0]}: not with an export of format {self.name} ({folder})")

    def load(self, folder: str, request: Request) -> Callable:
        """The export in `folder` as a translate function: `fn(tf.string [N])` (with
        `request.prefixed`, `fn(sentences, target_prefixes)`) -> {"translations", "scores"}, each
        [N] (or [N, n_best], best first), tensors or arrays. `check_request` has passed."""
        raise NotImplementedError(f"the {self.name} format loads nothing")


_FORMATS: Registry[Exporter] = Registry("format", "format")


def register_exporter(cls: Type[Exporter]) -> Type[Exporter]:  # typing.Type: `type` is ambiguous in the docs
    """Class decorator: registers an instance of the `Exporter` subclass `cls` under `cls.name`.

    Raises:
        ValueError: `cls` is not an `Exporter`, has no name, or its name is taken.
    """
    if not (isinstance(cls, type) and issubclass(cls, Exporter)):
        raise ValueError(f"{cls!r} is not an Exporter subclass")
    _FORMATS.add(cls.name, cls())
    return cls


def unregister_exporter(name: str) -> None:
    """Removes the format `name` (a test's or a plug-in's own)."""
    _FORMATS.remove(name)


def names() -> tuple[str, ...]:
    """The registered formats, in the order registered (--format's choices)."""
    return _FORMATS.names()


def lookup(name: str) -> Exporter:
    """The registered format `name`.

    Raises:
        ValueError: no format has that name ("format must be one of saved_model, ctranslate2, ...").
    """
    return _FORMATS.lookup(name)


def options() -> tuple[str, ...]:
    """Every format-specific option some registered format takes, in order of appearance."""
    return tuple(dict.fromkeys(option for exporter in _FORMATS.values() for option in exporter.options))


def takers(option: str) -> str:
    """The formats that take `option`, as --format's help and refusals name them ("saved_model")."""
    return "/".join(exporter.name for exporter in _FORMATS.values() if option in exporter.options)


def check_options(name: str, given: Mapping[str, Any]) -> Exporter:
    """The format `name`, after refusing (one line) an option of `given` (the format-specific
    options the user gave, by flag name) it does not take, then `Exporter.check` of them.
    No TensorFlow: the export command calls it first."""
    exporter = lookup(name)
    for option in given:
        if option not in exporter.options:
            hint = exporter.hints.get(option)
            raise ValueError(f"--{option} applies to --format={takers(option)} only" + (f" ({hint})" if hint else ""))
    exporter.check(given)
    return exporter


def choices_help() -> str:
    """--format's help: each registered format with what it writes."""
    return "; ".join(f"{exporter.name}: {exporter.help}" for exporter in _FORMATS.values()) + "."


# Reading an export back -----------------------------------------------------------------------


def settings_file(folder: str) -> str:
    """`<folder>/export.json`, the settings of an export of any format but the SavedModel."""
    return os.path.join(folder, versions.SETTINGS_FILE)


def read_settings(folder: str) -> dict:
    """An export's `<folder>/export.json` as a dict; a one-line error naming the file otherwise."""
    settings = json_files.read_json(settings_file(folder), "an export's settings", advice="; export the model again")
    if not isinstance(settings, dict):
        raise ValueError(f"{settings_file(folder)}: not an export's settings (a JSON object expected); "
                         "export the model again")
    return settings


def recorded_format(folder: str) -> Optional[str]:
    """The "format" `<folder>/export.json` records (None without the file or the field)."""
    if not os.path.isfile(settings_file(folder)):
        return None
    return read_settings(folder).get("format")


def locate(export_dir: str) -> tuple[Exporter, str]:
    """(the format, the folder) of the export a user points at: `export_dir` itself, else its
    highest version folder holding an export of a registered format.

    Raises:
        FileNotFoundError: neither holds an export.
        ValueError: a folder's export.json records a format no module registered, or is damaged.
    """
    folders = [export_dir] + [os.path.join(export_dir, str(v)) for v in reversed(versions.versions(export_dir))]
    for folder in folders:
        for exporter in _FORMATS.values():
            if exporter.holds(folder):
                return exporter, folder
        recorded = recorded_format(folder)
        if recorded is not None:
            try:
                lookup(recorded)
            except ValueError as error:
                raise ValueError(f"{settings_file(folder)}: {error} (KT_PLUGINS names the modules that register "
                                 "more)") from None
    raise FileNotFoundError(f"{export_dir}: no {versions.SAVED_MODEL_FILE} in it or in a version folder")


# The stock formats ------------------------------------------------------------------------------


@register_exporter
class SavedModelExporter(Exporter):
    """A SavedModel that stock TF Serving serves (`keras_transformer.export.serving_module`)."""

    name = "saved_model"
    title = "SavedModel"
    help = "a SavedModel for TF Serving"
    options = ("precision", "signatures", "check_ops", "ensemble_model_dirs")
    accepts = frozenset({"n_best", "sampling", "prefix"})

    def check(self, options):
        versions.chosen_signatures(options.get("signatures"))  # a bad name: one line

    def export(self, model_dir, export_dir, decoding, options, *, checkpoint=None, version=None,
               shortlist_file=None, log=print):
        from keras_transformer.decoding import precision as precision_lib  # pylint: disable=g-import-not-at-top
        from keras_transformer.export import serving_module  # pylint: disable=g-import-not-at-top  (TensorFlow)

        signatures = versions.chosen_signatures(options.get("signatures"), decoding.tree_constraint)
        asked = options.get("precision", "float32")
        precision = precision_lib.resolve(asked, log=log)
        path, checkpoint, translator = serving_module.export_model_dir(
            model_dir, export_dir, decoding, checkpoint, version, options.get("check_ops", True), log=log,
            precision=precision, ensemble_model_dirs=options.get("ensemble_model_dirs") or (),
            shortlist_file=shortlist_file, signatures=signatures)
        log(f"exported {checkpoint} to {path} ({precision}" + (", auto" if asked == "auto" else "") + ")")
        log(f"signatures: {', '.join(sorted(translator.signatures()))}; "
            f"beam_size={decoding.beam_size} alpha={decoding.alpha} max_extra_length={decoding.max_extra_length}"
            + (" tree_constraint" if decoding.tree_constraint else ""))
        return path

    def holds(self, folder):
        return os.path.isfile(os.path.join(folder, versions.SAVED_MODEL_FILE))

    def settings(self, folder):
        return versions.read_settings(folder)

    def check_request(self, folder, request):
        from keras_transformer.export import loaded_saved_model  # pylint: disable=g-import-not-at-top  (no TensorFlow)

        loaded_saved_model.check_request(folder, request.n_best, request.sampling is not None, request.prefixed)

    def load(self, folder, request):
        from keras_transformer.export import loaded_saved_model  # pylint: disable=g-import-not-at-top

        return loaded_saved_model.load(folder, request.n_best, request.sampling, request.prefixed)


@register_exporter
class Ctranslate2Exporter(Exporter):
    """A CTranslate2 4.x model folder with the tokenizer beside it (`keras_transformer.export.ctranslate2_model`)."""

    name = "ctranslate2"
    title = "CTranslate2"
    help = "a CTranslate2 model folder"
    options = ("quantization",)
    hints = {"precision": "CTranslate2: --quantization",
             "ensemble_model_dirs": "CTranslate2 ensembles are not exported"}
    accepts = frozenset({"n_best"})

    def check(self, options):
        from keras_transformer.export import ctranslate2_model  # pylint: disable=g-import-not-at-top

        ctranslate2_model.check_quantization(options.get("quantization"))

    def export(self, model_dir, export_dir, decoding, options, *, checkpoint=None, version=None,
               shortlist_file=None, log=print):
        from keras_transformer.export import ctranslate2_model  # pylint: disable=g-import-not-at-top

        if decoding.tree_constraint:  # CTranslate2 decodes as each call says, with no such rule
            print("note: CTranslate2 cannot constrain decoding to trees; its outputs are repaired instead "
                  "(python -m keras_transformer.parse)", file=sys.stderr)
            decoding = dataclasses.replace(decoding, tree_constraint=False)
        quantization = options.get("quantization")
        path, checkpoint = ctranslate2_model.export_model_dir(model_dir, export_dir, decoding, checkpoint, version,
                                                              quantization, log=log, shortlist_file=shortlist_file)
        log(f"exported {checkpoint} to {path} ({self.title}, {quantization or 'float32'})")
        return path

    def check_request(self, folder, request):
        super().check_request(folder, request)
        if request.n_best > 1:  # the recorded beam keeps that many
            versions.recorded_decoding(self.settings(folder), settings_file(folder), folder, request.n_best)

    def load(self, folder, request):
        from keras_transformer.export import ctranslate2_model  # pylint: disable=g-import-not-at-top

        return ctranslate2_model.load_translate_fn(folder, request.n_best)
