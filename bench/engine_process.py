"""One translation engine in a process of its own, timed on request, as a server holds it.

The worker side of bench/serving_vs_ctranslate2.py and bench/model_shapes_speed.py, the handle
their parent holds, and what both parents share around it (no flags: each passes its own values):

    lines, references = engine_process.read_corpus(input_path, reference_path, sentences)
    batches = engine_process.sentence_batches(lines, batch_size)   # the same for every engine
    spec = engine_process.engine_spec("saved_model", path, decoding, threads, [[lines[i] for i in b] for b in batches])
    with engine_process.started({"saved_model": spec, ...}, work) as processes:
        processes["saved_model"].request("translate")   # {"seconds": 1.2, "outputs": [[...], ...]}
        seconds, outputs, changed = engine_process.time_engines(processes, batches, repeats)

`host()` describes the machine the figures belong to; `export_tokenizers`, `as_texts` and
`target_tokens` turn a CTranslate2 worker's pieces into text and count the target tokens of any
engine's translations the same way.

`started` writes each spec to `work/<name>.json` and runs `python bench/engine_process.py
work/<name>.json` for it: a fresh interpreter that loads that one engine and nothing else, then
answers requests until its stdin closes. A spec is a JSON object:

    engine        "saved_model": a SavedModel's `serving_default` (`keras_transformer.export.client.load_translate_fn`),
                  strings in and out;
                  "export_path": `ctranslate2_model.translate_pieces` on source pieces (the
                  project's decoding with CTranslate2: outputs re-ranked by `rescore`), pieces out;
                  "plain": `ctranslate2.Translator.translate_batch` alone on the pieces, CTranslate2's
                  own ranking and defaults, pieces out, no score;
                  "text": `Ctranslate2Translator.translate`, strings in and out.
    path          the export's folder (a SavedModel version folder or a CTranslate2 model folder).
    batches       the inputs, batch by batch: sentences (str) for "saved_model" and "text", source
                  piece lists for "export_path" and "plain" (tokenized once by the parent).
    threads       TensorFlow's intra- and inter-op threads, CTranslate2's intra_threads.
    compute_type, inter_threads  CTranslate2's ("float32" or "int8"; 1 for one batch at a time).
    ct2_use_mkl   CTranslate2's engines: the value of the environment variable CT2_USE_MKL in the
                  worker ("0": its oneDNN (DNNL) backend instead of Intel MKL), or None (the default):
                  the variable is removed from the worker's environment, even when the parent has it,
                  so that CTranslate2 decides as installed (MKL on a GenuineIntel CPU if built with it).
    decoding      `DecodingConfig.to_dict()` (what CTranslate2 is asked to do; a SavedModel's is built in).

What each engine imports is what it needs. "plain" imports ctranslate2 and no TensorFlow.
"export_path" and "text" start TensorFlow (`cli.start_tensorflow` with `threads`) because the
library code they time needs it: `rescore` ranks with `beam_search.length_penalty` (a TF
function) and `Ctranslate2Translator` tokenizes with the export's tensorflow-text tokenizers.
"saved_model" starts TensorFlow and loads one SavedModel. A CTranslate2 engine's translator is
`ctranslate2.Translator(path, device="cpu", compute_type, intra_threads=threads, inter_threads)`.

Which matrix-product (GEMM) backend CTranslate2 uses is decided once per process, when its first
model loads (CTranslate2's src/cpu/backend.cc: CT2_USE_MKL if set, else Intel MKL on a CPU whose
vendor is GenuineIntel when the build has MKL, else oneDNN), and CTranslate2 says which in info-level
log lines at that moment (src/utils.cc `log_system_config`: "CPU: GenuineIntel (...)", " - Use Intel
MKL: true", " - SGEMM backend: MKL (packed: true)", " - GEMM_S8 backend: ...", and src/models/model.cc
" - Selected compute type: int8_float32"). A CTranslate2 worker raises the log level to info for the
load (`ctranslate2.set_log_level`), catches those lines off file descriptor 2 (`ctranslate2_loaded`),
and reports them parsed (`ctranslate2_system`) with the backend of its own compute type.

Protocol: one request a line on stdin, one JSON reply a line on the worker's stdout (a copy of
file descriptor 1 made at start; fd 1 then points at stderr, so a library's print cannot break
a reply). The first reply, sent once the engine is loaded, describes the process: pid, load
seconds, whether TensorFlow is imported and its thread counts, CTranslate2's compute type or the
SavedModel's precision, and for CTranslate2 the CT2_USE_MKL it saw and what its log said
(`ctranslate2_system`: CPU vendor, ISA, MKL or not, each GEMM backend, and "gemm_backend": the
one its compute type multiplies with).
Requests:

    warm_up      translate the first batch; reply {}.
    translate    translate every batch in order; reply {"seconds": the time of those calls alone,
                 "outputs": per batch, per sentence [output, score]} (output: text or pieces;
                 score None for "plain", whose score is not the project's).
    count_calls  ("export_path") reply {"calls": the translate_batch calls one pass makes}.

A worker that fails prints its traceback to stderr and exits; the parent's next read raises.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Iterator, Optional

ENGINES = ("saved_model", "export_path", "plain", "text")
CLOSE_SECONDS = 60  # a worker whose stdin is closed exits at once; one that does not is killed
USE_MKL = "CT2_USE_MKL"  # CTranslate2's environment variable: MKL or not (its docs/environment_variables.md)
# CTranslate2's info lines as it loads its first model (src/utils.cc, src/models/model.cc) -> the
# record's keys; each must be there.
CT2_LOG_LINES = {
    "cpu_vendor": re.compile(r"\bCPU: (\S+)"),
    "isa": re.compile(r" - Selected ISA: (\S+)"),
    "use_mkl": re.compile(r" - Use Intel MKL: (true|false)"),
    "sgemm": re.compile(r" - SGEMM backend: (\S+) \(packed: (true|false)"),
    "gemm_s16": re.compile(r" - GEMM_S16 backend: (\S+) \(packed: (true|false)"),
    "gemm_s8": re.compile(r" - GEMM_S8 backend: (\S+) \(packed: (true|false)"),
    "compute_type": re.compile(r" - Selected compute type: (\S+)"),
}
GEMMS = {"float32": "sgemm", "int16": "gemm_s16", "int8": "gemm_s8"}  # compute type (its start) -> its GEMM


# The worker -------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Engine:
    """One loaded engine.

    Attributes:
        run: batch number -> per sentence of that batch (output, score) as the engine returns
            them (timed).
        as_json: such a list -> [output, score] pairs JSON can carry (not timed).
        compute_type: CTranslate2's compute type, or the SavedModel's precision (its export.json).
        count_calls: for the export path, the translate_batch calls of one pass.
        ctranslate2: for CTranslate2, `ctranslate2_system` of its load's log.
    """

    run: Callable[[int], list]
    as_json: Callable[[list], list] = list
    compute_type: Optional[str] = None
    count_calls: Optional[Callable[[], int]] = None
    ctranslate2: Optional[dict[str, Any]] = None


def start_tensorflow(threads: int):
    """TensorFlow with `threads` intra- and inter-op threads (`cli.start_tensorflow`), its logger
    and absl's quiet below warnings (no "Assets written to" lines from the SavedModel writer)."""
    from absl import logging  # pylint: disable=g-import-not-at-top

    from keras_transformer import cli  # pylint: disable=g-import-not-at-top

    tf = cli.start_tensorflow(threads=threads)
    tf.get_logger().setLevel("ERROR")
    logging.set_verbosity(logging.WARNING)
    return tf


