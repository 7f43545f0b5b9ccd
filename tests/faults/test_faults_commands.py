"""The guarantees every command shares (issue 33, rows 3-6, 8 and 10), through the real commands.

One test a row: an --output that is an input is refused (3); two exports at once publish two
versions (4); data that cannot make a batch is refused before anything is written (5); bad flag
values end as one `error:` line before TensorFlow starts (6); SIGTERM during the final
evaluation stops the run, which the same command then finishes (8); a full or read-only file
system is one `error:` line naming the path, and what was written stays (10).

"Before TensorFlow starts" is checked, not timed: those commands run with a `tensorflow` package
first on their path whose import fails, so a command that got as far as importing TensorFlow
shows that failure instead of the expected line. One tiny training run (configs/tiny.flags) is
shared by the module; the signal test trains one of its own.
"""

import errno
import glob
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.paths import REPO
from tests.helpers.train_runs import FINISHED, TINY, shared_tiny_run, train_args

SLOW = 900  # seconds a command that trains, evaluates or exports may take on a busy machine


def snapshot(directory) -> dict:
    """{relative path: bytes, or None for a folder} below `directory` (or of the file itself)."""
    root = pathlib.Path(directory)
    if root.is_file():
        return {".": root.read_bytes()}
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished tiny run (checkpoints at steps 6 and 12, evaluated and averaged), its flag file
    and a folder of small inputs. The run is test_faults_training.py's (the same flags), copied."""
    base = tmp_path_factory.mktemp("commands")
    flagfile = base / "tiny.flags"
    flagfile.write_text(TINY)
    shared_tiny_run(tmp_path_factory, base / "run", *FINISHED, timeout=SLOW)
    (base / "source.txt").write_text("A dog runs .\nThe cat sleeps .\n", encoding="utf-8")
    (base / "reference.txt").write_text("Ein Hund rennt .\nDie Katze schläft .\n", encoding="utf-8")
    return base


@pytest.fixture(scope="module")
def no_tensorflow(tmp_path_factory):
    """An environment for `run_command` whose `import tensorflow` fails loudly."""
    folder = tmp_path_factory.mktemp("no_tensorflow")
    (folder / "tensorflow").mkdir()
    (folder / "tensorflow" / "__init__.py").write_text('raise ImportError("TensorFlow was imported")\n')
    return {"PYTHONPATH": f"{folder}{os.pathsep}{REPO}"}


# Row 3: an --output that is an input ------------------------------------------------------------


@pytest.mark.slow
def test_row3_translate_output_that_is_the_input_or_the_reference_is_refused(finished, no_tensorflow, tmp_path):
    source, reference = finished / "source.txt", finished / "reference.txt"
    (tmp_path / "link.txt").symlink_to(source)
    os.link(reference, tmp_path / "hard.txt")
    before = {path: path.read_bytes() for path in (source, reference)}
    for output, flag in ((source, "input"), (reference, "reference"), (tmp_path / "link.txt", "input"),
                         (tmp_path / "hard.txt", "reference")):
        result = run_command("-m", "keras_transformer.translate", f"--model_dir={finished / 'run'}",
                             f"--input={source}", f"--reference={reference}", f"--output={output}", env=no_tensorflow)
        assert_one_error_line(result, f"--output={output}: is the input --{flag}=")
    both = run_command("-m", "keras_transformer.translate", f"--model_dir={finished / 'run'}", "--input=-",
                       "--reference=-", f"--output={tmp_path / 'hyp.txt'}", stdin="A dog runs .\n", env=no_tensorflow)
    assert_one_error_line(both, "--reference=-: must be a file (stdin is for --input)")  # stdin is read once
    parse = run_command("-m", "keras_transformer.parse", "--baseline=right_branching", f"--input={source}",
                        f"--output={tmp_path / 'link.txt'}", env=no_tensorflow)
    assert_one_error_line(parse, f"--output={tmp_path / 'link.txt'}: is the input --input={source}")
    assert {path: path.read_bytes() for path in before} == before and (tmp_path / "link.txt").is_symlink()


# Row 4: two exports at once into one --export_dir -----------------------------------------------


