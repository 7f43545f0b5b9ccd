"""The SavedModel's `serving_default` (float32, bfloat16) against CTranslate2 (float32, int8), each engine in its own process.

    .venv/bin/python bench/serving_vs_ctranslate2.py --model_dir=runs/multi30k_en_de \\
        --input=../shared/data/multi30k/test_2016_flickr.en.gz \\
        --reference=../shared/data/multi30k/test_2016_flickr.de.gz --batch_size=32 --repeats=3

The same outputs? How fast, measured as the engines are deployed: one engine per serving process.

What runs where. This process (the parent) restores the checkpoint of --model_dir that export
and translation use (averaged/, else the newest readable one; or --checkpoint) once
(`serving_module.from_model_dir`) and writes into a new work folder (temporary unless
--work_dir is given)

* two CTranslate2 models of the restored model (`ctranslate2_model.convert`): float32 weights,
  run with compute_type float32, and int8 weights, run with compute_type int8;
* two SavedModels (`serving_module.export_saved_model`): one with the beam search of
  --beam_size, --alpha and --max_extra_length, one greedy (beam 1);
* with --bfloat16 (the default), a third: the beam-search SavedModel of the same weights
  rounded once to bfloat16 (`decoding.precision.decoding_model`, what `python -m keras_transformer.export
  --precision=bfloat16` writes). It runs on any CPU, natively where the CPU multiplies in
  bfloat16 (AVX512_BF16, AMX), slower than float32 elsewhere; --nobfloat16 leaves it out.

It tokenizes the first --sentences lines of --input (plain or gzipped UTF-8, read by
`keras_transformer.pipelines.text_files.read_lines`) into source pieces once, with the export's tokenizer
(`Ctranslate2Translator.tokenize`; that translator's model is unloaded at once, it is used for
its tokenizers only), and cuts them into the same batches for every engine: at most
--batch_size sentences of similar length, longest first (`sorted_batches.length_sorted_batches`
on the key `keras_transformer.export.client.translate_lines` sorts by: words, then bytes). Every engine then runs
in a fresh worker process of its own (`bench/engine_process.py`, started with the sentences or
pieces of its batches in a JSON file): one SavedModel or one `ctranslate2.Translator` per
process, never two, the process loading only its engine. The workers stay alive across rounds,
as servers do, and translate when the parent asks over a pipe; each times its own calls. The
parent only asks and waits (it translates nothing while a worker is timed), and afterwards turns
pieces into text, checks and counts.

Why. An earlier version kept every engine in this one process, and a float32
`ctranslate2.Translator` in a process where an int8 one had been loaded and used runs much slower
than alone in its process (importing or running TensorFlow beside it changes nothing): CTranslate2
float32 was handicapped, and the SavedModel looked as fast as it while, as deployed with one
engine per serving process, it is not (issue 29 has the figures). Hence one process per engine,
and no engine in the process that starts them.

1. Fidelity, CTranslate2 float32 (the export path below) against the SavedModel: how many
   translations are identical, and the largest score difference over those. Greedy search must
   give the same translation for every sentence (the exit status is 1 otherwise); it runs first,
   the greedy SavedModel and CTranslate2 float32 with greedy decoding each in a worker of its own,
   closed before the timing starts. Beam search agrees on most sentences, not all: the two
   searches collect finished hypotheses by different rules (`ctranslate2_model.translation_options`);
   where they differ, the scores (both the project's log P(Y) / lp(|Y|) of their own output) say
   which search found the better one.
2. Speed, with beam search, of eight engines (seven with --nobfloat16), one worker process each,
   and on a CPU where CTranslate2 as installed multiplies with Intel MKL six more (below):
   * SavedModel, float32 and bfloat16: its `serving_default` (tokenization, search and
     detokenization in the graph), loaded with `tf.saved_model.load` and called through that
     signature (`keras_transformer.export.client.load_translate_fn`): strings in, strings out;
   * CTranslate2 float32 and int8, export path: `ctranslate2_model.translate_pieces` on the
     source pieces; outputs stay pieces. It makes one `translate_batch` call per batch with the
     batch's largest output limit, and one more per source length for the sources whose output
     reached their own limit (the project's limit is per sentence, CTranslate2's per call), asks
     for every finished hypothesis and re-ranks them with the project's length penalty (`rescore`);
   * CTranslate2 float32 and int8, plain: CTranslate2 alone on the same model folder and the same
     piece batches, one call per batch, `translate_batch(pieces, beam_size, length_penalty=alpha,
     max_decoding_length=the batch's longest source in tokens (EOS included) + max_extra_length)`
     and CTranslate2's defaults otherwise. Its time over the export path's is what the export's
     own work costs. Its outputs may differ from the export's: it ranks finished hypotheses by
     log P(Y) / |Y| ** alpha (not the GNMT penalty), never ends at the first step, does not
     suppress PAD and BOS, and has one output limit per batch;
   * CTranslate2 float32 and int8, text: `Ctranslate2Translator.translate`, strings in and
     strings out, tokenization and detokenization included as in the SavedModel.
   CTranslate2's matrix-product (GEMM) backend. CTranslate2 multiplies with Intel MKL when its
   build has MKL and the CPU's vendor is GenuineIntel, unless the environment variable CT2_USE_MKL
   says otherwise; CT2_USE_MKL=0 makes it use its oneDNN backend (DNNL) instead (CTranslate2's
   src/cpu/backend.cc and docs/environment_variables.md). It decides once per process, and the
   choice can change its speed several times over (issue 29: 3.9x on one model), so each CTranslate2
   worker reports what its CTranslate2 logged as it loaded the model (`engine_process.ctranslate2_system`:
   CPU vendor, ISA, MKL or not, the backend of each GEMM) and the CT2_USE_MKL it ran with; the six
   CTranslate2 engines above run with CT2_USE_MKL unset ("as installed", even if this process has it
   set). If CTranslate2 float32 as installed uses MKL (the greedy fidelity worker's log says so),
   the same six also run with CT2_USE_MKL=0, each in a worker of its own ("`CT2_USE_MKL=0`" in
   their labels, `_no_mkl` in their JSON names), and every SavedModel ratio is given against both;
   elsewhere (an AMD or ARM CPU, a build without MKL) CTranslate2's default is already its DNNL
   backend, only that runs, and the notes say why.
   What each worker imports: the plain ones ctranslate2 and no TensorFlow; the export path and
   text ones also TensorFlow, which the library code they run needs (`rescore` ranks with a TF
   length penalty, `Ctranslate2Translator` tokenizes with tensorflow-text); the SavedModel one
   TensorFlow. The JSON line records each worker's pid and whether it imported TensorFlow.
   Each engine translates one batch to warm up; then in each of --repeats rounds every engine
   translates all batches, one engine at a time (the others wait on their pipe, so no two engines
   share the CPU while one is timed; a pause of `engine_process.SETTLE_SECONDS` before each turn
   lets the last engine's spinning threads fall asleep), the engines' order rotated each round, so
   that a change of the machine's load touches all of them alike. Each engine's best round gives its sentences/s,
   target tokens/s, its wall time and its speed over the SavedModel's, its median round its median
   sentences/s, and beside them the median over the rounds of the SavedModel's time over the
   engine's in the same round (robust to a host whose speed drifts during a run); with --reference,
   also sacreBLEU BLEU (`keras_transformer.metrics`). Then each SavedModel (float32, bfloat16) over
   each CTranslate2 engine: the ratio of their sentences/s in their best rounds, in their median
   rounds, and the median of the rounds' paired ratios. Target tokens are counted the same way for
   every engine: each translation tokenized again by the target tokenizer, plus one EOS per
   non-empty source. Beam search's fidelity is that of the first round's outputs.

Threads: --threads (default: the host's physical cores) for TensorFlow's intra-op and inter-op
pools in every worker that starts TensorFlow (`cli.start_tensorflow`, which sets
`tf.config.threading` before it creates the devices: once the runtime runs, TensorFlow refuses
the change), and CTranslate2 set up as its documentation recommends for a CPU (CTranslate2's
docs/performance.md: inter_threads * intra_threads not above the physical cores; docs/parallel.md:
inter_threads translates that many batches in parallel, which helps only when several are
submitted at once): `intra_threads` = --threads, `inter_threads=1`, as here, like the
SavedModel, one batch is submitted at a time. On a 2-core CPU: inter_threads=1, intra_threads=2.

Prints the steps as they run (each CTranslate2 worker with its CT2_USE_MKL, CPU vendor, ISA and
GEMM backend), then a Markdown table with its notes for docs/speed.md#serving-speed (a GEMM backend column;
CPU figures: the host's CPU model and vendor, cores, instruction sets that decide which precision pays
(AVX2, AVX-512, AVX512_VNNI, AVX512_BF16, AMX), CTranslate2's compute types on it, and the
load) and, last, one JSON line with every number.
Needs ctranslate2 4.x (`pip install -e .[bench]`). Bad input (a missing or unreadable file,
references that do not match the input line for line, a training directory without a checkpoint
or tokenizer, a model CTranslate2 cannot express, no ctranslate2) ends with one `error:` line and
exit status 2, before anything is written or any worker starts.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import statistics
import sys
import time
from typing import Any, Optional

from absl import flags

import engine_process
import serving_flags
from engine_process import (CT2_INTER_THREADS, PIECES_OUT, as_texts, engine_spec, export_tokenizers, flags_text,
                            host, in_input_order, target_tokens, time_engines)
from keras_transformer import cli
from keras_transformer.config import TransformerConfig
from keras_transformer.files import command_files
from keras_transformer.tasks import flags as task_flags

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Training directory (model_config.json, tokenizer/, checkpoints/).")
flags.DEFINE_string("checkpoint", None, "Checkpoint prefix (default: averaged/, else the latest).")
serving_flags.define("every engine gets the same length-sorted batches")
flags.DEFINE_bool("bfloat16", True, "Also time a bfloat16 SavedModel of the same weights (`python -m keras_transformer.export "
                  "--precision=bfloat16`); it runs on any CPU, natively with AVX512_BF16 or AMX.")
flags.mark_flags_as_required(["model_dir", "input"])

COMPUTE_TYPES = {"ct2_float32": (None, "float32"), "ct2_int8": ("int8", "int8")}  # quantization, compute_type
CT2_MODES = {  # CTranslate2 engine-name suffix -> (what its worker runs, `engine_process.ENGINES`; its label)
    "": ("export_path", "export path (`translate_pieces`)"),
    "_plain": ("plain", "plain `translate_batch`"),
    "_text": ("text", "text (`Ctranslate2Translator.translate`)"),
}
NO_MKL = "_no_mkl"  # the suffix of the CTranslate2 engines whose process has CT2_USE_MKL=0
CT2_USE_MKL = {"": None, NO_MKL: "0"}  # suffix -> CT2_USE_MKL in the worker (None: unset, CTranslate2 decides)
ENGINES = {  # engine -> (what its worker runs; the export it loads; CT2_USE_MKL), in the order they take turns
    "saved_model": ("saved_model", "saved_model", None),
    "saved_model_bf16": ("saved_model", "saved_model_bf16", None),
    **{f"{export}{mode}{backend}": (worker, export, use_mkl) for backend, use_mkl in CT2_USE_MKL.items()
       for mode, (worker, _) in CT2_MODES.items() for export in COMPUTE_TYPES},
}
LABELS = {  # engine -> its row in the table
    "saved_model": "SavedModel, `serving_default`",
    "saved_model_bf16": "SavedModel bfloat16 (`export --precision=bfloat16`), `serving_default`",
    **{f"{export}{mode}{backend}": f"CTranslate2 {COMPUTE_TYPES[export][1]}, {label}"
       + (f", `{engine_process.USE_MKL}={use_mkl}`" if use_mkl is not None else "")
       for backend, use_mkl in CT2_USE_MKL.items() for mode, (_, label) in CT2_MODES.items()
       for export in COMPUTE_TYPES},
}
BASELINE = "saved_model"  # speeds are also given over this engine's
FIDELITY = "ct2_float32"  # the engine whose outputs and scores are compared with the SavedModel's
BFLOAT16 = "saved_model_bf16"  # the engine --nobfloat16 leaves out
SHORT_LABELS = {BASELINE: "SavedModel float32", BFLOAT16: "SavedModel bfloat16"}
SAVED_MODELS = (BASELINE, BFLOAT16)  # each one's speed is also given over every CTranslate2 engine's
EXPORT_OVERHEAD_TARGET = 1.05  # the issue: the export path within 5% of CTranslate2 itself (wall time)
SCORE_TOLERANCE = 1e-4  # scores closer than this count as equal (float32 sums in two programs)
SHOWN_DIFFERENCES = 3


# Exports, engines, their processes --------------------------------------------------------------

def write_exports(translator, greedy_decoding, checkpoint: str, work: str, bfloat16: bool) -> dict[str, str]:
    """The CTranslate2 models (float32, int8) and the SavedModels (beam search, greedy, and with
    `bfloat16` beam search in bfloat16) of the model of `translator` (the float32
    `serving_module.Translator` with the beam search), in `work`."""
    from keras_transformer.export import ctranslate2_model, serving_module  # pylint: disable=g-import-not-at-top
    from keras_transformer.decoding import precision  # pylint: disable=g-import-not-at-top

    paths = {}
    # The model object rather than the directory: the same weights as the SavedModels for sure,
    # even while a training run writes new checkpoints into --model_dir.
    tokenizers = (translator.source_tokenizer, translator.target_tokenizer)
    for name, (quantization, _) in COMPUTE_TYPES.items():
        paths[name], _ = ctranslate2_model.convert(translator.model, os.path.join(work, name), quantization,
                                                   tokenizers=tokenizers, decoding_config=translator.decoding_config)
    greedy = serving_module.Translator(translator.model, translator.source_tokenizer, translator.target_tokenizer,
                                       greedy_decoding)
    modules = {"saved_model": translator, "saved_model_greedy": greedy}
    if bfloat16:  # the float32 weights rounded once, as `python -m keras_transformer.export --precision=bfloat16` does
        modules[BFLOAT16] = serving_module.Translator(
            precision.decoding_model(translator.model, "bfloat16"), translator.source_tokenizer,
            translator.target_tokenizer, translator.decoding_config)
    for name, module in modules.items():
        paths[name] = serving_module.export_saved_model(module, os.path.join(work, name), version=1,
                                                        extra={"checkpoint": checkpoint})
    return paths


def timed_specs(paths: dict[str, str], decoding, threads: int, text_batches: list, piece_batches: list,
                use_mkl_values: tuple[Optional[str], ...]) -> dict[str, dict[str, Any]]:
    """The spec of each timed engine (`ENGINES` whose export is in `paths`; CTranslate2's with a
    CT2_USE_MKL in `use_mkl_values`), in the order they take turns."""
    specs = {}
    for name, (engine, export, use_mkl) in ENGINES.items():
        if export not in paths or use_mkl not in use_mkl_values:
            continue
        batches = piece_batches if engine in PIECES_OUT else text_batches
        compute_type = COMPUTE_TYPES[export][1] if export in COMPUTE_TYPES else None
        specs[name] = engine_spec(engine, paths[export], decoding, threads, batches, compute_type, use_mkl)
    return specs


def translate_greedy(paths: dict[str, str], greedy, threads: int, text_batches: list, piece_batches: list,
                     batches: list[list[int]], work: str) -> tuple[dict[str, list], dict[str, dict[str, Any]]]:
    """The greedy SavedModel and CTranslate2 float32's export path (as installed: CT2_USE_MKL unset)
    with greedy decoding, each in a worker of its own, closed before the timing: per engine its
    [output, score] pairs in input order, and its worker's first reply (`EngineProcess.ready`)."""
    specs = {
        "saved_model_greedy": engine_spec("saved_model", paths["saved_model_greedy"], greedy, threads, text_batches,
                                          None),
        "ct2_float32_greedy": engine_spec("export_path", paths[FIDELITY], greedy, threads, piece_batches,
                                          COMPUTE_TYPES[FIDELITY][1]),
    }
    with engine_process.started(specs, work) as processes:
        outputs = {name: in_input_order(batches, process.request("translate")["outputs"])
                   for name, process in processes.items()}
    infos = {name: process.info for name, process in processes.items()}
    print("greedy search: " + ", ".join(process_text(name, info) for name, info in infos.items()), flush=True)
    return outputs, infos