def ctranslate2_system(log: str) -> dict[str, Any]:
    """What CTranslate2's info lines at its first model load (`CT2_LOG_LINES`) say: CPU vendor,
    ISA, whether it uses Intel MKL, the backend of each GEMM (float32 "sgemm", "gemm_s16", int8
    "gemm_s8") and whether it packs the weights, the compute type selected, and "gemm_backend":
    the backend of that compute type's products. Raises ValueError if a line is missing (a
    CTranslate2 that logs otherwise): a figure without its backend could mislead."""
    found = {key: pattern.search(log) for key, pattern in CT2_LOG_LINES.items()}
    missing = [key for key, match in found.items() if match is None]
    if missing:
        raise ValueError(f"CTranslate2's load log has no line for {', '.join(missing)}; it said: {log.strip()!r}")
    system: dict[str, Any] = {"cpu_vendor": found["cpu_vendor"][1], "isa": found["isa"][1],
                              "use_mkl": found["use_mkl"][1] == "true", "compute_type": found["compute_type"][1]}
    for key in ("sgemm", "gemm_s16", "gemm_s8"):
        system[key] = {"backend": found[key][1], "packed": found[key][2] == "true"}
    gemm = next((key for prefix, key in GEMMS.items() if system["compute_type"].startswith(prefix)), None)
    system["gemm_backend"] = dict(system[gemm], gemm=gemm) if gemm else None  # float16, bfloat16: no such line
    return system