@pytest.mark.slow
def test_row4_two_exports_at_once_publish_two_complete_versions(finished, tmp_path):
    serving = tmp_path / "serving"
    command = [sys.executable, "-m", "keras_transformer.export", f"--model_dir={finished / 'run'}", f"--export_dir={serving}"]
    environment = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
    processes = [subprocess.Popen(command, cwd=REPO, env=environment, text=True, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) for _ in range(2)]
    outputs = [process.communicate(timeout=SLOW) for process in processes]
    for process, (out, err) in zip(processes, outputs):
        assert process.returncode == 0 and "Traceback" not in err, err[-2000:]
    assert sorted(os.listdir(serving)) == ["1", "2"]  # no temporary folder left
    for version in ("1", "2"):
        assert (serving / version / "saved_model.pb").is_file()
        settings = json.loads((serving / version / "assets.extra" / "export.json").read_text())
        assert settings["checkpoint"].endswith("averaged/ckpt-12")
    printed = sorted(line.split(" to ")[1] for out, _ in outputs for line in out.splitlines()
                     if line.startswith("exported "))
    assert [p.split()[0] for p in printed] == [str(serving / "1"), str(serving / "2")]


# Row 5: data that cannot make a batch -------------------------------------------------------------


def write_files(folder: pathlib.Path, splits: dict) -> None:
    """{split: (source lines, target lines)} as folder/<split>.en and folder/<split>.de."""
    for split, (source, target) in splits.items():
        (folder / f"{split}.en").write_text("".join(line + "\n" for line in source), encoding="utf-8")
        (folder / f"{split}.de").write_text("".join(line + "\n" for line in target), encoding="utf-8")


def test_row5_files_without_a_pair_that_fits_max_length_are_refused_before_anything_is_written(finished, tmp_path):
    flagfile = finished / "tiny.flags"  # --max_length=32
    short = ([f"a dog number {i} runs ." for i in range(40)], [f"ein hund nummer {i} rennt ." for i in range(40)])
    long = ([" ".join(["word"] * 40)] * 20, [" ".join(["wort"] * 40)] * 20)  # 41 tokens at least, a side
    files = ("--dataset=files", f"--data_dir={tmp_path}", "--source_file={split}.en", "--target_file={split}.de",
             "--train_steps=2", "--eval_every_steps=0", "--eval_max_sentences=2")
    for long_split in ("train", "validation"):
        write_files(tmp_path, {"train": short, "validation": short, "test": short, long_split: long})
        result = run_command(*train_args(tmp_path / "run", *files, flagfile=flagfile), timeout=SLOW)
        assert_one_error_line(result, f"{tmp_path / (long_split + '.en')}", "every pair has more than 31 words",
                              "max_length=32")
        assert not (tmp_path / "run").exists()  # found before anything was written
    # Few words, many tokens: found once the tokenizer exists (trained in memory, never saved), before
    # the config or a step; the start leaves nothing, so the next one trains its own tokenizer.
    rng = random.Random(0)  # words of random letters: each many subwords
    scrambled = [" ".join("".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(12)) for _ in range(12))
                 for _ in range(60)]
    write_files(tmp_path, {"train": (scrambled, scrambled), "validation": short, "test": short})
    result = run_command(*train_args(tmp_path / "run", *files, flagfile=flagfile), timeout=SLOW)
    assert_one_error_line(result, "training corpus files: every pair has more than max_length=32 tokens")
    assert not (tmp_path / "run").exists()  # no tokenizer, no lock file, no folder


# Row 6: flags checked before TensorFlow starts -----------------------------------------------------


def fake_export(folder: pathlib.Path, beam_size: int) -> pathlib.Path:
    """A version folder with the export.json of an export with beam `beam_size` (no real model:
    the command must refuse before it loads one)."""
    version = folder / "1"
    (version / "assets.extra").mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"not loaded")
    decoding = {"beam_size": beam_size, "alpha": 0.6, "max_extra_length": 50, "n_best": 1, "tree_constraint": False}
    settings = {"decoding": decoding, "signatures": ["serving_default", "translate_n_best"]}
    (version / "assets.extra" / "export.json").write_text(json.dumps(settings))
    return folder


