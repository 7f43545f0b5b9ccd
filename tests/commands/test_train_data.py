"""`python -m keras_transformer.train` on the user's own data: --train_files, --cache, --init_from."""

import hashlib
import json
import os

import pytest

from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.files import write_lines
from tests.helpers.summaries import read_scalars
from tests.helpers.train_runs import train_args


def _write_corpus(folder, stem, pairs):
    folder.mkdir(parents=True, exist_ok=True)
    write_lines(folder / f"{stem}.en", [s for s, _ in pairs])
    write_lines(folder / f"{stem}.de", [t for _, t in pairs])
    return str(folder / stem) + ".{en,de}"


def _snapshot(folder):
    """{relative path: sha256} of every file under `folder` (None if it does not exist)."""
    if not os.path.exists(folder):
        return None
    return {os.path.relpath(os.path.join(root, name), folder):
            hashlib.sha256(open(os.path.join(root, name), "rb").read()).hexdigest()
            for root, _, names in os.walk(folder) for name in names}


@pytest.mark.parametrize("flags, fragment", [
    (["--train_files=web:{data}/web-*.{{en,de}}"], "web-001.de: no such file (the target shard of"),
    (["--train_files=web:{data}/none-*.{{en,de}}"], "none-*.en: matches no file"),
    (["--train_files=web:{data}/web-*.{{en,de}}:0"], "weight 0 must be a positive number"),
    (["--train_files=web:wikipedia:0.5"], "unknown corpus 'wikipedia'"),
    (["--train_files=web:{data}/bad.{{en,de}}"], "bad.en: line 2: not UTF-8 text"),
    (["--cache=ram"], "--cache=ram: value should be one of"),
    (["--shuffle_buffer=0"], "--shuffle_buffer"),
])
def test_bad_data_flags_end_with_one_error_line(tmp_path, flags, fragment):
    data = tmp_path / "data"
    _write_corpus(data, "web-000", [("a .", "A .")])
    (data / "web-001.en").write_text("b .\n")
    (data / "bad.en").write_bytes(b"fine\nnot \xff utf-8\n")
    (data / "bad.de").write_text("gut\nnicht\n")
    result = run_command(*train_args(tmp_path / "run", *[f.format(data=data) for f in flags]), timeout=120)
    assert_one_error_line(result, fragment)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_fine_tune_from_a_run_on_mixed_corpora(tmp_path, flagfile):
    """--init_from: the first loss of the new run is the old model's loss on that batch; a fresh
    optimizer and step; a mismatched architecture changes nothing in either directory. (That the
    same command then resumes the new run is the resume of any run, `test_train.py`.) The old run
    trains with source word dropout and the new one without: a training setting, not a shape."""
    old, new = tmp_path / "old", tmp_path / "new"
    first = run_command(*train_args(old, "--train_steps=3", "--eval_every_steps=0", "--eval_max_sentences=-1",
                              "--source_word_dropout_rate=0.2", flagfile=flagfile))
    assert first.returncode == 0, first.stderr[-2000:]

    before = _snapshot(old)
    mismatch = run_command(*train_args(new, f"--init_from={old}", "--d_model=64", flagfile=flagfile))
    assert_one_error_line(mismatch, "a different architecture: d_model=32 (there) vs 64 (flags)")
    assert _snapshot(old) == before and _snapshot(new) is None

    from keras_transformer.pipelines import sources  # the second corpus: held-out pairs, mixed with the embedded corpus
    corpus = _write_corpus(tmp_path / "data", "news", sources.load_pair_list("embedded", "test")[:300])
    flags = [f"--init_from={old}", f"--train_files=news:{corpus}:0.8,emb:embedded:0.2", "--train_steps=4",
             "--log_every_steps=1", "--checkpoint_every_steps=4", "--eval_max_sentences=-1",
             "--learning_rate_scale=0.5", "--shuffle_buffer=5000",
             "--precision=float32"]  # the loss recomputed below is float32's (auto is bfloat16 on some hosts)
    second = run_command(*train_args(new, *flags, flagfile=flagfile))
    assert second.returncode == 0, second.stderr[-2000:]
    assert "starting at step 0 from the weights of" in second.stdout and "(fresh optimizer)" in second.stdout
    assert "input: cache memory (auto: 0.0 MiB of training text <= 256 MiB), shuffle buffer 5,000; corpora " \
        "news 80.0%, emb 20.0%" in second.stdout
    assert "sampled pairs: news " in second.stdout and "step 4/4" in second.stdout
    assert _snapshot(old) == before  # the run started from is read, never written
    old_settings = json.loads((old / "model_config.json").read_text())
    settings = json.loads((new / "model_config.json").read_text())
    assert settings["tokenizer"] == old_settings["tokenizer"]  # the same tokenizer, copied
    assert settings["init_from"]["checkpoint"].endswith("ckpt-3")  # the old run's last (its only) save
    assert settings["training"]["learning_rate_scale"] == 0.5  # training settings may differ
    assert (old_settings["model"]["source_word_dropout_rate"], settings["model"]["source_word_dropout_rate"]) == \
        (0.2, 0.0)

    import tensorflow as tf
    reader = tf.train.load_checkpoint(str(new / "checkpoints" / "ckpt-4"))
    assert reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE") == 4
    assert reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == 4  # not 3 + 4
    train = read_scalars(str(new / "train"))
    from keras_transformer.training.schedules import learning_rate
    assert train["learning_rate"][1] == pytest.approx(float(learning_rate(1, 32, 30, 0.5)), rel=1e-6)  # step 1 again

    # The first update's loss, recomputed: the old model on the new run's first batch.
    from keras_transformer.run_dir import layout
    from keras_transformer.losses import decoder_inputs, label_smoothed_cross_entropy
    from keras_transformer.pipelines import batching, corpora, tokenizers
    from keras_transformer.pipelines.data_config import DataConfig
    tokenizer, _ = tokenizers.load_pair(str(new / "tokenizer"))
    import keras
    keras.utils.set_random_seed(settings["training"]["seed"])  # as the trainer does before its pipeline
    data = DataConfig(**{**settings["data"], "train_files": corpora.parse_train_files(
        [f"news:{corpus}:0.8,emb:embedded:0.2"])})
    batches = batching.make_dataset(data.training_pairs(), tokenizer, data.batch_tokens, data.max_length,
                                    shuffle=True, seed=data.seed * 1_000_003, repeat=True,
                                    shuffle_buffer=data.shuffle_buffer, cache="memory")
    source_ids, target_ids = next(iter(batches))
    model, checkpoint = layout.restore_model(str(old))
    assert checkpoint.endswith("ckpt-3")
    logits = model((source_ids, decoder_inputs(target_ids)), training=False)
    loss_sum, tokens = label_smoothed_cross_entropy(target_ids, logits, model.config.label_smoothing)
    assert train["loss"][1] == pytest.approx(float(loss_sum / tokens), rel=1e-5)