def ctranslate2_loaded(load: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """`load()` (which loads this process's first CTranslate2 model) with CTranslate2 logging at
    info level and file descriptor 2 caught in a temporary file; returns its result and
    `ctranslate2_system` of the lines caught. If `load` fails, the lines go to stderr first."""
    import ctranslate2  # pylint: disable=g-import-not-at-top

    level = ctranslate2.get_log_level()
    ctranslate2.set_log_level(logging.INFO)
    with tempfile.TemporaryFile() as caught:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(caught.fileno(), 2)
        failed = True
        try:
            loaded = load()
            failed = False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            ctranslate2.set_log_level(level)
            caught.seek(0)
            log = caught.read().decode("utf-8", errors="replace")
            if failed:
                sys.stderr.write(log)
    return loaded, ctranslate2_system(log)


def _translator_options(spec: dict[str, Any]) -> dict[str, Any]:
    """`ctranslate2.Translator` arguments: the spec's compute type, intra_threads and inter_threads, on CPU."""
    return dict(device="cpu", compute_type=spec["compute_type"], intra_threads=spec["threads"],
                inter_threads=spec["inter_threads"])


def _decoding(spec: dict[str, Any]):
    from keras_transformer.config import DecodingConfig  # pylint: disable=g-import-not-at-top  (no TensorFlow)

    return DecodingConfig(**spec["decoding"])


def _ctranslate2_translator(spec: dict[str, Any]):
    """The export's `Ctranslate2Translator` (TensorFlow started first: its tokenizers need it) and
    `ctranslate2_system` of its load (sentencepiece's INFO lines as the tokenizers load are caught too)."""
    start_tensorflow(spec["threads"])
    from keras_transformer.export import ctranslate2_model  # pylint: disable=g-import-not-at-top

    return ctranslate2_loaded(lambda: ctranslate2_model.Ctranslate2Translator(spec["path"], _decoding(spec),
                                                                              **_translator_options(spec)))


def saved_model_engine(spec: dict[str, Any]) -> Engine:
    """A SavedModel's `serving_default` (the batches' tensors are made before timing), float32 or
    bfloat16 as exported."""
    tf = start_tensorflow(spec["threads"])
    from keras_transformer.export import client, serving_module, versions  # pylint: disable=g-import-not-at-top
    from keras_transformer import cli  # pylint: disable=g-import-not-at-top

    with cli.silence_native_stderr():
        serving_default = client.load_translate_fn(export_dir=spec["path"])[0]
    inputs = [tf.constant([line.encode("utf-8") for line in batch], tf.string) for batch in spec["batches"]]

    def run(k: int) -> list:
        outputs = serving_default(**{serving_module.SIGNATURE_INPUT: inputs[k]})
        return list(zip(outputs["translations"].numpy().tolist(), outputs["scores"].numpy().tolist()))

    precision = versions.read_settings(versions.saved_model_path(spec["path"])).get("precision", "float32")
    return Engine(run, lambda pairs: [[text.decode("utf-8"), score] for text, score in pairs], precision)


class CountingTranslator:
    """A `ctranslate2.Translator` that counts its `translate_batch` calls."""

    def __init__(self, translator):
        self.translator, self.calls = translator, 0

    def translate_batch(self, *args, **kwargs):
        self.calls += 1
        return self.translator.translate_batch(*args, **kwargs)


def export_path_engine(spec: dict[str, Any]) -> Engine:
    """The export path: `translate_pieces` with a `Ctranslate2Translator`'s model on sources
    tokenized beforehand; outputs stay pieces."""
    from keras_transformer.export import ctranslate2_model  # pylint: disable=g-import-not-at-top

    (ct2, system), decoding, batches = _ctranslate2_translator(spec), _decoding(spec), spec["batches"]

    def translate(translator, k: int) -> list:
        nbest = ctranslate2_model.translate_pieces(translator, batches[k], decoding, ct2.config, special=ct2.special,
                                                   use_vmap=ct2.use_vmap)
        return [hypotheses[0] for hypotheses in nbest]

    def count_calls() -> int:
        counting = CountingTranslator(ct2.translator)
        for k in range(len(batches)):
            translate(counting, k)
        return counting.calls

    return Engine(lambda k: translate(ct2.translator, k), compute_type=ct2.translator.compute_type,
                  count_calls=count_calls, ctranslate2=system)


def plain_options(decoding, batch: list[list[str]]) -> dict[str, Any]:
    """The plain CTranslate2 call's arguments for `batch`: beam size, alpha as CTranslate2's own
    length penalty, and one output limit, that of the batch's longest source (tokens, EOS
    included, + max_extra_length: the project's limit for that sentence); CTranslate2's
    defaults otherwise."""
    longest = max((len(pieces) for pieces in batch), default=0) + 1  # + the EOS CTranslate2 appends
    return dict(beam_size=decoding.beam_size, length_penalty=decoding.alpha,
                max_decoding_length=longest + decoding.max_extra_length)


def plain_engine(spec: dict[str, Any]) -> Engine:
    """CTranslate2 alone: one `translate_batch` per batch, its best hypothesis by its own
    ranking, no score. Imports ctranslate2 and no TensorFlow."""
    import ctranslate2  # pylint: disable=g-import-not-at-top

    translator, system = ctranslate2_loaded(lambda: ctranslate2.Translator(spec["path"], **_translator_options(spec)))
    decoding, batches = _decoding(spec), spec["batches"]
    options = [plain_options(decoding, batch) for batch in batches]

    def run(k: int) -> list:
        results = translator.translate_batch(batches[k], **options[k])
        return [(result.hypotheses[0], None) for result in results]

    return Engine(run, compute_type=translator.compute_type, ctranslate2=system)


def text_engine(spec: dict[str, Any]) -> Engine:
    """`Ctranslate2Translator.translate`: sentences in, translations out."""
    (ct2, system), decoding, batches = _ctranslate2_translator(spec), _decoding(spec), spec["batches"]

    def run(k: int) -> list:
        return [hypotheses[0] for hypotheses in ct2.translate(batches[k], decoding)]

    return Engine(run, compute_type=ct2.translator.compute_type, ctranslate2=system)


LOADERS = {"saved_model": saved_model_engine, "export_path": export_path_engine, "plain": plain_engine,
           "text": text_engine}


def _translate(engine: Engine, count: int) -> dict[str, Any]:
    """Every batch in order, timed: the engine's calls alone, not the JSON made of their outputs."""
    start = time.perf_counter()
    per_batch = [engine.run(k) for k in range(count)]
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "outputs": [[list(pair) for pair in engine.as_json(pairs)] for pairs in per_batch]}


