"""Faults of the serving commands (`python -m keras_transformer.translate`, `python -m keras_transformer.export`):
bad paths end as one `error:` line and exit code 2, before any work, and leave what was
already written byte for byte; a killed export's temporary folder is removed by the next one.

The commands run in subprocesses. Most faults are found before TensorFlow starts (well under
a second each); the two found later (a reference of another length, a missing checkpoint)
still fail before a model is built or loaded.
"""

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys

import pytest

from keras_transformer.export import versions
from keras_transformer.tasks import translation
from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.export_models import shared_model_dir


def snapshot(path: pathlib.Path) -> dict:
    """Every file below `path` (or `path` itself) with its bytes, and the folders."""
    if path.is_file():
        return {".": path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() if p.is_file() else None for p in sorted(path.rglob("*"))}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A training directory (an untrained tiny model: nothing here is translated), an input,
    an existing output, an export base folder with a version, and a plain file."""
    root = tmp_path_factory.mktemp("faults")
    shared_model_dir(tmp_path_factory, root / "run", steps=0)
    (root / "source.txt").write_text("Der Hund.\nDie Katze.\nDer Mann.\n", encoding="utf-8")
    (root / "short.txt").write_text("The dog.\nThe cat.\n", encoding="utf-8")
    (root / "hyp.txt").write_text("an earlier translation\n", encoding="utf-8")
    (root / "a_file").write_text("not a folder\n", encoding="utf-8")
    version = root / "serving" / "1"
    (version / "variables").mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"\x08\x01 an existing export")
    (version / "variables" / "variables.index").write_bytes(b"\x00\x01\x02")
    return root


# python -m keras_transformer.translate ---------------------------------------------------------


@pytest.mark.parametrize("output, fragment", [
    ("{root}/serving", "is a folder, not a file"),  # an existing folder: left as it was
    ("{root}/a_file/hyp.txt", "a_file: is a file, not a folder"),
    ("{root}/a_file/new/hyp.txt", "a_file is a file, not a folder"),
], ids=["a_folder", "in_a_file", "below_a_file"])
def test_translate_output_that_cannot_be_written_fails_before_tensorflow(root, output, fragment):
    before = {p: snapshot(root / p) for p in ("serving", "a_file", "hyp.txt")}
    result = run_command("-m", "keras_transformer.translate", f"--model_dir={root}/run",
                         f"--input={root}/source.txt", f"--output={output.format(root=root)}")
    assert_one_error_line(result, fragment)
    assert {p: snapshot(root / p) for p in before} == before


def test_translate_missing_reference_fails_before_tensorflow(root):
    result = run_command("-m", "keras_transformer.translate", f"--model_dir={root}/run",
                         f"--input={root}/source.txt", f"--output={root}/hyp.txt", f"--reference={root}/missing.txt")
    assert_one_error_line(result, "missing.txt: no such file")
    assert (root / "hyp.txt").read_text(encoding="utf-8") == "an earlier translation\n"


def test_translate_reference_of_another_length_fails_before_the_model_loads(root):
    """The training directory does not exist: the reference is read and counted before it is looked at."""
    before = snapshot(root / "hyp.txt")
    result = run_command("-m", "keras_transformer.translate", f"--model_dir={root}/no_such_run",
                         f"--input={root}/source.txt", f"--output={root}/hyp.txt", f"--reference={root}/short.txt")
    assert_one_error_line(result, "short.txt has 2 lines but the input")
    assert snapshot(root / "hyp.txt") == before


def test_translate_file_checks_every_path_before_the_model(root, monkeypatch):
    """In process: the library function finds the same faults first (no model is loaded: the
    training directory does not exist), including a folder that is not writable."""
    kwargs = dict(model_dir=str(root / "no_such_run"))
    with pytest.raises(ValueError, match="is a folder"):
        translation.translate_file(str(root / "source.txt"), str(root / "serving"), **kwargs)
    with pytest.raises(ValueError, match="has 2 lines but the input"):
        translation.translate_file(str(root / "source.txt"), str(root / "hyp.txt"),
                                   reference=str(root / "short.txt"), **kwargs)
    with pytest.raises(FileNotFoundError, match="no such training directory"):  # all paths good: the model
        translation.translate_file(str(root / "source.txt"), str(root / "new" / "hyp.txt"), **kwargs)
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # the tests may run as root
    with pytest.raises(ValueError, match="is not writable"):
        translation.translate_file(str(root / "source.txt"), str(root / "hyp.txt"), **kwargs)
    assert (root / "hyp.txt").read_text(encoding="utf-8") == "an earlier translation\n"
    assert not (root / "new").exists()


def test_translate_with_a_damaged_saved_model_is_one_error_line(root):
    """serving/1 holds a saved_model.pb that does not parse: was an OSError traceback from
    TensorFlow's loader (`keras_transformer.export.client.load_saved_model`)."""
    before = snapshot(root / "hyp.txt")
    result = run_command("-m", "keras_transformer.translate", f"--export_dir={root}/serving",
                         f"--input={root}/source.txt", f"--output={root}/hyp.txt")
    assert_one_error_line(result, f"{root}/serving/1: not a readable SavedModel (", "export the model again")
    assert snapshot(root / "hyp.txt") == before


