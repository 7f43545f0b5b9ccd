"""Decoding speed of several trained models of different shapes, each served as users deploy it.

    .venv/bin/python bench/model_shapes_speed.py \\
        --model_dirs=recipe:runs/recipe_s1,s6_1:runs/student_6_1,s8_1:runs/student_8_1 \\
        --input=../shared/data/multi30k/test_2016_flickr.en.gz \\
        --reference=../shared/data/multi30k/test_2016_flickr.de.gz \\
        --beam_size=5 --alpha=1.4 --batch_size=32 --repeats=3 --out=/tmp/shapes.json

How much faster does a model with a deep encoder and a shallow decoder (a "student": 6-1, 8-1,
6-2 layers, trained with --num_encoder_layers and --num_decoder_layers) decode than the recipe's
model (4+4), and at what BLEU? The encoder runs once per sentence, the decoder once per output
token and beam, so moving layers from the decoder to the encoder should pay in decoding time.
--model_dirs lists LABEL:TRAINING_DIRECTORY pairs; the FIRST is the baseline every ratio is
taken against.

What runs where. This process (the parent) restores the checkpoint of each training directory
that export and translation use (averaged/, else the best, else the newest readable one:
`serving_module.from_model_dir`) and writes into a new work folder (temporary unless --work_dir
is given), per model:

* the SavedModel (`serving_module.export_saved_model`) with the beam search of --beam_size,
  --alpha (or the model's own from --alphas) and --max_extra_length
  (`keras_transformer.tasks.flags.define_decoding_flags`, as every command);
* a CTranslate2 model with float32 weights (`ctranslate2_model.convert`), run with compute type
  float32.

It reads the first --sentences lines of --input (0: all; `engine_process.read_corpus`) and cuts
them into the same length-sorted batches of at most --batch_size sentences for every model and
engine (`engine_process.sentence_batches`). The models may have different tokenizers: the
CTranslate2 engine of each gets the sentences tokenized by its own export's tokenizer
(`engine_process.export_tokenizers`), in the same batches.

Engines, two per model, each in a fresh worker process of its own (`bench/engine_process.py`,
`engine_process.started`), all alive across the rounds as servers are:

* "saved_model": the SavedModel's `serving_default`, strings in and out (tokenization, search and
  detokenization in the graph);
* "ct2_float32": CTranslate2 float32 through the project's export path (`engine_process`'s
  "export_path": `ctranslate2_model.translate_pieces` on the source pieces, hypotheses re-ranked
  with the project's length penalty), pieces out; CTranslate2 runs as installed (CT2_USE_MKL
  unset), and each worker reports the GEMM backend its CTranslate2 logged.

What is measured. Each engine translates one batch to warm up; then in each of --repeats rounds
every engine translates all batches, one engine at a time, the others waiting on their pipe
(`engine_process.time_engines`: a pause of `engine_process.SETTLE_SECONDS` before each turn, the
order rotated each round, so that a change of the machine's load touches every engine alike).
Each worker times its own calls. Per model: its label, encoder and decoder depth, parameters
(encoder, decoder, embeddings and total, from `TransformerConfig`'s counts, and Keras'
`count_params()` of the restored model beside them), how many translations the two engines
agree on; per engine: the best round's sentences/s and target tokens/s, the median round's
sentences/s, BLEU (cased sacreBLEU, `metrics.corpus_bleu`, and with --moses_bleu_lang the
lowercased Moses-tokenized convention of published Multi30k results, `metrics.moses_bleu`), and
its speed over the baseline model's same engine: of the best rounds, and the median over the
rounds of the paired ratio within a round. Target tokens: each translation tokenized again by
its model's target tokenizer, plus one EOS per non-empty source (`engine_process.target_tokens`),
so models with different tokenizers count different tokens for the same text: compare models by
sentences/s. The first round's outputs are scored; a later round that changes any is reported.

Why one engine per process. Two engines in one process share its thread pools and libraries:
a CTranslate2 model loaded beside another was seen to run much slower than alone, and
TensorFlow's pools stay busy a while after a call. A server holds one model; so does each worker
here, and the parent translates nothing while a worker is timed. Threads: --threads (default:
the host's physical cores) for TensorFlow's intra- and inter-op pools in every worker
(`cli.start_tensorflow`) and CTranslate2's intra_threads (inter_threads 1: one batch at a time).

Prints the steps as they run, then a Markdown table with its notes (the host's CPU model, cores
and the instruction sets that decide which precision pays: `engine_process.host`), and writes
every number as one JSON object to --out (also printed, last, as one line). Needs ctranslate2 4.x
(`pip install -e .[bench]`). Bad input (no model or the same label twice in --model_dirs, a
missing training directory, one without a checkpoint or a tokenizer, a model CTranslate2 cannot
express, a missing or unreadable --input, references that do not match it line for line) ends
with one `error:` line and exit status 2, before anything is exported or any worker starts.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import statistics
import sys
import time
from typing import Any, Optional

from absl import flags

import engine_process
import serving_flags
from keras_transformer import cli
from keras_transformer.files import command_files
from keras_transformer.tasks import flags as task_flags
from keras_transformer.training_directory import TrainingDirectory

FLAGS = flags.FLAGS
flags.DEFINE_list("model_dirs", None, "LABEL:TRAINING_DIRECTORY pairs, comma-separated; the first is the baseline "
                  "of every speed ratio (e.g. recipe:runs/recipe_s1,s6_1:runs/student_6_1).")
flags.DEFINE_string("moses_bleu_lang", "de", "With --reference, also BLEU as published Multi30k results count it: "
                    "lowercased, Moses-normalized and -tokenized for this target language (empty: not).")
serving_flags.define("every model and engine gets the same length-sorted batches")
flags.DEFINE_list("shortlists", [], "LABEL:VOCABULARY_MAP pairs: the model of that label decodes with the "
                  "shortlist (python -m keras_transformer.shortlist) in both engines: the SavedModel holds it, "
                  "CTranslate2 uses it as its vmap. A training directory may appear twice in --model_dirs, once "
                  "with a shortlist and once without.")
flags.DEFINE_list("alphas", [], "LABEL:ALPHA pairs: the model of that label decodes with this length penalty "
                  "instead of --alpha, in both engines (a model whose alpha was chosen apart on validation, such "
                  "as the distilled student's 1.8).")
flags.DEFINE_string("out", None, "Write the JSON record here.")
flags.mark_flags_as_required(["model_dirs", "input"])

ENGINES = {  # engine -> (what its worker runs, `engine_process.ENGINES`; its label in the table)
    "saved_model": ("saved_model", "SavedModel, `serving_default`"),
    "ct2_float32": ("export_path", "CTranslate2 float32, export path"),
}
CT2_ENGINE = "ct2_float32"
CT2_COMPUTE_TYPE = "float32"  # float32 weights (no quantization), computed in float32
LABEL = re.compile(r"[A-Za-z0-9_-]+")  # a label names files of the work folder: no dot, no slash


# Input ------------------------------------------------------------------------------------------

def parse_model_dirs(values: list[str]) -> list[tuple[str, str]]:
    """--model_dirs as (label, training directory) pairs, in order; a one-line ValueError for
    none, an entry without a label, a label of other characters than letters, digits, "_" and
    "-", or the same label twice."""
    if not values:
        raise ValueError("--model_dirs: no model; give LABEL:TRAINING_DIRECTORY pairs, comma-separated")
    models = []
    for value in values:
        label, separator, path = value.partition(":")
        if not separator or not path:
            raise ValueError(f"--model_dirs: {value!r} is not LABEL:TRAINING_DIRECTORY")
        if not LABEL.fullmatch(label):
            raise ValueError(f"--model_dirs: the label {label!r} may hold only letters, digits, '_' and '-'")
        models.append((label, path))
    labels = [label for label, _ in models]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ValueError(f"--model_dirs: the label{'s' if len(repeated) > 1 else ''} {', '.join(repeated)} "
                         "given more than once; each model needs a label of its own")
    return models


def per_label(flag: str, values: list[str], labels: list[str], what: str) -> dict[str, str]:
    """A LABEL:VALUE list flag (--shortlists, --alphas) as {label: value text}; a one-line
    ValueError for an entry that is not LABEL:`what`, a label --model_dirs lacks or one given twice."""
    found: dict[str, str] = {}
    for value in values:
        label, separator, text = value.partition(":")
        if not separator or not text:
            raise ValueError(f"--{flag}: {value!r} is not LABEL:{what}")
        if label not in labels:
            raise ValueError(f"--{flag}: {label!r} is not a label of --model_dirs")
        if label in found:
            raise ValueError(f"--{flag}: {label!r} given more than once")
        found[label] = text
    return found


def parse_shortlists(values: list[str], labels: list[str]) -> dict[str, str]:
    """--shortlists as {label: file} (`per_label`); a one-line ValueError also for a file that is
    not there."""
    shortlists = per_label("shortlists", values, labels, "VOCABULARY_MAP")
    for path in shortlists.values():
        command_files.check_input_file(path, "shortlists", stdin=False)
    return shortlists


def parse_alphas(values: list[str], labels: list[str]) -> dict[str, float]:
    """--alphas as {label: alpha} (`per_label`); a one-line ValueError also for an alpha that is
    not a number >= 0."""
    alphas = {}
    for label, text in per_label("alphas", values, labels, "ALPHA").items():
        try:
            alpha = float(text)
        except ValueError:
            alpha = -1.0
        if not alpha >= 0:  # also NaN
            raise ValueError(f"--alphas: {label}'s alpha {text!r} is not a number >= 0")
        alphas[label] = alpha
    return alphas


def check_out(path: Optional[str]) -> None:
    """A one-line error unless --out can be written (not a folder, its folder writable)."""
    if path is None:
        return
    if os.path.isdir(path):
        raise ValueError(f"--out={path}: is a folder, not a file")
    command_files.check_writable_folder(os.path.dirname(os.path.abspath(path)), "out")


def restore(models: list[tuple[str, str]], decoding, shortlists: Optional[dict[str, str]] = None,
            alphas: Optional[dict[str, float]] = None) -> list[dict[str, Any]]:
    """Each model's `serving_module.Translator` with `decoding` (its alpha replaced by the model's
    entry of `alphas`, if any) and its checkpoint, checked to be one CTranslate2 can express
    (`ctranslate2_model.build_spec`): every training directory read before anything is written,
    so that a bad one ends the command with nothing exported."""
    from keras_transformer.export import ctranslate2_model, serving_module  # pylint: disable=g-import-not-at-top

    restored = []
    for label, path in models:
        shortlist = (shortlists or {}).get(label)
        own = dataclasses.replace(decoding, alpha=alphas[label]) if label in (alphas or {}) else decoding
        translator, checkpoint = serving_module.from_model_dir(path, own, shortlist_file=shortlist)
        ctranslate2_model.build_spec(translator.model, translator.source_tokenizer.pieces(),
                                     translator.target_tokenizer.pieces(),
                                     ctranslate2_model.default_max_positions(translator.model.config, own))
        restored.append({"label": label, "model_dir": path, "translator": translator, "checkpoint": checkpoint,
                         "shortlist": shortlist, "decoding": own})
        print(f"{label}: {checkpoint} (N={translator.model.config.depth_text})", flush=True)
    return restored


# Exports and engines ----------------------------------------------------------------------------

def write_exports(translator, checkpoint: str, folder: str, shortlist: Optional[str] = None) -> dict[str, str]:
    """The beam-search SavedModel and the float32 CTranslate2 model of `translator`'s model (the
    model object, not its directory: the same weights for both, even while a run writes new
    checkpoints), in `folder`: {engine: path}. With `shortlist` (the file the translator read),
    the CTranslate2 model keeps it as its vmap."""
    from keras_transformer.export import ctranslate2_model, serving_module  # pylint: disable=g-import-not-at-top

    tokenizers = (translator.source_tokenizer, translator.target_tokenizer)
    with cli.silence_native_stderr():  # sentencepiece's INFO lines as the tokenizers load
        ct2_path, _ = ctranslate2_model.convert(translator.model, os.path.join(folder, CT2_ENGINE), None,
                                                tokenizers=tokenizers, decoding_config=translator.decoding_config,
                                                shortlist_file=shortlist)
        saved_model = serving_module.export_saved_model(translator, os.path.join(folder, "saved_model"), version=1,
                                                        extra={"checkpoint": checkpoint})
    return {"saved_model": saved_model, CT2_ENGINE: ct2_path}


def parameters(model) -> dict[str, int]:
    """The weights of a restored model: `TransformerConfig`'s counts per stack and in total, and
    what Keras counts (`count_params`) beside them."""
    config = model.config
    return {"encoder": config.encoder_parameters, "decoder": config.decoder_parameters,
            "embeddings": config.embedding_parameters, "total": config.num_parameters,
            "count_params": int(model.count_params())}


def engine_name(label: str, engine: str) -> str:
    """A worker's name (and its spec file's, in the work folder): "recipe.saved_model"."""
    return f"{label}.{engine}"


# The measurement --------------------------------------------------------------------------------

def measure(restored: list[dict[str, Any]], work: str, lines: list[str], references: Optional[list[str]],
            decoding, threads: int) -> dict[str, Any]:
    """Exports every model, times every engine (each in its own worker); returns every number."""
    batches = engine_process.sentence_batches(lines, FLAGS.batch_size)
    text_batches = [[lines[i] for i in batch] for batch in batches]
    specs, models = {}, []
    for entry in restored:
        label, translator = entry["label"], entry["translator"]
        started = time.perf_counter()
        paths = write_exports(translator, entry["checkpoint"], os.path.join(work, label), entry["shortlist"])
        tokenizers = engine_process.export_tokenizers(paths[CT2_ENGINE])
        with cli.silence_native_stderr():
            pieces = tokenizers.tokenize(lines)  # the export's own tokenizer: each model its own
        print(f"{label}: exported to {os.path.join(work, label)} in {time.perf_counter() - started:.0f} s "
              f"(SavedModel, beam {decoding.beam_size}; CTranslate2 float32)", flush=True)
        piece_batches = [[pieces[i] for i in batch] for batch in batches]
        for engine, (worker, _) in ENGINES.items():
            inputs = piece_batches if worker in engine_process.PIECES_OUT else text_batches
            compute_type = CT2_COMPUTE_TYPE if engine == CT2_ENGINE else None
            specs[engine_name(label, engine)] = engine_process.engine_spec(worker, paths[engine], entry["decoding"],
                                                                           threads, inputs, compute_type)
        models.append({"label": label, "model_dir": entry["model_dir"], "checkpoint": entry["checkpoint"],
                       "shortlist": entry["shortlist"], "alpha": entry["decoding"].alpha,
                       "config": translator.model.config, "parameters": parameters(translator.model),
                       "tokenizers": tokenizers, "nonempty": [bool(p) for p in pieces]})
        entry["translator"] = None  # the parent keeps no model it does not need (exports done)

    started = time.perf_counter()
    with engine_process.started(specs, work) as processes:
        print(f"started {len(processes)} engine processes in {time.perf_counter() - started:.0f} s: "
              + ", ".join(f"{name} pid {process.info['pid']}" for name, process in processes.items()), flush=True)
        print(f"input: {len(lines):,} sentences in {len(batches):,} batches of up to {FLAGS.batch_size}, longest "
              "first, the same for every model and engine", flush=True)
        seconds, outputs, changed = engine_process.time_engines(processes, batches, FLAGS.repeats)
        infos = {name: process.info for name, process in processes.items()}
    load_after = [round(load, 2) for load in os.getloadavg()]

    signatures: dict[str, Optional[str]] = {"bleu": None, "bleu_lc_moses": None}
    baseline = models[0]["label"]
    for model in models:
        label, texts = model["label"], {}
        model["engines"] = {}
        for engine, (worker, _) in ENGINES.items():
            name = engine_name(label, engine)
            texts[engine] = engine_process.as_texts(worker, outputs[name], model["tokenizers"])
            row = speed_row(seconds[name], seconds[engine_name(baseline, engine)], len(lines))
            translations = [text for text, _ in texts[engine]]
            tokens = engine_process.target_tokens(model["tokenizers"].target_tokenizer, translations,
                                                  model["nonempty"])
            row.update(target_tokens=tokens, target_tokens_per_second=tokens / row["wall_seconds"],
                       outputs_changed_in_later_rounds=changed[name], process=process_row(infos[name]))
            if references is not None:
                row.update(quality(translations, references, signatures))
            model["engines"][engine] = row
        model["identical_outputs"] = sum(a[0] == b[0] for a, b in zip(texts["saved_model"], texts[CT2_ENGINE]))
    return {
        "sentences": len(lines),
        "batch_size": FLAGS.batch_size,
        "batches": len(batches),
        "decoding": decoding.to_dict(),
        "threads": {"tensorflow_intra_op": infos[engine_name(baseline, "saved_model")]["tensorflow_threads"][0],
                    "tensorflow_inter_op": infos[engine_name(baseline, "saved_model")]["tensorflow_threads"][1],
                    "ct2_intra_threads": threads, "ct2_inter_threads": engine_process.CT2_INTER_THREADS},
        "processes": "one per engine",
        "repeats": FLAGS.repeats,
        "baseline": baseline,
        "models": [model_record(model) for model in models],
        "bleu_signature": signatures["bleu"],
        "moses_bleu_signature": signatures["bleu_lc_moses"],
        "load_average_after": load_after,
    }


def speed_row(seconds: list[float], baseline: list[float], sentences: int) -> dict[str, Any]:
    """An engine's speed from the seconds of its rounds, and over the baseline model's same
    engine (`baseline`: its rounds' seconds; the same sentences, so a speed ratio is the inverse
    ratio of times): of the best rounds, and the median of the ratios within a round (robust to
    a host whose speed drifts during the run)."""
    best, median = min(seconds), statistics.median(seconds)
    return {"wall_seconds": best, "seconds_per_round": seconds, "sentences_per_second": sentences / best,
            "median_sentences_per_second": sentences / median,
            "speed_over_baseline": min(baseline) / best,
            "paired_speed_over_baseline": statistics.median(theirs / own for theirs, own in zip(baseline, seconds))}


def quality(translations: list[str], references: list[str], signatures: dict[str, Optional[str]]
            ) -> dict[str, float]:
    """Cased sacreBLEU and, with --moses_bleu_lang, the lowercased Moses-tokenized BLEU; their
    signatures go into `signatures`."""
    from keras_transformer import metrics  # pylint: disable=g-import-not-at-top

    bleu = metrics.corpus_bleu(translations, references)
    scores, signatures["bleu"] = {"bleu": bleu.score}, bleu.signature
    if FLAGS.moses_bleu_lang:
        moses = metrics.moses_bleu(translations, references, FLAGS.moses_bleu_lang)
        scores["bleu_lc_moses"], signatures["bleu_lc_moses"] = moses.score, moses.signature
    return scores


def process_row(info: dict[str, Any]) -> dict[str, Any]:
    """What a worker's first reply says about its process: pid, load time, TensorFlow or not, its
    compute type or precision, and for CTranslate2 its GEMM backend and CT2_USE_MKL."""
    system = info.get("ctranslate2")
    return {"pid": info["pid"], "load_seconds": info["load_seconds"], "tensorflow_imported": info["tensorflow"],
            "computes_in": info["compute_type"], engine_process.USE_MKL: info[engine_process.USE_MKL],
            "gemm_backend": system["gemm_backend"] if system else None,
            "ct2_cpu_vendor": system["cpu_vendor"] if system else None}


def model_record(model: dict[str, Any]) -> dict[str, Any]:
    """A model's part of the JSON record."""
    config = model["config"]
    return {"label": model["label"], "model_dir": model["model_dir"], "checkpoint": model["checkpoint"],
            "shortlist": model["shortlist"], "alpha": model["alpha"],
            "encoder_layers": config.encoder_depth, "decoder_layers": config.decoder_depth,
            "model": config.to_dict(), "parameters": model["parameters"],
            "identical_outputs": model["identical_outputs"], "engines": model["engines"]}