def serve(spec_path: str) -> None:
    """Loads the engine of `spec_path`, says so, then answers requests until stdin closes."""
    with open(spec_path, encoding="utf-8") as file:
        spec = json.load(file)
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # from here a print anywhere goes to stderr, never into the replies

    def reply(message: dict[str, Any]) -> None:
        replies.write(json.dumps(message) + "\n")
        replies.flush()

    started = time.perf_counter()
    engine = LOADERS[spec["engine"]](spec)
    tf = sys.modules.get("tensorflow")
    reply({"pid": os.getpid(), "load_seconds": time.perf_counter() - started, "tensorflow": tf is not None,
           "tensorflow_threads": ([tf.config.threading.get_intra_op_parallelism_threads(),
                                   tf.config.threading.get_inter_op_parallelism_threads()] if tf else None),
           "compute_type": engine.compute_type, "ctranslate2": engine.ctranslate2,
           USE_MKL: os.environ.get(USE_MKL)})
    count = len(spec["batches"])

    def warm_up() -> dict[str, Any]:
        engine.run(0)
        return {}

    handlers = {"warm_up": warm_up,
                "translate": lambda: _translate(engine, count),
                "count_calls": lambda: {"calls": engine.count_calls()}}
    for line in iter(sys.stdin.readline, ""):
        reply(handlers[line.strip()]())