def backend_text(info: dict[str, Any], long: bool = False) -> str:
    """A CTranslate2 worker's GEMM backend from its first reply or its row's "process" (CTranslate2's
    log, `engine_process.ctranslate2_system`), e.g. "MKL (SGEMM, packed)"; with `long` also
    CT2_USE_MKL, the CPU vendor and the ISA CTranslate2 saw. "-" for a SavedModel."""
    system = info.get("ctranslate2")
    if not system:
        return "-"
    gemm = system["gemm_backend"]
    text = (f"{gemm['backend']} ({gemm['gemm'].upper()}{', packed' if gemm['packed'] else ''})" if gemm
            else f"none logged for {system['compute_type']}")
    if long:
        use_mkl = info[engine_process.USE_MKL]
        text += (f", {engine_process.USE_MKL}{' unset' if use_mkl is None else '=' + use_mkl}, CPU "
                 f"{system['cpu_vendor']}, ISA {system['isa']}")
    return text


def process_text(name: str, info: dict[str, Any]) -> str:
    """"name pid N" and for CTranslate2 its backend (`backend_text`)."""
    return f"{name} pid {info['pid']}" + (f" ({backend_text(info, long=True)})" if info.get("ctranslate2") else "")


def no_mkl_variant(as_installed: dict[str, Any], timed: bool) -> str:
    """Why CTranslate2 is (`timed`) or is not also timed with CT2_USE_MKL=0, from what CTranslate2
    as installed logged (`engine_process.ctranslate2_system`)."""
    said = (f"its log: CPU {as_installed['cpu_vendor']}, Use Intel MKL {str(as_installed['use_mkl']).lower()}, "
            f"SGEMM backend {as_installed['sgemm']['backend']}, GEMM_S8 backend {as_installed['gemm_s8']['backend']}")
    if timed:
        return (f"CTranslate2 as installed multiplies with Intel MKL on this CPU ({said}); each CTranslate2 engine "
                f"is also timed with {engine_process.USE_MKL}=0 (its oneDNN backend, DNNL), in processes of its own.")
    return (f"CTranslate2 as installed does not multiply with Intel MKL on this CPU ({said}): it takes MKL only on a "
            f"GenuineIntel CPU and when built with it (its src/cpu/backend.cc), so {engine_process.USE_MKL}=0 would "
            "change nothing; CTranslate2 is timed as installed only.")


