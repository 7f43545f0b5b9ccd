"""Parsing end to end (section 6.3): train on the treebank, dev F1 in the log, parse, export, parse again.

One tiny parsing run per module, trained by the training command on the sample treebank's
(sentence, linearized tree) pairs, with the levers of issue 32 on together: predicted
part-of-speech tags in the source (`--source_tags=predicted`, Vinyals et al. 2015), placeholder
targets (`--tree_targets=placeholders`, each word "XX"), evaluated during training under the tree
constraint, and the best checkpoint by dev EVALB F1 (`--best_checkpoint_metric=f1`). (Targets with
the words kept, the recipe's form, are trained and parsed in notebook 05's test, and the
tree-constraint tests decode both forms.)
Checked: the dev evaluation reports EVALB F1 and no repair beside BLEU (console and
eval/history.json), and that F1 ranks MODEL_DIR/best; the run keeps its tagger, and its export a
copy; `python -m keras_transformer.parse` from the training directory and from its SavedModel
writes the same trees, each over exactly its sentence's words, none repaired, and the F1 it
prints is the one recomputed from the trees it wrote; both use section 6.3's decoding (beam 21,
alpha 0.3, input + 300) without being told; the SavedModel's own outputs through both loaders
equal the in-process Translator's, one XX per word. Needs ../shared/data (skips without it).
"""

import json
import re

import nltk
import pytest

from tasks import parsing
from tests.helpers.commands import run_command

SENTENCES = 8  # of the test split, parsed by each path