# The parent's handle ----------------------------------------------------------------------------

def worker_environment(spec: dict[str, Any]) -> dict[str, str]:
    """This process's environment with CT2_USE_MKL as `spec` says: its "ct2_use_mkl", or absent
    (CTranslate2 decides as installed) when that is None or missing."""
    environment = {key: value for key, value in os.environ.items() if key != USE_MKL}
    if spec.get("ct2_use_mkl") is not None:
        environment[USE_MKL] = spec["ct2_use_mkl"]
    return environment


class EngineProcess:
    """A worker process running one engine: started at once, `ready()` waits for it to load."""

    def __init__(self, name: str, spec: dict[str, Any], work: str):
        if spec["engine"] not in ENGINES:
            raise ValueError(f"unknown engine {spec['engine']!r}; one of {', '.join(ENGINES)}")
        self.name, self.info = name, None
        spec_path = os.path.join(work, f"{name}.json")
        with open(spec_path, "w", encoding="utf-8") as file:
            json.dump(spec, file)
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), spec_path],
                                        env=worker_environment(spec), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, encoding="utf-8")

    def ready(self) -> dict[str, Any]:
        """The worker's first reply (pid, load seconds, TensorFlow or not, compute type, CTranslate2's
        CT2_USE_MKL and `ctranslate2_system`)."""
        self.info = self._reply()
        return self.info

    def request(self, what: str) -> dict[str, Any]:
        self.process.stdin.write(what + "\n")
        self.process.stdin.flush()
        return self._reply()

    def _reply(self) -> dict[str, Any]:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} engine's process (pid {self.process.pid}) ended with status "
                               f"{self.process.wait()} without replying; its error is above")
        return json.loads(line)

    def close(self) -> None:
        """Closes the worker's stdin (it exits); kills it if it has not within CLOSE_SECONDS."""
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=CLOSE_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def started(specs: dict[str, dict[str, Any]], work: str) -> Iterator[dict[str, EngineProcess]]:
    """One worker process per spec, all loading at once; yields them once every one is ready,
    and closes them all on the way out."""
    processes: dict[str, EngineProcess] = {}
    try:
        for name, spec in specs.items():
            processes[name] = EngineProcess(name, spec, work)
        for process in processes.values():
            process.ready()
        yield processes
    finally:
        for process in processes.values():
            process.close()


# What the parents share: the host, the input, the specs, the timed rounds, the outputs ------------

CPU_FLAGS = {  # /proc/cpuinfo flag -> its name in the output: what decides which precision pays
    "avx2": "AVX2", "avx512f": "AVX-512", "avx512_vnni": "AVX512_VNNI", "avx512_bf16": "AVX512_BF16",
    "amx_bf16": "AMX-BF16", "amx_int8": "AMX-INT8"}
CT2_INTER_THREADS = 1  # one batch at a time, as the SavedModel is called (CTranslate2's docs/parallel.md)
# A pause before each engine's turn: the previous engine's idle threads (OpenMP's and TensorFlow's
# pools spin a while before they sleep) are asleep before the next engine's clock starts.
SETTLE_SECONDS = 1.0
PIECES_OUT = ("export_path", "plain")  # engines whose inputs and outputs are pieces, not text