# Comparing --------------------------------------------------------------------------------------

def identical(reference: list[tuple], other: list[tuple]) -> int:
    """How many translations of `other` equal those of `reference`."""
    return sum(a[0] == b[0] for a, b in zip(reference, other))


def agreement(reference: list[tuple[str, float]], other: list[tuple[str, float]]) -> dict[str, Any]:
    """`other`'s (translation, score) pairs against `reference`'s: identical translations, the
    largest score difference over them, and on the others whether `other`'s score is higher or
    lower (each is the project's score of its own output)."""
    same = [i for i, ((a, _), (b, _)) in enumerate(zip(reference, other)) if a == b]
    differing = [i for i, ((a, _), (b, _)) in enumerate(zip(reference, other)) if a != b]
    deltas = [other[i][1] - reference[i][1] for i in differing]
    return {
        "identical": len(same),
        "sentences": len(reference),
        "max_score_difference": max((abs(other[i][1] - reference[i][1]) for i in same), default=0.0),
        "differing": len(differing),
        "other_scores_higher": sum(delta > SCORE_TOLERANCE for delta in deltas),
        "other_scores_lower": sum(delta < -SCORE_TOLERANCE for delta in deltas),
        "first_differing": differing[:SHOWN_DIFFERENCES],
    }


def report_agreement(name: str, result: dict[str, Any], lines: list[str], reference: list, other: list) -> None:
    """Prints `agreement`'s result and the first differing sentences."""
    line = (f"  {name}: {result['identical']:,} of {result['sentences']:,} identical; largest score difference "
            f"over them {result['max_score_difference']:.2g}")
    if result["differing"]:
        line += (f"; of the {result['differing']:,} that differ, CTranslate2's output scores higher on "
                 f"{result['other_scores_higher']:,}, lower on {result['other_scores_lower']:,} (the rest equal "
                 f"within {SCORE_TOLERANCE:g})")
    print(line, flush=True)
    for i in result["first_differing"]:
        print(f"    sentence {i + 1}: {lines[i]!r}\n      SavedModel:  {reference[i][0]!r} ({reference[i][1]:.4f})"
              f"\n      CTranslate2: {other[i][0]!r} ({other[i][1]:.4f})")


