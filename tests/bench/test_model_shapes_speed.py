"""bench/model_shapes_speed.py: several models of different depths, each engine in a process of its own.

Two tiny trained training directories (`export_models.shared_model_dir`) of different shapes and
tokenizers, 2+2 layers and 2+1 layers, on a few sentences of the embedded grammar corpus. Checked:
the record has both models in the order given, both engines of each, each in a process of its own,
speed ratios of 1 for the first model and the ratio of times for the other, the parameters of each
stack as `TransformerConfig` counts them (and as Keras does), BLEU in both conventions, and greedy
search giving the same translations in the SavedModel and in CTranslate2; bad input is refused
with one `error:` line and exit 2 before anything is exported.
"""

import json
import shutil

import pytest

pytest.importorskip("ctranslate2")

from tests.helpers.commands import assert_one_error_line, run_command  # noqa: E402

SCRIPT = "bench/model_shapes_speed.py"
SENTENCES = 5


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{"deep": a 2+2 training directory, "shallow": a 2+1 one with a tokenizer of its own,
    "input", "reference": SENTENCES lines each}."""
    from keras_transformer.pipelines import grammar_corpus  # pylint: disable=import-outside-toplevel
    from tests.helpers.export_models import shared_model_dir  # pylint: disable=import-outside-toplevel

    root = tmp_path_factory.mktemp("model_shapes")
    shared_model_dir(tmp_path_factory, root / "deep")
    shared_model_dir(tmp_path_factory, root / "shallow", seed=1, num_decoder_layers=1)
    pairs = grammar_corpus.generate_pairs(SENTENCES, seed=7)
    (root / "source.en").write_text("".join(f"{source}\n" for source, _ in pairs), encoding="utf-8")
    (root / "reference.de").write_text("".join(f"{target}\n" for _, target in pairs), encoding="utf-8")
    return {name: root / name for name in ("deep", "shallow")} | {
        "input": root / "source.en", "reference": root / "reference.de", "root": root}


@pytest.mark.slow
def test_every_model_and_engine_is_timed_against_the_first_model(runs, tmp_path):
    from keras_transformer.config import TransformerConfig  # pylint: disable=import-outside-toplevel

    out = tmp_path / "shapes.json"
    result = run_command(SCRIPT, f"--model_dirs=deep:{runs['deep']},shallow:{runs['shallow']}",
                         f"--input={runs['input']}", f"--reference={runs['reference']}", "--beam_size=1",
                         "--max_extra_length=10", "--batch_size=2", "--repeats=1", "--alphas=shallow:1.8",
                         f"--out={out}", timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    record = json.loads(out.read_text(encoding="utf-8"))
    assert json.loads(result.stdout.strip().splitlines()[-1]) == record
    assert (record["baseline"], record["sentences"], record["batches"]) == ("deep", SENTENCES, 3)
    assert [model["label"] for model in record["models"]] == ["deep", "shallow"]
    deep, shallow = record["models"]
    assert (deep["encoder_layers"], deep["decoder_layers"]) == (2, 2)
    assert (shallow["encoder_layers"], shallow["decoder_layers"]) == (2, 1)
    assert (record["decoding"]["alpha"], deep["alpha"], shallow["alpha"]) == (0.6, 0.6, 1.8)  # --alpha, --alphas
    pids = set()
    for model in record["models"]:
        config = TransformerConfig.from_dict(model["model"])
        assert model["parameters"] == {"encoder": config.encoder_parameters, "decoder": config.decoder_parameters,
                                       "embeddings": config.embedding_parameters, "total": config.num_parameters,
                                       "count_params": config.num_parameters}
        assert set(model["engines"]) == {"saved_model", "ct2_float32"}
        assert model["identical_outputs"] == SENTENCES  # greedy search: the same translation everywhere
        for engine, row in model["engines"].items():
            assert row["sentences_per_second"] > 0 and len(row["seconds_per_round"]) == 1
            assert row["target_tokens"] > SENTENCES  # more than an EOS each: translations are not empty
            assert 0 <= row["bleu"] <= 100 and 0 <= row["bleu_lc_moses"] <= 100
            assert (row["process"]["gemm_backend"] is not None) == (engine == "ct2_float32")
            pids.add(row["process"]["pid"])
    assert len(pids) == 4  # one process per engine
    assert shallow["parameters"]["decoder"] < deep["parameters"]["decoder"]
    assert shallow["parameters"]["encoder"] == deep["parameters"]["encoder"]
    for engine in ("saved_model", "ct2_float32"):
        assert deep["engines"][engine]["speed_over_baseline"] == 1.0
        assert deep["engines"][engine]["paired_speed_over_baseline"] == 1.0
        assert shallow["engines"][engine]["speed_over_baseline"] == pytest.approx(
            deep["engines"][engine]["wall_seconds"] / shallow["engines"][engine]["wall_seconds"])
    assert record["bleu_signature"].startswith("nrefs:1|case:mixed")
    assert "moses-tok-de" in record["moses_bleu_signature"]
    assert "| deep | 2-2 | none | 0.6 |" in result.stdout and "| shallow | 2-1 | none | 1.8 |" in result.stdout


@pytest.mark.parametrize("model_dirs, input_name, reference_lines, fragments", [
    ("", "source.en", None, ["--model_dirs: no model"]),
    ("a:{root}/deep,a:{root}/shallow", "source.en", None, ["the label a given more than once"]),
    ("{root}/deep", "source.en", None, ["is not LABEL:TRAINING_DIRECTORY"]),
    ("a.b:{root}/deep", "source.en", None, ["the label 'a.b' may hold only"]),
    ("a:{root}/missing", "source.en", None, ["--model_dirs=", "missing: no such training directory"]),
    ("a:{root}/deep", "missing.en", None, ["--input=", "missing.en"]),
    ("a:{root}/deep", "source.en", 2, ["has 2 lines but --input="]),
    ("a:{root}/deep --alphas=b:1.0", "source.en", None, ["--alphas: 'b' is not a label of --model_dirs"]),
    ("a:{root}/deep --alphas=a:long", "source.en", None, ["--alphas: a's alpha 'long' is not a number >= 0"]),
    ("a:{root}/deep --alphas=a:1,a:2", "source.en", None, ["--alphas: 'a' given more than once"]),
])
def test_bad_input_is_one_error_line(tmp_path, model_dirs, input_name, reference_lines, fragments):
    """Refused before TensorFlow starts (the training directories need not hold a run here)."""
    (tmp_path / "source.en").write_text("A dog runs.\nA cat sleeps.\nTwo men walk.\n", encoding="utf-8")
    model_dirs, *more = model_dirs.split(" ")
    args = [f"--model_dirs={model_dirs.format(root=tmp_path)}", *more, f"--input={tmp_path / input_name}"]
    if reference_lines:
        (tmp_path / "reference.de").write_text("Ein Satz.\n" * reference_lines, encoding="utf-8")
        args.append(f"--reference={tmp_path / 'reference.de'}")
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "model_config.json").write_text("{}", encoding="utf-8")
    assert_one_error_line(run_command(SCRIPT, *args, f"--work_dir={tmp_path / 'work'}"), *fragments)
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize("removed, fragment", [("checkpoints", "no checkpoint"), ("tokenizer", "no saved tokenizer")])
def test_a_run_without_checkpoint_or_tokenizer_is_refused_before_any_export(runs, tmp_path, removed, fragment):
    broken = tmp_path / "broken"
    shutil.copytree(runs["shallow"], broken)
    shutil.rmtree(broken / removed)
    work = tmp_path / "work"
    result = run_command(SCRIPT, f"--model_dirs=good:{runs['deep']},broken:{broken}", f"--input={runs['input']}",
                         f"--work_dir={work}", timeout=300)
    assert_one_error_line(result, str(broken), fragment)
    assert not work.exists() or not any(work.iterdir())  # nothing exported, no worker started
