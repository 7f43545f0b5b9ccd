"""The project against OpenNMT-tf 2.32 on the same data, model, hardware: speed, quality, serving.

    .venv/bin/python bench/opennmt_tf_side_by_side.py --data_dir=../shared/data/multi30k --out=side_by_side.json
    .venv/bin/python bench/opennmt_tf_side_by_side.py --parts=speed,startup,serving --shape=base ...
    .venv/bin/python bench/opennmt_tf_side_by_side.py --peer_venv=/work/onmt-venv --parts=speed ...

    # one measurement over several sessions: the first keeps its work folder WORK (it prints the path:
    # /work/opennmt_tf_side_by_side-XXXX), each next session resumes it until it is complete
    .venv/bin/python bench/opennmt_tf_side_by_side.py --data_dir=../shared/data/multi30k --work_dir=/work --keep ...
    .venv/bin/python bench/opennmt_tf_side_by_side.py --resume=WORK --out=side_by_side.json

OpenNMT-tf is the TensorFlow toolkit a user would otherwise pick. This harness makes the peer's
own virtual environment (`opennmt_tf.peer_venv`: OpenNMT-tf 2.32.0, TensorFlow 2.12,
tensorflow-text, tensorflow-addons, ctranslate2 3.x, every version pinned, from PyPI) in
--peer_venv (default: inside this run's work folder), writes the peer's configuration from the
project's recipe (--recipe, configs/multi30k_en_de.flags: `opennmt_tf.peer_config`), and runs
each toolkit's own commands in processes of their own, the toolkits alternating
(`opennmt_tf.train_runs`, `opennmt_tf.serve_runs`). --parts chooses what runs:

1. speed: training target tokens/s over the same updates (--speed_steps, the first
   --speed_warmup left out), float32 against float32 and each toolkit in the precision its
   documentation recommends on this CPU (ours `--precision=auto`; OpenNMT-tf float32, its
   `--mixed_precision` being float16 for Volta GPUs and later), --speed_rounds times. The
   recipe's shape measures updates 400-1,000 of 1,000 by default: the project's training
   switches to an XLA-compiled loss after update 200
   (`keras_transformer.training.trainer.COMPILE_LOSS_AFTER`) and compiles it once per batch
   shape in the updates that follow, so its compilations fall mostly in the warm-up (a batch
   shape first seen later is still compiled inside the window) and the window holds both
   toolkits' steady state. The base shape measures updates 50-200 of 200 by default
   (an update of the base model takes seconds on a few cores): there ours runs its uncompiled
   loss throughout, a figure below its steady state, and the table's note says so.
2. startup: seconds from the train command's start to its first update, the progress line of
   update 1 in both consoles (`opennmt_tf.training_logs.first_update`).
3. quality: the recipe's whole run per seed (--seeds), each toolkit's own checkpoint averaging,
   the whole validation split translated by each toolkit's own command with beam search
   (--beam_size, --alpha), both scored here by `keras_transformer.metrics` (cased sacreBLEU; the
   lowercased Moses-tokenized convention of published Multi30k numbers): quality at equal
   updates; per seed, both averaged models also translate test2016 once, scored alike (the
   test rows). Then, per seed, quality at equal wall-clock (`opennmt_tf.wallclock`): T is the
   faster toolkit's time from its training command's start to the progress line of its final
   update (its last checkpoint; not the command's whole wall time, which adds each toolkit's own
   final evaluation and averaging), each checkpoint of both runs timed by that same rule from the
   harness's stamps of their consoles; the faster toolkit's last checkpoint against the slower's
   newest made at or before T, single checkpoints (not averaged) for both, translated and scored
   as above. The row notes T and the slower toolkit's update at T; a checkpoint no longer on disk
   is reported as not measured, with the update needed and those kept. Quality runs keep every
   checkpoint (--keep_checkpoints, OpenNMT-tf's keep_checkpoint_max: the saves of the run), which
   changes no average: ours averages its best (MODEL_DIR/best), OpenNMT-tf its last 3.
4. serving: each toolkit's SavedModel export (strings in, strings out) timed in a fresh process
   of its own on the same --serving_sentences test sentences in the same batches, and both
   CTranslate2 conversions timed by the same CTranslate2; the export times.
Peak RSS of every training, export and serving process (`os.wait4`). --shape=base runs the paper's
base model (6+6 layers, d_model 512, 8 heads, d_ff 2048, a shared 32k vocabulary as far as the data
gives one) for speed: a few hundred updates, and that short-trained model for decoding speed (a
model that short may not translate yet: the table's serving rows say when the toolkits' outputs
differ in length, so that their sentences/s time different searches; --parts=serving alone
trains a model of each toolkit for it, --serving_steps updates with a --serving_warmup warm-up,
ours in its recommended precision and with the peer's LayerNorm placement (pre-LN by default:
the same architecture, and one that translates after a few hundred updates); it refuses
--parts=quality with one `error:` line before any work.

It prints the versions of both toolkits (the project's Python and packages, the peer venv's
as its check found them) and a Markdown table (ours, OpenNMT-tf, ours / OpenNMT-tf;
`opennmt_tf.report`), and writes every number as JSON to --out (also when a part fails: what
was measured, and the error), with those versions ("versions") and every child process's
command line ("processes"). Its work folder (--work_dir/opennmt_tf_side_by_side-XXXX: data, the
shared tokenizer, runs, exports, logs, the journal, and the peer's venv unless --peer_venv is
given) is removed at the end unless --keep. Ctrl-C, SIGTERM and SIGHUP stop it alike
(`opennmt_tf.processes.stop_on_signals`): the running child's process group is stopped and the
work folder removed or kept as at a normal end. The peer's venv is made by this interpreter's
`venv`; TensorFlow 2.12 has wheels for Python 3.8 to 3.11 only, so another Python is refused
with one `error:` line before any work unless --peer_venv (or the journal) names a venv the
harness made.

Resuming: the whole measurement takes longer than a working session, and a process does not
outlive its session. Each finished unit of work (the peer's venv; the data and the tokenizer; each
speed, start-up and quality run with what is measured on it; each seed's comparison at equal
wall-clock and its test2016 scores; each short model; serving) is written to WORK/journal.json as
soon as it ends (`opennmt_tf.journal`), with the flags that define the measurement and the host. --resume=WORK
continues a work folder kept by --keep: it reuses its data, tokenizer, tfds copy and peer venv,
takes each finished unit's result (and for quality its run folders, the models it serves) from
the journal, and runs the rest; a unit cut short is run again from scratch. Its flags are the
journal's; one given again must have the journal's value, and the host (CPU model, instruction
sets, cores) must be the journal's, or it stops with one `error:` line before any work. A
journal stores the speed window's numbers; one that holds 0 for them was made when that meant
updates 100-600 of 600 at the recipe's shape, and resumes with that window
(`opennmt_tf.journal.ZERO_SPEED_DEFAULTS`). It prints which units are done and which remain;
its record and table are a one-go run's, with each unit's date and session, and "resumed":
which units each session gave. A resumed run keeps
the work folder unless the measurement is complete and --keep is not given. --parts and --seeds
choose units as usual: `--parts=quality --seeds=1,2` cut off after seed 1's two runs goes on with
seed 1's comparison at equal wall-clock, then seed 2's. A journal begun before the equal
wall-clock units existed resumes as it was (the same flags) and runs them from its finished
quality runs' folders and logs (kept in the work folder; seeds run before every checkpoint was
kept may find the slower toolkit's checkpoint at T rotated away).

Same for both: the Multi30k sentences (plain text, each line stripped); ONE SentencePiece model,
trained once by the project's command (`python -m keras_transformer.pipelines train_tokenizer`, the recipe's
tokenizer flags) and used by every run of both toolkits, in the peer's graph by its
`SentencePieceTokenizer` (OpenNMT-tf's vocabulary file lists the model's pieces, its four special
ones replaced by OpenNMT-tf's: as many ids as ours); N, d_model, h, d_ff, P_drop (0.3 on sub-layer
outputs and embeddings), no attention or ReLU dropout, one embedding matrix for source, target and
softmax; Adam(0.9, 0.98, 1e-9); equation (3) with the recipe's warm-up (2,000) and scale (x2.5),
and its linear cool-down over the last 3,000 updates; label smoothing 0.1, the loss averaged over
target tokens; batches of the recipe's 4,000 tokens with no gradient accumulation; pairs over 128
tokens dropped; the same number of updates; beam 4 with the GNMT length penalty alpha 0.6 (both
toolkits implement ((5 + |Y|) / 6) ** alpha).

Where the peer's configuration differs, and why:
- Layer normalization: OpenNMT-tf's default pre-LN (`pre_norm=True`, with a final LayerNorm in the
  encoder and the decoder); the recipe is post-LN. A measurement found OpenNMT-tf's post-LN
  Transformer stalls with this schedule (peak 4.9e-3) while its default pre-LN trains, so the peer
  runs as its users would (--nopeer_pre_norm gives it the paper's post-LN).
- The output layer has a bias (OpenNMT-tf's default `output_layer_bias=True`): 8,000 parameters
  more at the recipe's shape. With pre-LN the peer also has the encoder's and the decoder's final
  LayerNorms (a gain and a bias each: 4 x d_model, 512 at the recipe's shape); the rest of the
  count is identical (8,512 more in all at the recipe's shape, 0.4%).
- The cool-down: OpenNMT-tf has no such schedule; the harness registers one through its public
  `opennmt.schedules.register_learning_rate_schedule` in the peer's model.py (`NoamCooldown`:
  its own `NoamDecay` times the recipe's linear ramp). --nopeer_cooldown gives it plain NoamDecay.
- Checkpoint averaging: OpenNMT-tf averages its last checkpoints (`average_last_checkpoints: 3`,
  saved every 500 updates); the recipe averages its 3 best by dev loss, which in its cool-down are
  its last 3. Quality runs of both keep every checkpoint (the recipe keeps 5) for the comparison
  at equal wall-clock: only the rotation changes, not which checkpoints either averages. Early
  stopping: the recipe's (patience on dev loss, then the cool-down) has no OpenNMT-tf counterpart
  (its early stopping just stops); the peer runs all its updates.
- Dev evaluation during training: the recipe computes dev loss and greedy BLEU every 500 updates;
  the peer its dev loss (`--with_eval`) every 500. Neither touches the speed runs, which evaluate
  nothing before their end; both count in the quality runs' wall time.
- The output limit: the project's is per sentence (source length + --max_extra_length);
  OpenNMT-tf's is one number, set to the longest source of the sentences decoded +
  --max_extra_length.
- Precision: OpenNMT-tf recommends float32 on a CPU, so its "recommended precision" figures are
  its float32 runs.
- The tokenizer's vocabulary file is written by the harness, not by `onmt-build-vocab
  --from_format sentencepiece`, which would keep the model's <pad> piece as a word (one unused id).
- The peer's SavedModel is served under its own TensorFlow 2.12 (`opennmt_tf.peer_engine`),
  ours under the project's TensorFlow; both CTranslate2 folders are timed by the project's
  CTranslate2 4.x (the peer's was converted by its own ctranslate2 3.x).
- Threads: each training command with its toolkit's defaults (TensorFlow's: all cores); every
  serving engine with --threads intra- and inter-op threads (CTranslate2: intra_threads).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shlex
import shutil
import sys
import tempfile
import traceback
from typing import Optional

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/: engine_process, opennmt_tf

from keras_transformer.tasks import flags as task_flags  # noqa: E402  pylint: disable=wrong-import-position  (no TensorFlow)
from opennmt_tf.journal import SPEED_DEFAULTS, SPEED_FLAGS  # noqa: E402  pylint: disable=wrong-import-position

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTS = ("speed", "startup", "quality", "serving")

FLAGS = flags.FLAGS
flags.DEFINE_string("recipe", os.path.join(REPO, "configs", "multi30k_en_de.flags"), "The project's run recipe.")
flags.DEFINE_enum("shape", "recipe", ["recipe", "base"], "recipe: the recipe's model; base: 6+6, d_model 512, 8 heads, "
                  "d_ff 2048, a shared 32k vocabulary (speed, start-up and serving only).")
flags.DEFINE_string("data_dir", "../shared/data/multi30k", "Multi30k's raw release files ({train,val,"
                    "test_2016_flickr}.{en,de}.gz).")
flags.DEFINE_list("parts", None, f"What to measure, of {', '.join(PARTS)} (default: all; with --shape=base all "
                  "but quality).")
flags.DEFINE_list("seeds", ["1", "2"], "Seeds of the quality runs (the first also seeds the other parts' runs).")
flags.DEFINE_integer("quality_steps", 0, "Updates of each quality run (0: the recipe's); shorter runs keep the "
                     "recipe's cool-down, evaluation and checkpoint shares.", lower_bound=0)
flags.DEFINE_integer("dev_sentences", 0, "Translate and score only the first N validation pairs in quality "
                     "(0: the whole split; a smoke test's setting).", lower_bound=0)
flags.DEFINE_integer("speed_steps", 0, f"Updates of each speed run (0: {SPEED_DEFAULTS['recipe'][0]}, base "
                     f"{SPEED_DEFAULTS['base'][0]}).", lower_bound=0)
flags.DEFINE_integer("speed_warmup", 0, f"Updates left out of the speed (0: {SPEED_DEFAULTS['recipe'][1]}, base "
                     f"{SPEED_DEFAULTS['base'][1]}).", lower_bound=0)
flags.DEFINE_integer("log_every", 0, f"Progress lines every this many updates in speed runs (0: "
                     f"{SPEED_DEFAULTS['recipe'][2]}, base {SPEED_DEFAULTS['base'][2]}).", lower_bound=0)
flags.DEFINE_integer("speed_rounds", 2, "Speed runs per toolkit and precision, alternating; the best is reported.",
                     lower_bound=1)
flags.DEFINE_integer("serving_sentences", 1000, "Test sentences each serving engine translates (0: all).",
                     lower_bound=0)
flags.DEFINE_integer("serving_steps", 0, "Updates of the short model each toolkit trains for serving when neither "
                     "speed nor quality is measured (0: --speed_steps).", lower_bound=0)
flags.DEFINE_integer("serving_warmup", 0, "The learning-rate warm-up of those short models, in updates (0: the "
                     "recipe's); a short warm-up gets a model that translates in fewer updates.", lower_bound=0)
flags.DEFINE_integer("batch_size", 32, "Sentences per serving batch.", lower_bound=1)
flags.DEFINE_integer("repeats", 3, "Timed serving rounds, the engines taking turns.", lower_bound=1)
flags.DEFINE_integer("threads", 0, "Intra- and inter-op threads of every serving engine (0: all cores).",
                     lower_bound=0)
task_flags.define_decoding_flags()  # --beam_size 4, --alpha 0.6, --max_extra_length 50 (section 6.1), both toolkits
flags.DEFINE_bool("peer_pre_norm", True, "OpenNMT-tf's default pre-LN Transformer (False: the paper's post-LN).")
flags.DEFINE_bool("peer_cooldown", True, "Give the peer the recipe's cool-down (a schedule registered in its "
                  "model.py); False: plain NoamDecay.")
flags.DEFINE_string("peer_venv", None, "The peer's venv folder, made there if absent and kept (default: inside "
                    "the work folder, removed with it).")
flags.DEFINE_string("work_dir", None, "Where this run's work folder is made (default: the system's temporary "
                    "folder).")
flags.DEFINE_bool("keep", False, "Keep the work folder (runs, exports, logs, the journal) at the end, for a later "
                  "--resume.")
flags.DEFINE_string("resume", None, "Continue the measurement of this work folder (kept by --keep or an earlier "
                    "--resume): the units its journal holds are taken from it, the rest run. Its flags are the "
                    "journal's; one given again must have the same value. The folder is kept at the end unless the "
                    "measurement is complete and --keep is not given.")
flags.DEFINE_string("out", None, "Write the record as JSON here.")


HOST_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags a journal's host is told by


def host() -> dict:
    """`engine_process.host()` as the journal compares hosts: the CPU model, the instruction sets of
    HOST_FLAGS it has (they decide which precision pays), cores, load, Python."""
    import engine_process  # pylint: disable=import-outside-toplevel  (bench/)

    machine = engine_process.host()
    return {"cpu": machine["cpu"], "cores": machine["cores"], "load_average": machine["load_average"],
            "flags": [flag for flag in HOST_FLAGS if machine["cpu_flags"][engine_process.CPU_FLAGS[flag]]],
            "python": platform.python_version()}


def command_line_measurement():
    """This command line's `journal.Measurement` (every defining flag, normalized; the speed
    window's 0 resolved by `SPEED_DEFAULTS`), and the defining flags it gives: {name: normalized
    value}, a speed window flag given as 0 left out (a resumed measurement's default is its own)."""
    from opennmt_tf import journal  # pylint: disable=import-outside-toplevel

    parts = FLAGS.parts or [p for p in PARTS if FLAGS.shape != "base" or p != "quality"]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise app.UsageError(f"--parts: unknown {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    try:
        seeds = tuple(int(seed) for seed in FLAGS.seeds)
    except ValueError:
        raise app.UsageError(f"--seeds={','.join(FLAGS.seeds)}: whole numbers, comma-separated") from None
    values = {field.name: FLAGS[field.name].value for field in dataclasses.fields(journal.Measurement)}
    values.update(recipe=os.path.abspath(FLAGS.recipe), data_dir=os.path.abspath(FLAGS.data_dir),
                  parts=tuple(p for p in PARTS if p in parts), seeds=seeds)
    given = {name: value for name, value in values.items()
             if FLAGS[name].present and not (name in SPEED_FLAGS and value == 0)}
    return journal.Measurement(**values).with_speed_defaults(SPEED_DEFAULTS), given


def speed_settings(measurement) -> tuple[int, int, int]:
    """(updates, warm-up updates, log interval) of a speed run (and of a short serving model)."""
    return measurement.speed_steps, measurement.speed_warmup, measurement.log_every


def planned_units(measurement) -> list[str]:
    """The journal's keys of every unit of the measurement, in the order `measure` runs them."""
    from opennmt_tf import journal, serve_runs, train_runs  # pylint: disable=import-outside-toplevel

    parts = measurement.parts
    units = [journal.PEER_VENV, journal.WORKSPACE]
    if "speed" in parts:
        units += train_runs.speed_units(measurement.speed_rounds)
    if "startup" in parts:
        units += train_runs.startup_units()
    if "quality" in parts:
        units += train_runs.quality_units(list(measurement.seeds))
    if "serving" in parts:
        units += [] if {"speed", "quality"} & set(parts) else serve_runs.serving_model_units()
        units.append(journal.SERVING)
    return units


def measure(space, measurement, record) -> None:
    """Runs the measurement's parts into `record` (each unit the journal holds taken from it)."""
    from opennmt_tf import serve_runs, train_runs  # pylint: disable=import-outside-toplevel

    parts, seeds = measurement.parts, list(measurement.seeds)
    steps, warmup, log_every = speed_settings(measurement)
    models = {}
    if "speed" in parts:
        record["speed"] = train_runs.speed(space, measurement.speed_rounds, steps, warmup, log_every, seeds[0])
        models = record["speed"].pop("models")
    if "startup" in parts:
        record["startup"] = train_runs.startup(space, seeds[0])
    if "quality" in parts:
        training = train_runs.quality_training(space.recipe.training, measurement.quality_steps)
        record["quality"] = train_runs.quality(space, seeds, training)
        models = record["quality"].pop("models")
    if "serving" in parts:
        if not models:
            models = serve_runs.short_models(space, measurement.serving_steps or steps, measurement.serving_warmup,
                                             log_every, seeds[0])
        record["serving"] = serve_runs.serving(space, models, measurement.serving_sentences, measurement.batch_size,
                                               measurement.repeats)


def chosen_peer_venv(entry: Optional[dict]) -> Optional[str]:
    """--peer_venv, else the folder of the journal's unit `PEER_VENV` (`entry`), else None (a new
    venv in the work folder)."""
    return FLAGS.peer_venv or (entry["result"]["folder"] if entry else None)


def open_journal(measurement, given: dict, here: dict, command: str, versions: dict):
    """(the journal, the measurement): a new one in a new work folder, or --resume's, checked
    against this host and the given flags, and this Python against the peer's venv it would
    make, before any work (ValueError: one line). The session is recorded with the project's
    package `versions`."""
    from opennmt_tf import journal, peer_venv, recipe  # pylint: disable=import-outside-toplevel

    if FLAGS.resume:
        if FLAGS.work_dir:
            raise app.UsageError("--resume continues the work folder it names; --work_dir makes a new one: give one")
        book = journal.Journal.read(FLAGS.resume)
        measurement = book.resume(given, here)
    the_recipe = recipe.read(measurement.recipe, measurement.shape)
    if the_recipe.flags.get("dataset") != "multi30k" or not the_recipe.shared_vocab:
        raise app.UsageError(f"--recipe={measurement.recipe}: the harness compares Multi30k recipes with a shared "
                             "vocabulary")
    if FLAGS.resume:
        book.check_unchanged(the_recipe.flags, peer_venv.PINS)
        peer_venv.refuse_unsupported_python(chosen_peer_venv(book.entry(journal.PEER_VENV)))
    else:
        peer_venv.refuse_unsupported_python(chosen_peer_venv(None))
        work = tempfile.mkdtemp(prefix="opennmt_tf_side_by_side-", dir=FLAGS.work_dir)
        book = journal.Journal.start(work, measurement, here, the_recipe.flags, peer_venv.PINS)
    book.begin_session(command, versions=versions)
    return book, measurement, the_recipe


def ensure_peer_venv(book) -> tuple[str, dict]:
    """(the peer's venv folder, its versions as `peer_venv.check` found them this session): the
    folder --peer_venv, else the journal's, else WORK/onmt-venv (removed first if an earlier
    session was cut short making it); made or checked (the journal's unit `PEER_VENV`, which
    keeps the folder and the versions it was made or first checked with)."""
    from opennmt_tf import journal, peer_venv  # pylint: disable=import-outside-toplevel

    entry = book.entry(journal.PEER_VENV)
    inside = os.path.join(book.work, "onmt-venv")
    venv_dir = os.path.abspath(chosen_peer_venv(entry) or inside)
    if entry is None and venv_dir == inside:
        shutil.rmtree(venv_dir, ignore_errors=True)
    versions = peer_venv.ensure(venv_dir)
    if entry is None:
        book.record(journal.PEER_VENV, {"folder": venv_dir, "versions": versions}, processes=book.processes,
                    parameters=book.parameters)
    return venv_dir, versions


def versions_line(versions: dict) -> str:
    """"ours: python 3.11.7, tensorflow 2.21.0, ...; OpenNMT-tf's venv: python 3.11.7, ..."."""
    def listed(found: Optional[dict]) -> str:
        return ", ".join(f"{name} {version or 'absent'}" for name, version in found.items()) if found else "unchecked"

    return f"ours: {listed(versions['ours'])}; OpenNMT-tf's venv: {listed(versions['peer'])}"


def print_progress(book, units: list, session: int) -> None:
    done, remaining = book.progress(units)
    print(f"work folder: {book.work} (session {session} of this measurement; journal {book.path})")
    if done:
        print(f"units done ({len(done)}): " + ", ".join(f"{k} (session {book.entry(k)['session']})" for k in done))
    print(f"units to run ({len(remaining)}): {', '.join(remaining) or 'none'}", flush=True)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    from keras_transformer.config import DecodingConfig  # pylint: disable=import-outside-toplevel  (no TensorFlow)
    from opennmt_tf import peer_config, peer_venv, processes, report  # pylint: disable=import-outside-toplevel
    from opennmt_tf.toolkits import Commands, project_versions  # pylint: disable=import-outside-toplevel
    from opennmt_tf.workspace import Workspace  # pylint: disable=import-outside-toplevel

    processes.stop_on_signals()  # SIGTERM and SIGHUP take Ctrl-C's path: children stopped, `finally` run
    command = shlex.join([os.path.relpath(sys.executable), *sys.argv])
    here = host()
    versions = {"ours": project_versions(), "peer": None}
    book, measurement, the_recipe = open_journal(*command_line_measurement(), here, command, versions["ours"])
    work, session, units = book.work, len(book.sessions), planned_units(measurement)
    decoding = DecodingConfig(beam_size=measurement.beam_size, alpha=measurement.alpha,
                              max_extra_length=measurement.max_extra_length)
    first = book.sessions[0]
    record = {"command": first["command"], "date": first["date"], "host": here, "recipe": measurement.recipe,
              "shape": measurement.shape, "parts": list(measurement.parts), "measurement": measurement.to_dict(),
              "model": the_recipe.model.to_dict(), "training": dataclasses.asdict(the_recipe.training),
              "batch_tokens": the_recipe.batch_tokens, "decoding": decoding.to_dict(),
              "peer_pins": list(peer_venv.PINS), "versions": versions, "work": work}
    print(command, flush=True)
    print_progress(book, units, session)
    failure = None
    try:
        venv_dir, versions["peer"] = ensure_peer_venv(book)
        record["peer_venv"] = venv_dir
        commands = Commands(REPO, sys.executable, venv_dir, the_recipe, measurement.data_dir,
                            os.path.join(work, "tfds"))
        options = peer_config.PeerOptions(pre_norm=measurement.peer_pre_norm, cooldown=measurement.peer_cooldown)
        record["peer_options"] = dataclasses.asdict(options)
        space = Workspace.create(work, commands, options, decoding, measurement.threads or os.cpu_count(), book,
                                 measurement.dev_sentences)
        record["tokenizer"] = space.summary()
        try:
            measure(space, measurement, record)
        finally:
            record["processes"] = space.processes
            record["parameters"] = dict(space.parameters)
            record["peak_rss"] = {kind: {t: space.peak_rss(t, kind) for t in ("ours", "peer")}
                                  for kind in ("training", "export")}
            if set(space.parameters) != {"ours", "peer"}:
                del record["parameters"]
    except Exception as error:  # pylint: disable=broad-except
        failure = error
        record["error"] = "".join(traceback.format_exception_only(type(error), error)).strip()
    finally:
        remaining = book.progress(units)[1]
        if FLAGS.keep or (session > 1 and remaining):
            print(f"work folder kept: {work}" + (f" (to continue: --resume={work})" if remaining else ""), flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    record.update(book.summary(units))
    table = report.markdown(report.rows(record))
    sessions = "".join(f"\nsession {s['session']} ({s['date']}): {len(s['units'])} unit(s)"
                       for s in record.get("resumed", []))
    print(f"\n--- OpenNMT-tf side by side ({measurement.shape}) ---\n\n{record['host']['cpu']}, "
          f"{record['host']['cores']} cores ({', '.join(record['host']['flags'])}); {command}{sessions}\n"
          f"{versions_line(versions)}\n\n{table}\n", flush=True)
    if FLAGS.out:
        with open(FLAGS.out, "w", encoding="utf-8") as file:
            json.dump(record, file, indent=1, sort_keys=True, default=str)
        print(f"record: {FLAGS.out}")
    if failure is not None:
        raise failure
    return 0


if __name__ == "__main__":
    from keras_transformer import cli  # pylint: disable=g-import-not-at-top  (no TensorFlow)

    cli.run(main)
