"""A shortlist end to end: `python -m keras_transformer.shortlist` learns it from the training
pairs of a tiny deep-encoder, shallow-decoder run; `translate --shortlist`, the SavedModel
exported with it (in a fresh process, TF Serving's loader) and the in-process search give the
same outputs; the CTranslate2 export keeps it as its vmap and translates with it; bad input is
one error line."""

import json
import os
import re

import numpy as np
import pytest

from keras_transformer.config import DecodingConfig
from keras_transformer.decoding import search
from keras_transformer.decoding import shortlist as shortlist_lib
from keras_transformer.run_dir import layout
from keras_transformer.pipelines import tokenizers
from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.export_models import DEEP_ENCODER, FRESH_PROCESS, MAX_LENGTH, shared_model_dir

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    """(training directory, shortlist file, source sentences, tokenizer, SavedModel version folder)."""
    path = tmp_path_factory.mktemp("run")
    pairs = shared_model_dir(tmp_path_factory, path, **DEEP_ENCODER)
    data = tmp_path_factory.mktemp("data")
    (data / "train.en").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (data / "train.de").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    vmap = data / "shortlist.vmap"
    result = run_command("-m", "keras_transformer.shortlist", f"--model_dir={path}", f"--source={data / 'train.en'}",
                         f"--target={data / 'train.de'}", f"--output={vmap}", "--top_k=4", "--frequent=8")
    assert result.returncode == 0, result.stderr[-2000:]
    kept = re.search(r"from (\d+) pairs(?: \((\d+) longer than the model's max_length)?", result.stderr)
    assert kept and int(kept.group(1)) + int(kept.group(2) or 0) == len(pairs), result.stderr  # every pair counted
    exports = tmp_path_factory.mktemp("exports")
    result = run_command("-m", "keras_transformer.export", f"--model_dir={path}", f"--export_dir={exports / 'saved'}", "--beam_size=2",
                         f"--shortlist={vmap}", timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    # In the order `translate` batches them (longest first), so that every path sees one batch alike.
    # Sources the export does not truncate (the in-process search below does not).
    tokenizer = tokenizers.load(os.path.join(path, layout.TOKENIZER_DIR))
    lengths = tokenizer.tokenize([s for s, _ in pairs], add_eos=True).row_lengths().numpy()
    sources = [s for (s, _), length in zip(pairs, lengths) if length <= MAX_LENGTH][-30:]
    sources.sort(key=lambda s: (len(s.split()), len(s.encode("utf-8"))), reverse=True)
    return path, str(vmap), sources, tokenizer, str(exports / "saved" / "1")


def test_the_learned_file_reads_back_with_the_runs_vocabulary(learned):
    _, vmap, _, tokenizer, _ = learned
    shortlist = shortlist_lib.read(vmap, tokenizer.pieces(), tokenizer.pieces())
    assert shortlist.frequent.size == 8 and shortlist.table.shape == (tokenizer.vocab_size, 4)
    assert (shortlist.table > 3).sum(axis=1).max() == 4  # some source pieces have 4 candidates


def test_translate_the_saved_model_and_the_search_agree_and_keep_to_the_candidates(learned, tmp_path):
    path, vmap, sources, tokenizer, saved = learned
    shortlist = shortlist_lib.read(vmap, tokenizer.pieces(), tokenizer.pieces())
    model, _ = layout.restore_model(path)
    ids = tokenizer.tokenize(sources, add_eos=True).to_tensor()
    sequences, _ = search.translate_ids(model, ids, DecodingConfig(beam_size=2), shortlist=shortlist)
    expected = [t.decode("utf-8") for t in tokenizer.detokenize(sequences[:, 0]).numpy()]
    full, _ = search.translate_ids(model, ids, DecodingConfig(beam_size=2))
    # Each sentence's own candidates (a batch of one would search over these alone) hold its output.
    for row, source in zip(sequences.numpy()[:, 0], ids.numpy()):
        assert set(row[row > 3].tolist()) <= set(shortlist_lib.candidates(shortlist, ids).numpy().tolist())
    assert not np.array_equal(sequences.numpy(), full.numpy())  # the shortlist restricted this search

    (tmp_path / "in.en").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
    result = run_command("-m", "keras_transformer.translate", f"--model_dir={path}", f"--shortlist={vmap}",
                         "--beam_size=2", f"--input={tmp_path / 'in.en'}", f"--output={tmp_path / 'out.de'}",
                         f"--batch_size={len(sources)}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "out.de").read_text(encoding="utf-8").splitlines() == expected

    result = run_command("-c", FRESH_PROCESS, saved, json.dumps(sources), env={"PYTHONPATH": None}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    served = json.loads(result.stdout)
    assert served["load"]["translations"] == expected and served["session"]["translations"] == expected
    settings = json.load(open(os.path.join(saved, "assets.extra", "export.json"), encoding="utf-8"))
    assert settings["shortlist"] == {"file": "shortlist.vmap", "frequent": 8, "per_source_piece": 4}
    assert os.path.isfile(os.path.join(saved, "assets.extra", "shortlist.vmap"))


def test_the_ctranslate2_export_translates_with_its_vmap(learned, tmp_path):
    pytest.importorskip("ctranslate2")
    from keras_transformer.export import ctranslate2_model  # pylint: disable=import-outside-toplevel

    path, vmap, sources, tokenizer, _ = learned
    result = run_command("-m", "keras_transformer.export", f"--model_dir={path}", f"--export_dir={tmp_path / 'ct2'}",
                         "--format=ctranslate2", f"--shortlist={vmap}", timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    folder = str(tmp_path / "ct2" / "1")
    with open(os.path.join(folder, ctranslate2_model.VMAP_FILE), encoding="utf-8") as file, \
            open(vmap, encoding="utf-8") as original:
        assert file.read() == original.read()
    translator = ctranslate2_model.Ctranslate2Translator(folder)
    assert translator.use_vmap
    greedy = DecodingConfig(beam_size=1)
    got = [hypotheses[0][0] for hypotheses in translator.translate(sources, greedy)]
    shortlist = shortlist_lib.read(vmap, tokenizer.pieces(), tokenizer.pieces())
    model, _ = layout.restore_model(path)
    # One call translates every source (`translate_pieces`): both engines search over the union of
    # the batch's candidates.
    ids = tokenizer.tokenize(sources, add_eos=True).to_tensor()
    sequences, _ = search.translate_ids(model, ids, greedy, shortlist=shortlist)
    expected = [t.decode("utf-8") for t in tokenizer.detokenize(sequences[:, 0]).numpy()]
    agree = sum(a == b for a, b in zip(got, expected))
    assert agree >= 0.9 * len(sources)


@pytest.mark.parametrize("flags, fragments", [
    (["--shortlist=MISSING"], ["--shortlist", "MISSING"]),
    (["--shortlist=BAD"], ["line 1", "no tab"]),
])
def test_bad_shortlists_are_one_error_line(learned, tmp_path, flags, fragments):
    path, _, _, _, _ = learned
    (tmp_path / "bad.vmap").write_text("no tab here\n", encoding="utf-8")
    flags = [f.replace("MISSING", str(tmp_path / "missing.vmap")).replace("BAD", str(tmp_path / "bad.vmap"))
             for f in flags]
    fragments = [f.replace("MISSING", "missing.vmap") for f in fragments]
    (tmp_path / "in.en").write_text("A dog.\n", encoding="utf-8")
    result = run_command("-m", "keras_transformer.translate", f"--model_dir={path}", f"--input={tmp_path / 'in.en'}",
                         f"--output={tmp_path / 'out.de'}", *flags)
    assert_one_error_line(result, *fragments)
    assert not (tmp_path / "out.de").exists()


def test_the_command_refuses_files_that_do_not_pair_up(learned, tmp_path):
    path, _, _, _, _ = learned
    (tmp_path / "a.en").write_text("one\ntwo\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("eins\n", encoding="utf-8")
    result = run_command("-m", "keras_transformer.shortlist", f"--model_dir={path}", f"--source={tmp_path / 'a.en'}",
                         f"--target={tmp_path / 'a.de'}", f"--output={tmp_path / 'out.vmap'}")
    assert_one_error_line(result, "has 1 lines but", "has 2")
    assert not (tmp_path / "out.vmap").exists()


@pytest.mark.parametrize("format_flag", ["--format=saved_model", "--format=ctranslate2"])
def test_export_refuses_a_bad_shortlist_before_the_model_and_writes_no_version(learned, tmp_path, format_flag):
    path, _, _, _, _ = learned
    (tmp_path / "bad.vmap").write_text("\t▁nosuchpiece\n", encoding="utf-8")
    result = run_command("-m", "keras_transformer.export", f"--model_dir={path}", f"--export_dir={tmp_path / 'out'}", format_flag,
                         f"--shortlist={tmp_path / 'bad.vmap'}", timeout=600)
    assert_one_error_line(result, "bad.vmap line 1", "'▁nosuchpiece' is not in the target vocabulary")
    assert not (tmp_path / "out").exists() or not [n for n in os.listdir(tmp_path / "out") if not n.startswith(".")]