def test_init_from_names_a_run_or_a_checkpoint(tmp_path):
    from keras_transformer.tasks.fine_tuning import InitSource
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no such training directory or checkpoint prefix"):
        InitSource.resolve(str(tmp_path / "nowhere"), str(tmp_path / "new"))
    with pytest.raises(ValueError, match=r"no checkpoint in checkpoints/ or averaged/"):
        InitSource.resolve(str(run_dir), str(tmp_path / "new"))
    (run_dir / "checkpoints" / "ckpt-3.index").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="ckpt-3"):  # damaged: named, never read into a model
        InitSource.resolve(str(run_dir / "checkpoints" / "ckpt-3"), str(tmp_path / "new"))


@pytest.mark.slow
def test_best_checkpoints_through_the_command_and_a_run_started_from_them(tmp_path, flagfile, ptb):
    """--keep_best_checkpoints by dev loss: the list and its average at the end; a run started
    from that run (--init_from) starts from the averaged best weights and keeps a list of its own.
    A placeholder parsing run cannot start from it (its tokenizer splits "XX"), refused before the
    tokenizer is copied even where the run recorded no --tree_targets (one from before the flag)."""
    old, new = tmp_path / "old", tmp_path / "new"
    common = ["--eval_every_steps=4", "--eval_max_sentences=-1", "--keep_best_checkpoints=2",
              "--best_checkpoint_metric=loss"]
    first = run_command(*train_args(old, "--train_steps=12", "--average_checkpoints=2", *common, flagfile=flagfile))
    assert first.returncode == 0, first.stderr[-2000:]
    listed = json.loads((old / "best" / "best.json").read_text())["checkpoints"]
    assert len(listed) == 2 and {e["step"] for e in listed} <= {4, 8, 12}
    assert listed[0]["value"] <= listed[1]["value"]  # best (lowest dev loss) first
    history = {r["step"]: r["loss"] for r in json.loads((old / "eval" / "history.json").read_text())["evaluations"]}
    assert sorted(history.values())[:2] == [e["value"] for e in listed]  # the two best evaluations
    steps = ", ".join(str(s) for s in sorted(e["step"] for e in listed))
    assert f"averaged the best 2 checkpoints, steps {steps}, into {old / 'averaged' / 'ckpt-12'}" in first.stdout
    assert json.loads(first.stdout.splitlines()[-1].split("done: ", 1)[1])["best_loss"] == listed[0]["value"]

    before = _snapshot(old)
    second = run_command(*train_args(new, f"--init_from={old}", "--train_steps=8", *common, flagfile=flagfile))
    assert second.returncode == 0, second.stderr[-2000:]
    assert json.loads((new / "model_config.json").read_text())["init_from"]["checkpoint"] == \
        str(old / "averaged" / "ckpt-12")
    assert {e["step"] for e in json.loads((new / "best" / "best.json").read_text())["checkpoints"]} <= {4, 8}
    assert _snapshot(old) == before

    config = old / "model_config.json"
    recorded = json.loads(config.read_text())
    del recorded["data"]["tree_targets"]
    config.write_text(json.dumps(recorded))
    refused = run_command(*train_args(tmp_path / "parser", f"--init_from={old}", "--dataset=ptb", f"--data_dir={ptb}",
                                      "--tree_targets=placeholders", flagfile=flagfile))
    assert_one_error_line(refused, "--tree_targets=placeholders: the run's tokenizer writes the placeholder 'XX' as")
    assert not (tmp_path / "parser" / "tokenizer").exists()


