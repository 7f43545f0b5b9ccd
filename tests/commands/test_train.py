"""`python -m keras_transformer.train`: bad flags, a tiny run that learns, resume, SIGKILL, multi-worker."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.paths import REPO
from tests.helpers.train_runs import TINY, latest_step, train_args


@pytest.mark.parametrize("flags, fragment", [
    (["--preset=huge"], "unknown preset 'huge'"),
    (["--dataset=multi30k", "--data_dir=/nonexistent/multi30k"], "data_dir /nonexistent/multi30k: no such folder"),
    (["--batch_tokens=100", "--max_length=256"], "batch_tokens=100 is smaller than one sentence"),
    (["--train_steps=0"], "train_steps must be positive, got 0"),
    (["--keep_checkpoints=2", "--average_checkpoints=5"], "average_last (5) needs keep_checkpoints >= it"),
    (["--ema_decay=1"], "ema_decay must be in [0, 1)"),
    (["--dataset=multi30k", "--data_dir=/nonexistent/multi30k", "--tree_targets=placeholders"],
     "tree_targets=placeholders: the targets are trees only with a treebank (dataset ptb), not dataset multi30k_en_de"),
    (["--tree_targets=xx"], "--tree_targets"),
    (["--tokenizer=wordpiece", "--bpe_dropout=0.1"], "bpe_dropout=0.1 needs the bpe tokenizer, not wordpiece"),
    (["--bpe_dropout=1"], "bpe_dropout must be in [0, 1), got 1.0"),
    (["--num_decoder_layers=0"], "--num_decoder_layers=0: 0 is not a positive integer"),
    (["--num_encoder_layers=-1"], "--num_encoder_layers=-1: -1 is not a positive integer"),
    (["--num_layers=0", "--num_decoder_layers=1"], "num_layers must be a positive integer, got 0"),
])
def test_bad_flags_end_with_one_error_line_and_exit_code_2(tmp_path, flags, fragment):
    assert_one_error_line(run_command(*train_args(tmp_path / "run", *flags)), fragment)


def test_batch_tokens_per_replica_smaller_than_one_sentence(tmp_path, flagfile):
    result = run_command(*train_args(tmp_path / "run", "--cpu_replicas=2", "--batch_tokens=40", flagfile=flagfile))
    assert_one_error_line(result, "split over 2 replica(s) and 1 micro-batch(es), leaves 20 tokens")


def test_tiny_run_learns_resumes_and_refuses_another_model(tmp_path, flagfile):
    model_dir = tmp_path / "run"
    # float32 on every host: with --precision=auto (mixed bfloat16 where the CPU has AVX512_BF16 and times
    # bfloat16 products faster) this tiny model at the tiny recipe's peak rate (6.5e-2) in mixed bfloat16
    # stalled near the unigram loss on an Intel host (4.90 -> 4.78 in 60 updates, float32 4.91 -> 4.00;
    # docs/speed.md#precision), so the margin below would test the host's bfloat16 kernels, not that a
    # run learns.
    first = run_command(*train_args(model_dir, "--train_steps=60", "--eval_every_steps=20", "--precision=float32",
                                    flagfile=flagfile))
    assert first.returncode == 0, first.stderr[-2000:]
    history = json.loads((model_dir / "eval" / "history.json").read_text())["evaluations"]
    assert [h["step"] for h in history] == [20, 40, 60]
    assert history[-1]["loss"] < history[0]["loss"] - 0.15, history  # the dev loss improves
    assert "BLEU" in first.stdout and "nrefs:1|case:mixed" in first.stdout
    settings = json.loads((model_dir / "model_config.json").read_text())
    assert settings["model"]["d_model"] == 32 and settings["training"]["train_steps"] == 60
    assert settings["model"]["vocab_size"] <= 500
    tokenizer = model_dir / "tokenizer" / "tokenizer.model"
    stamp = tokenizer.stat().st_mtime_ns

    second = run_command(*train_args(model_dir, "--train_steps=70", "--eval_every_steps=0", "--precision=float32",
                                     flagfile=flagfile))
    assert second.returncode == 0, second.stderr[-2000:]
    assert "resumed at step 60" in second.stdout
    assert "step 70/70" in second.stdout and "step 10/70" not in second.stdout
    assert tokenizer.stat().st_mtime_ns == stamp  # loaded, not retrained
    assert sorted(os.listdir(model_dir / "checkpoints"))[0] == "checkpoint"
    assert (model_dir / "checkpoints" / "ckpt-70.index").exists()

    other = run_command(*train_args(model_dir, "--train_steps=80", "--d_model=64", flagfile=flagfile))
    assert_one_error_line(other, "d_model=32 (saved) vs 64 (flags)")


@pytest.mark.slow
def test_a_run_whose_stacks_differ_in_depth_trains_restores_and_refuses_another_depth(tmp_path, flagfile):
    """--num_encoder_layers=3 --num_decoder_layers=1 over the recipe's --num_layers=2: a few updates,
    the checkpoint holds 3 encoder and 1 decoder layers and restores into that model; a resume may
    spell the depths otherwise, not change them, and --init_from compares each stack's depth."""
    import tensorflow as tf
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    from keras_transformer.run_dir import layout

    model_dir = tmp_path / "run"
    depths = ("--num_encoder_layers=3", "--num_decoder_layers=1")
    short = ("--eval_every_steps=0", "--eval_max_sentences=-1", "--precision=float32")
    first = run_command(*train_args(model_dir, "--train_steps=4", "--checkpoint_every_steps=4", *depths, *short,
                                    flagfile=flagfile))
    assert first.returncode == 0, first.stderr[-2000:]
    model = json.loads((model_dir / "model_config.json").read_text())["model"]
    assert (model["num_layers"], model["num_encoder_layers"], model["num_decoder_layers"]) == (2, 3, 1)
    reader = tf.train.load_checkpoint(str(model_dir / "checkpoints" / "ckpt-4"))
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))

    def node(path):  # the checkpoint's object at "model/encoder_layer_2/...", by its attribute names
        node_id = 0
        for name in path.split("/"):
            node_id = next(child.node_id for child in graph.nodes[node_id].children if child.local_name == name)
        return graph.nodes[node_id]

    stacks = {child.local_name for child in node("model").children if "coder_layer_" in child.local_name}
    assert stacks == {"encoder_layer_0", "encoder_layer_1", "encoder_layer_2", "decoder_layer_0"}
    restored, checkpoint = layout.restore_model(str(model_dir))  # the checkpoint round trip
    assert checkpoint.endswith("ckpt-4") and (len(restored.encoder_layers), len(restored.decoder_layers)) == (3, 1)
    for path, variable in (("encoder_layer_2/feed_forward/inner_dense/_kernel",
                            restored.encoder_layers[2].feed_forward.inner_dense.kernel),
                           ("decoder_layer_0/feed_forward/inner_dense/_kernel",
                            restored.decoder_layers[0].feed_forward.inner_dense.kernel)):
        key = next(a.checkpoint_key for a in node(f"model/{path}").attributes if a.name == "VARIABLE_VALUE")
        np.testing.assert_array_equal(variable.numpy(), reader.get_tensor(key))

    # The same depths spelled otherwise: --num_layers=3 for the encoder. A resume.
    second = run_command(*train_args(model_dir, "--train_steps=5", "--num_layers=3", "--num_decoder_layers=1",
                                     *short, flagfile=flagfile))
    assert second.returncode == 0, second.stderr[-2000:]
    assert "resumed at step 4" in second.stdout and "step 5/5" in second.stdout
    other = run_command(*train_args(model_dir, "--train_steps=6", "--num_encoder_layers=3", *short, flagfile=flagfile))
    assert_one_error_line(other, "holds a different model: num_decoder_layers=1 (saved) vs 2 (flags)")
    started = run_command(*train_args(tmp_path / "new", f"--init_from={model_dir}", "--num_encoder_layers=2",
                                      "--num_decoder_layers=1", *short, flagfile=flagfile))
    assert_one_error_line(started, "a different architecture: num_encoder_layers=3 (there) vs 2 (flags)")
    assert not (tmp_path / "new").exists()