@pytest.fixture(scope="module")
def exported(root, tmp_path_factory):
    """A real export of the module's run (its variables are what the next test damages)."""
    base = tmp_path_factory.mktemp("exported") / "serving"
    result = run_command("-m", "keras_transformer.export", f"--model_dir={root}/run", f"--export_dir={base}", timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    return base


@pytest.mark.slow
@pytest.mark.parametrize("keep", [0.5, 0.0], ids=["cut_in_half", "emptied"])
def test_translate_with_an_export_whose_variables_are_cut_short_is_one_error_line(root, exported, tmp_path, keep):
    """variables.data cut short: TensorFlow's checkpoint reader raised IndexError ("Read less bytes
    than requested"), a traceback with exit status 1 (`keras_transformer.export.client.load_saved_model`)."""
    damaged = tmp_path / "serving"
    shutil.copytree(exported, damaged)
    (data,) = damaged.glob("*/variables/variables.data-*")
    data.write_bytes(data.read_bytes()[: int(data.stat().st_size * keep)])
    before = snapshot(root / "hyp.txt")
    result = run_command("-m", "keras_transformer.translate", f"--export_dir={damaged}",
                         f"--input={root}/source.txt", f"--output={root}/hyp.txt")
    assert_one_error_line(result, f"{damaged}/1: not a readable SavedModel (", "cut short", "export the model again")
    assert snapshot(root / "hyp.txt") == before


@pytest.mark.parametrize("flags, signature", [
    (("--n_best=2",), versions.N_BEST_SIGNATURE),
    (("--sampling_topk=5", "--seed=1"), versions.SAMPLED_SIGNATURE),
    (("--target_prefix_file={root}/short.txt",), versions.PREFIX_SIGNATURE),
], ids=["n_best", "sampling", "prefix"])
def test_an_export_older_than_the_signature_asked_for_is_refused_before_tensorflow(root, tmp_path, flags, signature):
    """An export made before a signature existed lists only the older ones in its export.json:
    the flag that needs the newer one is one line naming it, found from export.json alone (the
    SavedModel here would not even load)."""
    version = tmp_path / "older" / "1"
    (version / versions.ASSETS_EXTRA).mkdir(parents=True)
    (version / versions.SAVED_MODEL_FILE).write_bytes(b"\x08\x01 an older export")
    settings = {"decoding": {"beam_size": 4}, "signatures": ["serving_default", "translate_with_attention"]}
    (version / versions.ASSETS_EXTRA / versions.SETTINGS_FILE).write_text(json.dumps(settings), encoding="utf-8")
    result = run_command("-m", "keras_transformer.translate", f"--export_dir={tmp_path}/older",
                         f"--input={root}/short.txt", *(flag.format(root=root) for flag in flags),
                         f"--output={tmp_path}/hyp.txt")
    assert_one_error_line(result, f"{version} has no {signature} signature (exported without it by --signatures, "
                                  "or an older export)")
    assert not (tmp_path / "hyp.txt").exists()


# python -m keras_transformer.export ---------------------------------------------------------------------------------


@pytest.mark.parametrize("export_dir, fragment", [
    ("{root}/a_file", "a_file: is a file, not a folder"),
    ("{root}/a_file/serving", "a_file is a file, not a folder"),
], ids=["a_file", "below_a_file"])
def test_export_dir_that_is_or_lies_below_a_file_fails_before_tensorflow(root, export_dir, fragment):
    before = snapshot(root / "a_file")
    result = run_command("-m", "keras_transformer.export", f"--model_dir={root}/run",
                         f"--export_dir={export_dir.format(root=root)}")
    assert_one_error_line(result, fragment)
    assert snapshot(root / "a_file") == before


def test_export_missing_checkpoint_fails_before_the_model_is_built(root):
    before = snapshot(root / "serving")
    result = run_command("-m", "keras_transformer.export", f"--model_dir={root}/run", f"--export_dir={root}/serving",
                         f"--checkpoint={root}/run/checkpoints/ckpt-999")
    assert_one_error_line(result, "ckpt-999: no such checkpoint")
    assert snapshot(root / "serving") == before  # no new version, no temporary folder


def test_export_dir_checks_in_process(root, monkeypatch):
    with pytest.raises(ValueError, match="already exists"):
        versions.check_export_dir(str(root / "serving"), 1)
    versions.check_export_dir(str(root / "serving"), 2)
    versions.check_export_dir(str(root / "new" / "serving"))  # created by the export
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(ValueError, match="is not writable"):
        versions.check_export_dir(str(root / "serving"))


# A killed export's temporary folder ---------------------------------------------------------------


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_temporary_folders_of_dead_exports_on_this_host_are_removed(tmp_path):
    out = tmp_path / "serving"
    out.mkdir()
    (out / "1").mkdir()
    old_umask = os.umask(0o022)
    try:
        made = versions.temporary_folder(str(out), 2)
    finally:
        os.umask(old_umask)
    name = os.path.basename(made)
    host = name[len(".tmp-2-"):].rsplit("-", 2)[0]
    assert name == f".tmp-2-{host}-{os.getpid()}-{name[-8:]}" and os.stat(made).st_mode & 0o777 == 0o755

    pid = dead_pid()
    stale = out / f".tmp-2-{host}-{pid}-0123abcd"
    os.rename(made, stale)
    (stale / "saved_model.pb").write_bytes(b"half")
    kept = [
        f".tmp-3-{host}-{os.getppid()}-89abcdef",  # a live process: its export is still being written
        f".tmp-3-{host}-{os.getpid()}-00000000",  # this process
        f".tmp-3-another-host.example-{pid}-0123abcd",  # a dead pid, but of another machine
        ".tmp-3-k2j_9xqz",  # the old name (tempfile.mkdtemp): its writer is not known
    ]
    for name in kept:
        (out / name).mkdir()
    if socket.gethostname() == "another-host.example":
        pytest.skip("this host has the name of the 'other' host")

    lines = []
    removed = versions.remove_stale_temporaries(str(out), log=lines.append)
    assert removed == [str(stale)] and not stale.exists()
    assert len(lines) == 1 and str(stale) in lines[0] and str(pid) in lines[0]
    assert sorted(os.listdir(out)) == sorted(["1", *kept])
    assert versions.versions(str(out)) == [1] and versions.next_version(str(out)) == 2
