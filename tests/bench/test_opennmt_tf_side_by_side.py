"""bench/opennmt_tf_side_by_side.py's pure parts: the peer's configuration has the recipe's shape.

OpenNMT-tf is not installed here, so the peer's parameter count comes from
`peer_config.parameter_count` on the files the writer wrote (model.py's settings, vocab.txt's
size); the harness checks that formula against OpenNMT-tf's own count on every training run, and
`test_formula_against_opennmt_tf` against counts OpenNMT-tf 2.32 printed. Also checked by
behaviour: the recipe reader, the configuration (schedule, batching, tokenizer, vocabulary), the
cool-down schedule written into model.py against the project's, the training consoles' parsing
and throughput, the first update of each console, the speed window and which loss ours runs in
it, a child process's stamps, stop, peak RSS and command line, SIGTERM stopping a child's
process group as Ctrl-C does, the peer venv's constraints, `pip check` and Python guard, the
Markdown table.
"""

import json
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
import types

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from opennmt_tf import corpus, peer_config, peer_venv, processes, recipe, report, training_logs  # noqa: E402
from opennmt_tf import toolkits, train_runs, workspace  # noqa: E402

RECIPE = BENCH.parent / "configs" / "multi30k_en_de.flags"


def sentencepiece_pieces(size):
    """A SentencePiece model's pieces in id order: pad, unk, bos, eos at the project's special ids."""
    return ["<pad>", "<unk>", "<s>", "</s>"] + [f"\u2581w{i}" for i in range(size - 4)]


def written(tmp_path, shape="recipe", options=peer_config.PeerOptions(), training=None):
    the_recipe = recipe.read(str(RECIPE), shape)
    pieces = sentencepiece_pieces(the_recipe.model.vocab_size)
    data = peer_config.DataFiles("train.en", "train.de", "val.en", "val.de")
    files = peer_config.write(str(tmp_path / "peer"), the_recipe.model, training or the_recipe.training,
                              the_recipe.batch_tokens, data, "/tok/tokenizer.model", pieces, options)
    return the_recipe, pieces, files


@pytest.mark.parametrize("shape", ["recipe", "base"])
@pytest.mark.parametrize("pre_norm", [True, False])
def test_peer_parameters_within_one_percent_of_the_project_model(tmp_path, shape, pre_norm):
    the_recipe, pieces, files = written(tmp_path, shape, peer_config.PeerOptions(pre_norm=pre_norm))
    settings = peer_config.read_model_settings(files.model)
    peer = peer_config.parameter_count(settings, peer_config.vocabulary_size(files.vocabulary))
    ours = the_recipe.model.num_parameters
    assert peer_config.vocabulary_size(files.vocabulary) == len(pieces) == the_recipe.model.vocab_size
    assert abs(peer - ours) / ours < 0.01, (peer, ours)
    # The whole difference, named: OpenNMT-tf's output-layer bias, and with pre-LN its two final LayerNorms.
    d = the_recipe.model.d_model
    assert peer - ours == len(pieces) + (2 * 2 * d if pre_norm else 0)
    assert (settings["num_layers"], settings["num_units"], settings["num_heads"], settings["ffn_inner_dim"]) == (
        (4, 128, 4, 256) if shape == "recipe" else (6, 512, 8, 2048))
    assert settings["share_embeddings"] == "ALL" and settings["dropout"] == 0.3
    assert settings["attention_dropout"] == 0.0 and settings["ffn_dropout"] == 0.0


@pytest.mark.parametrize("settings, vocabulary, count", [
    # OpenNMT-tf 2.32's `count_params()` (== the sum of its trainable variables' sizes) of
    # opennmt.models.Transformer(**settings) on a 1,000-line vocabulary (+1 <unk>), TensorFlow 2.12.
    (dict(num_layers=2, num_units=16, num_heads=2, ffn_inner_dim=32, share_embeddings="ALL", pre_norm=True,
          output_layer_bias=True), 1001, 28217),
    (dict(num_layers=2, num_units=16, num_heads=2, ffn_inner_dim=32, share_embeddings="ALL", pre_norm=False,
          output_layer_bias=False), 1001, 27152),
    (dict(num_layers=3, num_units=16, num_heads=2, ffn_inner_dim=24, share_embeddings="NONE", pre_norm=True,
          output_layer_bias=True), 1001, 64233),
])
def test_formula_against_opennmt_tf(settings, vocabulary, count):
    assert peer_config.parameter_count(settings, vocabulary) == count