@pytest.mark.parametrize("flag, fragment", [
    ("--learning_rate_scale=nan", "learning_rate_scale must be a finite number, got nan"),
    ("--learning_rate_scale=inf", "learning_rate_scale must be a finite number, got inf"),
    ("--clip_norm=nan", "clip_norm must be a finite number"),
    ("--max_train_minutes=nan", "max_train_minutes must be a finite number"),
    ("--checkpoint_every_minutes=inf", "checkpoint_every_minutes must be a finite number"),
    ("--dropout_rate=nan", "dropout_rate must be a finite number"),
    ("--eval_alpha=inf", "alpha must be a finite number"),
    ("--seed=-1", "seed must be an integer in [0, 2**32), got -1"),
    ("--dev_split=bogus", "dev_split 'bogus': dataset embedded has the splits train, validation, test"),
    ("--eval_max_extra_length=1000000000", "eval_max_extra_length"),
    ("--train_files=,", "--train_files=,: names no corpus"),
    ("--cpu_replicas=-1", "cpu_replicas"),
    ("--eval_max_sentences=-5", "--eval_max_sentences=-5: -5 is not integer >= -1"),  # was: no BLEU, silently
    ("--data_dir=", "--data_dir=: an empty path; give a file or folder"),
    ("--init_from=/nonexistent/run", "--init_from=/nonexistent/run: no such training directory or checkpoint "
     "prefix (e.g. RUN/checkpoints/ckpt-1000)"),
])
def test_row6_bad_training_flags_are_one_error_line_before_tensorflow(finished, no_tensorflow, tmp_path, flag,
                                                                      fragment):
    result = run_command(*train_args(tmp_path / "run", flag, flagfile=finished / "tiny.flags"), env=no_tensorflow)
    assert_one_error_line(result, fragment)
    assert not (tmp_path / "run").exists()


def test_row6_bad_serving_flags_are_one_error_line_before_tensorflow(finished, no_tensorflow, tmp_path):
    run, source = finished / "run", finished / "source.txt"
    before = snapshot(run)
    export = run_command("-m", "keras_transformer.export", f"--model_dir={run}", f"--export_dir={run}/", env=no_tensorflow)
    assert_one_error_line(export, f"--export_dir={run}/: is the training directory --model_dir={run}")
    exported = fake_export(tmp_path / "serving", beam_size=2)
    n_best = run_command("-m", "keras_transformer.translate", f"--export_dir={exported}", f"--input={source}",
                         "--n_best=3", env=no_tensorflow)
    assert_one_error_line(n_best, "--n_best with the export",
                          "n_best must be an integer between 1 and beam_size (2), got 3")
    (tmp_path / "three.txt").write_text("a\nb\nc\n", encoding="utf-8")
    reference = run_command("-m", "keras_transformer.translate", f"--model_dir={run}", f"--input={source}",
                            f"--reference={tmp_path / 'three.txt'}", f"--output={tmp_path / 'hyp.txt'}",
                            env=no_tensorflow)
    assert_one_error_line(reference, "three.txt has 3 lines but the input")
    missing = run_command(*train_args(tmp_path / "no_run", "--evaluate_only", flagfile=finished / "tiny.flags"),
                          env=no_tensorflow)
    assert_one_error_line(missing, "no such training directory")
    assert snapshot(run) == before and not (tmp_path / "hyp.txt").exists() and not (tmp_path / "no_run").exists()


# Row 8: signals during the final evaluation and the average -----------------------------------------


def start(model_dir, flagfile, until: str):
    """The training command on `model_dir`, once it has printed a line that starts with `until`."""
    process = subprocess.Popen([sys.executable, *train_args(model_dir, *FINISHED, "--log_every_steps=1",
                                                            flagfile=flagfile)],
                               cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"})
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith(until):
            return process, lines
    process.wait()
    pytest.fail(f"the run ended before {until!r}:\n{''.join(lines)}\n{process.stderr.read()[-2000:]}")


def history_steps(model_dir) -> list[int]:
    path = model_dir / "eval" / "history.json"
    return [record["step"] for record in json.loads(path.read_text())["evaluations"]] if path.exists() else []


@pytest.mark.slow
def test_row8_sigterm_after_the_last_update_stops_the_final_evaluation_and_the_run_finishes_later(finished,
                                                                                                   tmp_path):
    flagfile, model_dir = finished / "tiny.flags", tmp_path / "run"
    process, lines = start(model_dir, flagfile, "step 12/12")
    time.sleep(0.5)  # past the check after the update: the save of step 12 or the final evaluation runs
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=SLOW)
    out = "".join(lines) + out
    assert process.returncode == 143, err[-2000:]
    assert "Traceback" not in err and "done:" not in out and "interrupted: " in out
    assert "SIGTERM at step 12, during the dev evaluation (not recorded; redone on resume): saved ckpt-12" in out
    assert history_steps(model_dir) == [] and not (model_dir / "averaged").exists()
    checkpoints = snapshot(model_dir / "checkpoints")

    # Started again it goes straight to the final evaluation: two SIGTERMs there stop it, no traceback
    # (143; or, were the second one later than the first one's handling, the default end by SIGTERM).
    process, lines = start(model_dir, flagfile, "the run reached --train_steps=12 before")
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=SLOW)
    out = "".join(lines) + out
    assert process.returncode in (143, -signal.SIGTERM), err[-2000:]
    assert "Traceback" not in err and "done:" not in out
    assert "SIGTERM during the final evaluation of step 12 (not recorded)" in out or "SIGTERM again" in err, out
    assert snapshot(model_dir / "checkpoints") == checkpoints
    assert history_steps(model_dir) == [] and not (model_dir / "averaged").exists()

    # Once more without a signal: the evaluation and the average, once.
    result = run_command(*train_args(model_dir, *FINISHED, flagfile=flagfile), timeout=SLOW)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("eval step 12:") == 1 and "done: " in result.stdout
    assert history_steps(model_dir) == [12] and (model_dir / "averaged" / "ckpt-12.index").is_file()


