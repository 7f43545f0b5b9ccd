"""Reading a training directory through the real commands when it is damaged, mismatched, oddly
named or being trained: one `error:` line (exit 2) and nothing written, or the documented result.

Every command that reads a run opens it through `keras_transformer.training_directory.TrainingDirectory.open` (config, tokenizer and its
fingerprint, the checkpoint to read); these are the cases of issue 33 that one place fixes: a
tokenizer that is not the run's (row 1), a MODEL_DIR with glob characters beside a sibling it
would match (row 2), tokenizer flags that contradict the run (row 7), a checkpoint that a
training run's rotation removes between the check and the read (row 9), damaged run files
(row 11), a model_config.json that does not fit the checkpoints (row 12). One tiny run of
configs/tiny.flags (with --cache=disk) is trained once for the module and copied per test.
"""

import os
import pathlib
import shutil
import textwrap

import pytest

from tests.helpers.commands import assert_one_error_line
from tests.helpers.commands import run_command as run_command_quickly
from tests.helpers.train_runs import TINY, train_args

RUN = ("--train_steps=12", "--checkpoint_every_steps=6", "--eval_every_steps=0", "--eval_max_sentences=-1",
       "--average_checkpoints=2", "--keep_checkpoints=2", "--cache=disk")
MORE = ("--train_steps=18",)  # a resume: one more checkpoint, ckpt-6 rotated away, a new average


def run_command(*argv):
    """`tests.helpers.commands.run_command` with time for a tiny training on a busy host."""
    return run_command_quickly(*argv, timeout=1200)


def snapshot(directory):
    """{relative path: (bytes, mtime)} of every file below `directory` but the lock (a trainer
    writes its pid there and empties it again as it ends, refused or not)."""
    root = pathlib.Path(directory)
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished tiny run (checkpoints 6 and 12, averaged/ckpt-12, a disk cache) and its flagfile."""
    base = tmp_path_factory.mktemp("trained")
    flagfile = base / "tiny.flags"
    flagfile.write_text(TINY)
    result = run_command(*train_args(base / "run", *RUN, flagfile=flagfile))
    assert result.returncode == 0, result.stderr[-2000:]
    return base / "run", flagfile


@pytest.fixture
def run(trained, tmp_path):
    """A copy of the trained run, free to damage; (its path, the flagfile)."""
    return pathlib.Path(shutil.copytree(trained[0], tmp_path / "run")), trained[1]


@pytest.fixture
def sentences(tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_text("A dog runs .\nThe cat sleeps .\n")
    return path


@pytest.mark.slow
def test_a_tokenizer_that_is_not_the_runs_is_refused_by_every_reader(run, sentences, tmp_path):
    """Row 1: another run's tokenizer (400 ids, the model has 500 rows) in MODEL_DIR/tokenizer."""
    from keras_transformer.pipelines import grammar_corpus, tokenizers

    model_dir, flagfile = run
    other = tokenizers.train([s for pair in grammar_corpus.generate_pairs(300, seed=1) for s in pair],
                             tokenizers.TokenizerConfig(vocab_size=400, seed=1))
    shutil.rmtree(model_dir / "tokenizer")
    other.save(str(model_dir / "tokenizer"))
    before = snapshot(model_dir)
    out = tmp_path / "out.txt"
    commands = {
        "export": ("-m", "keras_transformer.export", f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'exported'}"),
        "translate": ("-m", "keras_transformer.translate", f"--model_dir={model_dir}", f"--input={sentences}",
                      f"--output={out}"),
        "parse": ("-m", "keras_transformer.parse", f"--model_dir={model_dir}", f"--input={sentences}",
                  f"--output={out}"),
        "average": ("-m", "keras_transformer.average_checkpoints", f"--model_dir={model_dir}",
                    "--num_checkpoints=2"),
        "evaluate_only": train_args(model_dir, "--evaluate_only", flagfile=flagfile),
    }
    for name, command in commands.items():
        line = assert_one_error_line(run_command(*command), f"{model_dir / 'tokenizer'}: not the tokenizer the run "
                                                             "was trained with")
        assert "recorded" in line, name
    assert snapshot(model_dir) == before
    assert not out.exists() and not (tmp_path / "exported").exists()