def test_config_carries_the_recipe(tmp_path):
    the_recipe, pieces, files = written(tmp_path)
    config = json.loads(pathlib.Path(files.config).read_text(encoding="utf-8"))
    params, train = config["params"], config["train"]
    assert params["optimizer"] == "Adam" and params["optimizer_params"] == {"beta_1": 0.9, "beta_2": 0.98,
                                                                            "epsilon": 1e-9}
    assert params["decay_type"] == peer_config.COOLDOWN_SCHEDULE and params["learning_rate"] == 2.5
    assert params["decay_params"] == {"model_dim": 128, "warmup_steps": 2000, "total_steps": 7000,
                                      "cooldown_steps": 3000}
    assert params["label_smoothing"] == 0.1 and params["average_loss_in_time"] is True
    assert (train["batch_size"], train["batch_type"], train["effective_batch_size"]) == (4000, "tokens", None)
    assert (train["max_step"], train["save_checkpoints_steps"], train["average_last_checkpoints"]) == (7000, 500, 3)
    assert train["maximum_features_length"] == train["maximum_labels_length"] == 128
    assert config["eval"]["steps"] == 500
    data = config["data"]
    assert data["source_vocabulary"] == data["target_vocabulary"] == files.vocabulary
    assert data["source_tokenization"] == data["target_tokenization"] == {
        "type": "SentencePieceTokenizer", "params": {"model": "/tok/tokenizer.model"}}
    assert config["model_dir"] == files.model_dir
    vocabulary = pathlib.Path(files.vocabulary).read_text(encoding="utf-8").splitlines()
    assert vocabulary[:4] == ["<blank>", "<s>", "</s>", "\u2581w0"] and vocabulary[-1] == pieces[-1]
    assert not {"<pad>", "<unk>"} & set(vocabulary)


def test_config_text_reads_alike_as_json_and_yaml(tmp_path):
    yaml = pytest.importorskip("yaml")
    _, _, files = written(tmp_path)
    text = pathlib.Path(files.config).read_text(encoding="utf-8")
    assert yaml.safe_load(text) == json.loads(text)  # PyYAML reads "1e-09" as a string; 1.0e-09 as the float
    assert peer_config.to_text({"a": 1e-9, "b": [1e20, 2.5]}) == '{\n "a": 1.0e-09,\n "b": [1.0e+20, 2.5]\n}'


def test_plain_noam_without_cooldown(tmp_path):
    the_recipe = recipe.read(str(RECIPE))
    _, _, files = written(tmp_path, options=peer_config.PeerOptions(cooldown=False))
    params = json.loads(pathlib.Path(files.config).read_text(encoding="utf-8"))["params"]
    assert params["decay_type"] == "NoamDecay" and params["decay_params"] == {"model_dim": 128, "warmup_steps": 2000}
    speed = train_runs.speed_training(types.SimpleNamespace(recipe=the_recipe), 600, 50)
    _, _, files = written(tmp_path / "speed", training=speed)
    config = json.loads(pathlib.Path(files.config).read_text(encoding="utf-8"))
    assert config["params"]["decay_type"] == "NoamDecay"  # a speed run has no cool-down
    assert (config["train"]["max_step"], config["train"]["save_checkpoints_steps"]) == (600, 600)
    assert config["train"]["average_last_checkpoints"] == 0 and config["train"]["save_summary_steps"] == 50