# Row 10: a full disk, a read-only file system --------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs (skipped where this process may not mount one), unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                                 capture_output=True, timeout=30, check=False)
    except OSError as error:
        pytest.skip(f"cannot mount a tmpfs here: {error}")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=30, check=False)


def fill(folder: pathlib.Path, leave: int, name: str = "filler") -> None:
    """Fills the file system of `folder` up to about `leave` free bytes."""
    stats = os.statvfs(folder)
    try:
        with open(folder / name, "wb") as file:
            file.write(b"\0" * max(stats.f_bavail * stats.f_frsize - leave, 0))
    except OSError as error:  # full already
        assert error.errno == errno.ENOSPC, error


def remove_temporaries(folder: pathlib.Path) -> None:
    """What a save cut short by the full disk left (the next run removes it too): its room back."""
    for path in glob.glob(str(folder / "**" / "*_temp"), recursive=True):
        shutil.rmtree(path)


@pytest.mark.slow
def test_row10_a_full_or_read_only_disk_is_one_error_line_naming_the_path(finished, small_disk, no_tensorflow):
    run = small_disk / "run"
    shutil.copytree(finished / "run", run)
    shutil.rmtree(run / "averaged")
    fill(small_disk, leave=200 << 10)  # room for a lock, a config, a line; not for a checkpoint
    before = snapshot(run)
    flagfile = finished / "tiny.flags"

    resumed = run_command(*train_args(run, *FINISHED, "--train_steps=18", flagfile=flagfile), timeout=SLOW)
    assert_one_error_line(resumed, str(run / "checkpoints"), "No space left on device")  # the save of step 18
    remove_temporaries(run)
    averaged = run_command("-m", "keras_transformer.average_checkpoints", f"--model_dir={run}", "--num_checkpoints=2",
                           timeout=SLOW)
    assert_one_error_line(averaged, str(run / "averaged"), "No space left on device")
    remove_temporaries(run)
    exported = run_command("-m", "keras_transformer.export", f"--model_dir={run}", f"--export_dir={small_disk / 'serving'}",
                           timeout=SLOW)
    assert_one_error_line(exported, str(small_disk / "serving"), "No space left on device")
    assert os.listdir(small_disk / "serving") == []  # no half-written version, no temporary folder
    after = snapshot(run)
    kept = [name for name in before if name.startswith(("checkpoints/", "tokenizer/"))]
    assert kept and all(after[name] == before[name] for name in kept)

    fill(small_disk, leave=0, name="filler-2")  # now full: found before any work
    translated = run_command("-m", "keras_transformer.translate", f"--model_dir={run}",
                             f"--input={finished / 'source.txt'}", f"--output={small_disk / 'hyp.txt'}")
    assert_one_error_line(translated, f"--output={small_disk}: {small_disk} cannot be written: No space left")

    for name in ("filler", "filler-2"):
        os.remove(small_disk / name)
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True, timeout=30)
    read_only = run_command("-m", "keras_transformer.translate", f"--model_dir={run}",
                            f"--input={finished / 'source.txt'}", f"--output={small_disk / 'hyp.txt'}")
    assert_one_error_line(read_only, f"--output={small_disk}: {small_disk} is not writable")
    evaluated = run_command(*train_args(run, "--evaluate_only", flagfile=flagfile))
    assert_one_error_line(evaluated, f"--model_dir={run}: {run} is not writable")
    averaged = run_command("-m", "keras_transformer.average_checkpoints", f"--model_dir={run}", "--num_checkpoints=2",
                           env=no_tensorflow)  # before TensorFlow starts, not after reading the checkpoints
    assert_one_error_line(averaged, f"--model_dir={run}: {run} is not writable")
    assert not (small_disk / "hyp.txt").exists()


MAPPED = """
import errno, os, sys
from keras_transformer import cli
case = sys.argv[1]

def main(argv):
    if case == "tensorflow":
        tf = cli.start_tensorflow()
        raise tf.errors.ResourceExhaustedError(None, None, "{{function_node __wrapped__SaveV2}} "
                                               "/data/run/ckpt-9_temp/part-0; No space left on device [Op:SaveV2]")
    number = getattr(errno, case)
    raise OSError(number, os.strerror(number), "/data/run/.lock")

cli.run(main)
"""