def test_ranking_by_bleu_without_dev_bleu_is_refused_before_any_work(tmp_path, flagfile):
    result = run_command(*train_args(tmp_path / "run", "--keep_best_checkpoints=2", "--eval_max_sentences=-1",
                                     flagfile=flagfile), timeout=120)
    assert_one_error_line(result, "--eval_max_sentences=-1 turns off")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flags, fragment", [
    (["--best_checkpoint_metric=f1", "--keep_best_checkpoints=2"],
     "--best_checkpoint_metric=f1 ranks by the dev EVALB F1 of a parsing run, but --dataset=embedded"),
    (["--best_checkpoint_metric=f1", "--early_stopping_patience=3", "--dataset=ptb", "--data_dir={ptb}",
      "--eval_max_sentences=-1"], "rank by dev EVALB F1, which --eval_max_sentences=-1 turns off"),
])
def test_ranking_by_f1_without_a_parsing_dev_evaluation_is_refused_before_any_work(tmp_path, flagfile, ptb, flags,
                                                                                  fragment):
    result = run_command(*train_args(tmp_path / "run", *[f.format(ptb=ptb) for f in flags], flagfile=flagfile),
                         timeout=120)
    assert_one_error_line(result, fragment)
    assert not (tmp_path / "run").exists()


def test_a_data_dir_named_with_glob_characters_is_a_folder_not_a_pattern(tmp_path, flagfile):
    """--data_dir="ünï [x]*" holds the files, as a --model_dir of that name holds a run: the run
    trains on them. Spelled as a glob pattern matching that folder (glob.escape), it names no folder."""
    import glob  # pylint: disable=g-import-not-at-top

    from keras_transformer.pipelines import sources  # pylint: disable=g-import-not-at-top

    data = tmp_path / "ünï [x]*"
    for split, count in (("train", 400), ("validation", 20), ("test", 20)):
        _write_corpus(data, split, sources.load_pair_list("embedded", split)[:count])
    files = ["--dataset=files", "--source_file={split}.en", "--target_file={split}.de", "--train_steps=1",
             "--eval_every_steps=0", "--eval_max_sentences=-1"]
    escaped = run_command(*train_args(tmp_path / "escaped", f"--data_dir={glob.escape(str(data))}", *files,
                                      flagfile=flagfile), timeout=120)
    assert_one_error_line(escaped, f"data_dir {glob.escape(str(data))}: no such folder")
    trained = run_command(*train_args(tmp_path / "run", f"--data_dir={data}", *files, flagfile=flagfile))
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert "step 1/1" in trained.stdout
    assert json.loads((tmp_path / "run" / "model_config.json").read_text())["data"]["data_dir"] == str(data)