# The two levers of the tests below, in one run: BPE-dropout segments only the training stream (the
# dev pairs are tokenized as always), so the EMA test's dev losses are the moving average's either way.
LEVERS = ("--train_steps=20", "--eval_every_steps=20", "--bpe_dropout=0.1", "--ema_decay=0.9",
          "--eval_max_sentences=-1", "--precision=float32")  # the restored model decodes in float32: the same numbers


@pytest.fixture(scope="module")
def levers_run(tmp_path_factory):
    """A tiny run of 20 updates with --bpe_dropout=0.1 and --ema_decay=0.9 (`LEVERS`), its flag
    file and the training command's result. Tests that run a command on it copy it first."""
    base = tmp_path_factory.mktemp("levers")
    flagfile = base / "tiny.flags"
    flagfile.write_text(TINY)
    model_dir = base / "run"
    trained = run_command(*train_args(model_dir, *LEVERS, flagfile=flagfile))
    assert trained.returncode == 0, trained.stderr[-2000:]
    return model_dir, flagfile, trained


@pytest.mark.slow
def test_a_run_with_bpe_dropout_records_it_trains_and_evaluates(levers_run):
    """BPE-dropout reaches the training stream (the log and model_config.json say so); the run
    trains and evaluates. Whether it learns faster or slower is the recipe's question, measured in
    docs/experiments.md#regularisation: its draws are not seeded, so a margin here would be a coin toss."""
    model_dir, _, trained = levers_run
    assert "BPE-dropout 0.1 (a new segmentation each epoch, not seeded)" in trained.stdout
    assert json.loads((model_dir / "model_config.json").read_text())["data"]["bpe_dropout"] == 0.1
    history = json.loads((model_dir / "eval" / "history.json").read_text())["evaluations"]
    assert [h["step"] for h in history] == [20] and np.isfinite(history[0]["loss"])