@pytest.mark.parametrize("case, fragment", [
    ("ENOSPC", "/data/run/.lock: No space left on device"),
    ("EROFS", "/data/run/.lock: Read-only file system"),
    ("EACCES", "/data/run/.lock: Permission denied"),
    ("EISDIR", "/data/run/.lock: Is a directory"),
    ("tensorflow", "/data/run/ckpt-9_temp/part-0: No space left on device"),
])
def test_row10_every_command_turns_a_file_systems_refusal_into_one_error_line(case, fragment):
    """Where no file system can be mounted: the one place every command's errors go through."""
    result = run_command("-c", MAPPED, case)
    assert_one_error_line(result, fragment)


# Rough edges: refusals that came only after TensorFlow started ---------------------------------------

# The commands that read a run with a model_dir, {run}, and files in {out}.
RUN_READERS = (
    ("-m", "keras_transformer.export", "--model_dir={run}", "--export_dir={out}/serving"),
    ("-m", "keras_transformer.translate", "--model_dir={run}", "--input={out}/source.txt", "--output={out}/hyp.txt"),
    ("-m", "keras_transformer.parse", "--model_dir={run}", "--input={out}/source.txt", "--output={out}/hyp.txt"),
    ("-m", "keras_transformer.score", "--model_dir={run}", "--source={out}/source.txt", "--target={out}/source.txt",
     "--output={out}/hyp.txt"),
)


@pytest.mark.parametrize("command", RUN_READERS)
def test_a_checkpoint_that_does_not_exist_is_one_error_line_before_tensorflow(no_tensorflow, tmp_path, command):
    """`--checkpoint` (tasks.flags.define_checkpoint_flag) is checked as the flags are parsed."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "ckpt-2.index").write_bytes(b"")
    (tmp_path / "source.txt").write_text("A dog runs .\n", encoding="utf-8")
    before = snapshot(tmp_path)
    argv = [part.format(run=run, out=tmp_path) for part in command]
    for prefix in (run / "checkpoints" / "ckpt-999", run / "checkpoints"):
        result = run_command(*argv, f"--checkpoint={prefix}", env=no_tensorflow)
        assert_one_error_line(result, f"--checkpoint={prefix}: no such checkpoint ({prefix.name}.index not found")
    assert snapshot(tmp_path) == before


def test_a_second_trainer_is_refused_before_tensorflow(no_tensorflow, tmp_path):
    """The training command asks `run_lock.check_free` before TensorFlow starts; the holder's
    lock and the directory stay as they were."""
    from keras_transformer.training import run_lock

    flagfile, run = tmp_path / "tiny.flags", tmp_path / "run"
    flagfile.write_text(TINY)
    with run_lock.RunLock(str(run)):
        holder = (run / ".lock").read_text()
        result = run_command(*train_args(run, "--train_steps=2", flagfile=flagfile), env=no_tensorflow)
        assert_one_error_line(result, f"{run} is in use by pid {os.getpid()} on ", "another training process")
        assert (run / ".lock").read_text() == holder and os.listdir(run) == [".lock"]
    free = run_command(*train_args(run, "--train_steps=2", flagfile=flagfile), env=no_tensorflow)
    assert "TensorFlow was imported" in free.stderr  # once released, no refusal: on to TensorFlow


def test_a_vocabulary_too_small_for_the_characters_names_our_flag_not_sentencepieces():
    """sentencepiece's advice ("decrease character_coverage with --character_coverage option")
    named a flag no command has."""
    from keras_transformer.pipelines import grammar_corpus, tokenizers

    sentences = [s for pair in grammar_corpus.generate_pairs(50, seed=1) for s in pair]
    with pytest.raises(ValueError) as error:
        tokenizers.train(sentences, tokenizers.TokenizerConfig(vocab_size=12, seed=1))
    assert "vocab_size=12 is too small for this training text" in str(error.value)
    assert "raise --vocab_size" in str(error.value) and "character_coverage" not in str(error.value)


@pytest.mark.parametrize("settings, fragment", [
    ("{", "tokenizer.json: not valid JSON"),
    ("{}", "tokenizer.json: not a tokenizer's settings (missing or invalid: model_file, type, lowercase)"),
    ('{"model_file": "gone.model", "type": "bpe", "lowercase": false}', "gone.model: no such file"),
])
def test_a_damaged_tokenizer_json_is_an_error_naming_the_file(tmp_path, settings, fragment):
    """Was a KeyError / JSONDecodeError that named no file (every reader of a run loads it here)."""
    from keras_transformer.pipelines import tokenizers
    from keras_transformer.pipelines.errors import DataError

    (tmp_path / "tokenizer.json").write_text(settings, encoding="utf-8")
    with pytest.raises(DataError) as error:
        tokenizers.load(str(tmp_path))
    assert fragment in str(error.value) and str(tmp_path) in str(error.value)


def test_parse_refuses_the_export_of_a_translation_model_before_tensorflow(no_tensorflow, tmp_path):
    """export.json records the run's task; an export made before it did (no "task") is taken."""
    exported = fake_export(tmp_path / "serving", beam_size=4)
    settings_file = exported / "1" / "assets.extra" / "export.json"
    settings = json.loads(settings_file.read_text())
    settings_file.write_text(json.dumps({**settings, "task": "translation"}))
    (tmp_path / "sentences.txt").write_text("The dog barks .\n", encoding="utf-8")
    result = run_command("-m", "keras_transformer.parse", f"--export_dir={exported}",
                         f"--input={tmp_path / 'sentences.txt'}", f"--output={tmp_path / 'trees.txt'}",
                         env=no_tensorflow)
    assert_one_error_line(result, f"--export_dir={exported}: an export of a translation model",
                          "trained on a treebank")
    assert not (tmp_path / "trees.txt").exists()
    settings_file.write_text(json.dumps({**settings, "task": "parsing"}))
    parsing = run_command("-m", "keras_transformer.parse", f"--export_dir={exported}",
                          f"--input={tmp_path / 'sentences.txt'}", f"--output={tmp_path / 'trees.txt'}",
                          env=no_tensorflow)
    assert "TensorFlow was imported" in parsing.stderr  # a parsing export goes on to TensorFlow