# The report -------------------------------------------------------------------------------------

def print_markdown(record: dict[str, Any]) -> None:
    """The table and its notes, as docs/speed.md shows a measurement."""
    machine, decoding, models = record["host"], record["decoding"], record["models"]
    with_bleu = record["bleu_signature"] is not None
    with_moses = record["moses_bleu_signature"] is not None
    print(f"\n--- for docs/speed.md ---\n\nCPU figures: {machine['cpu']} ({machine['vendor']}), "
          f"{machine['cores']} cores ({machine['physical_cores']} physical; {engine_process.flags_text(machine)}), "
          f"load average {machine['load_average'][0]:g} at the start and {record['load_average_after'][0]:g} at the "
          f"end; TensorFlow {record['tensorflow']}, CTranslate2 {record['ctranslate2']}.\n\n    {record['command']}\n")
    print(f"| model | layers (enc-dec) | shortlist | alpha | parameters (enc / dec / total) | engine (one process each) | sentences/s, "
          f"best round | median round | target tokens/s | speed over {record['baseline']} | median of the rounds' "
          "ratios |" + (" BLEU |" if with_bleu else "") + (" BLEU lc Moses |" if with_moses else ""))
    print("|---|---:|---|---:|---:|---|---:|---:|---:|---:|---:|" + ("---:|" if with_bleu else "")
          + ("---:|" if with_moses else ""))
    for model in models:
        counts = model["parameters"]
        shape = (f"| {model['label']} | {model['encoder_layers']}-{model['decoder_layers']} | "
                 f"{os.path.basename(model['shortlist']) if model.get('shortlist') else 'none'} | "
                 f"{model['alpha']:g} | "
                 f"{counts['encoder']:,} / {counts['decoder']:,} / {counts['total']:,} |")
        for engine, row in model["engines"].items():
            print(f"{shape} {ENGINES[engine][1]} | {row['sentences_per_second']:,.1f} | "
                  f"{row['median_sentences_per_second']:,.1f} | {row['target_tokens_per_second']:,.0f} | "
                  f"{row['speed_over_baseline']:.2f}x | {row['paired_speed_over_baseline']:.2f}x |"
                  + (f" {row['bleu']:.2f} |" if with_bleu else "")
                  + (f" {row['bleu_lc_moses']:.2f} |" if with_moses else ""))
    threads = record["threads"]
    print(f"\n- {record['sentences']:,} sentences of {os.path.basename(record['input'])} in {record['batches']:,} "
          f"length-sorted batches of up to {record['batch_size']}, the same for every model and engine; beam "
          f"{decoding['beam_size']}, alpha as the table says (--alpha {decoding['alpha']:g}), outputs up to source length + "
          f"{decoding['max_extra_length']}; the best and the median of {record['repeats']} round"
          f"{'s' if record['repeats'] > 1 else ''}, the engines taking turns (the median of the rounds' ratios: of "
          f"each round's {record['baseline']} time over the model's in the same round, per engine).")
    print(f"- Processes: each engine of each model in a fresh worker process of its own (`bench/engine_process.py`), "
          f"kept alive across the rounds and timing its own calls, one engine at a time. Threads, per process: "
          f"TensorFlow intra-op {threads['tensorflow_intra_op']}, inter-op {threads['tensorflow_inter_op']}; "
          f"CTranslate2 intra_threads {threads['ct2_intra_threads']}, inter_threads {threads['ct2_inter_threads']}.")
    backends = sorted({json.dumps(model["engines"][CT2_ENGINE]["process"]["gemm_backend"], sort_keys=True)
                       for model in models})
    print(f"- CTranslate2 float32 as installed; its GEMM backend, as each worker's CTranslate2 logged it: "
          f"{'; '.join(backends)}.")
    print("- Parameters: `TransformerConfig`'s counts (embeddings, shared with the softmax, in the total only); "
          "Keras' count_params(): " + ", ".join(f"{m['label']} {m['parameters']['count_params']:,}" for m in models)
          + ".")
    print("- SavedModel and CTranslate2 outputs identical: " + ", ".join(
        f"{m['label']} {m['identical_outputs']:,}/{record['sentences']:,}" for m in models)
          + ". Target tokens: the translations tokenized again by each model's own tokenizer, plus EOS.")
    if with_bleu:
        print(f"- BLEU against {os.path.basename(record['reference'])}: sacreBLEU {record['bleu_signature']}"
              + (f"; lowercased Moses-tokenized: {record['moses_bleu_signature']}" if with_moses else "") + ".")
    unstable = {f"{m['label']}.{engine}": row["outputs_changed_in_later_rounds"]
                for m in models for engine, row in m["engines"].items() if row["outputs_changed_in_later_rounds"]}
    if unstable:
        print(f"- Outputs changed between rounds (most in one round): {unstable}.")