def run(module, *args):
    """`python -m MODULE ARGS...`, which must succeed."""
    result = run_command("-m", module, *args, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def train_tiny_parser(ptb, model_dir, *flags):
    """40 updates of the tiny recipe on the treebank, evaluated at the end: (model_dir, its log)."""
    result = run("keras_transformer.train", "--flagfile=configs/tiny.flags", "--dataset=ptb", f"--data_dir={ptb}",
                 f"--model_dir={model_dir}", "--split_by_script=false", "--vocab_size=1000", "--max_length=200",
                 "--batch_tokens=2400", "--train_steps=40", "--eval_every_steps=40", "--eval_max_sentences=8",
                 "--eval_max_extra_length=40", "--checkpoint_every_steps=40", *flags)
    return model_dir, result.stdout + result.stderr


@pytest.fixture(scope="module")
def run_dir(ptb, tmp_path_factory):
    """A tiny parsing model with source tags and placeholder targets, its best checkpoint by dev F1
    under the tree constraint."""
    return train_tiny_parser(ptb, tmp_path_factory.mktemp("parse") / "run", "--source_tags=predicted",
                             "--tree_targets=placeholders", "--eval_tree_constraint",
                             "--keep_best_checkpoints=1", "--best_checkpoint_metric=f1")


@pytest.fixture(scope="module")
def files(ptb, tmp_path_factory):
    """The first sentences of the test split, one per line, and their gold trees (tags included)."""
    root = tmp_path_factory.mktemp("parse_files")
    gold = parsing.Gold.from_treebank(str(ptb), "test").take(SENTENCES)
    (root / "sentences.txt").write_text("".join(s.sentence + "\n" for s in gold.sentences), encoding="utf-8")
    (root / "gold.trees").write_text("".join(parsing.format_tree(s.tagged_tree()) + "\n" for s in gold.sentences),
                                     encoding="utf-8")
    return root, gold


def test_dev_evaluation_reports_evalb_f1_and_repairs(run_dir):
    model_dir, log = run_dir
    line = next(line for line in log.splitlines() if line.startswith("eval step 40:"))
    assert re.search(r"BLEU [\d.]+ .* f1 [\d.]+ repaired 0\.00", line), line
    history = json.loads((model_dir / "eval" / "history.json").read_text())["evaluations"]
    assert 0.0 <= history[-1]["f1"] <= 100.0 and 0.0 <= history[-1]["repaired"] <= 100.0
    best = json.loads((model_dir / "best" / "best.json").read_text())
    assert best["metric"] == "f1" and best["checkpoints"] == [{"step": 40, "value": history[-1]["f1"],
                                                               "name": "ckpt-40"}]
    assert (model_dir / "tagger.json").is_file()
    data = json.loads((model_dir / "model_config.json").read_text())["data"]
    assert data["source_tags"] == "predicted" and data["tree_targets"] == "placeholders"


def printed_f1(text):
    return float(re.search(r"^labelled \(EVALB, COLLINS.prm\): F1 ([\d.]+)", text, re.M).group(1))


def parse_with_the_run_and_its_export(model_dir, files, tmp_path):
    """(parse's output from the run, the export's version folder): parse from the run and from its
    export write the same trees, each over its sentence's words, and the F1 printed is theirs."""
    root, gold = files
    # Both with section 6.3's decoding, which neither command is given: parse's defaults, and what
    # an export of a parsing model gets without decoding flags.
    from_run = run("keras_transformer.parse", f"--model_dir={model_dir}", f"--input={root / 'sentences.txt'}",
                   f"--reference={root / 'gold.trees'}", f"--output={tmp_path / 'run.trees'}")
    exported = run("export", f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'export'}")
    assert "beam_size=21 alpha=0.3 max_extra_length=300 tree_constraint" in exported.stdout, exported.stdout
    run("keras_transformer.parse", f"--export_dir={tmp_path / 'export'}", f"--input={root / 'sentences.txt'}",
        f"--output={tmp_path / 'export.trees'}")
    (version,) = (tmp_path / "export").iterdir()

    written = (tmp_path / "run.trees").read_text(encoding="utf-8")
    assert written == (tmp_path / "export.trees").read_text(encoding="utf-8")
    trees = [nltk.Tree.fromstring(line) for line in written.splitlines()]
    assert [tree.leaves() for tree in trees] == [list(s.words) for s in gold.sentences]
    assert printed_f1(from_run.stdout) == pytest.approx(gold.scores(trees).f1, abs=0.005)
    assert re.search(rf"^repaired: \d+ of {SENTENCES} outputs", from_run.stdout, re.M), from_run.stdout
    return from_run, version


def test_parse_from_the_run_and_from_its_export_agree_and_are_scored(run_dir, files, tmp_path):
    """Parse from the run and from its export agree (none repaired); the SavedModel's own outputs
    for tagged sentences through both loaders (TF Serving's TF1 Session loader too, in a process without this project),
    "XX" and brackets, equal the in-process Translator's, one XX a word."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    from export import client  # pylint: disable=g-import-not-at-top
    from keras_transformer.config import PARSING_DECODING  # pylint: disable=g-import-not-at-top
    from tests.helpers.export_models import FRESH_PROCESS  # pylint: disable=g-import-not-at-top

    model_dir, _ = run_dir
    from_run, version = parse_with_the_run_and_its_export(model_dir, files, tmp_path)
    settings = json.loads((version / "assets.extra" / "export.json").read_text())
    assert settings["tree_targets"] == "placeholders" and settings["source_tags"] == "predicted"
    assert (version / "assets.extra" / "tagger.json").read_bytes() == (model_dir / "tagger.json").read_bytes()
    assert "source tags predicted" in from_run.stderr
    assert "placeholder targets" in from_run.stderr
    assert f"repaired: 0 of {SENTENCES} outputs (0.0%)" in from_run.stdout

    # A TF Serving client tags its sentences itself, with the export's copy of the tagger.
    from pipelines import pos_tags  # pylint: disable=g-import-not-at-top

    _, gold = files
    tagger = pos_tags.load(str(version / "assets.extra" / "tagger.json"))
    sentences = [pos_tags.tagged_source(s.words, pos_tags.tag_words(tagger, s.words)) for s in gold.sentences]
    translate, _ = client.load_translate_fn(model_dir=str(model_dir), decoding=PARSING_DECODING)
    expected = [t.decode("utf-8") for t in translate(tf.constant(sentences))["translations"].numpy()]
    result = run_command("-c", FRESH_PROCESS, version, json.dumps(sentences), env={"PYTHONPATH": None},
                         cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served["modules"] == []
    assert served["load"]["translations"] == served["session"]["translations"] == expected
    for output, sentence in zip(expected, gold.sentences):
        tokens = output.split()
        assert tokens.count("XX") == len(sentence.words), output
        assert all(t == "XX" or t[0] in "()" for t in tokens), output