@pytest.mark.parametrize("command", RUN_READERS + (
    ("-m", "keras_transformer.average_checkpoints", "--model_dir={run}"),
    ("-m", "keras_transformer.train", "--model_dir={run}", "--evaluate_only"),
), ids=["export", "translate", "parse", "score", "average_checkpoints", "evaluate_only"])
def test_a_model_dir_that_is_not_a_training_directory_is_one_error_line_before_tensorflow(no_tensorflow, tmp_path,
                                                                                           command):
    """`TrainingDirectory.check_exists`, one wording for every command that reads a run: export and
    translate found a missing run only once TensorFlow had started."""
    (tmp_path / "source.txt").write_text("A dog runs .\n", encoding="utf-8")
    (tmp_path / "not_a_run").mkdir()  # e.g. an export's base folder given as --model_dir
    before = snapshot(tmp_path)
    for run, fragment in ((tmp_path / "missing", "no such training directory"),
                          (tmp_path / "source.txt", "is a file, not a training directory"),
                          (tmp_path / "not_a_run", "not a training directory (no model_config.json in it)")):
        result = run_command(*[part.format(run=run, out=tmp_path) for part in command], env=no_tensorflow)
        assert_one_error_line(result, f"--model_dir={run}: {fragment}")
    assert snapshot(tmp_path) == before


def test_an_export_dir_without_a_saved_model_or_with_damaged_settings_is_refused_before_tensorflow(no_tensorflow,
                                                                                                   tmp_path):
    (tmp_path / "source.txt").write_text("A dog runs .\n", encoding="utf-8")
    translate = ("-m", "keras_transformer.translate", f"--input={tmp_path / 'source.txt'}",
                 f"--output={tmp_path / 'hyp.txt'}")
    (tmp_path / "empty").mkdir()
    for export_dir in (tmp_path / "missing", tmp_path / "empty"):
        result = run_command(*translate, f"--export_dir={export_dir}", env=no_tensorflow)
        assert_one_error_line(result, f"{export_dir}: no saved_model.pb in it or in a version folder")
    exported = fake_export(tmp_path / "serving", beam_size=4)
    settings = exported / "1" / "assets.extra" / "export.json"
    for text, fragment in (("[1, 2]", "not an export's settings (a JSON object expected)"),
                           ('{"decoding": 4}', "not an export's settings (a JSON object whose decoding is expected)"),
                           ("{", "not valid JSON"),
                           ('{"decoding": {"beam": 4}}', "its \"decoding\" is not an export's")):
        settings.write_text(text)
        for command in (translate + (f"--export_dir={exported}", "--n_best=2"),
                        ("-m", "keras_transformer.parse", f"--export_dir={exported}",
                         f"--input={tmp_path / 'source.txt'}")):
            if command[1] == "keras_transformer.parse" and "beam" in text:
                continue  # parse reads only the task
            result = run_command(*command, env=no_tensorflow)
            assert_one_error_line(result, f"{settings}: {fragment}")
    assert not (tmp_path / "hyp.txt").exists()


