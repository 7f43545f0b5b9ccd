"""`python -m keras_transformer.translate`: from a training directory or an export, scored with sacreBLEU."""

import gzip
import os
import sys

import pytest

from keras_transformer.export import client, serving_module
from keras_transformer.decoding import sorted_batches
from keras_transformer.config import DecodingConfig
from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.export_models import shared_model_dir


def run(*args, stdin=None):
    return run_command("-m", "keras_transformer.translate", *args, stdin=stdin)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("translate")
    pairs = shared_model_dir(tmp_path_factory, root / "run")[:20]
    (root / "source.txt").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (root / "reference.txt").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    translator, _ = serving_module.from_model_dir(str(root / "run"), DecodingConfig())
    serving_module.export_saved_model(translator, str(root / "export"))
    return root


@pytest.fixture(scope="module")
def translated(files):
    """source.txt translated from the training directory into hyp.txt and scored (--batch_size=8),
    once for the module: (the command's result, the hypotheses). The tests that need the plain
    translations take them from here: they do not depend on the batch size (the first test checks
    them against the export's in batches of 5)."""
    result = run(f"--model_dir={files / 'run'}", f"--input={files / 'source.txt'}",
                 f"--output={files / 'hyp.txt'}", f"--reference={files / 'reference.txt'}", "--batch_size=8")
    assert result.returncode == 0, result.stderr[-2000:]
    return result, (files / "hyp.txt").read_text(encoding="utf-8").splitlines()


