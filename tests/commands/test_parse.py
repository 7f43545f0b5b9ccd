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
equal the in-process Translator's, one XX per word.
Reranking (`--rerank_kbest`, `keras_transformer.tasks.parsing.reranking`): from the run and from its export (the `score`
signature) the same trees, each the PCFG candidate of highest model + weight x PCFG score with the
model's scores worked out by the `score` command; the printed oracle F1 is at least the F1.
Ensembles (`--ensemble_model_dirs`, Vinyals et al. 2015): the run with itself parses exactly as
the run alone (the command); the run with a second one (its copy with seeded noise on every
weight, standing in for a run of another --seed, which would cost a training) parses the two
shortest sentences into trees over their words, none repaired (`parse_file`), and each step of its
tree-constrained search ranks by the members' mean probability (worked out here from full
teacher-forced passes of each member, `test_ensemble.hand_mean`) at the tokens the grammar allows,
not renormalized over them (averaged first, constrained after): the greedy tokens are its argmax
and the score the sum of its logs, the ensemble's own log-probability of the tree. Needs ../shared/data (skips without it).
"""

import json
import re

import nltk
import pytest

from keras_transformer.tasks.parsing import parse_files
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
    gold = parse_files.Gold.from_treebank(str(ptb), "test").take(SENTENCES)
    (root / "sentences.txt").write_text("".join(s.sentence + "\n" for s in gold.sentences), encoding="utf-8")
    (root / "gold.trees").write_text("".join(parse_files.format_tree(s.tagged_tree()) + "\n"
                                             for s in gold.sentences), encoding="utf-8")
    return root, gold


@pytest.mark.slow
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


def parse_args(model_dir, files, output, *flags):
    """parse's flags for the run's sentences and gold trees, with section 6.3's decoding, which is
    not given: parse's defaults, and what an export of a parsing model gets without decoding flags."""
    root, _ = files
    return (f"--model_dir={model_dir}", f"--input={root / 'sentences.txt'}", f"--reference={root / 'gold.trees'}",
            f"--output={output}", *flags)


@pytest.fixture(scope="module")
def parsed(run_dir, files, tmp_path_factory):
    """`python -m keras_transformer.parse` from the run: (its result, the trees it wrote)."""
    output = tmp_path_factory.mktemp("parsed") / "run.trees"
    result = run("keras_transformer.parse", *parse_args(run_dir[0], files, output))
    return result, output.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def exported(run_dir, tmp_path_factory):
    """The run exported without decoding flags: (the export's base folder, export's stdout)."""
    export_dir = tmp_path_factory.mktemp("exported") / "export"
    result = run("export", f"--model_dir={run_dir[0]}", f"--export_dir={export_dir}")
    return export_dir, result.stdout


def parse_with_the_run_and_its_export(exported, files, parsed, tmp_path):
    """(parse's output from the run, the export's version folder): parse from the run and from its
    export write the same trees, each over its sentence's words, and the F1 printed is theirs."""
    root, gold = files
    from_run, written = parsed
    export_dir, export_stdout = exported
    assert "beam_size=21 alpha=0.3 max_extra_length=300 tree_constraint" in export_stdout, export_stdout
    run("keras_transformer.parse", f"--export_dir={export_dir}", f"--input={root / 'sentences.txt'}",
        f"--output={tmp_path / 'export.trees'}")
    (version,) = export_dir.iterdir()

    assert written == (tmp_path / "export.trees").read_text(encoding="utf-8")
    trees = [nltk.Tree.fromstring(line) for line in written.splitlines()]
    assert [tree.leaves() for tree in trees] == [list(s.words) for s in gold.sentences]
    assert printed_f1(from_run.stdout) == pytest.approx(gold.scores(trees).f1, abs=0.005)
    assert re.search(rf"^repaired: \d+ of {SENTENCES} outputs", from_run.stdout, re.M), from_run.stdout
    return from_run, version