def test_summary_and_average_checkpoints_refuse_bad_flags_before_tensorflow(no_tensorflow, tmp_path):
    for argv, fragment in ((("--preset=bogus",), "unknown preset 'bogus'"),
                           (("--preset=tiny", "--vocab_size=-5"), "vocab_size must be a positive integer, got -5"),
                           (("--num_decoder_layers=0",), "--num_decoder_layers=0: 0 is not a positive integer"),
                           (("--num_layers=0",), "num_layers must be a positive integer, got 0")):
        assert_one_error_line(run_command("-m", "keras_transformer.summary", *argv, env=no_tensorflow), fragment)
    result = run_command("-m", "keras_transformer.average_checkpoints", f"--model_dir={tmp_path}", "--num_checkpoints=0",
                         env=no_tensorflow)
    assert_one_error_line(result, "--num_checkpoints=0: 0 is not a positive integer")


@pytest.mark.parametrize("command, fragment", [
    (("-m", "keras_transformer.train", "--model_dir="), "--model_dir=: an empty path"),  # would train into the cwd
    (("-m", "keras_transformer.export", "--model_dir=run", "--export_dir="), "--export_dir=: an empty path"),
    (("-m", "keras_transformer.translate", "--model_dir=", "--input=x.txt"), "--model_dir=: an empty path"),  # TypeError
    (("-m", "keras_transformer.score", "--model_dir=run", "--source=x", "--target=y", "--output="),
     "--output=: an empty path"),
    (("-m", "keras_transformer.pipelines", "train_tokenizer", "--tokenizer_dir="), "--tokenizer_dir=: an empty path"),
    (("-m", "keras_transformer.shortlist", "--model_dir=run", "--source=x", "--target=y", "--output="),
     "--output=: an empty path"),
], ids=["train", "export", "translate", "score", "pipelines", "shortlist"])
def test_an_empty_path_flag_is_one_error_line_before_tensorflow(no_tensorflow, tmp_path, command, fragment):
    """`cli.run` refuses a path flag given empty (an unset shell variable), for every command."""
    result = run_command(*command, env=no_tensorflow, cwd=tmp_path)
    assert_one_error_line(result, fragment)
    assert os.listdir(tmp_path) == []  # nothing written in the current folder


# Issue 60: flagfiles absl misreads, a full output device ----------------------------------------------

# Every command, with flags it would otherwise take up to TensorFlow.
FLAGFILE_COMMANDS = {
    "train": ("-m", "keras_transformer.train", "--model_dir=run"),
    "export": ("-m", "keras_transformer.export", "--model_dir=run", "--export_dir=serving"),
    "translate": ("-m", "keras_transformer.translate", "--model_dir=run", "--input=source.txt"),
    "score": ("-m", "keras_transformer.score", "--model_dir=run", "--source=source.txt", "--target=source.txt"),
    "parse": ("-m", "keras_transformer.parse", "--model_dir=run", "--input=source.txt"),
    "average_checkpoints": ("-m", "keras_transformer.average_checkpoints", "--model_dir=run"),
    "summary": ("-m", "keras_transformer.summary",),
    "variations": ("-m", "keras_transformer.variations", "--out=table"),
    "pipelines": ("-m", "keras_transformer.pipelines", "train_tokenizer", "--tokenizer_dir=tokenizer"),
    "shortlist": ("-m", "keras_transformer.shortlist", "--model_dir=run", "--source=source.txt",
                  "--target=source.txt", "--output=out.vmap"),
}


def test_a_flagfile_that_includes_itself_is_one_error_line_before_tensorflow(no_tensorflow, tmp_path):
    """absl skips a flagfile that includes itself with a warning (hidden with TensorFlow's start-up
    lines) and goes on without its flags: the training command started the base preset with every
    default. A cycle through other files, and one spelled with another path, are refused alike."""
    (tmp_path / "rec.flags").write_text("--flagfile=rec.flags\n")
    result = run_command("-m", "keras_transformer.train", "--flagfile=rec.flags", f"--model_dir={tmp_path / 'x'}",
                         env=no_tensorflow, cwd=tmp_path)
    assert_one_error_line(result, "--flagfile=rec.flags: rec.flags includes itself")
    (tmp_path / "recipe.flags").write_text(TINY + "--flagfile=more.flags\n")
    (tmp_path / "more.flags").write_text("--train_steps=60\n--flagfile=./recipe.flags\n")
    for name, command in FLAGFILE_COMMANDS.items():
        result = run_command(*command, "--flagfile", "recipe.flags", env=no_tensorflow, cwd=tmp_path)
        assert_one_error_line(result, "--flagfile=recipe.flags: flagfiles include each other in a cycle "
                                      "(recipe.flags -> more.flags -> ./recipe.flags)")
    assert sorted(os.listdir(tmp_path)) == ["more.flags", "rec.flags", "recipe.flags"]