def saved_model_ratios(seconds: dict[str, list[float]]) -> dict[str, dict[str, dict[str, float]]]:
    """Each SavedModel's (`SAVED_MODELS` that were timed) speed over each CTranslate2 engine's,
    from the seconds of their rounds (the same sentences in every round, so a speed ratio is the
    inverse ratio of times): of their best rounds, of their median rounds, and the median over the
    rounds of the ratio within a round (the engines take turns in each)."""
    ratios: dict[str, dict[str, dict[str, float]]] = {}
    for saved_model in (name for name in SAVED_MODELS if name in seconds):
        ratios[saved_model] = {
            peer: {"best": min(seconds[peer]) / min(seconds[saved_model]),
                   "median": statistics.median(seconds[peer]) / statistics.median(seconds[saved_model]),
                   "paired_median": statistics.median(
                       peer_seconds / own for peer_seconds, own in zip(seconds[peer], seconds[saved_model]))}
            for peer in seconds if peer.startswith("ct2_")}
    return ratios


# The measurement --------------------------------------------------------------------------------

def measure(translator, checkpoint: str, work: str, lines: list[str], references: Optional[list[str]],
            threads: int, bfloat16: bool) -> dict[str, Any]:
    """Exports, checks fidelity, times the engines (each in its own worker); returns every
    number (the JSON record)."""
    import ctranslate2  # pylint: disable=g-import-not-at-top

    from keras_transformer import metrics  # pylint: disable=g-import-not-at-top

    decoding = translator.decoding_config
    greedy = dataclasses.replace(decoding, beam_size=1, n_best=1)
    config = translator.model.config
    started = time.perf_counter()
    with cli.silence_native_stderr():  # sentencepiece's INFO lines as the tokenizers load
        paths = write_exports(translator, greedy, checkpoint, work, bfloat16)
    tokenizers = export_tokenizers(paths[FIDELITY])
    pieces = tokenizers.tokenize(lines)  # the export's tokenizer (the same in both models)
    print(f"exported {checkpoint} to {work} in {time.perf_counter() - started:.0f} s: CTranslate2 float32 and "
          f"int8, SavedModels (beam {decoding.beam_size}" + (", the same in bfloat16" if bfloat16 else "")
          + ", greedy)", flush=True)

    batches = engine_process.sentence_batches(lines, FLAGS.batch_size)
    piece_batches = [[pieces[i] for i in batch] for batch in batches]
    text_batches = [[lines[i] for i in batch] for batch in batches]

    # 1. Fidelity: greedy search now, beam search from the first timed round.
    greedy_outputs, greedy_infos = translate_greedy(paths, greedy, threads, text_batches, piece_batches, batches,
                                                    work)
    sm_texts = as_texts("saved_model", greedy_outputs["saved_model_greedy"], tokenizers)
    ct2_texts = as_texts("export_path", greedy_outputs["ct2_float32_greedy"], tokenizers)
    greedy_result = agreement(sm_texts, ct2_texts)
    print("fidelity of CTranslate2 float32 (export path) to the SavedModel:", flush=True)
    report_agreement("greedy", greedy_result, lines, sm_texts, ct2_texts)

    # 2. Speed, with beam search: one worker process per engine, alive across the rounds; CTranslate2
    # also with CT2_USE_MKL=0 where, as installed, it multiplies with Intel MKL.
    as_installed = greedy_infos[f"{FIDELITY}_greedy"]["ctranslate2"]
    use_mkl_values = tuple(CT2_USE_MKL.values()) if as_installed["use_mkl"] else (None,)
    no_mkl_note = no_mkl_variant(as_installed, len(use_mkl_values) > 1)
    print(no_mkl_note, flush=True)
    started = time.perf_counter()
    with engine_process.started(timed_specs(paths, decoding, threads, text_batches, piece_batches, use_mkl_values),
                                work) as processes:
        print(f"started {len(processes)} engine processes in {time.perf_counter() - started:.0f} s: "
              + ", ".join(process_text(name, process.info) for name, process in processes.items()), flush=True)
        calls = processes[FIDELITY].request("count_calls")["calls"]
        print(f"input: {len(lines):,} sentences in {len(batches):,} batches of up to {FLAGS.batch_size}, longest "
              f"first; the export path makes {calls:,} translate_batch calls per pass (one per batch, more for "
              f"sources whose output reached their own length limit), plain CTranslate2 {len(batches):,}",
              flush=True)
        seconds, outputs, changed = time_engines(processes, batches, FLAGS.repeats)
        infos = {name: process.info for name, process in processes.items()}
    load_after = [round(load, 2) for load in os.getloadavg()]
    texts = {name: as_texts(ENGINES[name][0], pairs, tokenizers) for name, pairs in outputs.items()}
    beam_result = agreement(texts[BASELINE], texts[FIDELITY])
    report_agreement(f"beam {decoding.beam_size}, alpha {decoding.alpha:g} (first round)", beam_result, lines,
                     texts[BASELINE], texts[FIDELITY])

    nonempty = [bool(p) for p in pieces]
    rows, bleu_signature = {}, None
    for name in seconds:  # the timed engines, in the order they took turns
        best, median = min(seconds[name]), statistics.median(seconds[name])
        translations = [text for text, _ in texts[name]]
        tokens = target_tokens(translator.target_tokenizer, translations, nonempty)
        rows[name] = {
            "wall_seconds": best,
            "seconds_per_round": seconds[name],
            "sentences_per_second": len(lines) / best,
            "median_wall_seconds": median,
            "median_sentences_per_second": len(lines) / median,
            "target_tokens": tokens,
            "target_tokens_per_second": tokens / best,
            "speed_over_saved_model": min(seconds[BASELINE]) / best,
            # Paired by round (the engines take turns within a round): robust to a host whose speed
            # drifts during the run, where the best rounds of two engines may come from different times.
            "paired_speed_over_saved_model": statistics.median(
                baseline / own for baseline, own in zip(seconds[BASELINE], seconds[name])),
            "identical_to_saved_model": identical(texts[BASELINE], texts[name]),
            "identical_to_ct2_float32": identical(texts[FIDELITY], texts[name]),
            "outputs_changed_in_later_rounds": changed[name],
            "process": {"pid": infos[name]["pid"], "tensorflow_imported": infos[name]["tensorflow"],
                        "load_seconds": infos[name]["load_seconds"], "computes_in": infos[name]["compute_type"],
                        engine_process.USE_MKL: infos[name][engine_process.USE_MKL],
                        "ctranslate2": infos[name]["ctranslate2"]},
        }
        if references is not None:
            bleu = metrics.corpus_bleu(translations, references)
            rows[name]["bleu"], bleu_signature = bleu.score, bleu.signature
    backends = [backend for backend, use_mkl in CT2_USE_MKL.items() if use_mkl in use_mkl_values]
    plain = {  # the export path against CTranslate2 alone, per compute type and backend
        f"{name}{backend}": {
            "export_wall_over_plain": rows[f"{name}{backend}"]["wall_seconds"]
            / rows[f"{name}_plain{backend}"]["wall_seconds"],
            "identical_to_export": identical(texts[f"{name}{backend}"], texts[f"{name}_plain{backend}"])}
        for backend in backends for name in COMPUTE_TYPES}
    int8_speed = {f"{worker}{backend}": rows[f"ct2_int8{mode}{backend}"]["sentences_per_second"]
                  / rows[f"ct2_float32{mode}{backend}"]["sentences_per_second"]
                  for backend in backends for mode, (worker, _) in CT2_MODES.items()}
    tf_threads = infos[BASELINE]["tensorflow_threads"]  # as the SavedModel's TensorFlow reports them
    return {
        "ctranslate2": ctranslate2.__version__,
        "checkpoint": checkpoint,
        "model": config.to_dict(),
        "parameters": translator.model.count_params(),
        "ct2_model_bytes": {name: os.path.getsize(os.path.join(paths[name], "model.bin")) for name in COMPUTE_TYPES},
        "compute_types": {name: infos[name]["compute_type"] for name in COMPUTE_TYPES},
        "ct2_as_installed": as_installed,
        "ct2_use_mkl_timed": list(use_mkl_values),
        "ct2_backend_note": no_mkl_note,
        "sentences": len(lines),
        "batch_size": FLAGS.batch_size,
        "batches": len(batches),
        "translate_batch_calls": {"export_path": calls, "plain": len(batches)},
        "decoding": decoding.to_dict(),
        "threads": {"tensorflow_intra_op": tf_threads[0], "tensorflow_inter_op": tf_threads[1],
                    "ct2_intra_threads": threads, "ct2_inter_threads": CT2_INTER_THREADS},
        "processes": "one per engine",
        "repeats": FLAGS.repeats,
        "fidelity": {"greedy": greedy_result, "beam": beam_result},
        "engines": rows,
        "plain_ct2": plain,
        "int8_speed_over_float32": int8_speed,
        "saved_model_over_ct2": saved_model_ratios(seconds),
        "ct2_cpu_compute_types": sorted(ctranslate2.get_supported_compute_types("cpu")),
        "export_overhead_target": EXPORT_OVERHEAD_TARGET,
        "bleu_signature": bleu_signature,
        "load_average_after": load_after,
    }