@contextlib.contextmanager
def work_folder(prefix: str, work_dir: Optional[str]) -> Iterator[str]:
    """A new folder for a benchmark's exports and worker specs, under `work_dir` (made if missing;
    default: the system's temporary folder): kept at the end only when `work_dir` is given and
    the block completed, removed otherwise."""
    if work_dir:
        os.makedirs(work_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix=prefix, dir=work_dir)  # a new folder each run
    completed = False
    try:
        yield work
        completed = True
    finally:
        if not (work_dir and completed):
            shutil.rmtree(work, ignore_errors=True)


def host() -> dict[str, Any]:
    """The CPU model and vendor, physical cores and instruction sets of `CPU_FLAGS` it has
    (/proc/cpuinfo), the logical cores and the load average: what the figures depend on."""
    cpu, vendor, cores, cpu_flags = platform.processor() or platform.machine(), None, set(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            blocks = file.read().split("\n\n")  # one block per logical CPU
    except OSError:
        blocks = []
    for block in blocks:
        fields = dict((key.strip(), value.strip()) for key, _, value in
                      (line.partition(":") for line in block.splitlines()))
        cpu, vendor = fields.get("model name", cpu), fields.get("vendor_id", vendor)
        cpu_flags.update(fields.get("flags", "").split())
        if "core id" in fields:
            cores.add((fields.get("physical id"), fields["core id"]))
    return {"cpu": cpu, "vendor": vendor, "cores": os.cpu_count(), "physical_cores": len(cores) or os.cpu_count(),
            "cpu_flags": {name: flag in cpu_flags for flag, name in CPU_FLAGS.items()},
            "load_average": [round(load, 2) for load in os.getloadavg()]}


def flags_text(machine: dict[str, Any]) -> str:
    """"AVX2 yes, AVX-512 yes, ..." of `host()`'s CPU flags."""
    return ", ".join(f"{name} {'yes' if present else 'no'}" for name, present in machine["cpu_flags"].items())


def read_corpus(input_path: str, reference_path: Optional[str], sentences: int
                ) -> tuple[list[str], Optional[list[str]]]:
    """The first `sentences` lines (0: all) of `input_path` (stripped), and of `reference_path`
    (None without it): the files of the benchmarks' --input and --reference flags.

    `text_files.read_lines` reads a gzipped file as such (it looks at the magic bytes, not the
    name) and raises a one-line `DataError` (a ValueError) for a missing, empty or non-UTF-8 file;
    references that do not match the input line for line are a one-line ValueError.
    """
    from keras_transformer.files import command_files  # pylint: disable=g-import-not-at-top  (no TensorFlow)
    from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top

    command_files.check_input_file(input_path, "input")
    command_files.check_input_file(reference_path, "reference")
    lines = text_files.read_lines(input_path)
    references = text_files.read_lines(reference_path) if reference_path else None
    if references is not None and len(references) != len(lines):
        raise ValueError(f"--reference={reference_path} has {len(references):,} lines but --input={input_path} "
                         f"has {len(lines):,}")
    count = sentences or len(lines)
    return lines[:count], (references[:count] if references is not None else None)


def sentence_batches(lines: list[str], batch_size: int) -> list[list[int]]:
    """The indices of `lines` in batches of at most `batch_size` sentences of similar length,
    longest first (`sorted_batches.length_sorted_batches` on the key `keras_transformer.export.client.translate_lines`
    sorts by: words, then bytes): the same batches for every engine and every model."""
    from keras_transformer.decoding import sorted_batches  # pylint: disable=g-import-not-at-top

    encoded = [line.encode("utf-8") for line in lines]
    lengths = [(len(line.split()), len(line)) for line in encoded]  # export.client.translate_lines' key
    return sorted_batches.length_sorted_batches(lengths, batch_size, descending=True)


def export_tokenizers(path: str):
    """The `Ctranslate2Translator` of the CTranslate2 export at `path`, for its `tokenize` and
    `detokenize` (the export's own tokenizers) only: its model is unloaded at once, so the
    calling process holds no engine."""
    from keras_transformer.export import ctranslate2_model  # pylint: disable=g-import-not-at-top
    from keras_transformer import cli  # pylint: disable=g-import-not-at-top

    with cli.silence_native_stderr():  # sentencepiece's INFO lines as the tokenizers load
        tokenizers = ctranslate2_model.Ctranslate2Translator(path, device="cpu", intra_threads=1)
    tokenizers.translator.unload_model()
    return tokenizers


def engine_spec(engine: str, path: str, decoding, threads: int, batches: list, compute_type: Optional[str] = None,
                use_mkl: Optional[str] = None) -> dict[str, Any]:
    """What a worker needs to run `engine` (one of `ENGINES`) on `batches` (sentences, or source
    pieces for `PIECES_OUT`); a CTranslate2 engine (with a `compute_type`) gets
    CT2_INTER_THREADS and CT2_USE_MKL=`use_mkl` (None: unset)."""
    spec = {"engine": engine, "path": path, "decoding": decoding.to_dict(), "threads": threads, "batches": batches}
    if compute_type:
        spec.update(compute_type=compute_type, inter_threads=CT2_INTER_THREADS, ct2_use_mkl=use_mkl)
    return spec


def in_input_order(batches: list[list[int]], per_batch: list[list]) -> list:
    """A worker's outputs, per batch, as one list in input order."""
    results: list = [None] * sum(len(batch) for batch in batches)
    for batch, outputs in zip(batches, per_batch):
        for i, output in zip(batch, outputs):
            results[i] = output
    return results


def time_engines(processes: dict[str, EngineProcess], batches: list[list[int]], repeats: int
                 ) -> tuple[dict[str, list[float]], dict[str, list], dict[str, int]]:
    """Warms each engine up on the first batch, then times `repeats` rounds of all batches per
    engine, the engines' order rotated each round; each worker times its own calls while the
    others wait for their turn, each turn after a pause of SETTLE_SECONDS.

    Returns per engine: the seconds of every round, the first round's [output, score] pairs in
    input order, and the most outputs a later round changed (0 for a deterministic engine).
    """
    for process in processes.values():
        process.request("warm_up")
    names = list(processes)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    outputs: dict[str, list] = {}
    changed = {name: 0 for name in names}
    for round_index in range(repeats):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            time.sleep(SETTLE_SECONDS)
            reply = processes[name].request("translate")
            seconds[name].append(reply["seconds"])
            result = in_input_order(batches, reply["outputs"])
            if name in outputs:
                changed[name] = max(changed[name], sum(a[0] != b[0] for a, b in zip(outputs[name], result)))
            else:
                outputs[name] = result
        print(f"round {round_index + 1}/{repeats}: "
              + ", ".join(f"{name} {seconds[name][-1]:.2f} s" for name in names), flush=True)
    return seconds, outputs, changed


def as_texts(engine: str, pairs: list, tokenizers) -> list[tuple[str, Optional[float]]]:
    """A worker's [output, score] pairs as (translation, score): the pieces of `PIECES_OUT`
    detokenized by the export's tokenizer (`tokenizers`, `export_tokenizers`), text as it is."""
    if engine not in PIECES_OUT:
        return [(text, score) for text, score in pairs]
    from keras_transformer import cli  # pylint: disable=g-import-not-at-top

    with cli.silence_native_stderr():  # a tokenizer's first use prints sentencepiece's INFO lines
        return list(zip(tokenizers.detokenize([pieces for pieces, _ in pairs]), [score for _, score in pairs]))


def target_tokens(tokenizer, translations: list[str], nonempty: list[bool]) -> int:
    """The pieces of `translations` (tokenized again by the target `tokenizer`) plus one EOS per
    non-empty source: every engine's output counted the same way."""
    from keras_transformer import cli  # pylint: disable=g-import-not-at-top

    with cli.silence_native_stderr():
        lengths = tokenizer.tokenize(translations).row_lengths().numpy()
    return int(lengths.sum()) + sum(nonempty)


if __name__ == "__main__":
    serve(sys.argv[1])