def main(argv):
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}")
    from keras_transformer.export import ctranslate2_model  # pylint: disable=g-import-not-at-top  (no TensorFlow)

    ctranslate2_model.check_quantization(None)  # ctranslate2 4.x is installed
    models = parse_model_dirs(FLAGS.model_dirs)
    shortlists = parse_shortlists(FLAGS.shortlists, [label for label, _ in models])
    alphas = parse_alphas(FLAGS.alphas, [label for label, _ in models])
    if FLAGS.moses_bleu_lang and not FLAGS.moses_bleu_lang.isalpha():
        raise ValueError(f"--moses_bleu_lang={FLAGS.moses_bleu_lang}: expected a language code such as de, fr, en")
    lines, references = engine_process.read_corpus(FLAGS.input, FLAGS.reference, FLAGS.sentences)
    for _, path in models:
        TrainingDirectory(path).check_exists("model_dirs")
    check_out(FLAGS.out)
    if FLAGS.work_dir:
        command_files.check_writable_folder(FLAGS.work_dir, "work_dir")
    decoding = task_flags.decoding_config()
    command = " ".join(shlex.quote(a) for a in [os.path.relpath(sys.executable), *sys.argv])
    machine = engine_process.host()
    threads = FLAGS.threads or machine["physical_cores"]
    print(f"CPU: {machine['cpu']} ({machine['vendor']}), {machine['cores']} cores ({machine['physical_cores']} "
          f"physical; {engine_process.flags_text(machine)}), load average {machine['load_average']}; {threads} "
          f"threads per engine; command: {command}", flush=True)

    tf = engine_process.start_tensorflow(threads)
    import ctranslate2  # pylint: disable=g-import-not-at-top

    # A training directory without a checkpoint or tokenizer, or a model CTranslate2 cannot
    # express, fails here: before anything is written.
    restored = restore(models, decoding, shortlists, alphas)
    with engine_process.work_folder("model_shapes_speed-", FLAGS.work_dir) as work:
        measured = measure(restored, work, lines, references, decoding, threads)
    record = {"command": command, "host": machine, "tensorflow": tf.__version__, "ctranslate2": ctranslate2.__version__,
              "input": FLAGS.input, "reference": FLAGS.reference, **measured}
    print_markdown(record)
    text = json.dumps(record, sort_keys=True)
    if FLAGS.out:
        with open(FLAGS.out, "w", encoding="utf-8") as file:
            file.write(text + "\n")
        print(f"\nwrote {FLAGS.out}")
    print("\n" + text)
    return 0


if __name__ == "__main__":
    cli.run(main)
