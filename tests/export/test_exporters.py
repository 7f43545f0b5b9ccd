"""The export formats' registry (`keras_transformer.export.exporters`), the one description of
what translates (`keras_transformer.export.client.Engine`), and a new format added by a plug-in
module run through the real commands."""

import json
import shutil

import pytest

from keras_transformer.config import DecodingConfig, SamplingConfig
from keras_transformer.export import client, exporters
from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.train_runs import FINISHED, shared_tiny_run

PLUGIN = {"KT_PLUGINS": "tests.helpers.plugin_exporter"}


@pytest.fixture
def lean_format():
    """A format registered for one test: takes --quantization (as CTranslate2) and serves n-best lists."""

    @exporters.register_exporter
    class Lean(exporters.Exporter):
        name = "lean"
        options = ("quantization",)
        accepts = frozenset({"n_best"})

    yield Lean
    exporters.unregister_exporter("lean")


def test_stock_formats_and_the_options_each_takes():
    assert exporters.names()[:2] == ("saved_model", "ctranslate2")
    assert exporters.lookup("ctranslate2").title == "CTranslate2"
    assert set(exporters.options()) >= {"precision", "signatures", "check_ops", "ensemble_model_dirs", "quantization"}
    assert exporters.takers("precision") == "saved_model"
    assert exporters.takers("quantization") == "ctranslate2"
    assert exporters.choices_help().startswith("saved_model: a SavedModel for TF Serving; ctranslate2: ")
    with pytest.raises(ValueError, match=r"^format must be one of saved_model, ctranslate2(, [a-z_]+)*, got 'onnx'$"):
        exporters.lookup("onnx")


def test_registration_is_checked_and_undone(lean_format):
    assert exporters.names()[-1] == "lean"
    assert exporters.takers("quantization") == "ctranslate2/lean"  # derived: both formats take it
    with pytest.raises(ValueError, match="a format named 'lean' is already registered"):
        exporters.register_exporter(lean_format)
    with pytest.raises(ValueError, match="is not an Exporter subclass"):
        exporters.register_exporter(dict)


def test_an_option_a_format_does_not_take_is_refused_by_the_formats_that_do(lean_format):
    cases = {("saved_model", "quantization"): "--quantization applies to --format=ctranslate2/lean only",
             ("ctranslate2", "precision"): "--precision applies to --format=saved_model only "
                                           "(CTranslate2: --quantization)",
             ("ctranslate2", "signatures"): "--signatures applies to --format=saved_model only",
             ("lean", "ensemble_model_dirs"): "--ensemble_model_dirs applies to --format=saved_model only",
             ("ctranslate2", "ensemble_model_dirs"): "--ensemble_model_dirs applies to --format=saved_model only "
                                                     "(CTranslate2 ensembles are not exported)"}
    for (name, option), message in cases.items():
        with pytest.raises(ValueError) as raised:
            exporters.check_options(name, {option: "x"})
        assert str(raised.value) == message
    assert exporters.check_options("lean", {"quantization": "int8"}) is exporters.lookup("lean")
    with pytest.raises(ValueError, match="--quantization=int7: not a CTranslate2 type"):  # the format's own check
        exporters.check_options("ctranslate2", {"quantization": "int7"})
    with pytest.raises(ValueError, match="--signatures: unknown bogus"):
        exporters.check_options("saved_model", {"signatures": ["serving_default", "bogus"]})


@pytest.mark.parametrize("flags, message", [
    (["--format=ctranslate2", "--signatures=serving_default"], "--signatures applies to --format=saved_model only"),
    (["--format=ctranslate2", "--nocheck_ops"], "--check_ops applies to --format=saved_model only"),
    (["--format=run_copy", "--quantization=int8"], "--quantization applies to --format=ctranslate2 only"),
])
def test_the_export_command_refuses_an_option_of_another_format_in_one_line(tmp_path, flags, message):
    result = run_command("-m", "keras_transformer.export", f"--model_dir={tmp_path / 'run'}",
                         f"--export_dir={tmp_path / 'out'}", *flags, env=PLUGIN)
    assert_one_error_line(result, message)
    assert not (tmp_path / "out").exists()