@pytest.mark.slow
def test_a_run_with_ema_decay_records_it_and_evaluate_only_scores_the_average(levers_run, tmp_path):
    """The dev loss of the training run's evaluation (the shadow swapped in) is the loss
    `--evaluate_only` finds from the saved checkpoint: both score the moving average."""
    run, flagfile, _ = levers_run
    model_dir = tmp_path / "run"
    shutil.copytree(run, model_dir)  # --evaluate_only writes its translations into the run
    assert json.loads((model_dir / "model_config.json").read_text())["training"]["ema_decay"] == 0.9
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    keys = [name for name, _ in tf.train.list_variables(str(model_dir / "checkpoints" / "ckpt-20"))]
    assert any(name.startswith("ema/shadow/") for name in keys)
    history = json.loads((model_dir / "eval" / "history.json").read_text())["evaluations"]
    evaluated = run_command(*train_args(model_dir, *LEVERS, "--evaluate_only", flagfile=flagfile))
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    line = [line for line in evaluated.stdout.splitlines() if "ckpt-20" in line][-1]
    results = json.loads(line[line.index("{"):])
    assert results["loss"] == pytest.approx(history[-1]["loss"], rel=1e-5)

    # --init_from it: the new run starts from its average, and its own average starts there:
    # after one update, shadow = d_1 * start + (1 - d_1) * weights, d_1 = min(0.9, 2 / 11).
    new = tmp_path / "tuned"
    tuned = run_command(*train_args(new, f"--init_from={model_dir}", "--train_steps=1", "--eval_every_steps=0",
                                    "--ema_decay=0.9", "--eval_max_sentences=-1", "--precision=float32",
                                    flagfile=flagfile))
    assert tuned.returncode == 0, tuned.stderr[-2000:]
    from keras_transformer import Transformer  # pylint: disable=g-import-not-at-top
    from keras_transformer.run_dir import layout  # pylint: disable=g-import-not-at-top

    start = layout.restore_model(str(model_dir))[0].trainable_variables  # the first run's average
    shadow, path = layout.restore_model(str(new))
    weights = Transformer(shadow.config)
    weights.build()
    tf.train.Checkpoint(model=weights).read(path).expect_partial()  # the raw weights of update 1
    d = 2 / 11
    for s, w0, w1 in zip(shadow.trainable_variables, start, weights.trainable_variables):
        np.testing.assert_allclose(s.numpy(), d * w0.numpy() + (1 - d) * w1.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_a_resume_without_ema_decay_keeps_the_moving_average_and_prints_no_tensorflow_warning(levers_run, tmp_path):
    """Left out on a resume, --ema_decay is the run's (one line says so), not 0: the average goes on
    in the new checkpoint and model_config.json, and TensorFlow prints none of its per-variable
    warnings about an unrestored `ema.shadow`. --ema_decay=0 is refused, the run left as it was."""
    run, flagfile, _ = levers_run
    model_dir = tmp_path / "run"
    shutil.copytree(run, model_dir)
    flags = [f for f in LEVERS if not f.startswith(("--ema_decay", "--train_steps"))] + ["--train_steps=21"]
    off = run_command(*train_args(model_dir, *flags, "--ema_decay=0", flagfile=flagfile))
    assert_one_error_line(off, f"--ema_decay=0: {model_dir} keeps a moving average of its weights (--ema_decay=0.9)",
                          "leave the flag out")
    assert not (model_dir / "checkpoints" / "ckpt-21.index").exists()

    resumed = run_command(*train_args(model_dir, *flags, flagfile=flagfile))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"--ema_decay not given: {model_dir} goes on with the moving average it was trained with " \
        "(--ema_decay=0.9)" in resumed.stdout
    assert "resumed at step 20" in resumed.stdout
    assert "ema.shadow" not in resumed.stderr and "unrestored" not in resumed.stderr, resumed.stderr[-2000:]
    assert json.loads((model_dir / "model_config.json").read_text())["training"]["ema_decay"] == 0.9
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    keys = [name for name, _ in tf.train.list_variables(str(model_dir / "checkpoints" / "ckpt-21"))]
    assert any(name.startswith("ema/shadow/") for name in keys)


@pytest.mark.slow
def test_sigkill_mid_run_then_the_same_command_resumes(tmp_path, flagfile):
    model_dir = tmp_path / "run"
    args = train_args(model_dir, "--train_steps=35", "--eval_every_steps=0", "--eval_max_sentences=-1",
                      "--checkpoint_every_steps=7", flagfile=flagfile)
    process = subprocess.Popen([sys.executable, *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    deadline = time.time() + 180
    while time.time() < deadline and (latest_step(model_dir) or 0) < 14:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)  # most likely mid-step, possibly mid-save; 21 of 35 updates left
    process.wait()
    killed_at = latest_step(model_dir)
    assert killed_at and killed_at % 7 == 0 and killed_at < 35
    resumed = run_command(*args, timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resumed at step {killed_at}" in resumed.stdout  # the latest complete checkpoint
    assert '"step": 35' in resumed.stdout and latest_step(model_dir) == 35


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_workers_under_multi_worker_mirrored_strategy_end_with_equal_weights(tmp_path, flagfile):
    import numpy as np  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    model_dir = tmp_path / "run"
    workers = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    processes = []
    for index in range(2):
        tf_config = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
        args = train_args(model_dir, "--train_steps=6", "--eval_every_steps=0", "--eval_max_sentences=-1",
                          "--checkpoint_every_steps=3", "--dropout_rate=0.1", flagfile=flagfile)
        processes.append(subprocess.Popen(
            [sys.executable, *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TF_CONFIG": tf_config}))
        if index == 0:
            time.sleep(0.5)
    outputs = [p.communicate(timeout=400) for p in processes]
    for p, (out, err) in zip(processes, outputs):
        assert p.returncode == 0, err[-3000:]
    assert "CollectiveAllReduceStrategy with 2 replica(s)" in outputs[0][0]  # MultiWorkerMirroredStrategy
    chief = tf.train.load_checkpoint(str(model_dir / "checkpoints" / "ckpt-6"))
    other = tf.train.load_checkpoint(str(model_dir / "workers" / "worker-1" / "ckpt-6"))
    names = [n for n in chief.get_variable_to_shape_map() if "CHECKPOINTABLE" not in n and "save_counter" not in n]
    assert len(names) > 50  # model weights, Adam slots, step
    for name in names:
        np.testing.assert_array_equal(chief.get_tensor(name), other.get_tensor(name))
