"""`python -m keras_transformer.score`: log P(target | source) per pair, batched, in input order.

One tiny trained training directory per module (`export_models.make_model_dir`). The scores
are checked against incremental decoding with the key/value cache (the decoding contract),
against the dev NLL of `keras_transformer.training.evaluation`, across token budgets, and through the
command in a subprocess; bad inputs end as one `error:` line found before TensorFlow starts.
"""

import math
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import sequence_scores
from keras_transformer.config import MAX_EXTRA_LENGTH, TransformerConfig
from keras_transformer.training.evaluation import make_loss_fn
from keras_transformer.special_ids import BOS_ID, PAD_ID
from keras_transformer.tasks import scoring as scoring_task
from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.export_models import MAX_LENGTH, make_model_dir

EMPTY_TARGET, EMPTY_SOURCE, BOTH_EMPTY, LONG = 3, 6, 9, 11  # lines (0-based) of the files below


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A trained tiny run, 14 aligned pairs (empty lines and one pair longer than the model's
    max_length among them), and the files of the bad-input cases."""
    root = tmp_path_factory.mktemp("score")
    pairs = make_model_dir(root / "run", steps=60)
    chosen = [list(pair) for pair in pairs[:14]]
    chosen[EMPTY_TARGET][1] = ""
    chosen[EMPTY_SOURCE][0] = ""
    chosen[BOTH_EMPTY] = ["", ""]
    chosen[LONG] = [" ".join(s for s, _ in pairs[20:24]), " ".join(t for _, t in pairs[20:24])]
    (root / "source.txt").write_text("".join(s + "\n" for s, _ in chosen), encoding="utf-8")
    (root / "target.txt").write_text("".join(t + "\n" for _, t in chosen), encoding="utf-8")
    (root / "short.txt").write_text("The dog.\nThe cat.\n", encoding="utf-8")
    (root / "bad.txt").write_bytes(b"Der Hund.\nDie \xffKatze.\n" + b"Der Mann.\n" * 12)
    (root / "existing.txt").write_text("earlier scores\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def scored(root):
    """The run's model and tokenizers, the files' lines and their scores in one large batch."""
    model, checkpoint, source_tokenizer, target_tokenizer = scoring_task.load_run(str(root / "run"))
    source_lines, target_lines = scoring_task.read_pair_lines(str(root / "source.txt"), str(root / "target.txt"))
    ids = (scoring_task.tokenize_lines(source_tokenizer, source_lines),
           scoring_task.tokenize_lines(target_tokenizer, target_lines))
    score_fn = sequence_scores.make_score_fn(model)
    results = sequence_scores.score_corpus(score_fn, *ids, batch_tokens=1 << 20)  # one batch
    return dict(model=model, checkpoint=checkpoint, tokenizers=(source_tokenizer, target_tokenizer),
                lines=(source_lines, target_lines), ids=ids, score_fn=score_fn, results=results)


def ids(tokenizer, line):
    return tokenizer.tokenize([line], add_eos=True)[0].numpy().tolist()


def pad(rows):
    """Id lists -> int32 (N, longest), PAD-padded."""
    return tf.ragged.constant(rows, tf.int32).to_tensor(default_value=PAD_ID)


def cached_log_probs(model, source_ids, target_ids):
    """sum_t log softmax(logits_t)[y_t] of each pair by incremental decoding: encode,
    init_memory, init_cache, then decode_step fed BOS and the gold tokens one at a time (all
    pairs at once, each row's sum stopping at its EOS)."""
    targets = pad(target_ids)  # (B, T)
    encoder_outputs, source_mask = model.encode(pad(source_ids))
    memory = model.init_memory(encoder_outputs, source_mask)
    cache = model.init_cache(len(target_ids), targets.shape[1])
    step_fn = tf.function(model.decode_step)  # one trace: every step has the same shapes
    previous = tf.fill([len(target_ids)], BOS_ID)
    totals = np.zeros(len(target_ids))
    for step in range(targets.shape[1]):
        logits, cache = step_fn(previous, tf.constant(step), cache, memory)  # (B, V)
        log_probs = tf.gather(tf.nn.log_softmax(logits), targets[:, step], batch_dims=1).numpy()  # (B,)
        totals += np.where(targets[:, step].numpy() != PAD_ID, log_probs, 0.0)
        previous = targets[:, step]
    return totals


def test_scores_equal_incremental_decoding_and_the_dev_nll(scored):
    model, (source_tokenizer, target_tokenizer) = scored["model"], scored["tokenizers"]
    source_lines, target_lines = scored["lines"]
    results = scored["results"]
    assert len(results) == len(source_lines) == 14
    source_ids = [ids(source_tokenizer, line) for line in source_lines]
    target_ids = [ids(target_tokenizer, line) for line in target_lines]
    assert len(target_ids[LONG]) > MAX_LENGTH and len(source_ids[LONG]) > MAX_LENGTH  # sinusoids: no limit
    assert [n for _, n in results] == [len(target) for target in target_ids]
    np.testing.assert_allclose([lp for lp, _ in results], cached_log_probs(model, source_ids, target_ids), atol=1e-4)

    # The same sum over the corpus is the dev NLL of evaluation.make_loss_fn (label smoothing 0).
    _, nll, count = make_loss_fn(model, 0.0)(pad(source_ids), pad(target_ids))
    assert float(nll) == pytest.approx(-sum(lp for lp, _ in results), rel=1e-5)
    assert int(count) == sum(n for _, n in results)


def test_empty_lines_have_defined_finite_scores(scored):
    results = scored["results"]
    source_lines, target_lines = scored["lines"]
    assert target_lines[EMPTY_TARGET] == source_lines[EMPTY_SOURCE] == source_lines[BOTH_EMPTY] == ""
    assert results[EMPTY_TARGET][1] == 1 and results[BOTH_EMPTY][1] == 1  # just EOS
    assert results[EMPTY_SOURCE][1] > 1
    for log_prob, _ in results:
        assert math.isfinite(log_prob) and log_prob < 0.0


def test_batching_does_not_change_scores_or_their_order(scored):
    for budget in (1, 40):  # one pair a batch; several batches of several pairs
        results = sequence_scores.score_corpus(scored["score_fn"], *scored["ids"], batch_tokens=budget)
        assert [n for _, n in results] == [n for _, n in scored["results"]]
        np.testing.assert_allclose([lp for lp, _ in results], [lp for lp, _ in scored["results"]], atol=1e-4)


def test_batches_are_length_sorted_and_within_the_token_budget():
    sources = [[5] * n for n in (3, 1, 6, 2, 2, 9)]
    targets = [[6] * n for n in (2, 4, 1, 2, 3, 1)]
    shapes = []

    def fake(source_ids, target_ids):  # log_prob: minus the first source length, to follow the pairs
        shapes.append((tuple(source_ids.shape), tuple(target_ids.shape)))
        lengths = tf.reduce_sum(tf.cast(source_ids > 0, tf.int32), axis=1)
        return -tf.cast(lengths, tf.float32), tf.reduce_sum(tf.cast(target_ids > 0, tf.int32), axis=1)

    done = []
    results = sequence_scores.score_corpus(fake, sources, targets, batch_tokens=8, on_batch=done.append)
    assert results == [(-3.0, 2), (-1.0, 4), (-6.0, 1), (-2.0, 2), (-2.0, 3), (-9.0, 1)]
    # Longest first (by the longer side): 9 alone (over budget), 6, then 1/4 3/2 2/3 2/2 two at a time.
    assert shapes == [((1, 9), (1, 1)), ((1, 6), (1, 1)), ((2, 3), (2, 4)), ((2, 2), (2, 3))]
    assert done == [1, 2, 4, 6]
    assert sequence_scores.token_budget_batches([5, 4, 2, 2, 1], 8) == [slice(0, 1), slice(1, 3), slice(3, 7)]


def test_learned_positions_refuse_pairs_past_max_length():
    learned = TransformerConfig.tiny(positional_encoding="learned", max_length=5)
    sinusoidal = TransformerConfig.tiny(max_length=5)
    source = tf.ragged.constant([[4, 1], [4, 4, 1], [4, 4, 4, 4, 4, 1]], tf.int32)
    target = tf.ragged.constant([[4, 1], [4, 4, 4, 4, 4, 4, 1], [1]], tf.int32)
    assert sequence_scores.too_long(learned, [2, 3, 6], [2, 7, 1]) == [1, 2]
    assert sequence_scores.too_long(sinusoidal, [2, 3, 6], [2, 7, 1]) == []
    scoring_task.check_lengths(sinusoidal, source, target, "src.txt", "tgt.txt")
    with pytest.raises(ValueError, match=r"^tgt\.txt: line 2: 7 tokens .* max_length=5; 2 pair\(s\) are longer"):
        scoring_task.check_lengths(learned, source, target, "src.txt", "tgt.txt")


def test_the_command_writes_one_line_per_pair_in_input_order(root, scored):
    output = root / "scores.tsv"
    result = run_command("-m", "keras_transformer.score", f"--model_dir={root / 'run'}",
                         f"--source={root / 'source.txt'}", f"--target={root / 'target.txt'}", f"--output={output}",
                         "--batch_tokens=64")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == ""
    # stderr is a pipe: no progress bar; a first line naming the model, a last one with the speed.
    stderr = result.stderr.splitlines()
    assert not any(code in result.stderr for code in ("\x1b[", "\r", "\b")), result.stderr[-500:]
    assert stderr[0] == f"scoring 14 pairs with {scored['checkpoint']}" and len(stderr) == 2, stderr
    assert stderr[-1].startswith("14 pairs in ") and stderr[-1].endswith(" pairs/s)")
    rows = [line.split("\t") for line in output.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 14 and all(len(row) == 3 for row in rows)
    log_probs = np.array([float(r[0]) for r in rows])
    tokens = np.array([int(r[1]) for r in rows])
    nlls = np.array([float(r[2]) for r in rows])
    np.testing.assert_allclose(log_probs, [lp for lp, _ in scored["results"]], atol=1e-4)
    assert tokens.tolist() == [n for _, n in scored["results"]]
    np.testing.assert_allclose(nlls, -log_probs / tokens, atol=2e-6)
    # Averaged over tokens, the per-token NLL is the corpus cross-entropy of the other columns.
    assert np.sum(nlls * tokens) / np.sum(tokens) == pytest.approx(-np.sum(log_probs) / np.sum(tokens), abs=1e-5)
    assert all(len(r[0].split(".")[1]) == 6 and len(r[2].split(".")[1]) == 6 for r in rows)


@pytest.mark.parametrize("args, fragment", [
    (["--source={root}/source.txt", "--target={root}/short.txt"], "short.txt: has 2 lines but"),
    (["--source={root}/source.txt", "--target={root}/bad.txt"], "bad.txt: line 2: not UTF-8 text"),
    (["--source={root}/missing.txt", "--target={root}/target.txt"], "missing.txt: no such file"),
    (["--source={root}/source.txt", "--target={root}/target.txt", "--output={root}"], "is a folder, not a file"),
    (["--model_dir={root}/missing_run", "--source={root}/source.txt", "--target={root}/target.txt"],
     "no such training directory"),
])
def test_bad_input_is_one_error_line_and_leaves_the_output_alone(root, args, fragment):
    args = [a.format(root=root) for a in args]
    if not any(a.startswith("--model_dir") for a in args):
        args.append(f"--model_dir={root / 'run'}")
    if not any(a.startswith("--output") for a in args):
        args.append(f"--output={root / 'existing.txt'}")
    before = sorted(os.listdir(root))
    result = run_command("-m", "keras_transformer.score", *args)
    assert_one_error_line(result, fragment)
    assert (root / "existing.txt").read_text(encoding="utf-8") == "earlier scores\n"
    assert sorted(os.listdir(root)) == before  # no temporary file left


def test_score_files_to_stdout_and_its_errors_before_the_model_loads(root, scored, capsys, tmp_path):
    count = scoring_task.score_files(str(root / "run"), str(root / "source.txt"), str(root / "target.txt"),
                                     batch_tokens=100)
    captured = capsys.readouterr()
    assert count == 14
    rows = [line.split("\t") for line in captured.out.splitlines()]
    np.testing.assert_allclose([float(r[0]) for r in rows], [lp for lp, _ in scored["results"]], atol=1e-4)
    assert "\x1b[" not in captured.err  # not a terminal: no progress bar
    assert captured.err.splitlines()[0].startswith("scoring 14 pairs with ")

    existing = root / "existing.txt"
    files = (str(root / "source.txt"), str(root / "target.txt"))
    with pytest.raises(FileNotFoundError, match="nope: no such checkpoint"):
        scoring_task.score_files(str(root / "run"), *files, str(existing), checkpoint=str(root / "nope"))
    no_tokenizer = tmp_path / "run"
    shutil.copytree(root / "run", no_tokenizer, ignore=shutil.ignore_patterns("tokenizer"))
    with pytest.raises(FileNotFoundError, match="no saved tokenizer"):
        scoring_task.score_files(str(no_tokenizer), *files, str(existing))
    with pytest.raises(ValueError, match="is the input"):
        scoring_task.score_files(str(root / "run"), *files, files[1])
    assert existing.read_text(encoding="utf-8") == "earlier scores\n"
    assert scoring_task.format_line(-12.3456784, 9) == "-12.345678\t9\t1.371742"


# Issue 60, group 2: lines longer than the model scores --------------------------------------------------


def test_sinusoids_refuse_pairs_longer_than_any_search_output():
    """Sinusoids have no table to end, but a search of the model outputs at most max_length +
    MAX_EXTRA_LENGTH tokens; past that a pair is refused, naming the file, line, length and limit."""
    sinusoidal = TransformerConfig.tiny(max_length=5)
    limit = 5 + MAX_EXTRA_LENGTH
    assert sequence_scores.max_scorable_length(sinusoidal) == limit
    assert sequence_scores.too_long(sinusoidal, [2, limit, limit + 1], [limit + 1, limit, 1]) == [0, 2]
    source = tf.ragged.constant([[4, 1], [4] * (limit - 1) + [1]], tf.int32)
    target = tf.ragged.constant([[4, 1], [4] * limit + [1]], tf.int32)
    with pytest.raises(ValueError, match=rf"^tgt\.txt: line 2: {limit + 1} tokens \(EOS included\), but the model "
                                         rf"scores at most {limit} a side \(its max_length=5 plus the longest extra "
                                         rf"length a search adds, {MAX_EXTRA_LENGTH}\); 1 pair\(s\) are longer"):
        scoring_task.check_lengths(sinusoidal, source, target, "src.txt", "tgt.txt")


def test_the_command_refuses_a_line_longer_than_the_model_scores_before_the_model_loads(root, scored, tmp_path):
    """A 200,000-word line tried to allocate [1, 2, 600001, 600001] floats (a ResourceExhaustedError
    traceback); a line just past the limit was scored. Both are refused before the checkpoint is
    read, and the output is left as it was."""
    source_tokenizer, target_tokenizer = scored["tokenizers"]
    source_lines, target_lines = (lines[:3] for lines in scored["lines"])
    limit = MAX_LENGTH + MAX_EXTRA_LENGTH
    pieces = len(ids(target_tokenizer, target_lines[0])) - 1  # EOS aside
    target_lines[1] = " ".join([target_lines[0]] * (limit // pieces + 1))  # just past the limit
    source_lines[2] = " ".join(["dog"] * 200_000)
    long_target = len(ids(target_tokenizer, target_lines[1]))
    assert limit < long_target < 2 * limit and len(ids(source_tokenizer, source_lines[2])) > 200_000
    source, target, output = tmp_path / "source.txt", tmp_path / "target.txt", tmp_path / "scores.tsv"
    source.write_text("".join(line + "\n" for line in source_lines), encoding="utf-8")
    target.write_text("".join(line + "\n" for line in target_lines), encoding="utf-8")
    output.write_text("earlier scores\n", encoding="utf-8")
    result = run_command("-m", "keras_transformer.score", f"--model_dir={root / 'run'}", f"--source={source}",
                         f"--target={target}", f"--output={output}")
    assert_one_error_line(result, f"{target}: line 2: {long_target} tokens (EOS included), but the model scores at "
                                  f"most {limit} a side (its max_length={MAX_LENGTH} plus ", "2 pair(s) are longer")
    assert "scoring 3 pairs with" not in result.stderr  # refused before the model loaded
    assert output.read_text(encoding="utf-8") == "earlier scores\n"
    assert sorted(os.listdir(tmp_path)) == ["scores.tsv", "source.txt", "target.txt"]


def test_a_batch_that_runs_out_of_memory_is_one_line_naming_the_files(scored, monkeypatch):
    """The last resort when a batch within the limit still does not fit (a model configured with a
    huge max_length): TensorFlow's ResourceExhaustedError becomes one `ValueError` line."""

    def out_of_memory(model):
        def score(source_ids, target_ids):
            raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[1,2,9,9]")
        return score

    monkeypatch.setattr(sequence_scores, "make_score_fn", out_of_memory)
    with pytest.raises(ValueError, match=r"^src\.txt, tgt\.txt: out of memory scoring 1 pair\(s\) of up to \d+ "
                                         r"source and \d+ target tokens: remove the longest pairs, or lower "
                                         r"--batch_tokens$"):
        scoring_task.score_lines(scored["model"], *scored["tokenizers"], ["A dog runs ."], ["Ein Hund rennt ."],
                                 names=("src.txt", "tgt.txt"))


def test_a_source_read_once_from_a_pipe_scores_as_the_file_does(root, scored):
    """--source=/dev/stdin (as `<(zcat src.gz)` names a pipe): read once, its lines counted then."""
    source = (root / "source.txt").read_text(encoding="utf-8")
    result = run_command("-m", "keras_transformer.score", f"--model_dir={root / 'run'}", "--source=/dev/stdin",
                         f"--target={root / 'target.txt'}", "--output=-", "--batch_tokens=64", stdin=source)
    assert result.returncode == 0, result.stderr[-2000:]
    np.testing.assert_allclose([float(line.split("\t")[0]) for line in result.stdout.splitlines()],
                               [lp for lp, _ in scored["results"]], atol=1e-4)
    short = "".join(source.splitlines(keepends=True)[:2])
    result = run_command("-m", "keras_transformer.score", f"--model_dir={root / 'run'}", "--source=/dev/stdin",
                         f"--target={root / 'target.txt'}", "--output=-", stdin=short)
    assert_one_error_line(result, "target.txt: has 14 lines but /dev/stdin has 2")