@pytest.mark.slow
def test_parse_from_the_run_and_from_its_export_agree_and_are_scored(run_dir, exported, files, parsed, tmp_path):
    """Parse from the run and from its export agree (none repaired); the SavedModel's own outputs
    for tagged sentences through both loaders (TF Serving's TF1 Session loader too, in a process without this project),
    "XX" and brackets, equal the in-process Translator's, one XX a word."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    from keras_transformer.export import client  # pylint: disable=g-import-not-at-top
    from keras_transformer.config import PARSING_DECODING  # pylint: disable=g-import-not-at-top
    from tests.helpers.export_models import FRESH_PROCESS  # pylint: disable=g-import-not-at-top

    model_dir, _ = run_dir
    from_run, version = parse_with_the_run_and_its_export(exported, files, parsed, tmp_path)
    settings = json.loads((version / "assets.extra" / "export.json").read_text())
    assert settings["tree_targets"] == "placeholders" and settings["source_tags"] == "predicted"
    assert (version / "assets.extra" / "tagger.json").read_bytes() == (model_dir / "tagger.json").read_bytes()
    assert "source tags predicted" in from_run.stderr
    assert "placeholder targets" in from_run.stderr
    assert f"repaired: 0 of {SENTENCES} outputs (0.0%)" in from_run.stdout

    # A TF Serving client tags its sentences itself, with the export's copy of the tagger.
    from keras_transformer.pipelines import pos_tags  # pylint: disable=g-import-not-at-top

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


# Reranking the PCFG's k best trees (--rerank_kbest) ------------------------------------------------

RERANK_K, RERANK_WEIGHT = 4, 0.5


@pytest.mark.slow
def test_reranking_from_the_run_and_from_its_export_takes_the_best_model_plus_weighted_pcfg_score(
        ptb, run_dir, exported, files, tmp_path):
    """`parse --rerank_kbest`: from the run and from its export (its `score` signature) the same
    trees, each sentence's the candidate of highest model + weight x PCFG score, with the model's
    scores worked out by the `score` command in its own process from the candidates listed here
    (the PCFG's k best, linearized with "XX", each after its sentence tagged by the run's tagger)."""
    from keras_transformer.pipelines import linearized_trees, pos_tags, treebank  # pylint: disable=g-import-not-at-top
    from keras_transformer.tasks.parsing import pcfg  # pylint: disable=g-import-not-at-top

    model_dir, _ = run_dir
    root, gold = files
    rerank = (f"--rerank_kbest={RERANK_K}", f"--pcfg_weight={RERANK_WEIGHT}", f"--data_dir={ptb}")
    from_run = run("keras_transformer.parse", *parse_args(model_dir, files, tmp_path / "run.trees", *rerank))
    run("keras_transformer.parse", f"--export_dir={exported[0]}", f"--input={root / 'sentences.txt'}",
        f"--output={tmp_path / 'export.trees'}", *rerank)
    written = (tmp_path / "run.trees").read_text(encoding="utf-8")
    assert written == (tmp_path / "export.trees").read_text(encoding="utf-8")
    trees = [nltk.Tree.fromstring(line) for line in written.splitlines()]
    assert printed_f1(from_run.stdout) == pytest.approx(gold.scores(trees).f1, abs=0.005)
    assert f"the {RERANK_K} best trees of the pcfg" in from_run.stdout and "source tags predicted" in from_run.stdout
    oracle = float(re.search(r"^the candidates' oracle, labelled: F1 ([\d.]+)", from_run.stdout, re.M).group(1))
    assert oracle >= printed_f1(from_run.stdout)

    grammar = pcfg.Grammar.induce(treebank.read_split(str(ptb), "train"))
    tagger = pos_tags.load(str(model_dir / pos_tags.TAGGER_FILE))
    sources, targets, lists = [], [], []
    for sentence in gold.sentences:
        found = grammar.parse_kbest(list(sentence.words), RERANK_K)
        assert found, sentence.sentence
        lists.append(found)
        tagged = pos_tags.tagged_source(sentence.words, pos_tags.tag_words(tagger, sentence.words))
        for tree, _ in found:
            sources.append(tagged)
            targets.append(linearized_trees.linearize(tree, placeholders=True))
    (tmp_path / "sources.txt").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
    (tmp_path / "targets.txt").write_text("".join(t + "\n" for t in targets), encoding="utf-8")
    run("keras_transformer.score", f"--model_dir={model_dir}", f"--source={tmp_path / 'sources.txt'}",
        f"--target={tmp_path / 'targets.txt'}", f"--output={tmp_path / 'scores.tsv'}")
    model_scores = iter(float(line.split("\t")[0]) for line in (tmp_path / "scores.tsv").read_text().splitlines())
    expected, changed = [], 0
    for found in lists:
        combined = [(next(model_scores) + RERANK_WEIGHT * score, -i) for i, (_, score) in enumerate(found)]
        best = max(range(len(found)), key=combined.__getitem__)
        expected.append(found[best][0])
        changed += best != 0
    assert trees == expected
    print(f"reranking moved {changed} of {SENTENCES} sentences off the PCFG's best tree")  # no claim: a tiny model


# Ensembles (--ensemble_model_dirs) ------------------------------------------------------------

def test_an_ensemble_of_the_run_with_itself_parses_as_the_run(run_dir, files, parsed, tmp_path):
    model_dir, _ = run_dir
    result = run("keras_transformer.parse", *parse_args(model_dir, files, tmp_path / "ensemble.trees",
                                                        f"--ensemble_model_dirs={model_dir}"))
    assert (tmp_path / "ensemble.trees").read_text(encoding="utf-8") == parsed[1]
    assert printed_f1(result.stdout) == printed_f1(parsed[0].stdout)
    checkpoints = re.search(r"^an ensemble of 2 models \((\S+)\)", result.stdout, re.M).group(1).split(",")
    assert len(checkpoints) == 2 and checkpoints[0] == checkpoints[1], result.stdout


@pytest.fixture(scope="module")
def other_run(run_dir, tmp_path_factory):
    """A second parsing run of the run's tokenizer, tagger and settings whose weights differ: the
    run's settings, tokenizer and tagger, and its model with seeded noise (of each weight
    tensor's standard deviation) on every weight, as the only checkpoint."""
    import shutil  # pylint: disable=g-import-not-at-top

    import numpy as np  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    from keras_transformer.run_dir import layout  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import pos_tags  # pylint: disable=g-import-not-at-top

    model_dir, _ = run_dir
    other = tmp_path_factory.mktemp("other_run")
    for name in (layout.CONFIG_FILE, pos_tags.TAGGER_FILE):
        shutil.copyfile(model_dir / name, other / name)
    shutil.copytree(model_dir / layout.TOKENIZER_DIR, other / layout.TOKENIZER_DIR)
    model, _ = layout.restore_model(str(model_dir))
    rng = np.random.RandomState(7)
    for variable in model.trainable_variables:
        value = variable.numpy()
        variable.assign(value + rng.normal(0.0, value.std(), value.shape).astype(value.dtype))
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(other / layout.CHECKPOINT_DIR),
                               max_to_keep=1).save(checkpoint_number=40)
    return other