def fake_opennmt():
    """Enough of `opennmt` for model.py's schedule: OpenNMT-tf 2.32's NoamDecay, as in its source."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    class NoamDecay:
        def __init__(self, scale, model_dim, warmup_steps):
            self.scale, self.model_dim = tf.cast(scale, tf.float32), tf.cast(model_dim, tf.float32)
            self.warmup_steps = tf.cast(warmup_steps, tf.float32)

        def __call__(self, step):
            step = tf.cast(step + 1, tf.float32)
            return self.scale * tf.pow(self.model_dim, -0.5) * tf.minimum(
                tf.pow(step, -0.5), step * tf.pow(self.warmup_steps, -1.5))

    schedules = types.SimpleNamespace(NoamDecay=NoamDecay, register_learning_rate_schedule=lambda cls: cls)
    return types.SimpleNamespace(schedules=schedules, models=types.SimpleNamespace())


def test_peer_cooldown_schedule_is_the_projects(tmp_path):
    from keras_transformer.training import schedules  # pylint: disable=import-outside-toplevel

    _, _, files = written(tmp_path)
    namespace = {"opennmt": fake_opennmt(), "__name__": "model"}
    source = pathlib.Path(files.model).read_text(encoding="utf-8").replace("import opennmt\n", "")
    exec(compile(source, files.model, "exec"), namespace)  # noqa: S102
    peer = namespace[peer_config.COOLDOWN_SCHEDULE](2.5, 128, 2000, 7000, 3000)
    for iterations in (0, 999, 1999, 3999, 4000, 5500, 6999):
        ours = float(schedules.learning_rate(iterations + 1, 128, 2000, 2.5, 3000, 7000))
        assert float(peer(iterations)) == pytest.approx(ours, rel=1e-6), iterations


def test_recipe_reader(tmp_path):
    assert recipe.parse_flags("# c\n\n--a=1\n--nob\n--c\n--a=2\n") == {"a": "2", "b": "false", "c": "true"}
    with pytest.raises(ValueError, match="line 1"):
        recipe.parse_flags("a=1\n")
    the_recipe = recipe.read(str(RECIPE))
    assert (the_recipe.model.num_layers, the_recipe.model.d_model, the_recipe.model.layer_norm) == (4, 128, "post")
    assert (the_recipe.training.warmup_steps, the_recipe.training.learning_rate_scale) == (2000, 2.5)
    assert (the_recipe.training.cooldown_steps, the_recipe.training.average_last) == (3000, 3)
    assert the_recipe.tokenizer_flags() == {"dataset": "multi30k", "source_lang": "en", "target_lang": "de",
                                            "tokenizer": "bpe", "vocab_size": "8000", "max_length": "128"}
    base = recipe.read(str(RECIPE), "base")
    assert (base.model.num_layers, base.model.d_model, base.model.num_heads, base.model.d_ff) == (6, 512, 8, 2048)
    assert base.model.vocab_size == 32000 and base.tokenizer_flags()["vocab_size"] == "32000"
    assert base.shape_flags()["d_model"] == "512" and the_recipe.shape_flags() == {}
    with pytest.raises(ValueError, match="batch_tokens"):
        recipe.from_flags({"preset": "base"})


def test_quality_training_keeps_the_shares():
    training = recipe.read(str(RECIPE)).training
    assert train_runs.quality_training(training, 0) is training
    short = train_runs.quality_training(training, 700)
    assert (short.train_steps, short.warmup_steps, short.cooldown_steps) == (700, 200, 300)
    assert (short.eval_every_steps, short.checkpoint_every_steps, short.log_every_steps) == (50, 50, 25)


OURS_LOG = [
    (5.0, "_DefaultDistributionStrategy with 1 replica(s); 2,349,056 parameters; vocabulary 8000; float32"),
    (6.0, "precision auto: mixed_bfloat16 (this CPU has AVX512_BF16: ...)"),
    (10.0, "step 50/600 loss 9.0000 lr 1.0e-04 |g| 1.000 1,000 tok/s ETA 0:01:00"),
    (20.0, "step 100/600 loss 8.0000 lr 1.0e-04 |g| 1.000 4,000 tok/s ETA 0:01:00"),
    (30.0, "step 150/600 loss 7.0000 lr 1.0e-04 |g| 1.000 5,000 tok/s ETA 0:01:00"),
    (50.0, "step 200/600 loss 6.5000 lr 1.0e-04 |g| 1.000 2,000 tok/s ETA 0:01:00"),
    (51.0, "eval step 200: dev loss 6.0 nll 5.9 ppl 300.00 [1 s]"),
]
PEER_LOG = [
    (90.0, "2026-11-29 10:52:10.778000: I runner.py:310] Number of model parameters: 2357568"),
    (90.1, "2026-11-29 10:52:10.782000: I runner.py:310] Number of model weights: 174 (trainable = 174, "
           "non trainable = 0)"),
    (99.0, "2026-11-29 10:52:20.757000: I runner.py:310] Step = 5 ; steps/s = 0.49, tokens/s = 3530 (1693 source, "
           "1837 target) ; Learning rate = 0.000015 ; Loss = 8.993834"),
    (110.0, "2026-11-29 10:52:31.573000: I runner.py:310] Step = 10 ; steps/s = 0.46, tokens/s = 3330 (1575 source, "
            "1755 target) ; Learning rate = 0.000027 ; Loss = 8.967032"),
]


def test_training_consoles():
    ours = training_logs.points("ours", OURS_LOG)
    assert [(p.step, p.tokens_per_second) for p in ours] == [(50, 1000), (100, 4000), (150, 5000), (200, 2000)]
    measured = training_logs.throughput(ours, warmup=100)  # intervals 100-150 (10 s) and 150-200 (20 s)
    assert measured["tokens_per_second"] == pytest.approx((5000 * 10 + 2000 * 20) / 30)
    assert measured["updates_per_second"] == pytest.approx(100 / 30)
    assert (measured["from_update"], measured["to_update"], measured["last_loss"]) == (100, 200, 6.5)
    with pytest.raises(ValueError, match="no progress interval"):
        training_logs.throughput(ours, warmup=200)
    assert training_logs.parameters("ours", OURS_LOG) == 2349056
    assert training_logs.auto_precision(OURS_LOG) == "mixed_bfloat16"
    assert training_logs.first_update("ours", [(3.0, "step 1/3 loss 9 lr 1e-5 |g| 1 9 tok/s ETA 0:00:01")]) == 3.0
    peer = training_logs.points("peer", PEER_LOG)
    assert [(p.step, p.tokens_per_second, p.loss) for p in peer] == [(5, 1837, 8.993834), (10, 1755, 8.967032)]
    assert training_logs.parameters("peer", PEER_LOG) == 2357568
    assert training_logs.first_update("peer", PEER_LOG) is None  # its first progress line is update 5's
    frozen = [PEER_LOG[0], (90.1, "Number of model weights: 174 (trainable = 170, non trainable = 4)")]
    with pytest.raises(ValueError, match="non-trainable"):
        training_logs.parameters("peer", frozen)


def test_child_process_lines_stop_and_peak_rss(tmp_path):
    script = textwrap.dedent("""\
        import sys, time
        block = bytearray(64 * 2**20)  # 64 MB touched: the peak RSS must show it
        for i in range(len(block) // 4096):
            block[i * 4096] = 1
        print("first", flush=True)
        time.sleep(0.2)
        print("second", flush=True)
        time.sleep(60)
        print("never")
        """)
    finished = processes.run([sys.executable, "-c", script], str(tmp_path / "child.log"),
                             stop_when=lambda line: line == "second")
    assert [line for _, line in finished.lines] == ["first", "second"] and finished.stopped
    assert finished.returncode < 0 and finished.seconds < 30
    assert finished.lines[1][0] - finished.lines[0][0] >= 0.15
    assert finished.first(lambda line: line == "second") == finished.lines[1][0]
    assert finished.peak_rss_bytes > 64 * 2**20
    assert "second" in (tmp_path / "child.log").read_text(encoding="utf-8")
    finished.check("stopped on purpose")  # no error
    failed = processes.run([sys.executable, "-c", "print('boom'); raise SystemExit(3)"], str(tmp_path / "f.log"))
    with pytest.raises(RuntimeError, match="status 3"):
        failed.check("the child")


def test_vocabulary_batches_and_venv_refusal(tmp_path):
    assert peer_config.vocabulary_lines(["<pad>", "<unk>", "<s>", "</s>", "a", "b"]) == ["<blank>", "<s>", "</s>",
                                                                                        "a", "b"]
    assert corpus.length_sorted_batches([["a"], ["a", "b", "c"], ["a", "b"], ["c", "d"]], 2) == [[1, 2], [3, 0]]
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "something").write_text("x")
    with pytest.raises(ValueError, match="remove it or give another folder"):
        peer_venv.ensure(str(tmp_path / "venv"), log=lambda line: None)
    assert any(pin.startswith("OpenNMT-tf==2.32.0") for pin in peer_venv.PINS)


def test_markdown_table():
    record = {
        "speed": {
            "float32": {t: {"tokens_per_second": v, "tokens_per_update": 3760.0, "precision": "float32",
                            "rounds": [{"from_update": 100, "to_update": 600}]}
                        for t, v in (("ours", 5000.0), ("peer", 4000.0))},
            "recommended": {"ours": {"tokens_per_second": 8000.0, "precision": "mixed_bfloat16"},
                            "peer": {"tokens_per_second": 4000.0, "precision": "float32"}}},
        "startup": {"ours_float32": {"seconds": 20.0}, "peer_float32": {"seconds": 40.0},
                    "ours_auto": {"seconds": 25.0, "precision": "mixed_bfloat16"}},
        "peak_rss": {"training": {"ours": 2 * 2**30, "peer": None}},
        "parameters": {"ours": 2349056, "peer": 2357568},
    }
    rows = report.rows(record)
    by_measure = {(row.measure, row.unit): row for row in rows}
    assert by_measure[("training, float32", "tokens/s")].ratio == pytest.approx(1.25)
    assert by_measure[("training, recommended precision", "tokens/s")].ratio == pytest.approx(2.0)
    assert by_measure[("start-up to the first update, float32", "s")].ratio == pytest.approx(0.5)
    assert by_measure[("training peak RSS", "MB")].ratio is None
    table = report.markdown(rows)
    lines = table.splitlines()
    assert lines[0].startswith("| measure | unit | ours | OpenNMT-tf | ours / OpenNMT-tf |")
    assert "| training, float32 | tokens/s | 5,000 | 4,000 | 1.25x | higher |" in table
    assert "| training peak RSS | MB | 2,048 | - | - | lower |" in table
    assert "| parameters | parameters | 2,349,056 | 2,357,568 | 1.00x |" in table
    assert len(lines) == 2 + len(rows)
    assert report.Row("x", "s", 1.0, 0.0).ratio is None


def test_serving_rows_say_when_the_outputs_are_not_the_same_work():
    """Short-trained models may stop after a token or run to the length limit: sentences/s then
    compares different searches, and the row's note says so; outputs of like length get no such note."""
    def engine(sentences_per_second, tokens_per_sentence):
        return {"sentences_per_second": sentences_per_second, "output_tokens_per_sentence": tokens_per_sentence,
                "target_tokens_per_second": sentences_per_second * tokens_per_sentence, "export_seconds": 10.0,
                "peak_rss_bytes": 2**30}

    def sentences_notes(ours_tokens, peer_tokens):
        engines = {f"{toolkit}_{kind}": engine(20.0, tokens) for kind in ("saved_model", "ctranslate2")
                   for toolkit, tokens in (("ours", ours_tokens), ("peer", peer_tokens))}
        record = {"serving": {"engines": engines, "sentences": 1000, "batch_size": 32, "repeats": 3,
                              "decoding": {"beam_size": 4}}}
        return [row.note for row in report.rows(record) if row.unit == "sentences/s"]

    unequal = sentences_notes(10.1, 2.0)
    assert len(unequal) == 2 and all("NOT THE SAME WORK: the models' outputs have 10.1 and 2.0 tokens" in note
                                     for note in unequal)
    assert not any("NOT THE SAME WORK" in note for note in sentences_notes(14.2, 13.9))


PEER_STARTUP = [  # OpenNMT-tf 2.32 logging every update (save_summary_steps: 1): update 1, then 2
    (3.474, "2026-11-29 14:40:32.725000: I dataset_ops.py:2481] Training on 29000 examples"),
    (25.158, "2026-11-29 14:40:54.409000: I runner.py:310] Number of model parameters: 2357568"),
    (25.160, "2026-11-29 14:40:54.411000: I runner.py:310] Number of model weights: 174 (trainable = 174, "
             "non trainable = 0)"),
    (25.171, "2026-11-29 14:40:54.422000: I runner.py:310] Step = 1 ; steps/s = 0.05, tokens/s = 1671 (801 source, "
             "870 target) ; Learning rate = 0.000001 ; Loss = 9.112245"),
    (25.402, "2026-11-29 14:40:54.653000: I training.py:176] Saved checkpoint runs/startup-peer-float32/run/ckpt-1"),
    (26.512, "2026-11-29 14:40:55.763000: I runner.py:310] Step = 2 ; steps/s = 0.90, tokens/s = 1702 (815 source, "
             "887 target) ; Learning rate = 0.000002 ; Loss = 9.101004"),
]


def test_first_update_is_the_progress_line_of_update_1():
    assert training_logs.first_update("peer", PEER_STARTUP) == 25.171
    assert [training_logs.is_first_update("peer", line) for _, line in PEER_STARTUP] == [False] * 3 + [True, False,
                                                                                                      False]
    assert not training_logs.is_first_update("peer", "I runner.py:310] Step = 10 ; steps/s = 0.90, tokens/s = 1")
    ours = [(20.0, "_DefaultDistributionStrategy with 1 replica(s); 2,349,056 parameters; vocabulary 8000; float32"),
            (23.0, "step 1/3 loss 9.1000 lr 1.0e-07 |g| 1.000 870 tok/s ETA 0:00:02"),
            (23.4, "step 2/3 loss 9.0000 lr 2.0e-07 |g| 1.000 880 tok/s ETA 0:00:01")]
    assert training_logs.first_update("ours", ours) == 23.0
    assert not training_logs.is_first_update("ours", "step 10/600 loss 9.0000 lr 2.0e-07 |g| 1.000 880 tok/s")
    assert training_logs.first_update("peer", PEER_LOG[:2]) is None  # the parameter count is not an update


def test_a_startup_run_stops_at_the_progress_line_of_update_1(tmp_path):
    """The peer's console fed through a child process: stopped on its `Step = 1` line, as
    `train_runs._startup_run` stops it, with the parameter count already said."""
    script = ("import sys, time\nfor line in sys.argv[1:]:\n    print(line, flush=True)\n"
              "    time.sleep(60 if 'Step = ' in line else 0)\n")  # what follows update 1 would come too late
    finished = processes.run([sys.executable, "-c", script, *(line for _, line in PEER_STARTUP)],
                             str(tmp_path / "startup.log"),
                             stop_when=lambda line: training_logs.is_first_update("peer", line))
    assert finished.stopped and [line for _, line in finished.lines] == [line for _, line in PEER_STARTUP[:4]]
    assert training_logs.first_update("peer", finished.lines) == finished.lines[3][0]
    assert training_logs.parameters("peer", finished.lines) == 2357568


def test_startup_runs_log_every_update(tmp_path):
    the_recipe = recipe.read(str(RECIPE))
    training = train_runs.startup_training(types.SimpleNamespace(recipe=the_recipe), seed=3)
    assert (training.log_every_steps, training.train_steps, training.seed) == (1, 3, 3)
    _, _, files = written(tmp_path, training=training)
    config = json.loads(pathlib.Path(files.config).read_text(encoding="utf-8"))
    assert config["train"]["save_summary_steps"] == 1  # the peer's Step line of update 1


def test_the_speed_window_and_ours_loss_in_it():
    trainer = (BENCH.parent / "keras_transformer" / "training" / "trainer.py").read_text(encoding="utf-8")
    assert int(re.search(r"^COMPILE_LOSS_AFTER = (\d+)", trainer, re.M)[1]) == train_runs.OURS_COMPILE_LOSS_AFTER
    from opennmt_tf import journal  # pylint: disable=import-outside-toplevel

    steps, warmup, _ = journal.SPEED_DEFAULTS["recipe"]
    assert train_runs.ours_loss(warmup, steps) == "compiled"  # the recipe's default window: ours' steady state
    steps, warmup, _ = journal.SPEED_DEFAULTS["base"]
    assert train_runs.ours_loss(warmup, steps) == "uncompiled"
    assert train_runs.ours_loss(100, 600) == "both"  # a journal's window from before the defaults moved
    train_runs.check_window("speed-ours-float32-1", {"from_update": 100, "to_update": 600}, 600, 100, 50)
    with pytest.raises(RuntimeError, match="measured over updates 100-600, not the window"):
        train_runs.check_window("speed-ours-float32-1", {"from_update": 100, "to_update": 600}, 1000, 400, 50)


def speed_record(windows, ours_loss):
    """A record's speed part whose rounds were measured over `windows` (ours float32, the peer's,
    ours auto)."""
    def rounds(window, precision):
        return [{"from_update": window[0], "to_update": window[1], "precision": precision, "round": 1}]

    return {"float32": {"ours": {"tokens_per_second": 5000.0, "tokens_per_update": 3760.0,
                                 "rounds": rounds(windows[0], "float32")},
                        "peer": {"tokens_per_second": 4000.0, "tokens_per_update": 3760.0,
                                 "rounds": rounds(windows[1], "float32")}},
            "recommended": {"ours": {"tokens_per_second": 8000.0, "precision": "mixed_bfloat16",
                                     "rounds": rounds(windows[2], "mixed_bfloat16")},
                            "peer": {"tokens_per_second": 4000.0, "precision": "float32", "same_runs_as": "float32"}},
            "ours_loss": ours_loss}


def test_speed_note_states_the_recorded_window():
    def note(windows, ours_loss):
        return report.rows({"speed": speed_record(windows, ours_loss)})[0].note

    assert note([(400, 1000)] * 3, "compiled") == "target tokens, best of 1 round(s), updates 400-1000"
    assert note([(50, 200)] * 3, "uncompiled").endswith("updates 50-200; ours' loss uncompiled throughout (its "
                                                        "XLA-compiled loss starts later): below its steady state")
    assert "updates 100-600; ours' loss XLA-compiled from inside the window" in note([(100, 600)] * 3, "both")
    assert "updates 100-600 (ours float32 1, OpenNMT-tf float32 1); 400-1000 (ours mixed_bfloat16 1)" in note(
        [(100, 600), (100, 600), (400, 1000)], "both")


def test_every_child_process_keeps_its_command_line(tmp_path):
    space = workspace.Workspace(str(tmp_path), types.SimpleNamespace(repo=str(tmp_path)), None, {}, None, None, None,
                                1, None, lambda line: None)
    command = [sys.executable, "-c", "print('a b')", "two words"]
    space.run("child", command, "ours", "tokenizer")
    space.record_process("ours_saved_model", "ours", "serving_saved_model", [sys.executable, "engine.py", "a b.json"],
                         1.0, 2**20)
    assert [p["command"] for p in space.processes] == [shlex.join(command),
                                                       f"{shlex.join([sys.executable])} engine.py 'a b.json'"]
    assert shlex.split(space.processes[0]["command"]) == command


def test_project_versions_from_installed_metadata(monkeypatch):
    import importlib.metadata  # pylint: disable=import-outside-toplevel
    import platform  # pylint: disable=import-outside-toplevel

    versions = toolkits.project_versions()
    assert list(versions) == ["python", *toolkits.PROJECT_PACKAGES]
    assert versions["python"] == platform.python_version()
    assert versions["tensorflow"] == importlib.metadata.version("tensorflow")

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert set(toolkits.project_versions().values()) - {platform.python_version()} == {None}


STOPPED_BY_A_SIGNAL = textwrap.dedent("""\
    import os, shutil, sys
    sys.path.insert(0, sys.argv[1])
    from opennmt_tf import processes
    work = sys.argv[2]
    processes.stop_on_signals()
    child = ("import os, subprocess, time; sleeper = subprocess.Popen(['sleep', '60']); "
             "print(os.getpid(), sleeper.pid, flush=True); time.sleep(60)")
    try:
        processes.run([sys.executable, "-c", child], os.path.join(work, "child.log"), echo=lambda line: True,
                      prefix="pids ")
    except KeyboardInterrupt as error:
        print("interrupted", error.exit_code, flush=True)
    finally:
        shutil.rmtree(work)
    """)


def _gone(pid: int, seconds: float = 3.0) -> bool:
    """Whether the process `pid` has ended (a zombie waiting for its reaper counts) within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat", encoding="utf-8") as file:
                if file.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_take_ctrl_c_s_path(tmp_path, signum):
    """A harness stopped by SIGTERM or SIGHUP stops its child's process group (the child and what
    it started) and runs its `finally`, as Ctrl-C does."""
    import select  # pylint: disable=import-outside-toplevel

    work = tmp_path / "work"
    work.mkdir()
    harness = subprocess.Popen([sys.executable, "-c", STOPPED_BY_A_SIGNAL, str(BENCH), str(work)],
                               stdout=subprocess.PIPE, text=True, cwd=str(BENCH.parent),
                               env={**os.environ, "PYTHONPATH": str(BENCH.parent)})
    pids = []
    try:
        assert select.select([harness.stdout], [], [], 20)[0], "the child never started"
        line = harness.stdout.readline()
        assert line.startswith("pids "), line
        pids = [int(pid) for pid in line.split()[1:]]
        harness.send_signal(signum)
        output, _ = harness.communicate(timeout=60)  # generous: the host may be busy with another test file
        assert f"interrupted {128 + signum}" in output and harness.returncode == 0
        assert not work.exists()  # its `finally` ran
        assert all(_gone(pid) for pid in pids)  # the child and its `sleep`
    finally:
        for pid in [harness.pid, *pids]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        harness.wait()


def test_peer_constraints_are_the_measured_venv_and_hold_the_pins():
    lines = pathlib.Path(peer_venv.CONSTRAINTS).read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# ") and len(lines) == 60  # a comment, then `pip freeze`'s 59 lines

    def normalized(name):
        return re.sub(r"[-_.]+", "-", name).lower()

    frozen = dict(line.split("==") for line in lines[1:])
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", name) and version for name, version in frozen.items())
    frozen = {normalized(name): version for name, version in frozen.items()}
    assert {normalized(name): version for name, version in (pin.split("==") for pin in peer_venv.PINS)}.items() <= \
        frozen.items()


def test_peer_venv_refuses_a_python_without_tensorflow_2_12_wheels(tmp_path, monkeypatch):
    for version in ((3, 12), (3, 7), (4, 0)):
        with pytest.raises(ValueError) as raised:
            peer_venv.refuse_unsupported_python(None, version)
        assert "Python 3.8 to 3.11" in str(raised.value) and "\n" not in str(raised.value)
    for version in ((3, 8), (3, 11)):
        peer_venv.refuse_unsupported_python(None, version)
    made = tmp_path / "made"
    made.mkdir()
    (made / peer_venv.STAMP).write_text(json.dumps({"pins": list(peer_venv.PINS)}), encoding="utf-8")
    peer_venv.refuse_unsupported_python(str(made), (3, 12))  # a venv the harness made is reused, any Python
    with pytest.raises(ValueError):
        peer_venv.refuse_unsupported_python(str(tmp_path / "absent"), (3, 12))
    created = []
    monkeypatch.setattr(peer_venv.venv, "EnvBuilder", lambda **kwargs: types.SimpleNamespace(create=created.append))
    monkeypatch.setattr(peer_venv, "SUPPORTED_PYTHONS", ((2, 6), (2, 7)))  # this Python, outside
    with pytest.raises(ValueError, match="TensorFlow 2.12 has wheels for Python 2.6 to 2.7 only"):
        peer_venv.ensure(str(tmp_path / "new"), log=lambda line: None)
    assert created == [] and not (tmp_path / "new").exists()


@pytest.mark.parametrize("pip_check", [0, 1])
def test_peer_venv_installs_with_the_constraints_and_pip_check_must_pass(tmp_path, monkeypatch, pip_check):
    calls = []
    versions = {"python": "3.11.7", **{pin.split("==")[0]: pin.split("==")[1] for pin in peer_venv.PINS}}

    def run(command, **kwargs):  # pylint: disable=unused-argument
        calls.append(list(command))
        stdout, status = "", 0
        if command[1:] == ["-m", "pip", "check"]:
            status = pip_check
            stdout = ("tensorflow 2.12.1 has requirement numpy<1.24,>=1.22, but you have numpy 1.26.4.\n" if status
                      else "No broken requirements found.\n")
        elif command[0].endswith("onmt-main"):
            stdout = "usage: onmt-main [-h] ... {train,eval,infer,export,score,average_checkpoints,update_vocab}\n"
        elif command[1] == "-c":
            stdout = json.dumps(versions) + "\n"
        return subprocess.CompletedProcess(command, status, stdout, "")

    monkeypatch.setattr(peer_venv.subprocess, "run", run)
    monkeypatch.setattr(peer_venv.venv, "EnvBuilder", lambda **kwargs: types.SimpleNamespace(create=os.makedirs))
    folder = tmp_path / "venv"
    if pip_check:
        with pytest.raises(RuntimeError) as raised:
            peer_venv.ensure(str(folder), log=lambda line: None)
        assert str(raised.value) == (f"{folder}: `pip check` finds requirements unmet in the peer's venv: tensorflow "
                                     "2.12.1 has requirement numpy<1.24,>=1.22, but you have numpy 1.26.4.")
        assert not (folder / peer_venv.STAMP).exists()  # not reused: the next run refuses the folder
    else:
        assert peer_venv.ensure(str(folder), log=lambda line: None) == versions
        stamp = json.loads((folder / peer_venv.STAMP).read_text(encoding="utf-8"))
        assert stamp["pins"] == list(peer_venv.PINS) and stamp["versions"] == versions
    install = next(c for c in calls if c[3:4] == ["install"] and peer_venv.PINS[0] in c)
    assert install[-len(peer_venv.PINS) - 2:] == ["-c", peer_venv.CONSTRAINTS, *peer_venv.PINS]