@pytest.mark.slow
def test_a_model_dir_with_glob_characters_reads_and_rotates_only_its_own_files(run, sentences, tmp_path):
    """Row 2: runs/g[1] beside runs/g1, whose checkpoints and cache are damaged: TensorFlow would
    match g[1]'s prefixes against g1's files (find none, read them, or rotate them away)."""
    model_dir, flagfile = run
    glob_dir = pathlib.Path(shutil.copytree(model_dir, tmp_path / "g[1]"))
    sibling = pathlib.Path(shutil.copytree(model_dir, tmp_path / "g1"))
    for folder in ("checkpoints", "averaged", "cache"):
        for path in (sibling / folder).iterdir():
            if path.name != "checkpoint":
                os.truncate(path, path.stat().st_size // 2)
    untouched = snapshot(sibling)

    exported = run_command("-m", "keras_transformer.export", f"--model_dir={glob_dir}", f"--export_dir={tmp_path / 'exported'}",
                           "--nocheck_ops")
    assert exported.returncode == 0 and "warning" not in exported.stderr, exported.stderr[-2000:]
    assert f"exported {glob_dir / 'averaged' / 'ckpt-12'} to {tmp_path / 'exported' / '1'}" in exported.stdout
    out = tmp_path / "out.txt"
    translated = run_command("-m", "keras_transformer.translate", f"--model_dir={glob_dir}", f"--input={sentences}",
                             f"--output={out}", "--beam_size=1")
    assert translated.returncode == 0 and "warning" not in translated.stderr, translated.stderr[-2000:]
    assert len(out.read_text().splitlines()) == 2
    scored = run_command("-m", "keras_transformer.score", f"--model_dir={glob_dir}", f"--source={sentences}",
                         f"--target={sentences}")
    assert scored.returncode == 0 and len(scored.stdout.splitlines()) == 2, scored.stderr[-2000:]

    resumed = run_command(*train_args(glob_dir, *RUN, *MORE, flagfile=flagfile))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed at step 12" in resumed.stdout and "removed the damaged disk cache" not in resumed.stdout
    assert sorted(p.name for p in (glob_dir / "checkpoints").glob("ckpt-*.index")) == ["ckpt-12.index",
                                                                                        "ckpt-18.index"]
    assert sorted(p.name for p in (glob_dir / "averaged").glob("ckpt-*.index")) == ["ckpt-18.index"]
    assert snapshot(sibling) == untouched  # nothing of g1 read as g[1]'s, nothing of it deleted


def test_tokenizer_flags_that_contradict_the_run_are_refused_before_training(run, tmp_path):
    """Row 7: --init_from with another --vocab_size, a resume with another --vocab_size or --tokenizer."""
    model_dir, flagfile = run
    before = snapshot(model_dir)
    new_dir = tmp_path / "fine_tuned"
    init = run_command(*train_args(new_dir, f"--init_from={model_dir}", "--vocab_size=100", flagfile=flagfile))
    assert_one_error_line(init, "--vocab_size=100", f"--init_from={model_dir}", "--vocab_size=500")
    assert not new_dir.exists()
    for flag, run_value in (("--vocab_size=100", "--vocab_size=500"), ("--tokenizer=unigram", "--tokenizer=bpe")):
        resumed = run_command(*train_args(model_dir, *RUN, *MORE, flag, flagfile=flagfile))
        assert_one_error_line(resumed, flag, str(model_dir), run_value)
    assert snapshot(model_dir) == before  # model_config.json not rewritten with the contradicting values


ROTATING = textwrap.dedent("""
    # The command's own main, with a training run's save and rotation simulated right after the
    # readability check of VICTIM passed: the newest listed checkpoint saved again as NEW, the
    # state file listing the survivors and NEW, VICTIM's files deleted.
    import os, shutil, sys
    from keras_transformer import cli
    from keras_transformer.run_dir import readable_checkpoints

    folder, victim, new, command = sys.argv[1:5]
    check, rotated = readable_checkpoints.checkpoint_problem, []

    def rotating(prefix):
        problem = check(prefix)
        if os.path.basename(prefix) == victim and not rotated:
            rotated.append(prefix)
            listed = [os.path.basename(p) for p in readable_checkpoints.listed_checkpoints(folder)]
            for name in os.listdir(folder):
                if name.startswith(listed[-1] + "."):
                    shutil.copy(os.path.join(folder, name), os.path.join(folder, new + name[len(listed[-1]):]))
            survivors = [name for name in listed if name != victim] + [new]
            with open(os.path.join(folder, "checkpoint"), "w") as state:
                state.write(f'model_checkpoint_path: "{new}"\\n')
                state.writelines(f'all_model_checkpoint_paths: "{name}"\\n' for name in survivors)
            for name in os.listdir(folder):
                if name.startswith(victim + "."):
                    os.remove(os.path.join(folder, name))
        return problem

    readable_checkpoints.checkpoint_problem = rotating
    module = __import__(command, fromlist=["main"])
    sys.argv = [command] + sys.argv[5:]
    cli.run(module.main)
""")


def test_a_checkpoint_rotated_away_between_check_and_read_is_chosen_again(run, sentences, tmp_path):
    """Row 9: translate and average_checkpoints on a run being trained, whose save removes the
    checkpoint the command has just checked (the newest for translate, the oldest for averaging)."""
    model_dir, _ = run
    shutil.rmtree(model_dir / "averaged")  # a run still training has no average yet
    folder = model_dir / "checkpoints"
    out = tmp_path / "out.txt"
    translated = run_command("-c", ROTATING, folder, "ckpt-12", "ckpt-18", "keras_transformer.commands.translate",
                             f"--model_dir={model_dir}", f"--input={sentences}", f"--output={out}", "--beam_size=1")
    assert translated.returncode == 0, translated.stderr[-2000:]
    assert f"with {folder / 'ckpt-18'}" in translated.stderr and len(out.read_text().splitlines()) == 2
    assert not (folder / "ckpt-12.index").exists()  # the rotation did happen

    averaged = run_command("-c", ROTATING, folder, "ckpt-6", "ckpt-24", "keras_transformer.commands.average_checkpoints",
                           f"--model_dir={model_dir}", "--num_checkpoints=2")
    assert averaged.returncode == 0, averaged.stderr[-2000:]
    assert f"averaged ckpt-18, ckpt-24 -> {model_dir / 'averaged' / 'ckpt-24'}" in averaged.stdout
    assert not (folder / "ckpt-6.index").exists()


@pytest.mark.slow
def test_damaged_run_files_are_one_error_line_naming_the_path(run, sentences, tmp_path):
    """Row 11: model_config.json of {}, [] or an unknown field; a .lock folder; checkpoints/ or
    eval/ a file; a truncated disk cache (rebuilt); train_tokenizer into a file."""
    model_dir, flagfile = run
    config = model_dir / "model_config.json"
    original = config.read_text()
    out = tmp_path / "out.txt"
    translate = ("-m", "keras_transformer.translate", f"--model_dir={model_dir}", f"--input={sentences}",
                 f"--output={out}")
    for text, fragment in (("{}", 'a JSON object with a "model" object'), ("[]", "found list"),
                           (original.replace('"d_ff": 64,', '"d_ff": 64, "colour": 1,'), "colour")):
        config.write_text(text)
        before = snapshot(model_dir)
        assert_one_error_line(run_command(*translate), str(config), fragment)
        assert snapshot(model_dir) == before and not out.exists()
    config.write_text(original)

    for name, command, kind in ((".lock", train_args(model_dir, *RUN, *MORE, flagfile=flagfile), "a file"),
                                ("checkpoints", train_args(model_dir, *RUN, *MORE, flagfile=flagfile), "a folder"),
                                ("eval", train_args(model_dir, "--evaluate_only", flagfile=flagfile), "a folder")):
        path = model_dir / name
        kept = model_dir.parent / f"kept-{name}"
        os.replace(path, kept)
        if kind == "a file":
            path.mkdir()
        else:
            path.write_text("not a folder")
        before = snapshot(model_dir)
        assert_one_error_line(run_command(*command), f"{path}: is not {kind}")
        assert snapshot(model_dir) == before
        if path.is_dir():
            path.rmdir()
        else:
            path.unlink()
        os.replace(kept, path)

    [data] = (model_dir / "cache").glob("train-*.data-*")
    os.truncate(data, data.stat().st_size // 2)  # tf.data would fail mid-epoch, on every resume
    resumed = run_command(*train_args(model_dir, *RUN, *MORE, flagfile=flagfile))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "removed the damaged disk cache" in resumed.stdout and "resumed at step 12" in resumed.stdout

    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    result = run_command("-m", "keras_transformer.pipelines", "train_tokenizer", "--vocab_size=400", f"--tokenizer_dir={a_file}")
    assert_one_error_line(result, f"--tokenizer_dir={a_file}", "is a file")
    assert a_file.read_text() == "mine"


def test_a_config_that_does_not_fit_the_checkpoints_is_one_line_and_no_tensorflow_warnings(run, sentences, tmp_path):
    """Row 12: model_config.json says d_ff=128, the checkpoints hold d_ff=64."""
    model_dir, flagfile = run
    config = model_dir / "model_config.json"
    config.write_text(config.read_text().replace('"d_ff": 64', '"d_ff": 128'))
    before = snapshot(model_dir)
    commands = (("-m", "keras_transformer.average_checkpoints", f"--model_dir={model_dir}", "--num_checkpoints=2"),
                ("-m", "keras_transformer.translate", f"--model_dir={model_dir}", f"--input={sentences}",
                 f"--output={tmp_path / 'out.txt'}"),
                train_args(model_dir, *RUN, *MORE, "--d_ff=128", flagfile=flagfile))
    for command in commands:
        result = run_command(*command)
        line = assert_one_error_line(result, f"does not fit {config}: ", "/feed_forward/", " in the checkpoint, ")
        assert "128) in the model" in line or "(128,) in the model" in line, line
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr[-3000:]  # no TensorFlow warnings
        if command[1] != "keras_transformer.train":  # training rewrites its config before it restores
            assert snapshot(model_dir) == before


def another_run(model_dir, path, tokenizer_seed=None):
    """A copy of the run at `path`, its ckpt-12 also saved as ckpt-30. With `tokenizer_seed`, a run
    trained with another tokenizer of the same size: another 500-id tokenizer in its tokenizer/,
    its fingerprint recorded in its model_config.json (the model's shapes cannot tell it apart)."""
    import json  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import grammar_corpus, tokenizers  # pylint: disable=g-import-not-at-top

    other = pathlib.Path(shutil.copytree(model_dir, path))
    for file in (other / "checkpoints").glob("ckpt-12.*"):
        shutil.copy(file, file.with_name("ckpt-30" + file.name[len("ckpt-12"):]))
    if tokenizer_seed is not None:
        tokenizer = tokenizers.train([s for pair in grammar_corpus.generate_pairs(300, seed=tokenizer_seed)
                                      for s in pair], tokenizers.TokenizerConfig(vocab_size=500, seed=tokenizer_seed))
        assert tokenizer.vocab_size == 500
        shutil.rmtree(other / "tokenizer")
        tokenizer.save(str(other / "tokenizer"))
        settings = json.loads((other / "model_config.json").read_text())
        settings["tokenizer"]["sha256"] = tokenizers.fingerprint(tokenizer, tokenizer)
        (other / "model_config.json").write_text(json.dumps(settings))
    return other


@pytest.mark.slow
def test_a_checkpoint_of_another_run_is_read_only_when_that_run_has_the_same_tokenizer(run, sentences, tmp_path):
    """--checkpoint naming another run's checkpoint: refused by every reader, naming both runs,
    when that run was trained with another tokenizer of the same size (its weights would read
    this run's ids as other subwords; was: read without a word, exit 0); read when the tokenizer is
    the same; refused when the checkpoint is in no training directory."""
    model_dir, _ = run
    other = another_run(model_dir, tmp_path / "other", tokenizer_seed=1)
    foreign = other / "checkpoints" / "ckpt-30"
    out, exported = tmp_path / "out.txt", tmp_path / "exported"
    before = snapshot(model_dir)
    reads = (f"--model_dir={model_dir}", f"--input={sentences}", f"--output={out}", "--beam_size=1")
    commands = {
        "translate": ("-m", "keras_transformer.translate", *reads),
        "parse": ("-m", "keras_transformer.parse", *reads),
        "score": ("-m", "keras_transformer.score", f"--model_dir={model_dir}", f"--source={sentences}",
                  f"--target={sentences}", f"--output={out}"),
        "export": ("-m", "keras_transformer.export", f"--model_dir={model_dir}", f"--export_dir={exported}", "--nocheck_ops"),
    }
    for name, command in commands.items():
        result = run_command(*command, f"--checkpoint={foreign}")
        line = assert_one_error_line(result, f"--checkpoint={foreign}: a checkpoint of the run {other}, ",
                                     f"tokenizer of --model_dir={model_dir} ")
        assert "sha256" in line, name
    assert snapshot(model_dir) == before and not out.exists() and not exported.exists()

    twin = another_run(model_dir, tmp_path / "twin")  # the same tokenizer: its checkpoints read
    translated = run_command("-m", "keras_transformer.translate", *reads, f"--checkpoint={twin}/checkpoints/ckpt-30")
    assert translated.returncode == 0, translated.stderr[-2000:]
    assert f"with {twin / 'checkpoints' / 'ckpt-30'}" in translated.stderr and len(out.read_text().splitlines()) == 2

    loose = tmp_path / "loose"
    loose.mkdir()
    for path in (model_dir / "checkpoints").glob("ckpt-12.*"):
        shutil.copy(path, loose / path.name)
    result = run_command("-m", "keras_transformer.translate", *reads, f"--checkpoint={loose / 'ckpt-12'}")
    assert_one_error_line(result, f"--checkpoint={loose / 'ckpt-12'}: neither in --model_dir={model_dir} nor in "
                                  "another training directory")


def test_a_run_file_naming_a_checkpoint_outside_the_run_is_refused_and_nothing_outside_is_removed(run, sentences,
                                                                                                   tmp_path):
    """best.json naming `../../other/checkpoints/ckpt-30` or an absolute path, checkpoints/checkpoint
    naming an absolute path elsewhere: one line naming the file from keras_transformer.export (no version published;
    was: another run's weights exported with this run's tokenizer, exit 0), translate and score;
    a resume keeping 2 best checkpoints, whose next evaluation would push the outside entry out of
    the list, refuses before it (was: that run's ckpt-30 files deleted)."""
    import json  # pylint: disable=g-import-not-at-top

    model_dir, flagfile = run
    other = another_run(model_dir, tmp_path / "other")  # even with the same tokenizer: a run reads only its own
    untouched = snapshot(other)
    shutil.rmtree(model_dir / "averaged")  # the best checkpoint is then the one the commands read
    best = model_dir / "best"
    best.mkdir()
    for path in (model_dir / "checkpoints").glob("ckpt-12.*"):
        shutil.copy(path, best / path.name)
    listed = best / "best.json"

    def list_best(*entries):  # (name, dev loss), best first
        listed.write_text(json.dumps({"metric": "loss", "checkpoints": [
            {"step": int(name.rsplit("-", 1)[1]), "value": value, "name": name} for name, value in entries]}))

    exported, out = tmp_path / "exported", tmp_path / "out.txt"
    relative, absolute = "../../other/checkpoints/ckpt-30", str(other / "checkpoints" / "ckpt-30")
    list_best((relative, 1.0), ("ckpt-12", 2.0))
    result = run_command("-m", "keras_transformer.export", f"--model_dir={model_dir}", f"--export_dir={exported}", "--nocheck_ops")
    assert_one_error_line(result, f'{listed}: entry "{relative}" is outside {best}; ')
    assert not exported.exists()
    list_best((absolute, 1.0), ("ckpt-12", 2.0))
    result = run_command("-m", "keras_transformer.translate", f"--model_dir={model_dir}", f"--input={sentences}",
                         f"--output={out}", "--beam_size=1")
    assert_one_error_line(result, f'{listed}: entry "{absolute}" is outside {best}; ')
    assert not out.exists()

    state = model_dir / "checkpoints" / "checkpoint"
    kept_state = state.read_text()
    state.write_text(f'model_checkpoint_path: "{absolute}"\nall_model_checkpoint_paths: "ckpt-6"\n'
                     f'all_model_checkpoint_paths: "{absolute}"\n')
    list_best(("ckpt-12", 2.0))
    result = run_command("-m", "keras_transformer.score", f"--model_dir={model_dir}", f"--source={sentences}",
                         f"--target={sentences}", f"--output={out}")
    assert_one_error_line(result, f'{state}: entry "{absolute}" is outside {model_dir / "checkpoints"}; ')
    assert not out.exists()
    state.write_text(kept_state)

    list_best(("ckpt-12", 98.0), (relative, 99.0))  # any dev loss at step 18 pushes the outside entry out
    resumed = run_command(*train_args(model_dir, *RUN, *MORE, "--keep_best_checkpoints=2", "--eval_every_steps=6",
                                      "--best_checkpoint_metric=loss", flagfile=flagfile))
    assert_one_error_line(resumed, f'{listed}: entry "{relative}" is outside {best}; ')
    assert not (model_dir / "checkpoints" / "ckpt-18.index").exists()
    assert snapshot(other) == untouched  # nothing of the other run deleted (or written)