def test_requests_that_do_not_go_together_are_one_line_each():
    sampling = SamplingConfig(topk=5)
    cases = {(2, sampling, False, None): "sampling draws one translation per sentence: no --beam_size or --n_best "
                                         "above 1 with it",
             (1, sampling, False, 4): "sampling draws one translation per sentence",
             (1, sampling, True, None): "--target_prefix_file: not with sampling (--sampling_*)",
             (2, None, True, None): "--target_prefix_file: not with --n_best above 1"}
    for (n_best, sampled, prefixed, beam_size), message in cases.items():
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
            exporters.Request(n_best=n_best, sampling=sampled, prefixed=prefixed, beam_size=beam_size)
    assert exporters.Request(sampling=sampling, beam_size=1).kinds() == ("sampling",)
    assert exporters.Request(n_best=3).kinds() == ("n_best",)
    assert exporters.Request().kinds() == ()


def write_export(folder, format_name=None, beam_size=4, saved_model=False):
    """A version folder with an export's settings only (no model: what is checked before one loads)."""
    folder.mkdir(parents=True)
    settings = {"decoding": DecodingConfig(beam_size=beam_size).to_dict(), "signatures": ["serving_default"]}
    if saved_model:
        (folder / "saved_model.pb").write_bytes(b"not loaded")
        (folder / "assets.extra").mkdir()
        (folder / "assets.extra" / "export.json").write_text(json.dumps(settings))
    else:
        (folder / "export.json").write_text(json.dumps({**settings, "format": format_name}))
    return folder


def test_an_export_folder_is_located_by_the_format_it_records(tmp_path):
    out = tmp_path / "out"
    write_export(out / "1", saved_model=True)
    (out / "3").mkdir()  # incomplete: no export in it
    assert exporters.locate(str(out)) == (exporters.lookup("saved_model"), str(out / "1"))
    write_export(out / "2", "ctranslate2")
    assert exporters.locate(str(out)) == (exporters.lookup("ctranslate2"), str(out / "2"))  # the highest version
    assert exporters.locate(str(out / "1"))[0].name == "saved_model"  # a version folder itself
    write_export(out / "4", "text_table")
    with pytest.raises(ValueError) as raised:
        exporters.locate(str(out))
    assert str(raised.value).startswith(f"{out / '4' / 'export.json'}: format must be one of saved_model, ctranslate2")
    assert "got 'text_table' (KT_PLUGINS names the modules that register more)" in str(raised.value)
    (out / "4" / "export.json").write_text("{")
    with pytest.raises(ValueError, match="export.json: not valid JSON"):
        exporters.locate(str(out))
    with pytest.raises(FileNotFoundError, match="empty: no saved_model.pb in it or in a version folder"):
        exporters.locate(str(tmp_path / "empty"))