@pytest.mark.parametrize("name", FLAGFILE_COMMANDS)
def test_a_flagfile_that_is_not_utf8_is_one_error_line_naming_it_in_every_command(no_tensorflow, tmp_path, name):
    """`cli.run`, before absl reads the flagfile (which raised UnicodeDecodeError): the file, or the
    one that included it, is named."""
    (tmp_path / "bad.flags").write_bytes(b"--model_dir=\xff\xfe\n")
    (tmp_path / "recipe.flags").write_text(TINY + "--flagfile=bad.flags\n")
    result = run_command(*FLAGFILE_COMMANDS[name], "--flagfile=bad.flags", env=no_tensorflow, cwd=tmp_path)
    assert_one_error_line(result, "--flagfile=bad.flags: not UTF-8 text (line 1 has the byte 0xff)")
    result = run_command(*FLAGFILE_COMMANDS[name], "--flagfile=recipe.flags", env=no_tensorflow, cwd=tmp_path)
    assert_one_error_line(result, "bad.flags (included by recipe.flags): not UTF-8 text")
    assert sorted(os.listdir(tmp_path)) == ["bad.flags", "recipe.flags"]


@pytest.mark.parametrize("command", ["translate", "score"])
def test_an_output_on_a_full_device_is_one_error_line_naming_it(finished, command):
    """A write to /dev/full fails with ENOSPC on an open file, an error that names no path
    (`atomic.write_output` names it). parse writes its trees through the same function."""
    inputs = {"translate": (f"--input={finished / 'source.txt'}",),
              "score": (f"--source={finished / 'source.txt'}", f"--target={finished / 'reference.txt'}")}[command]
    result = run_command("-m", f"keras_transformer.{command}", f"--model_dir={finished / 'run'}", *inputs,
                         "--output=/dev/full", timeout=SLOW)
    lines = result.stderr.splitlines()  # the command's progress lines, then the error
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert lines[-1] == "error: /dev/full: No space left on device", result.stderr[-3000:]
    assert sum(line.startswith("error: ") for line in lines) == 1, result.stderr[-3000:]


# Issue 60, group 2: a model no machine can build ------------------------------------------------------


@pytest.mark.slow
def test_a_model_config_no_machine_can_build_is_one_error_line_in_every_command_that_builds_it(finished, no_tensorflow,
                                                                                              tmp_path):
    """A finished run's model_config.json with d_ff=10**12 (hundreds of terabytes of weights): every
    reader ran out of memory building the model (a ResourceExhaustedError traceback, exit 1). The
    same sizes as training flags are refused before TensorFlow starts, before anything is written."""
    run = tmp_path / "run"
    shutil.copytree(finished / "run", run)
    settings_file = run / "model_config.json"
    settings = json.loads(settings_file.read_text())
    settings["model"]["d_ff"] = 10**12
    settings_file.write_text(json.dumps(settings))
    (tmp_path / "source.txt").write_text("A dog runs .\n", encoding="utf-8")
    flagfile = tmp_path / "tiny.flags"
    flagfile.write_text(TINY)
    before = snapshot(tmp_path)
    fragments = ("the model (num_layers=2, d_model=32, d_ff=1000000000000, num_heads=2, vocab_size=500) needs about ",
                 " float32 weights, but this machine has ")
    for command in RUN_READERS + (("-m", "keras_transformer.average_checkpoints", "--model_dir={run}"),
                                  train_args("{run}", "--evaluate_only", flagfile=flagfile)):
        result = run_command(*[part.format(run=run, out=tmp_path) for part in command], timeout=SLOW)
        line = assert_one_error_line(result, *fragments)
        assert line.startswith(f"error: {settings_file}: the model ("), line
    assert snapshot(tmp_path) == before
    new_run = tmp_path / "new"
    result = run_command(*train_args(new_run, "--d_ff=1000000000000", flagfile=flagfile), env=no_tensorflow)
    assert_one_error_line(result, *fragments)
    assert not new_run.exists()