def test_from_model_dir_with_reference_and_from_export_agree(files, translated):
    result, hypotheses = translated
    report = result.stdout
    assert report.startswith("BLEU = ") and "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in report
    assert [line.split(" = ")[0] for line in report.splitlines()[0::2]] == ["BLEU", "chrF2", "chrF2++"]
    assert "|nc:6|nw:0|" in report and "|nc:6|nw:2|" in report  # chrF and chrF++ signatures
    assert len(hypotheses) == 20
    # stderr is a pipe: no progress bar (ANSI colours, carriage returns), plain lines only.
    stderr = result.stderr
    assert not any(code in stderr for code in ("\x1b[", "\r", "\b")), repr(stderr[-500:])
    assert stderr.splitlines()[-1].startswith("20 sentences in ")
    umask = os.umask(0)
    os.umask(umask)
    assert (files / "hyp.txt").stat().st_mode & 0o777 == 0o666 & ~umask  # as open() makes it, not mkstemp's 0600
    assert not [name for name in os.listdir(files) if ".tmp-" in name]

    # The export (its base folder: the highest version is used), stdin to stdout, another batch size.
    result = run(f"--export_dir={files / 'export'}", "--input=-", "--output=-", "--batch_size=5",
                 stdin=(files / "source.txt").read_text(encoding="utf-8"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == hypotheses
    # Two plain lines, without the tokenizer resource's "normalizer.cc ... precompiled_charsmap is empty".
    assert [line.split(" ")[0] for line in result.stderr.splitlines()] == ["translating", "20"], \
        result.stderr[-1000:]

    # Gzipped input and reference (as corpora are shipped) read as the plain files.
    for name in ("source.txt", "reference.txt"):
        (files / f"{name}.gz").write_bytes(gzip.compress((files / name).read_bytes()))
    result = run(f"--export_dir={files / 'export'}", f"--input={files / 'source.txt.gz'}",
                 f"--output={files / 'hyp_gz.txt'}", f"--reference={files / 'reference.txt.gz'}", "--batch_size=5")
    assert result.returncode == 0, result.stderr[-2000:]
    assert (files / "hyp_gz.txt").read_text(encoding="utf-8").splitlines() == hypotheses
    assert result.stdout.splitlines()[0] == report.splitlines()[0]  # the same BLEU


@pytest.mark.slow
def test_n_best_from_model_dir_and_from_export_agree_and_lead_with_the_best(files, translated):
    """--n_best=3: Moses n-best lines, best first; the first of each sentence is its 1-best
    translation of the same search (beam 4, `translated`), from a training directory and from the export."""
    lines = (files / "source.txt").read_text(encoding="utf-8").splitlines()[:8] + [""]
    (files / "nbest_source.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    outputs = {}
    for source in (f"--model_dir={files / 'run'}", f"--export_dir={files / 'export'}"):
        result = run(source, f"--input={files / 'nbest_source.txt'}", "--output=-", "--n_best=3")
        assert result.returncode == 0, result.stderr[-2000:]
        outputs[source.split("=")[0]] = result.stdout.splitlines()
    assert outputs["--model_dir"] == outputs["--export_dir"]
    rows = [line.split(" ||| ") for line in outputs["--model_dir"]]
    assert all(len(row) == 3 for row in rows)
    by_sentence = {}
    for index, text, score in rows:
        by_sentence.setdefault(int(index), []).append((text, float(score)))
    assert sorted(by_sentence) == list(range(len(lines)))
    assert by_sentence[len(lines) - 1] == [("", 0.0)]  # an empty line: one empty hypothesis
    for hypotheses in list(by_sentence.values())[:-1]:
        assert len(hypotheses) == 3
        assert [score for _, score in hypotheses] == sorted((score for _, score in hypotheses), reverse=True)
    one_best = translated[1][:len(lines) - 1]  # the plain translations of the same first 8 sentences
    assert one_best == [by_sentence[i][0][0] for i in range(len(lines) - 1)]


@pytest.mark.parametrize("args, message", [
    (["--model_dir={root}/run", "--n_best=5", "--input={root}/source.txt"],
     "n_best must be an integer between 1 and beam_size (4), got 5"),
    (["--export_dir={root}/export", "--n_best=9", "--input={root}/source.txt"],
     "n_best must be an integer between 1 and beam_size (4), got 9"),
    (["--model_dir={root}/missing", "--input={root}/source.txt"], "missing"),
    (["--model_dir={root}/run", "--input={root}/missing.txt"], "missing.txt: no such file"),
    (["--export_dir={root}/export", "--beam_size=2", "--input={root}/source.txt"], "--beam_size"),
    (["--export_dir={root}/export", "--moses_bleu_lang=de", "--input={root}/source.txt"], "only with --reference"),
    (["--export_dir={root}/export", "--moses_bleu_lang=d/e", "--input={root}/source.txt",
      "--reference={root}/source.txt"], "--moses_bleu_lang=d/e: expected a language code"),
])
def test_bad_input_is_one_line(files, args, message):
    assert_one_error_line(run(*[a.format(root=files) for a in args]), message)


def test_batches_are_sorted_by_length_and_order_is_restored():
    lines = [b"a b c", b"a", b"a b c d e", b"", b"a b"]
    lengths = [(len(line.split()), len(line)) for line in lines]  # what translate_lines sorts by
    assert sorted_batches.length_sorted_batches(lengths, 2, descending=True) == [[2, 0], [4, 1], [3]]

    def fake(batch):
        import tensorflow as tf  # pylint: disable=g-import-not-at-top
        return {"translations": tf.strings.upper(batch), "scores": tf.cast(tf.strings.length(batch), tf.float32)}

    translations, _ = client.translate_lines(fake, lines, 2, progress=False)
    assert translations == ["A B C", "A", "A B C D E", "", "A B"]


def fake_translate(batch):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    return {"translations": batch, "scores": tf.zeros(tf.shape(batch), tf.float32)}


def test_progress_bar_only_on_a_terminal(capsys, monkeypatch):
    """keras' Progbar always writes ANSI colour codes and redraws with carriage returns; without
    a terminal on stderr (here pytest's capture) nothing of it is written."""
    lines = [b"a", b"b c", b"d"]
    assert client.translate_lines(fake_translate, lines, 2)[0] == ["a", "b c", "d"]
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    client.translate_lines(fake_translate, lines, 2)
    captured = capsys.readouterr()
    assert "\x1b[" in captured.err and "3/3" in captured.err and captured.out == ""




# Sampling and target prefixes ------------------------------------------------------------------

@pytest.mark.slow
def test_sampling_from_model_dir_and_from_export_agree_and_the_seed_decides(files):
    """The same seed and batch size give the same samples from both sources; another seed others;
    temperature 0 is greedy search (--beam_size=1)."""
    sampling = ["--sampling_topk=0", "--sampling_temperature=1.5", "--batch_size=8"]
    outputs = {}
    for source, seed in ((f"--model_dir={files / 'run'}", 1), (f"--export_dir={files / 'export'}", 1),
                         (f"--model_dir={files / 'run'}", 2)):
        result = run(source, f"--input={files / 'source.txt'}", "--output=-", f"--seed={seed}", *sampling)
        assert result.returncode == 0, result.stderr[-2000:]
        outputs[source.split("=")[0], seed] = result.stdout.split("\n")[:-1]  # odd samples hold \x0b, \x1c...
    assert outputs["--model_dir", 1] == outputs["--export_dir", 1]
    assert outputs["--model_dir", 1] != outputs["--model_dir", 2] and len(outputs["--model_dir", 1]) == 20
    greedy = run(f"--model_dir={files / 'run'}", f"--input={files / 'source.txt'}", "--output=-", "--beam_size=1")
    cold = run(f"--model_dir={files / 'run'}", f"--input={files / 'source.txt'}", "--output=-",
               "--sampling_temperature=0", "--seed=5")
    assert cold.returncode == 0, cold.stderr[-2000:]
    assert cold.stdout == greedy.stdout


@pytest.mark.slow
def test_target_prefixes_from_model_dir_and_from_export_agree_and_start_each_translation(files, translated):
    sources = (files / "source.txt").read_text(encoding="utf-8").splitlines()
    plain = translated[1]
    # Every other line gets the first word of another line's translation as its prefix; the rest none.
    prefixes = [plain[(i + 3) % len(plain)].split(" ")[0] if i % 2 else "" for i in range(len(sources))]
    (files / "prefixes.txt").write_text("".join(p + "\n" for p in prefixes), encoding="utf-8")
    outputs = {}
    for source in (f"--model_dir={files / 'run'}", f"--export_dir={files / 'export'}"):
        result = run(source, f"--input={files / 'source.txt'}", "--output=-",
                     f"--target_prefix_file={files / 'prefixes.txt'}")
        assert result.returncode == 0, result.stderr[-2000:]
        outputs[source.split("=")[0]] = result.stdout.splitlines()
    assert outputs["--model_dir"] == outputs["--export_dir"]
    for translation, prefix, alone in zip(outputs["--model_dir"], prefixes, plain):
        assert translation.startswith(prefix)
        if not prefix:
            assert translation == alone


@pytest.mark.parametrize("args, message", [
    (["--sampling_topp=0"], "--sampling_topp must be in (0, 1], got 0.0"),
    (["--sampling_topp=1.5"], "--sampling_topp must be in (0, 1]"),
    (["--sampling_temperature=-1"], "--sampling_temperature must be >= 0"),
    (["--sampling_topk=-1"], "--sampling_topk must be an integer >= 0"),
    (["--seed=3"], "--seed: only with --sampling_topk"),
    (["--sampling_topk=5", "--beam_size=4"], "sampling draws one translation per sentence"),
    (["--sampling_topk=5", "--n_best=2"], "sampling draws one translation per sentence"),
    (["--sampling_topk=5", "--target_prefix_file={root}/source.txt"], "--target_prefix_file: not with sampling"),
    (["--n_best=2", "--target_prefix_file={root}/source.txt"], "--target_prefix_file: not with --n_best"),
    (["--target_prefix_file={root}/missing.txt"], "--target_prefix_file={root}/missing.txt: no such file"),
    (["--target_prefix_file={root}/one_line.txt"], "has 1 target prefixes but the input"),
])
def test_bad_sampling_and_prefix_flags_are_one_line(files, args, message):
    (files / "one_line.txt").write_text("Ein\n", encoding="utf-8")
    args = [a.format(root=files) for a in args]
    assert_one_error_line(run(f"--model_dir={files / 'run'}", f"--input={files / 'source.txt'}", *args),
                          message.format(root=files))


@pytest.mark.slow
def test_an_input_read_once_from_a_pipe_is_checked_against_the_reference_once(files, translated):
    """--input=/dev/stdin (as `<(zcat test.en.gz)` names a pipe) with a --reference: read once, so
    the line counts are compared then; /dev/null is an empty input."""
    _, hypotheses = translated
    source = (files / "source.txt").read_text(encoding="utf-8")
    result = run(f"--model_dir={files / 'run'}", "--input=/dev/stdin", "--output=-", "--batch_size=8",
                 stdin=source)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == hypotheses
    result = run(f"--model_dir={files / 'run'}", "--input=/dev/stdin", "--output=-",
                 f"--reference={files / 'reference.txt'}", stdin="".join(source.splitlines(keepends=True)[:3]))
    assert_one_error_line(result, "but the input (/dev/stdin) has 3")
    result = run(f"--model_dir={files / 'run'}", "--input=/dev/null", f"--output={files / 'empty.txt'}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert (files / "empty.txt").read_bytes() == b""