def test_an_engine_is_checked_once_with_the_same_lines_for_every_caller(tmp_path):
    for kwargs in ({}, {"model_dir": "a", "export_dir": "b"}):
        with pytest.raises(ValueError, match=r"^give exactly one of --model_dir and --export_dir$"):
            client.Engine(**kwargs)
        with pytest.raises(ValueError, match=r"^give exactly one of --model_dir and --export_dir$"):
            client.load_translate_fn(**kwargs)
    with pytest.raises(ValueError, match="^give exactly one of --model_dir, --export_dir and --baseline$"):
        client.exactly_one(model_dir="a", export_dir=None, baseline="pcfg")
    with pytest.raises(ValueError, match="--shortlist: only with --model_dir"):
        client.Engine(export_dir="b", shortlist_file="vmap.txt")
    with pytest.raises(ValueError, match="--target_prefix_file: not with --n_best above 1"):
        client.load_translate_fn(model_dir="a", n_best=2, prefixed=True)  # before any file is read

    ct2 = str(write_export(tmp_path / "ct2" / "1", "ctranslate2", beam_size=2).parent)
    assert client.Engine(export_dir=ct2, request=client.Request(n_best=2)).check() == DecodingConfig()
    assert client.Engine(export_dir=ct2).settings()["format"] == "ctranslate2"
    with pytest.raises(ValueError, match=r"--n_best with the export .*1: n_best must be an integer between 1 and "
                                         r"beam_size \(2\), got 3"):
        client.Engine(export_dir=ct2, request=client.Request(n_best=3)).check()
    with pytest.raises(ValueError, match=r"^sampling \(--sampling_\*\): not with an export of format ctranslate2 "):
        client.Engine(export_dir=ct2, request=client.Request(sampling=SamplingConfig(topk=3))).check()
    with pytest.raises(ValueError, match=r"^--target_prefix_file: not with an export of format ctranslate2 "):
        client.Engine(export_dir=ct2, request=client.Request(prefixed=True)).check()
    saved = str(write_export(tmp_path / "saved" / "1", saved_model=True).parent)
    with pytest.raises(ValueError, match="has no translate_n_best signature"):
        client.Engine(export_dir=saved, request=client.Request(n_best=2)).check()
    with pytest.raises(ValueError, match="n_best must be an integer between 1 and beam_size \\(4\\), got 5"):
        client.Engine(model_dir=str(tmp_path), request=client.Request(n_best=5)).check()
    with pytest.raises(FileNotFoundError, match="not a training directory"):
        client.Engine(model_dir=str(tmp_path)).check()


def read_lines(path):
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.slow
def test_a_format_a_plugin_registers_is_exported_and_translated_by_the_commands(tmp_path_factory, tmp_path):
    """A tiny run of the training command, exported by the plug-in's format (KT_PLUGINS) and
    translated from the export after the run is gone: the same lines as from the run."""
    run = tmp_path / "run"
    shared_tiny_run(tmp_path_factory, run, *FINISHED)
    source = tmp_path / "source.txt"
    source.write_text("A dog runs .\nThe woman reads a book .\n\nTwo men play .\n", encoding="utf-8")
    from_run = run_command("-m", "keras_transformer.translate", f"--model_dir={run}", f"--input={source}",
                           f"--output={tmp_path / 'from_run.txt'}", "--beam_size=2")
    assert from_run.returncode == 0, from_run.stderr[-2000:]

    result = run_command("-m", "keras_transformer.export", f"--model_dir={run}", f"--export_dir={tmp_path / 'out'}",
                         "--format=run_copy", "--beam_size=2", env=PLUGIN)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-1].endswith(f"to {tmp_path / 'out' / '1'} (run copy)")
    settings = json.loads((tmp_path / "out" / "1" / "export.json").read_text())
    assert settings["format"] == "run_copy" and settings["decoding"]["beam_size"] == 2
    shutil.rmtree(run)  # the export holds all it needs

    from_export = run_command("-m", "keras_transformer.translate", f"--export_dir={tmp_path / 'out'}",
                              f"--input={source}", f"--output={tmp_path / 'from_export.txt'}", env=PLUGIN)
    assert from_export.returncode == 0, from_export.stderr[-2000:]
    assert f"with {tmp_path / 'out' / '1'}" in from_export.stderr
    assert read_lines(tmp_path / "from_export.txt") == read_lines(tmp_path / "from_run.txt")
    assert len(read_lines(tmp_path / "from_export.txt")) == 4

    # What the format does not serve, and the format without its plug-in: one line each, before TensorFlow.
    refused = run_command("-m", "keras_transformer.translate", f"--export_dir={tmp_path / 'out'}", f"--input={source}",
                          "--n_best=2", env=PLUGIN)
    assert_one_error_line(refused, "--n_best above 1: not with an export of format run_copy")
    unknown = run_command("-m", "keras_transformer.translate", f"--export_dir={tmp_path / 'out'}", f"--input={source}")
    assert_one_error_line(unknown, "format must be one of saved_model, ctranslate2, got 'run_copy'")