def variant_text(key: str) -> str:
    """"ct2_float32_no_mkl" -> "float32 with CT2_USE_MKL=0", "plain" -> "plain", for the notes."""
    base, no_mkl = (key[:-len(NO_MKL)], True) if key.endswith(NO_MKL) else (key, False)
    base = base[len("ct2_"):] if base.startswith("ct2_") else base
    return base.replace("_", " ") + (f" with {engine_process.USE_MKL}={CT2_USE_MKL[NO_MKL]}" if no_mkl else "")


def print_markdown(record: dict[str, Any]) -> None:
    """The table and its notes, as docs/speed.md shows a measurement."""
    machine, model, decoding, rows = record["host"], record["model"], record["decoding"], record["engines"]
    greedy, beam = record["fidelity"]["greedy"], record["fidelity"]["beam"]
    with_bleu = record["bleu_signature"] is not None
    search = f"beam {decoding['beam_size']}, alpha {decoding['alpha']:g}"
    print(f"\n--- for docs/speed.md ---\n\nCPU figures: {machine['cpu']} ({machine['vendor']}), "
          f"{machine['cores']} cores ({machine['physical_cores']} physical; {flags_text(machine)}), load average "
          f"{machine['load_average'][0]:g} at the start and {record['load_average_after'][0]:g} at the end; "
          f"TensorFlow {record['tensorflow']}, CTranslate2 {record['ctranslate2']} (CPU compute types here: "
          f"{', '.join(record['ct2_cpu_compute_types'])}).\n\n    {record['command']}\n")
    print("| engine (one process each) | GEMM backend (CTranslate2's log) | sentences/s, best round | median round | "
          "target tokens/s | wall (s) | speed over the SavedModel's | median of the rounds' ratios | "
          "identical to SavedModel |" + (" BLEU |" if with_bleu else ""))
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if with_bleu else ""))
    for name, row in rows.items():
        print(f"| {LABELS[name]} | {backend_text(row['process'])} | {row['sentences_per_second']:,.1f} | "
              f"{row['median_sentences_per_second']:,.1f} | "
              f"{row['target_tokens_per_second']:,.0f} | {row['wall_seconds']:,.2f} | "
              f"{row['speed_over_saved_model']:.2f}x | {row['paired_speed_over_saved_model']:.2f}x | "
              f"{row['identical_to_saved_model']:,}/{record['sentences']:,} |"
              + (f" {row['bleu']:.2f} |" if with_bleu else ""))
    ratios = record["saved_model_over_ct2"]
    print("\n| SavedModel over (best rounds / median rounds / median of paired rounds) | GEMM backend | "
          + " | ".join(SHORT_LABELS[name] for name in ratios) + " |")
    print("|---|---|" + "---:|" * len(ratios))
    for peer in next(iter(ratios.values())):
        print(f"| {LABELS[peer]} | {backend_text(rows[peer]['process'])} | " + " | ".join(
            "{best:.2f}x / {median:.2f}x / {paired_median:.2f}x".format(**by_peer[peer]) for by_peer in ratios.values())
              + " |")
    megabytes = {name: size / 2**20 for name, size in record["ct2_model_bytes"].items()}
    threads, calls = record["threads"], record["translate_batch_calls"]
    vocabulary = f"vocabulary {model['vocab_size']:,}" + (
        f" / {model['target_vocab_size']:,}" if model.get("target_vocab_size") else "")
    print(f"\n- Model: N={TransformerConfig.from_dict(model).depth_text}, d_model={model['d_model']}, "
          f"d_ff={model['d_ff']}, h={model['num_heads']}, {vocabulary}, {record['parameters']:,} parameters "
          f"(CTranslate2 model.bin {megabytes['ct2_float32']:.1f} MB float32, {megabytes['ct2_int8']:.1f} MB int8); "
          f"{record['checkpoint']}.")
    print(f"- {record['sentences']:,} sentences of {os.path.basename(record['input'])} in {record['batches']:,} "
          f"length-sorted batches of up to {record['batch_size']}, the same for every engine; {search}, outputs "
          f"up to source length + {decoding['max_extra_length']}; the best and the median of {record['repeats']} "
          f"round{'s' if record['repeats'] > 1 else ''}, the engines taking turns (the median of the rounds' "
          f"ratios: of each round's SavedModel time over the engine's in the same round).")
    with_tf = [name for name, row in rows.items() if row["process"]["tensorflow_imported"]]
    print(f"- Processes: each engine in a fresh worker process of its own (`bench/engine_process.py`: one "
          f"SavedModel or one `ctranslate2.Translator` per process), kept alive across the rounds and timing its "
          f"own calls, one engine at a time (the others wait on their pipe); the parent translates nothing "
          f"meanwhile. TensorFlow imported in {', '.join(with_tf)}, "
          f"not in {', '.join(name for name in rows if name not in with_tf) or 'none'}.")
    print(f"- Threads, per process: TensorFlow intra-op {threads['tensorflow_intra_op']}, inter-op "
          f"{threads['tensorflow_inter_op']} (`tf.config.threading`); CTranslate2 intra_threads "
          f"{threads['ct2_intra_threads']}, inter_threads {threads['ct2_inter_threads']} (its documentation's "
          f"advice for {machine['physical_cores']} physical cores), compute types "
          f"{record['compute_types']['ct2_float32']} and {record['compute_types']['ct2_int8']}.")
    backends: dict[str, list[str]] = {}  # each process's backend (CTranslate2's log) -> its engines
    for name, row in rows.items():
        if row["process"]["ctranslate2"]:
            backends.setdefault(backend_text(row["process"], long=True), []).append(name)
    print(f"- CTranslate2's matrix products, as each process's CTranslate2 logged them when it loaded its model "
          f"(`engine_process.ctranslate2_system`): " + "; ".join(f"{', '.join(names)}: {text}"
                                                                 for text, names in backends.items())
          + f". {record['ct2_backend_note']}")
    if BFLOAT16 in rows:
        native = machine["cpu_flags"]["AVX512_BF16"] or machine["cpu_flags"]["AMX-BF16"]
        print(f"- The bfloat16 SavedModel (export.json: {rows[BFLOAT16]['process']['computes_in']}): the float32 "
              f"weights rounded once; this CPU multiplies in bfloat16 "
              + ("natively (AVX512_BF16 or AMX)." if native else "only by emulation (no AVX512_BF16, no AMX)."))
    print("- \"export path\" and \"plain\": sources tokenized before timing, outputs left as pieces; \"text\" and "
          "the SavedModel: strings to strings, tokenization included. Target tokens: the translations tokenized "
          "again, plus EOS.")
    print(f"- The export path (`translate_pieces`: {calls['export_path']:,} translate_batch calls per pass, one "
          f"per batch and one per source length of the sources translated again with their own limit, every "
          f"finished hypothesis re-ranked with the GNMT length penalty) "
          f"against CTranslate2 alone on the same model folder and batches ({calls['plain']:,} calls, "
          f"`translate_batch(beam_size={decoding['beam_size']}, length_penalty={decoding['alpha']:g}, "
          f"max_decoding_length=longest source + EOS + {decoding['max_extra_length']})`, its defaults otherwise): "
          + "; ".join(f"{variant_text(name)} wall time {plain['export_wall_over_plain']:.3f}x plain's "
                      f"({'within' if plain['export_wall_over_plain'] <= record['export_overhead_target'] else 'over'}"
                      f" {record['export_overhead_target']:g}x), {plain['identical_to_export']:,}/"
                      f"{record['sentences']:,} identical outputs"
                      for name, plain in record["plain_ct2"].items())
          + ". Plain CTranslate2 ranks finished hypotheses by log P(Y) / |Y| ** alpha, so its outputs may differ.")
    print(f"- Fidelity of CTranslate2 float32 (export path) to the SavedModel: greedy {greedy['identical']:,}/"
          f"{greedy['sentences']:,} identical (largest score difference {greedy['max_score_difference']:.2g}); "
          f"{search} {beam['identical']:,}/{beam['sentences']:,} (largest score difference "
          f"{beam['max_score_difference']:.2g}; of those that differ, CTranslate2's output scores higher on "
          f"{beam['other_scores_higher']:,} and lower on {beam['other_scores_lower']:,}).")
    print("- int8 over float32 (sentences/s): " + "; ".join(
        f"{variant_text(kind)} {ratio:.2f}x" for kind, ratio in record["int8_speed_over_float32"].items()) + ".")
    if with_bleu:
        print(f"- BLEU against {os.path.basename(record['reference'])}: sacreBLEU {record['bleu_signature']}.")
    unstable = {name: row["outputs_changed_in_later_rounds"] for name, row in rows.items()
                if row["outputs_changed_in_later_rounds"]}
    if unstable:
        print(f"- Outputs changed between rounds (most in one round): {unstable}.")