def test_an_ensemble_of_two_runs_parses_trees_by_their_mean_probability_under_the_constraint(
        run_dir, other_run, files, parsed, tmp_path):
    import numpy as np  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    from keras_transformer.export import serving_module  # pylint: disable=g-import-not-at-top
    from keras_transformer.config import PARSING_DECODING  # pylint: disable=g-import-not-at-top
    from keras_transformer.decoding import search, tree_constraint  # pylint: disable=g-import-not-at-top
    from keras_transformer.decoding.beam_search import NEG_INF  # pylint: disable=g-import-not-at-top
    from keras_transformer.special_ids import BOS_ID, EOS_ID  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import linearized_trees, pos_tags  # pylint: disable=g-import-not-at-top
    from tests.keras_transformer.decoding.test_ensemble import hand_mean  # pylint: disable=g-import-not-at-top

    model_dir, _ = run_dir
    root, gold = files
    shortest = sorted(range(SENTENCES), key=lambda i: len(gold.sentences[i].words))[:2]  # the cheapest to search
    sentences = [list(gold.sentences[i].words) for i in shortest]
    for name in ("sentences.txt", "gold.trees"):
        lines = (root / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (tmp_path / name).write_text("".join(lines[i] for i in shortest), encoding="utf-8")
    # The library path of the command: section 6.3's search (beam 21, alpha 0.3) over the ensemble.
    report = parse_files.parse_file(str(tmp_path / "sentences.txt"), str(tmp_path / "ensemble.trees"),
                                model_dir=str(model_dir), ensemble_model_dirs=[str(other_run)],
                                reference=str(tmp_path / "gold.trees"))
    assert report.startswith("an ensemble of 2 models (") and "repaired: 0 of 2 outputs" in report, report
    written = (tmp_path / "ensemble.trees").read_text(encoding="utf-8").splitlines()
    assert [nltk.Tree.fromstring(line).leaves() for line in written] == sentences
    alone = [parsed[1].splitlines()[i] for i in shortest]
    print(f"the ensemble's trees: {sum(map(str.__eq__, written, alone))} of 2 as the run's alone")  # no claim

    # Greedy search over the ensemble under the constraint, for those sentences (tagged by the
    # run's tagger, as parse tags them), against the members' mean worked out by hand.
    translator, _ = serving_module.from_model_dir(str(model_dir), PARSING_DECODING,
                                                  ensemble_model_dirs=[str(other_run)])
    ensemble, grammar = translator.model, translator.grammar
    assert len(ensemble.members) == 2 and grammar.source_tags and grammar.placeholder >= 0
    tagger = pos_tags.load(str(model_dir / pos_tags.TAGGER_FILE))
    tagged = parse_files.source_sentences(sentences, "predicted", tagger)
    source = translator.source_ids(tf.constant(tagged)).numpy()  # (2, S)
    sequences, scores = search.translate_ids(ensemble, source, PARSING_DECODING, beam_size=1, grammar=grammar)
    sequences, scores = sequences[:, 0].numpy(), scores[:, 0].numpy()  # (2, T), (2,)

    # Each step along those outputs: the ensemble's constrained distribution (the search's own
    # pieces, as `search.translate_ids` puts them together) and what the grammar allows, whatever
    # the model (the constraint over zero logits).
    limits = search.max_decode_lengths(ensemble, source, PARSING_DECODING.max_extra_length)
    vocab_size, pad_id = ensemble.config.output_vocab_size, ensemble.config.pad_id
    ensemble_fn, cache, memory = search.step_fn(ensemble, *ensemble.encode(source), int(max(limits)))
    ensemble_fn, cache, memory = tree_constraint.constrain(grammar, ensemble_fn, cache, memory, source, EOS_ID, pad_id,
                                                       limits=limits)
    allowed_fn, state, allowed_memory = tree_constraint.constrain(
        grammar, lambda ids, step, cache, memory: (tf.zeros([tf.shape(ids)[0], vocab_size]), cache), {}, {},
        source, EOS_ID, pad_id, limits=limits)
    for row, words in enumerate(sentences):
        text = translator.target_tokenizer.detokenize(sequences[row:row + 1]).numpy()[0].decode("utf-8")
        assert not linearized_trees.to_tree(text, words)[1], text  # a tree over its words, not repaired
    prefixes = np.concatenate([np.full([2, 1], BOS_ID, np.int32), sequences[:, :-1]], axis=1)  # (2, T)
    means = hand_mean(ensemble.members, source, prefixes, every_position=True)  # log of the members' mean (2, T, V)
    ids, total, choices = tf.fill([2], BOS_ID), np.zeros(2), 0
    for step in range(sequences.shape[1]):
        logits, cache = ensemble_fn(ids, step, cache, memory)
        log_probs = logits.numpy()  # (2, V): log-probabilities, what the search adds up (normalize=False)
        allowed, state = allowed_fn(ids, step, state, allowed_memory)
        allowed = allowed.numpy() > NEG_INF / 2  # (2, V)
        for row in range(2):
            if step > 0 and sequences[row, step - 1] in (EOS_ID, pad_id):
                continue  # this row has ended
            expected = np.where(allowed[row], means[row, step], -np.inf)  # averaged, then constrained
            np.testing.assert_allclose(log_probs[row][allowed[row]], expected[allowed[row]], rtol=1e-4, atol=1e-4)
            assert np.all(log_probs[row][~allowed[row]] < NEG_INF / 2), (row, step)
            choices = max(choices, int(allowed[row].sum()))
            token = sequences[row, step]
            assert token == int(np.argmax(expected)), (row, step)  # the greedy search's choice
            total[row] += expected[token]
        ids = tf.constant(sequences[:, step])
    np.testing.assert_allclose(scores, total, rtol=1e-4)
    assert choices > 10  # steps with a real choice (the opening brackets), not only the one next word
