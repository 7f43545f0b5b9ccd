"""bench/opennmt_tf_side_by_side.py's pure parts: the peer's configuration has the recipe's shape.

OpenNMT-tf is not installed here, so the peer's parameter count comes from
`peer_config.parameter_count` on the files the writer wrote (model.py's settings, vocab.txt's
size); the harness checks that formula against OpenNMT-tf's own count on every training run, and
`test_formula_against_opennmt_tf` against counts OpenNMT-tf 2.32 printed. Also checked by
behaviour: the recipe reader, the configuration (schedule, batching, tokenizer, vocabulary), the
cool-down schedule written into model.py against the project's, the training consoles' parsing
and throughput, a child process's stamps, stop and peak RSS, the Markdown table.
"""

import json
import pathlib
import sys
import textwrap
import types

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from opennmt_tf import corpus, peer_config, peer_venv, processes, recipe, report, training_logs  # noqa: E402
from opennmt_tf import train_runs  # noqa: E402

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
    assert training_logs.first_update("peer", PEER_LOG) == 90.0
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