def main(argv):
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}")
    from keras_transformer.export import ctranslate2_model  # pylint: disable=g-import-not-at-top  (no TensorFlow)

    ctranslate2_model.check_quantization("int8")  # ctranslate2 4.x is installed
    if not os.path.isdir(FLAGS.model_dir):
        raise FileNotFoundError(f"--model_dir={FLAGS.model_dir}: no such training directory")
    if FLAGS.work_dir:
        command_files.check_writable_folder(FLAGS.work_dir, "work_dir")
    lines, references = engine_process.read_corpus(FLAGS.input, FLAGS.reference, FLAGS.sentences)
    decoding = task_flags.decoding_config()
    command = " ".join(shlex.quote(a) for a in [os.path.relpath(sys.executable), *sys.argv])
    machine = host()
    threads = FLAGS.threads or machine["physical_cores"]
    print(f"CPU: {machine['cpu']} ({machine['vendor']}), {machine['cores']} cores "
          f"({machine['physical_cores']} physical; "
          f"{flags_text(machine)}), load average {machine['load_average']}; {threads} threads per engine; "
          f"command: {command}", flush=True)

    tf = engine_process.start_tensorflow(threads)
    from keras_transformer.export import serving_module  # pylint: disable=g-import-not-at-top

    # A training directory without a checkpoint or tokenizer fails here, and a model CTranslate2
    # cannot express (d_k != d_v, another activation, special pieces named differently on the two
    # sides) at `build_spec`: both before anything is written.
    translator, checkpoint = serving_module.from_model_dir(FLAGS.model_dir, decoding, FLAGS.checkpoint)
    ctranslate2_model.build_spec(translator.model, translator.source_tokenizer.pieces(),
                                 translator.target_tokenizer.pieces(),
                                 ctranslate2_model.default_max_positions(translator.model.config, decoding))
    with engine_process.work_folder("serving_vs_ctranslate2-", FLAGS.work_dir) as work:
        measured = measure(translator, checkpoint, work, lines, references, threads, FLAGS.bfloat16)
    record = {"command": command, "host": machine, "tensorflow": tf.__version__, "model_dir": FLAGS.model_dir,
              "input": FLAGS.input, "reference": FLAGS.reference, **measured}
    print_markdown(record)
    greedy_differs = record["fidelity"]["greedy"]["differing"]
    if greedy_differs:
        print(f"\nFAILED: greedy search gives other translations on {greedy_differs:,} of {len(lines):,} sentences "
              "(it must give the same on all); exit status 1")
    print("\n" + json.dumps(record, sort_keys=True))
    return 1 if greedy_differs else 0


if __name__ == "__main__":
    cli.run(main)
