"""Every command on hostile but realistic input: one table row a case, through the real commands.

The rows are grouped by what they try: fixed/ (faults fixed before, kept fixed), rundir/ (damaged
run directories), flags/ (bad flag values), text/ (odd input text), export/ (damaged exports),
signals/ (SIGINT and SIGTERM at moments of a command). A row expects success where success is
legitimate (its `why` says why: many odd inputs are fine and must translate), a refusal (exit 2,
one `error:` line, no traceback), either, or a signal's exit code; `tests.helpers.hostile`
builds the fixtures once per session, runs a row and checks its promise and what every row
shares (fixtures unchanged by hash, a failed command's outputs as they were, no half-written
version or temporary file). The cases the other fault tests already hold are not repeated here.
"""

import glob
import gzip
import os
import re
import shutil
import signal
import socket
import subprocess
from typing import Callable

import pytest

from tests.helpers.hostile import (BEST, EITHER, EMA, ERROR, FINISHED, LONG, OK, SHORT, SIGNAL, TINY, Case, Fixtures,
                                   Signal, absent, all_of, average, best_list, check_case, damage, edit_json, export,
                                   no_raw_warnings, output_lines, outside_entry, parse, pipelines,
                                   remember, run_reads, run_with_best, said, score, settings_of, skipped_to,
                                   stdout_lines, summary, train, translate, tree_digest, unchanged, variations,
                                   versions_in, write)


def fixed_cases() -> list:
    """Faults fixed before: each stays fixed."""
    cases = []
    for command, kind in (("score", "relative"), ("parse", "absolute"), ("evaluate", "absolute")):
        def prepare(ctx, command=command, kind=kind):
            return run_reads(ctx, run_with_best(ctx, outside_entry(ctx, kind)), command)
        cases.append(Case(f"fixed/best.json-{kind}-outside/{command}", ERROR, prepare,
                          "best.json naming a checkpoint outside the run", ("best.json", "outside"),
                          unchanged("other") if kind == "relative" else None))

    def average_outside(ctx):
        return run_reads(ctx, run_with_best(ctx, outside_entry(ctx, "absolute")), "average")
    cases.append(Case("fixed/best.json-absolute-outside/average_checkpoints", EITHER, average_outside,
                      "averaging reads the last checkpoints of checkpoints/, not best/: it may average them "
                      "(ckpt-6, ckpt-12) or refuse the run", ("best.json", "outside"),
                      lambda ctx, r: [] if r.code != 0 or "ckpt-6, ckpt-12" in r.stdout else
                      [f"averaged something else: {r.stdout.strip()[:200]}"]))

    for command in ("translate", "export", "resume"):
        def prepare(ctx, command=command):
            model_dir = ctx.copy(ctx.f.run)
            shutil.rmtree(os.path.join(model_dir, "averaged"))
            outside = os.path.join(ctx.f.other, "checkpoints", "ckpt-30")
            write(os.path.join(model_dir, "checkpoints", "checkpoint"),
                  f'model_checkpoint_path: "{outside}"\nall_model_checkpoint_paths: "ckpt-6"\n'
                  f'all_model_checkpoint_paths: "{outside}"\n')
            extra = ("--train_steps=18",) if command == "resume" else ()
            return run_reads(ctx, model_dir, command, extra=extra)
        cases.append(Case(f"fixed/checkpoint-state-absolute-outside/{command}", ERROR, prepare,
                          "checkpoints/checkpoint naming another run's checkpoint", ("checkpoint", "outside"),
                          absent("run/checkpoints/ckpt-18.index") if command == "resume" else None))

    for command in ("translate", "score", "export", "parse"):
        def prepare(ctx, command=command):
            return run_reads(ctx, ctx.f.run, command,
                             extra=(f"--checkpoint={os.path.join(ctx.f.other, 'checkpoints', 'ckpt-30')}",))
        cases.append(Case(f"fixed/checkpoint-flag-of-another-run/{command}", ERROR, prepare,
                          "--checkpoint of a run with another tokenizer", ("--checkpoint=", "{fixtures}/other")))

    for kind in ("absolute",):
        def prepare(ctx, kind=kind):
            model_dir = ctx.copy(ctx.f.best)
            if kind == "relative":
                entry = os.path.relpath(os.path.join(ctx.f.other, "checkpoints", "ckpt-30"),
                                        os.path.join(model_dir, "best"))
            else:
                entry = os.path.join(ctx.f.other, "checkpoints", "ckpt-30")
            best_list(os.path.join(model_dir, "best", "best.json"), [("ckpt-12", 98.0), (entry, 99.0)])
            return train(f"--model_dir={model_dir}", *BEST, "--train_steps=18")
        cases.append(Case(f"fixed/keep-2-best-resume-with-{kind}-outside-entry/train", ERROR, prepare,
                          "a resume whose next evaluation would push the outside entry out (and delete it)",
                          ("best.json", "outside"), absent("run/checkpoints/ckpt-18.index")))

    def long_line(side):
        def prepare(ctx):
            line = " ".join(["word"] * 200_000) + "\n"
            source = ctx.write("source.txt", line if side == "source" else "A dog runs .\n")
            target = ctx.write("target.txt", line if side == "target" else "Ein Hund rennt .\n")
            return score(f"--model_dir={ctx.f.run}", f"--source={source}", f"--target={target}",
                         f"--output={ctx.out()}")
        return prepare
    for side in ("source", "target"):
        cases.append(Case(f"fixed/score-200000-word-{side}-line", ERROR, long_line(side),
                          "a pair longer than the model scores, before the model loads", (f"{side}.txt",)))

    def translate_long(ctx):
        source = ctx.write("source.txt", " ".join(["word"] * 200_000) + "\nA dog runs .\n")
        return translate(f"--model_dir={ctx.f.run}", f"--input={source}", f"--output={ctx.out()}", "--beam_size=1")
    cases.append(Case("fixed/translate-200000-word-line", EITHER, translate_long,
                      "a 200,000-word line may be translated (cut to what the model reads) or refused with one "
                      "line; not a crash or an out-of-memory kill", check=output_lines(2)))

    for keep in ("half", "empty"):
        def prepare(ctx, keep=keep):
            serving = ctx.copy(ctx.f.export, "serving")
            data = os.path.join(serving, "1", "variables", "variables.data-00000-of-00001")
            damage(data, keep)
            return translate(f"--export_dir={serving}", f"--input={ctx.f.src}", f"--output={ctx.out()}")
        cases.append(Case(f"fixed/translate-export-variables-data-{keep}", ERROR, prepare,
                          "an export whose variables are cut short", ("not a readable SavedModel",)))

    def itself_other_spelling(ctx):
        ctx.write("rec.flags", f"--flagfile={ctx.path('.', 'rec.flags')}\n--train_steps=1\n")
        return translate(f"--model_dir={ctx.f.run}", f"--input={ctx.f.src}", "--flagfile=rec.flags")
    cases.append(Case("fixed/flagfile-includes-itself-by-absolute-path/translate", ERROR, itself_other_spelling,
                      "a flagfile that includes itself spelled otherwise", ("includes itself",)))

    def first_start(ctx):
        return train(f"--model_dir={ctx.path('new', 'run')}", "--max_length=1", *SHORT)

    def then_vocab_400(ctx, result):
        problems = []
        if os.path.exists(ctx.path("new")):
            problems.append(f"the refused first start left {sorted(os.listdir(ctx.path('new')))} in new/")
        again = ctx.run(train(f"--model_dir={ctx.path('new', 'run')}", "--vocab_size=400", *SHORT))
        if again.code != 0:
            return problems + [f"the rerun with --vocab_size=400 exited {again.code}: {again.tail(2)}"]
        settings = settings_of(ctx.path("new", "run"))
        if settings["data"]["vocab_size"] != 400:
            problems.append(f"model_config data.vocab_size {settings['data']['vocab_size']}, not 400")
        if settings["model"]["vocab_size"] != 400:
            problems.append(f"model_config model.vocab_size {settings['model']['vocab_size']}, not 400")
        if "400 ids" not in again.stdout:
            problems.append("the rerun did not train a 400-id tokenizer")
        return problems
    cases.append(Case("fixed/max_length-1-first-start-then-vocab_size-400/train", ERROR, first_start,
                      "no pair fits --max_length=1", ("max_length=1",), then_vocab_400))

    def glob_data_dir(escaped):
        def prepare(ctx):
            data = ctx.copy(ctx.f.data, "ünï [x]*")
            value = glob.escape(data) if escaped else data
            return train(f"--model_dir={ctx.path('new')}", "--dataset=files", f"--data_dir={value}",
                         "--source_file={split}.en", "--target_file={split}.de", *SHORT)
        return prepare

    def trained_on_glob_dir(ctx, result):
        if result.code != 0:
            return []
        recorded = settings_of(ctx.path("new"))["data"]["data_dir"]
        return [] if recorded == ctx.path("ünï [x]*") else [f"model_config records data_dir {recorded!r}"]
    cases.append(Case("fixed/data_dir-named-uni-glob/train", OK, glob_data_dir(False),
                      "a folder named `ünï [x]*` is a folder, not a pattern: the run trains on it",
                      check=all_of(trained_on_glob_dir, said("step 1/1"))))
    cases.append(Case("fixed/data_dir-glob-escaped-spelling/train", ERROR, glob_data_dir(True),
                      "the glob-escaped spelling names no folder", ("no such folder",), absent("new")))

    for signum, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        def prepare(ctx):
            return variations(f"--flagfile={TINY}", "--rows=C/N=4", f"--out={ctx.path('table')}",
                              "--train_steps=100000", "--eval_max_sentences=-1", "--log_every_steps=1",
                              "--checkpoint_every_steps=0")
        cases.append(Case(f"fixed/variations-{signal.Signals(signum).name}-during-a-row", SIGNAL, prepare,
                          "the table stops with the row's exit code and one error line",
                          signals=(Signal(signum, 1.0, r"^step 2/"),), codes=(code,)))

    def parse_to_dev_full(ctx):  # `run` is no parsing model: the baseline writes trees the same way
        return parse("--baseline=right_branching", f"--input={ctx.f.src}", "--output=/dev/full")
    cases.append(Case("fixed/output-dev-full/parse", ERROR, parse_to_dev_full, "a full output device",
                      ("/dev/full", "No space left")))

    def ema_resume(*flags_, drop_ema=True):
        def prepare(ctx):
            model_dir = ctx.copy(ctx.f.ema)
            remember(ctx, "run")
            kept = [f for f in EMA if not (drop_ema and f.startswith("--ema_decay"))]
            return train(f"--model_dir={model_dir}", *kept, "--train_steps=14", *flags_)
        return prepare

    def kept_ema(ctx, result):
        problems = no_raw_warnings(ctx, result)
        if result.code == 0:
            decay = settings_of(ctx.path("run"))["training"]["ema_decay"]
            if decay != 0.9:
                problems.append(f"model_config ema_decay is {decay}, not 0.9")
            if not os.path.isfile(ctx.path("run", "checkpoints", "ckpt-14.index")):
                problems.append("no ckpt-14 saved")
        return problems
    cases.append(Case("fixed/ema-resume-without-ema_decay/train", OK, ema_resume(),
                      "leaving --ema_decay out of a resume keeps the run's moving average",
                      check=all_of(kept_ema, said("goes on with the moving average", "resumed at step 12"))))

    def other_dataset(ctx):
        argv = ema_resume("--dataset=files", f"--data_dir={ctx.f.data}", "--source_file={split}.en",
                          "--target_file={split}.de")(ctx)
        return argv
    cases.append(Case("fixed/ema-resume-with-another-dataset/train", ERROR, other_dataset,
                      "a resume on another data set", ("--dataset=files",), unchanged("run")))

    def with_init_from(ctx):
        return ema_resume(f"--init_from={ctx.f.run}")(ctx)
    cases.append(Case("fixed/ema-resume-with-init_from/train", ERROR, with_init_from,
                      "--init_from on a run that has checkpoints", ("--init_from=",), unchanged("run")))
    cases.append(Case("fixed/ema-resume-with-ema_decay-0/train", ERROR, ema_resume("--ema_decay=0"),
                      "turning the moving average off on a resume", ("--ema_decay=0",), unchanged("run")))
    return cases


def run_dir_cases() -> list:
    """Damaged copies of `run`: each file of the layout missing, empty, garbage, of the wrong kind."""
    cases = []

    def damaged(target: str, how: str, command: str, no_average: bool = False, extra=()):
        def prepare(ctx):
            model_dir = ctx.copy(ctx.f.run)
            if no_average:
                shutil.rmtree(os.path.join(model_dir, "averaged"))
            for one in target.split("+"):
                damage(os.path.join(model_dir, one), how)
            remember(ctx, "run")
            return run_reads(ctx, model_dir, command, extra=extra)
        return prepare

    # Files and folders whose damage every reader must refuse (one line naming it).
    refused = [
        ("model_config.json", how, "translate") for how in ("missing", "empty", "garbage", "folder")
    ] + [
        ("model_config.json", "garbage", "export"), ("model_config.json", "garbage", "score"),
        ("model_config.json", "empty", "average"), ("model_config.json", "garbage", "resume"),
        ("tokenizer", "missing", "translate"), ("tokenizer", "missing", "export"), ("tokenizer", "missing", "score"),
        ("tokenizer", "missing", "resume"), ("tokenizer", "file", "translate"), ("tokenizer", "file", "resume"),
    ] + [
        (f"tokenizer/{name}", how, "translate") for name in ("tokenizer.json", "tokenizer.model")
        for how in ("missing", "empty", "garbage", "folder")
    ] + [
        ("tokenizer/tokenizer.model", "garbage", "export"), ("tokenizer/tokenizer.json", "missing", "resume"),
        ("checkpoints", "file", "translate"), ("checkpoints", "file", "resume"), ("averaged", "file", "translate"),
        ("averaged", "file", "export"), ("eval", "file", "resume"), ("train", "file", "resume"),
        (".lock", "folder", "resume"),
    ]
    for target, how, command in refused:
        cases.append(Case(f"rundir/{target}-{how}/{command}", ERROR, damaged(target, how, command),
                      f"{target} {how}", (target.split("/")[-1],),
                      all_of(unchanged("run"), absent("run/checkpoints/ckpt-14.index"))))

    # Both checkpoints damaged, no average: nothing readable.
    for command in ("translate", "export", "score"):
        cases.append(Case(f"rundir/every-checkpoint-cut-in-half/{command}", ERROR,
                          damaged("checkpoints/ckpt-6.data-00000-of-00001+checkpoints/ckpt-12.data-00000-of-00001",
                                  "half", command, no_average=True),
                          "no readable checkpoint", ("checkpoint",), unchanged("run")))

    # The newest checkpoint damaged: skipped with a warning for ckpt-6 (README: training, export, translation).
    for target in ("ckpt-12.index", "ckpt-12.data-00000-of-00001"):
        for how in ("missing", "empty", "garbage", "half"):
            if how == "half" and target.endswith(".index"):
                continue
            cases.append(Case(f"rundir/no-average-{target}-{how}/translate", OK,
                              damaged(f"checkpoints/{target}", how, "translate", no_average=True),
                              "a damaged newest checkpoint is skipped with a warning for the newest intact one",
                              check=all_of(skipped_to("ckpt-6"), output_lines(2))))
    cases.append(Case("rundir/no-average-ckpt-12-data-half/export", OK,
                      damaged("checkpoints/ckpt-12.data-00000-of-00001", "half", "export", no_average=True),
                      "a damaged newest checkpoint is skipped with a warning for the newest intact one",
                      check=skipped_to("ckpt-6")))
    cases.append(Case("rundir/no-average-ckpt-12-data-half/score", OK,
                      damaged("checkpoints/ckpt-12.data-00000-of-00001", "half", "score", no_average=True),
                      "a damaged newest checkpoint is skipped with a warning for the newest intact one",
                      check=all_of(skipped_to("ckpt-6"), output_lines(2))))
    cases.append(Case("rundir/ckpt-12-data-garbage/resume", OK,
                      damaged("checkpoints/ckpt-12.data-00000-of-00001", "garbage", "resume"),
                      "training skips a damaged checkpoint with a warning and resumes from the newest intact one",
                      check=said("resumed at step 6")))
    cases.append(Case("rundir/averaged-data-cut-in-half/translate", OK,
                      damaged("averaged/ckpt-12.data-00000-of-00001", "half", "translate"),
                      "a damaged average is skipped with a warning for the newest checkpoint",
                      check=all_of(skipped_to("checkpoints/ckpt-12"), output_lines(2))))
    cases.append(Case("rundir/averaged-index-missing/translate", OK,
                      damaged("averaged/ckpt-12.index", "missing", "translate"),
                      "a damaged average is skipped with a warning for the newest checkpoint",
                      check=all_of(skipped_to("checkpoints/ckpt-12"), output_lines(2))))
    # Damage that a reader may survive (reading around it) or refuse: either, never a traceback.
    either = [
        ("checkpoints/checkpoint", how, "translate", True) for how in ("missing", "empty", "garbage", "folder")
    ] + [
        ("averaged/checkpoint", "garbage", "translate", False),
        ("checkpoints/ckpt-12.index", "folder", "translate", True),
        ("eval", "file", "translate", False), ("train", "file", "translate", False),
        ("eval/history.json", "garbage", "resume", False), ("eval/history.json", "folder", "resume", False),
        ("checkpoints/checkpoint", "garbage", "resume", False),
    ]
    for target, how, command, no_average in either:
        check = output_lines(2) if command == "translate" else None
        cases.append(Case(f"rundir/{'no-average-' if no_average else ''}{target}-{how}/{command}", EITHER,
                          damaged(target, how, command, no_average=no_average),
                          f"{target} {how}: reading around it or refusing it are both honest", (target.split("/")[-1],),
                          check))

    def config_edit(change: Callable[[dict], None]):
        def prepare(ctx):
            model_dir = ctx.copy(ctx.f.run)
            edit_json(os.path.join(model_dir, "model_config.json"), change)
            remember(ctx, "run")
            return run_reads(ctx, model_dir, "translate")
        return prepare
    edits = {
        "num_heads-3": lambda s: s["model"].update(num_heads=3),
        "vocab_size-negative": lambda s: s["model"].update(vocab_size=-5),
        "d_model-string": lambda s: s["model"].update(d_model="32"),
        "max_length-0": lambda s: s["model"].update(max_length=0),
        "vocab_size-1e12": lambda s: s["model"].update(vocab_size=10 ** 12),
        "num_layers-1e9": lambda s: s["model"].update(num_layers=10 ** 9),
        "dropout_rate-nan": lambda s: s["model"].update(dropout_rate=float("nan")),
        "model-a-list": lambda s: s.update(model=[]),
        "tokenizer-sha256-a-number": lambda s: s["tokenizer"].update(sha256=5),
        "tokenizer-sha256-another": lambda s: s["tokenizer"].update(sha256="0" * 64),
        "d_ff-128-not-the-checkpoints": lambda s: s["model"].update(d_ff=128),
        "vocab_size-400-not-the-checkpoints": lambda s: s["model"].update(vocab_size=400),
    }
    for name, change in edits.items():
        named = "tokenizer" if name == "tokenizer-sha256-another" else "model_config.json"  # the folder that differs
        cases.append(Case(f"rundir/model_config-{name}/translate", ERROR, config_edit(change),
                          "a model_config.json that is not this run's", (named,), unchanged("run")))
    cases.append(Case("rundir/model_config-without-tokenizer-section/translate", EITHER,
                      config_edit(lambda s: s.pop("tokenizer")),
                      "a run that recorded no tokenizer fingerprint (an older run) may be read or refused",
                      check=output_lines(2)))

    for command in ("score",):
        def prepare(ctx, command=command):
            model_dir = ctx.copy(ctx.f.run)
            shutil.rmtree(os.path.join(model_dir, "tokenizer"))
            shutil.copytree(os.path.join(ctx.f.other, "tokenizer"), os.path.join(model_dir, "tokenizer"))
            remember(ctx, "run")
            return run_reads(ctx, model_dir, command)
        cases.append(Case(f"rundir/tokenizer-of-another-run/{command}", ERROR, prepare,
                          "a tokenizer that is not the run's", ("tokenizer",), unchanged("run")))

    def lock_garbage(ctx):
        model_dir = ctx.copy(ctx.f.run)
        write(os.path.join(model_dir, ".lock"), "pid 1 on elsewhere since yesterday\n")
        return run_reads(ctx, model_dir, "resume")
    cases.append(Case("rundir/.lock-naming-a-process-not-holding-it/resume", OK, lock_garbage,
                      "the lock is an flock: a recorded holder that does not hold it is no holder",
                      check=said("resumed at step 12")))

    def odd_name(ctx):
        return run_reads(ctx, ctx.copy(ctx.f.run, "rün dir ' \"x\""), "translate")
    cases.append(Case("rundir/model_dir-with-spaces-quotes-unicode/translate", OK, odd_name,
                      "any folder name is a run's name", check=output_lines(2)))

    def symlinked(ctx):
        os.symlink(ctx.f.run, ctx.path("link"))
        return run_reads(ctx, ctx.path("link"), "translate")
    cases.append(Case("rundir/model_dir-a-symlink/translate", OK, symlinked, "a link to a run is the run",
                      check=output_lines(2)))

    def trailing_slash(ctx):
        return run_reads(ctx, ctx.f.run + "/", "score")
    cases.append(Case("rundir/model_dir-trailing-slash/score", OK, trailing_slash, "RUN/ is RUN",
                      check=output_lines(2)))

    for name, where in (("checkpoints-subfolder", "run/checkpoints"), ("the-export", "export"),
                        ("a-file", "inputs/src.txt"), ("missing", "nowhere"), ("averaged-subfolder", "run/averaged")):
        def prepare(ctx, where=where):
            return run_reads(ctx, os.path.join(ctx.f.dir, where), "translate")
        cases.append(Case(f"rundir/model_dir-is-{name}/translate", ERROR, prepare,
                          "not a training directory", ("--model_dir=",)))
    def export_of_subfolder(ctx):
        return run_reads(ctx, os.path.join(ctx.f.run, "averaged"), "export")
    cases.append(Case("rundir/model_dir-is-averaged-subfolder/export", ERROR, export_of_subfolder,
                      "not a training directory", ("--model_dir=",)))
    return cases


def flag_cases() -> list:
    """Bad flag values, command by command: found before TensorFlow starts or before the work."""
    cases = []

    def simple(name, expect, build, why="", fragments=(), check=None):
        cases.append(Case(name, expect, build, why, fragments, check))

    # translate
    def tr(*extra, model=True):
        def prepare(ctx):
            base = [f"--model_dir={ctx.f.run}"] if model else []
            args = [a.format(case=ctx.dir, fixtures=ctx.f.dir) for a in extra]
            if not any(a.startswith("--input") for a in args):
                base.append(f"--input={ctx.f.src}")
            if not any(a.startswith("--output") for a in args):
                base.append(f"--output={ctx.out()}")
            else:
                for a in args:
                    if a.startswith("--output=") and a != "--output=":
                        ctx.watch(a.split("=", 1)[1])
            return translate(*base, *args)
        return prepare

    bad_translate = {
        "beam_size-0": ("--beam_size=0",), "beam_size-negative": ("--beam_size=-3",),
        "beam_size-not-a-number": ("--beam_size=four",), "beam_size-float": ("--beam_size=2.5",),
        "alpha-nan": ("--alpha=nan",), "alpha-negative": ("--alpha=-1",), "alpha-inf": ("--alpha=inf",),
        "max_extra_length-negative": ("--max_extra_length=-1",),
        "max_extra_length-1e9": ("--max_extra_length=1000000000",),
        "batch_size-0": ("--batch_size=0",), "n_best-0": ("--n_best=0",), "n_best-above-beam": ("--n_best=5",),
        "input-empty-string": ("--input=",), "input-a-folder": ("--input={fixtures}/inputs",),
        "input-missing": ("--input={case}/nothing.txt",), "output-a-folder": ("--output={case}",),
        "output-below-a-file": ("--output={fixtures}/inputs/src.txt/out.txt",),
        "output-empty-string": ("--output=",),
        "reference-missing": ("--reference={case}/nothing.txt",),
        "reference-a-folder": ("--reference={fixtures}/inputs",),
        "reference-stdin": ("--reference=-",),
        "reference-another-length": ("--reference={fixtures}/inputs/many_ref.txt",),
        "sampling_topk-negative": ("--sampling_topk=-1",), "sampling_topp-0": ("--sampling_topp=0",),
        "sampling_topp-above-1": ("--sampling_topp=1.5",), "sampling_topp-nan": ("--sampling_topp=nan",),
        "sampling_temperature-negative": ("--sampling_temperature=-1",),
        "sampling_temperature-nan": ("--sampling_temperature=nan",),
        "seed-without-sampling": ("--seed=5",), "seed-negative": ("--sampling_topk=5", "--seed=-1"),
        "sampling-with-beam": ("--sampling_topk=5", "--beam_size=4"),
        "sampling-with-n_best": ("--sampling_topk=5", "--n_best=2"),
        "checkpoint-missing": ("--checkpoint={fixtures}/run/checkpoints/ckpt-999",),
        "checkpoint-a-folder": ("--checkpoint={fixtures}/run/checkpoints",),
        "checkpoint-empty-string": ("--checkpoint=",),
        "ensemble-of-another-tokenizer": ("--ensemble_model_dirs={fixtures}/other",),
        "ensemble-missing": ("--ensemble_model_dirs={case}/nothing",),
        "ensemble-only-commas": ("--ensemble_model_dirs=,,",),
        "moses_bleu_lang-without-reference": ("--moses_bleu_lang=de",),
        "moses_bleu_lang-not-a-language": ("--reference={fixtures}/inputs/ref.txt", "--moses_bleu_lang=d3!"),
        "prefix-with-n_best": ("--target_prefix_file={fixtures}/inputs/ref.txt", "--n_best=2", "--beam_size=4"),
        "prefix-another-length": ("--target_prefix_file={fixtures}/inputs/many_ref.txt",),
        "unknown-flag": ("--beam=4",), "positional-argument": ("extra.txt",),
        "flagfile-missing": ("--flagfile={case}/nothing.flags",),
    }
    for name, extra in bad_translate.items():
        simple(f"flags/translate-{name}", ERROR, tr(*extra), "a bad translate flag")
    simple("flags/translate-both-model_dir-and-export_dir", ERROR, tr("--export_dir={fixtures}/export"),
           "exactly one of --model_dir and --export_dir")
    simple("flags/translate-neither-model_dir-nor-export_dir", ERROR, tr(model=False), "no model")
    simple("flags/translate-export_dir-is-a-run", ERROR, tr("--export_dir={fixtures}/run", model=False),
           "a run is not an export", ("saved_model",))
    simple("flags/translate-export_dir-with-beam_size", ERROR,
           tr("--export_dir={fixtures}/export", "--beam_size=2", model=False), "an export has its decoding built in")
    simple("flags/translate-export_dir-with-ensemble", ERROR,
           tr("--export_dir={fixtures}/export", "--ensemble_model_dirs={fixtures}/run", model=False),
           "an ensemble of an export")
    simple("flags/translate-export_dir-n_best-above-its-beam", ERROR,
           tr("--export_dir={fixtures}/export", "--n_best=5", model=False), "the export's beam is 4")
    simple("flags/translate-output-dev-null", OK, tr("--output=/dev/null"), "/dev/null is written to, not replaced")
    simple("flags/translate-output-in-a-missing-folder", EITHER, tr("--output={case}/new/sub/out.txt"),
           "a missing output folder may be created or refused", check=output_lines(2, "new/sub/out.txt"))
    simple("flags/translate-batch_size-1000000", OK, tr("--batch_size=1000000"),
           "a batch larger than the input is the input", check=output_lines(2))
    simple("flags/translate-checkpoint-index-file", EITHER,
           tr("--checkpoint={fixtures}/run/checkpoints/ckpt-12.index"),
           "the .index file of a checkpoint may be taken for its prefix or refused", check=output_lines(2))
    simple("flags/translate-beam_size-20000", EITHER, tr("--beam_size=20000"),
           "a beam larger than the vocabulary may be cut to it or refused; not a crash", check=output_lines(2))

    # score
    def sc(*extra):
        def prepare(ctx):
            args = [a.format(case=ctx.dir, fixtures=ctx.f.dir) for a in extra]
            base = [f"--model_dir={ctx.f.run}"]
            for flag, default in (("--source", ctx.f.src), ("--target", ctx.f.ref)):
                if not any(a.startswith(flag) for a in args):
                    base.append(f"{flag}={default}")
            if not any(a.startswith("--output") for a in args):
                base.append(f"--output={ctx.out()}")
            return score(*base, *args)
        return prepare
    bad_score = {
        "batch_tokens-0": ("--batch_tokens=0",), "batch_tokens-negative": ("--batch_tokens=-5",),
        "batch_tokens-not-a-number": ("--batch_tokens=lots",), "source-missing": ("--source={case}/nothing",),
        "source-a-folder": ("--source={fixtures}/inputs",),
        "target-another-length": ("--target={fixtures}/inputs/many_ref.txt",),
        "output-is-the-source": ("--output={fixtures}/inputs/src.txt",), "output-a-folder": ("--output={case}",),
        "target-stdin": ("--target=-",), "checkpoint-missing": ("--checkpoint={fixtures}/run/checkpoints/ckpt-7",),
        "model_dir-missing": ("--model_dir={case}/nothing",), "source-empty-string": ("--source=",),
    }
    for name, extra in bad_score.items():
        simple(f"flags/score-{name}", ERROR, sc(*extra), "a bad score flag")
    simple("flags/score-without-target", ERROR,
           lambda ctx: score(f"--model_dir={ctx.f.run}", f"--source={ctx.f.src}"), "--target is required")
    simple("flags/score-batch_tokens-1", OK, sc("--batch_tokens=1"),
           "a pair longer than the batch is a batch of its own", check=output_lines(2))

    # export
    def ex(*extra, base=None):
        def prepare(ctx):
            args = [a.format(case=ctx.dir, fixtures=ctx.f.dir) for a in extra]
            serving = ctx.path("serving")
            if base == "copy":
                serving = ctx.copy(ctx.f.export, "serving")
            ctx.watch_export(serving)
            flags_ = [f"--model_dir={ctx.f.run}"]
            if not any(a.startswith("--export_dir") for a in args):
                flags_.append(f"--export_dir={serving}")
            return export(*flags_, *args)
        return prepare
    bad_export = {
        "version-negative": ("--version=-1",), "version-not-a-number": ("--version=two",),
        "export_dir-a-file": ("--export_dir={fixtures}/inputs/src.txt",),
        "export_dir-below-a-file": ("--export_dir={fixtures}/inputs/src.txt/serving",),
        "export_dir-is-the-model_dir": ("--export_dir={fixtures}/run",),
        "export_dir-is-the-model_dir-with-slash": ("--export_dir={fixtures}/run/",),
        "export_dir-empty-string": ("--export_dir=",), "beam_size-0": ("--beam_size=0",), "alpha-inf": ("--alpha=inf",),
        "max_extra_length-negative": ("--max_extra_length=-5",), "format-unknown": ("--format=onnx",),
        "quantization-without-ctranslate2": ("--quantization=int8",), "precision-unknown": ("--precision=int4",),
        "checkpoint-missing": ("--checkpoint={fixtures}/run/checkpoints/ckpt-5",),
        "ensemble-of-another-tokenizer": ("--ensemble_model_dirs={fixtures}/other",),
        "ctranslate2-with-precision": ("--format=ctranslate2", "--precision=bfloat16"),
        "positional-argument": ("now",),
    }
    for name, extra in bad_export.items():
        simple(f"flags/export-{name}", ERROR, ex(*extra), "a bad export flag")
    simple("flags/export-version-1-exists", ERROR, ex("--version=1", base="copy"), "an existing version",
           check=lambda ctx, r: [] if tree_digest(ctx.path("serving", "1")) == tree_digest(
               os.path.join(ctx.f.export, "1")) else ["version 1 changed"])

    # train: a new --model_dir that must not appear
    def tn(*extra, model_dir="new"):
        def prepare(ctx):
            args = [a.format(case=ctx.dir, fixtures=ctx.f.dir) for a in extra]
            flags_ = [] if any(a.startswith("--model_dir") for a in args) else [f"--model_dir={ctx.path(model_dir)}"]
            return train(*flags_, *SHORT, *args)
        return prepare
    bad_train = {
        "train_steps-0": ("--train_steps=0",), "train_steps-negative": ("--train_steps=-5",),
        "train_steps-not-a-number": ("--train_steps=many",), "train_steps-float": ("--train_steps=1e3",),
        "warmup_steps-0": ("--warmup_steps=0",), "warmup_steps-negative": ("--warmup_steps=-1",),
        "learning_rate_scale-nan": ("--learning_rate_scale=nan",),
        "learning_rate_scale-negative": ("--learning_rate_scale=-1",),
        "vocab_size-0": ("--vocab_size=0",), "vocab_size-negative": ("--vocab_size=-1",),
        "vocab_size-1e12": ("--vocab_size=1000000000000",), "vocab_size-5": ("--vocab_size=5",),
        "d_model-not-divisible-by-heads": ("--d_model=33",), "num_heads-0": ("--num_heads=0",),
        "num_layers-0": ("--num_layers=0",), "d_ff-0": ("--d_ff=0",), "d_k-0": ("--d_k=0",),
        "d_ff-1e12": ("--d_ff=1000000000000",),
        "dropout_rate-1.5": ("--dropout_rate=1.5",), "dropout_rate-negative": ("--dropout_rate=-0.1",),
        "dropout_rate-nan": ("--dropout_rate=nan",), "label_smoothing-1.5": ("--label_smoothing=1.5",),
        "label_smoothing-negative": ("--label_smoothing=-0.1",),
        "batch_tokens-0": ("--batch_tokens=0",), "batch_tokens-negative": ("--batch_tokens=-1",),
        "max_length-0": ("--max_length=0",), "accumulation_steps-0": ("--accumulation_steps=0",),
        "keep_checkpoints-0": ("--keep_checkpoints=0",),
        "average-more-than-kept": ("--average_checkpoints=5", "--keep_checkpoints=2"),
        "model_dir-a-file": ("--model_dir={fixtures}/inputs/src.txt",), "model_dir-empty-string": ("--model_dir=",),
        "dataset-unknown": ("--dataset=imagenet",), "dataset-files-without-files": ("--dataset=files",),
        "source_file-missing": ("--dataset=files", "--data_dir={fixtures}/data", "--source_file={{split}}.fr",
                                "--target_file={{split}}.de"),
        "data_dir-missing": ("--dataset=files", "--data_dir={case}/nothing", "--source_file={{split}}.en",
                             "--target_file={{split}}.de"),
        "data_dir-a-file": ("--dataset=files", "--data_dir={fixtures}/inputs/src.txt", "--source_file={{split}}.en",
                            "--target_file={{split}}.de"),
        "train_files-matching-nothing": ("--train_files={case}/web-*.{{en,de}}",),
        "init_from-missing": ("--init_from={case}/nothing",),
        "init_from-another-architecture": ("--init_from={fixtures}/run", "--d_model=64"),
        "init_from-an-export": ("--init_from={fixtures}/export",),
        "init_from-with-another-vocab_size": ("--init_from={fixtures}/run", "--vocab_size=100"),
        "bpe_dropout-1": ("--bpe_dropout=1",), "bpe_dropout-with-unigram": ("--bpe_dropout=0.1", "--tokenizer=unigram"),
        "preset-unknown": ("--preset=huge",), "ema_decay-1.5": ("--ema_decay=1.5",),
        "ema_decay-negative": ("--ema_decay=-0.1",), "ema_decay-nan": ("--ema_decay=nan",),
        "rdrop_alpha-negative": ("--rdrop_alpha=-1",), "eval_every_steps-negative": ("--eval_every_steps=-1",),
        "log_every_steps-0": ("--log_every_steps=0",), "seed-2**32": ("--seed=4294967296",),
        "max_train_minutes-negative": ("--max_train_minutes=-1",),
        "checkpoint_every_steps-negative": ("--checkpoint_every_steps=-1",),
        "cooldown_steps-negative": ("--cooldown_steps=-1",),
        "cooldown_steps-above-train_steps": ("--cooldown_steps=100", "--train_steps=50"),
        "early_stopping_patience-negative": ("--early_stopping_patience=-1",),
        "precision-unknown": ("--precision=float8",), "num_gpus-negative": ("--num_gpus=-2",),
        "tokenizer-unknown": ("--tokenizer=chars",), "shuffle_buffer-0": ("--shuffle_buffer=0",),
        "clip_norm-negative": ("--clip_norm=-1",), "dev_split-unknown": ("--dev_split=dev",),
        "evaluate_only-without-a-run": ("--evaluate_only",),
        "keep_best-with-f1-on-translation": ("--keep_best_checkpoints=2", "--best_checkpoint_metric=f1"),
    }
    for name, extra in bad_train.items():
        simple(f"flags/train-{name}", ERROR, tn(*extra), "a bad training flag", check=absent("new"))

    def avg(*extra, copy=False):
        def prepare(ctx):
            model_dir = ctx.copy(ctx.f.run) if copy else ctx.f.run
            if copy:
                remember(ctx, "run")
            args = [a.format(case=ctx.dir, fixtures=ctx.f.dir) for a in extra]
            flags_ = [] if any(a.startswith("--model_dir") for a in args) else [f"--model_dir={model_dir}"]
            return average(*flags_, *args)
        return prepare
    simple("flags/average_checkpoints-num_checkpoints-0", ERROR, avg("--num_checkpoints=0"), "0 checkpoints")
    simple("flags/average_checkpoints-more-than-kept", ERROR, avg("--num_checkpoints=5", copy=True),
           "5 of 2 checkpoints", check=unchanged("run"))
    simple("flags/average_checkpoints-model_dir-an-export", ERROR, avg("--model_dir={fixtures}/export"),
           "an export is not a run")
    simple("flags/average_checkpoints-model_dir-missing", ERROR, avg("--model_dir={case}/nothing"), "no run")
    simple("flags/average_checkpoints-without-model_dir", ERROR, lambda ctx: average(), "no run")

    for name, extra in (("preset-unknown", ("--preset=huge",)), ("vocab_size-0", ("--vocab_size=0",)),
                        ("vocab_size-1e12", ("--preset=tiny", "--vocab_size=1000000000000")),
                        ("positional-argument", ("base",))):
        simple(f"flags/summary-{name}", ERROR, lambda ctx, extra=extra: summary(*extra), "a bad summary flag")
    simple("flags/summary-tiny", OK, lambda ctx: summary("--preset=tiny", "--vocab_size=500"),
           "the tiny preset's summary", check=said("parameters"))

    def pr(*extra):
        def prepare(ctx):
            args = [a.format(case=ctx.dir, fixtures=ctx.f.dir) for a in extra]
            return parse(*args, f"--input={ctx.f.src}", f"--output={ctx.out()}")
        return prepare
    simple("flags/parse-baseline-unknown", ERROR, pr("--baseline=left_branching"), "an unknown baseline")
    simple("flags/parse-treebank_split-without-data_dir", ERROR,
           lambda ctx: parse("--baseline=right_branching", "--treebank_split=test", f"--output={ctx.out()}"),
           "no treebank", ("data_dir",))
    simple("flags/parse-both-model_dir-and-export_dir", ERROR,
           pr("--model_dir={fixtures}/run", "--export_dir={fixtures}/export"), "two models")
    simple("flags/parse-a-translation-run", EITHER, pr("--model_dir={fixtures}/run", "--beam_size=1"),
           "a translation run may parse (its outputs repaired into trees) or be refused", check=output_lines(2))

    simple("flags/pipelines-no-command", ERROR, lambda ctx: pipelines(), "no command")
    simple("flags/pipelines-unknown-command", ERROR, lambda ctx: pipelines("train"), "an unknown command")
    simple("flags/pipelines-train_tokenizer-without-dir", ERROR, lambda ctx: pipelines("train_tokenizer"),
           "no tokenizer_dir")
    simple("flags/pipelines-train_tokenizer-into-a-file", ERROR,
           lambda ctx: pipelines("train_tokenizer", f"--tokenizer_dir={ctx.f.src}"), "a file", ("is a file",))
    simple("flags/pipelines-train_tokenizer-vocab_size-5", ERROR,
           lambda ctx: pipelines("train_tokenizer", "--vocab_size=5", f"--tokenizer_dir={ctx.path('tok')}"),
           "a vocabulary too small", ("vocab_size",), absent("tok"))
    simple("flags/pipelines-stats-missing-files", ERROR,
           lambda ctx: pipelines("stats", "--dataset=files", "--source_file={split}.xx", "--target_file={split}.yy",
                                 f"--data_dir={ctx.f.data}"), "missing files")
    simple("flags/pipelines-stats-split-unknown", ERROR,
           lambda ctx: pipelines("stats", "--split=dev", "--vocab_size=400"), "an unknown split")

    simple("flags/variations-rows-unknown", ERROR,
           lambda ctx: variations(f"--flagfile={TINY}", "--rows=Z", f"--out={ctx.path('table')}"), "unknown row",
           check=absent("table"))
    simple("flags/variations-without-flagfile", ERROR, lambda ctx: variations(f"--out={ctx.path('table')}"),
           "no recipe", check=absent("table"))
    simple("flags/variations-out-a-file", ERROR,
           lambda ctx: variations(f"--flagfile={TINY}", "--rows=A", f"--out={ctx.f.src}"), "a file")
    simple("flags/variations-seeds-0", ERROR,
           lambda ctx: variations(f"--flagfile={TINY}", "--seeds=0", f"--out={ctx.path('table')}"), "0 seeds",
           check=absent("table"))
    simple("flags/variations-rows-empty", ERROR,
           lambda ctx: variations(f"--flagfile={TINY}", "--rows=,", f"--out={ctx.path('table')}"), "no row",
           check=absent("table"))
    return cases


def text_cases() -> list:
    """Odd input text: what must translate, and what must be refused with one line."""
    cases = []
    texts = {  # name: (bytes, lines, expectation, why)
        "empty-file": (b"", 0, OK, "an empty input translates to an empty output"),
        "only-newlines": (b"\n\n\n\n\n", 5, OK, "empty lines translate, one output line each"),
        "whitespace-only-lines": (b"   \n\t\t\n", 2, OK, "blank lines translate"),
        "crlf": (b"A dog runs .\r\nThe cat sleeps .\r\n", 2, OK, "Windows line ends are line ends"),
        "no-final-newline": (b"A dog runs .\nThe cat sleeps .", 2, OK, "a last line without its newline"),
        "utf8-bom": (b"\xef\xbb\xbfA dog runs .\nThe cat sleeps .\n", 2, OK, "a byte order mark"),
        "unicode-line-separators": ("A dog\u2028runs .\nThe cat\x85sleeps\x0c .\n".encode(), 2, OK,
                                    "U+2028, NEL and form feed are not line ends of the file"),
        "emoji-rtl-combining": ("A dog 🐕 runs .\nשלום e\u0301 \u200d .\n".encode(), 2, OK, "any Unicode text"),
        "old-mac-cr-only": (b"A dog runs .\rThe cat sleeps .\r", 1, EITHER, "lone CRs are not line ends here"),
        "invalid-utf8": (b"A d\xf6g runs .\nThe cat sleeps .\n", 2, EITHER,
                         "bytes that are not UTF-8 may be translated as they are or refused naming the line"),
        "nul-byte": (b"A dog\x00 runs .\nThe cat sleeps .\n", 2, EITHER, "a NUL may be translated or refused"),
        "5000-word-line": ((" ".join(["dog"] * 5000) + "\nA dog runs .\n").encode(), 2, EITHER,
                           "a line far past max_length may be translated or refused with one line"),
        "gzip-compressed": (gzip.compress(b"A dog runs .\nThe cat sleeps .\nA man walks .\n", mtime=0), 3, OK,
                            "gzip input is read as its text (its compressed bytes split into 2 lines)"),
    }
    for name, (data, count, expect, why) in texts.items():
        for source in ("model_dir", "export_dir"):
            if source == "export_dir" and name not in ("only-newlines", "crlf", "unicode-line-separators",
                                                       "invalid-utf8", "nul-byte", "empty-file"):
                continue
            def prepare(ctx, data=data, source=source):
                path = ctx.write("input.txt", data)
                model = f"--model_dir={ctx.f.run}" if source == "model_dir" else f"--export_dir={ctx.f.export}"
                extra = ("--beam_size=1",) if source == "model_dir" else ()
                return translate(model, f"--input={path}", f"--output={ctx.out()}", *extra)
            cases.append(Case(f"text/translate-{source}-{name}", expect, prepare, why, check=output_lines(count)))

    def many(ctx):
        return translate(f"--model_dir={ctx.f.run}", f"--input={ctx.f.many}", f"--output={ctx.out()}",
                         "--beam_size=1", "--batch_size=256")
    cases.append(Case("text/translate-10000-lines", OK, many, "a long input translates line for line",
                      check=output_lines(10000)))

    def stdin_input(ctx):
        return translate(f"--model_dir={ctx.f.run}", "--input=-", "--beam_size=1")
    cases.append(Case("text/translate-stdin-crlf", OK, stdin_input, "stdin is an input like a file",
                      check=stdout_lines(3), stdin=b"A dog runs .\r\n\r\nThe cat .\r\n"))
    cases.append(Case("text/translate-input-dev-stdin", OK,
                      lambda ctx: translate(f"--model_dir={ctx.f.run}", "--input=/dev/stdin", f"--output={ctx.out()}",
                                            "--beam_size=1"),
                      "stdin by its device name, as `--input=<(zcat test.en.gz)` names a pipe",
                      check=output_lines(2), stdin=b"A dog runs .\nThe cat sleeps .\n"))
    cases.append(Case("text/score-source-dev-stdin", OK,
                      lambda ctx: score(f"--model_dir={ctx.f.run}", "--source=/dev/stdin", f"--target={ctx.f.ref}",
                                        f"--output={ctx.out()}"),
                      "stdin by its device name", check=output_lines(2), stdin=b"A dog runs .\nThe cat sleeps .\n"))
    cases.append(Case("text/translate-dev-null-input", OK,
                      lambda ctx: translate(f"--model_dir={ctx.f.run}", "--input=/dev/null", f"--output={ctx.out()}"),
                      "an empty device is an empty input", check=output_lines(0)))

    def reference(data, expect, why):
        def prepare(ctx):
            ref = ctx.write("ref.txt", data)
            return translate(f"--model_dir={ctx.f.run}", f"--input={ctx.f.src}", f"--reference={ref}",
                             f"--output={ctx.out()}", "--beam_size=1")
        return Case(f"text/translate-reference-{why}", expect, prepare, why, check=output_lines(2))
    cases.append(reference(b"Ein Hund rennt .\r\nDie Katze schl\xc3\xa4ft .\r\n", OK, "crlf"))
    cases.append(reference(b"Ein Hund r\xe4nnt .\nDie Katze .\n", EITHER, "invalid-utf8"))
    cases.append(reference(b"\n\n", OK, "empty-lines"))

    def score_text(source, target, expect, why, count):
        def prepare(ctx):
            s = ctx.write("source.txt", source)
            t = ctx.write("target.txt", target)
            return score(f"--model_dir={ctx.f.run}", f"--source={s}", f"--target={t}", f"--output={ctx.out()}")
        return Case(f"text/score-{why}", expect, prepare, why, check=output_lines(count))
    cases += [
        score_text(b"", b"", ERROR, "empty-files", 0),
        score_text(b"\n\n", b"A .\n\n", OK, "empty-lines", 2),
        score_text(b"A dog .\r\nA cat .\r\n", b"Ein Hund .\r\nEine Katze .\r\n", OK, "crlf", 2),
        score_text(b"A dog .\nA cat .\n", b"Ein H\xfcnd .\nEine Katze .\n", ERROR, "invalid-utf8-target", 2),
        score_text(b"A dog\x00 .\nA cat .\n", b"Ein Hund .\nEine Katze .\n", EITHER, "nul-byte", 2),
        score_text("A dog\u2028runs .\nA cat .\n".encode(), "Ein Hund .\nEine\x85Katze .\n".encode(), OK,
                   "unicode-line-separators", 2),
        score_text(gzip.compress(b"A dog .\n"), gzip.compress(b"Ein Hund .\n"), ERROR, "gzip", 1),
        score_text(b"A dog .\nA cat .\n", b"Ein Hund .\n", ERROR, "line-counts-differ", 2),
    ]

    def many_pairs(ctx):
        return score(f"--model_dir={ctx.f.run}", f"--source={ctx.f.many}", f"--target={ctx.f.many_ref}",
                     f"--output={ctx.out()}", "--batch_tokens=8192")
    cases.append(Case("text/score-10000-pairs", OK, many_pairs, "a long corpus scores line for line",
                      check=output_lines(10000)))

    def parse_text(data, expect, why, count):
        def prepare(ctx):
            path = ctx.write("input.txt", data)
            return parse(f"--model_dir={ctx.f.run}", f"--input={path}", f"--output={ctx.out()}", "--beam_size=1")
        return Case(f"text/parse-{why}", expect, prepare, why, check=output_lines(count))
    cases += [parse_text(b"", EITHER, "empty-file", 0), parse_text(b"The d\xf6g .\n", EITHER, "invalid-utf8", 1)]

    def train_text(name, expect, why, change):
        def prepare(ctx):
            data = ctx.copy(ctx.f.data, "data")
            change(data)
            return train(f"--model_dir={ctx.path('new')}", "--dataset=files", f"--data_dir={data}",
                         "--source_file={split}.en", "--target_file={split}.de", *SHORT)
        return Case(f"text/train-{name}", expect, prepare, why, check=absent("new") if expect == ERROR else None)

    def append(name, data):
        def change(folder):
            with open(os.path.join(folder, name), "ab") as file:
                file.write(data)
        return change
    cases += [
        train_text("invalid-utf8-in-train-de", ERROR, "not UTF-8, named by file and line",
                   append("train.de", b"Ein H\xfcnd .\n")),
        train_text("line-counts-differ", ERROR, "parallel files of different lengths", append("train.en", b"extra\n")),
        train_text("empty-validation", ERROR, "an empty dev split",
                   lambda folder: [write(os.path.join(folder, f"validation.{l}"), b"") for l in ("en", "de")]),
        train_text("validation-a-folder", ERROR, "a folder where the dev file belongs",
                   lambda folder: damage(os.path.join(folder, "validation.en"), "folder")),
    ]
    return cases


def export_cases() -> list:
    """Damaged exports read by translate (and exports written beside damaged versions)."""
    cases = []

    def damaged(target: str, how: str, point: str = "base"):
        def prepare(ctx):
            serving = ctx.copy(ctx.f.export, "serving")
            damage(os.path.join(serving, target), how)
            where = serving if point == "base" else os.path.join(serving, point)
            return translate(f"--export_dir={where}", f"--input={ctx.f.src}", f"--output={ctx.out()}")
        return prepare
    refused = [("1/saved_model.pb", how) for how in ("missing", "empty", "garbage")] + [
        ("1/variables", "missing"), ("1/variables/variables.index", "empty"),
        ("1/variables/variables.index", "missing"), ("1", "file"),
        ("1/variables/variables.data-00000-of-00001", "garbage"),
    ]
    for target, how in refused:
        cases.append(Case(f"export/{target}-{how}/translate", ERROR, damaged(target, how), f"{target} {how}"))

    def settings_list(ctx):
        serving = ctx.copy(ctx.f.export, "serving")
        write(os.path.join(serving, "1", "assets.extra", "export.json"), "[]")
        return translate(f"--export_dir={serving}", f"--input={ctx.f.src}", f"--output={ctx.out()}")
    cases.append(Case("export/export.json-a-list/translate", EITHER, settings_list,
                      "export.json is read for --n_best and the signatures: a plain translation may do without it",
                      check=output_lines(2)))
    for target, how, why in (("1/assets.extra/export.json", "garbage", "export.json is read for --n_best and the "
                              "signatures: a plain translation may do without it"),
                             ("1/assets/tokenizer.model", "missing", "the graph holds the tokenizer; the asset is a "
                              "copy for clients"),
                             ("1/assets/tokenizer.model", "garbage", "the graph holds the tokenizer; the asset is a "
                              "copy for clients"),
                             ("1/assets.extra/export.json", "missing", "an export made before export.json existed"),
                             ("1/assets.extra", "missing", "an export without assets.extra (no warm-up, no settings)"),
                             ("1/fingerprint.pb", "missing", "a SavedModel without its fingerprint")):
        cases.append(Case(f"export/{target}-{how}/translate", EITHER, damaged(target, how), why,
                          check=output_lines(2)))

    def beside(kind: str):
        def prepare(ctx):
            serving = ctx.copy(ctx.f.export, "serving")
            path = os.path.join(serving, "2")
            if kind == "file":
                write(path, "not a version\n")
            elif kind == "empty":
                os.makedirs(path)
            else:
                os.makedirs(os.path.join(serving, ".tmp-3-elsewhere-1-abcd"))
            return translate(f"--export_dir={serving}", f"--input={ctx.f.src}", f"--output={ctx.out()}")
        return prepare

    def used_version_1(ctx, result):
        if result.code != 0:
            return []
        return [] if os.path.join("serving", "1") in result.stderr else ["did not say it used serving/1"]
    cases.append(Case("export/version-2-a-file-beside-1/translate", EITHER, beside("file"),
                      "a file named 2 is no version: version 1 may be used, or the base refused",
                      check=all_of(output_lines(2), used_version_1)))
    cases.append(Case("export/version-2-an-empty-folder-beside-1/translate", EITHER, beside("empty"),
                      "an empty folder is no complete version: version 1 may be used, or the base refused",
                      check=all_of(output_lines(2), used_version_1)))
    cases.append(Case("export/a-hidden-temporary-beside-1/translate", OK, beside("tmp"),
                      "a hidden temporary folder is never a version", check=all_of(output_lines(2), used_version_1),
                      leftovers_ok=True))

    def version_folder(ctx):
        return translate(f"--export_dir={os.path.join(ctx.f.export, '1')}", f"--input={ctx.f.src}",
                         f"--output={ctx.out()}")
    cases.append(Case("export/export_dir-a-version-folder/translate", OK, version_folder,
                      "a version folder is an export", check=output_lines(2)))

    def wrong_level(ctx):
        return translate(f"--export_dir={os.path.join(ctx.f.export, '1', 'variables')}", f"--input={ctx.f.src}",
                         f"--output={ctx.out()}")
    cases.append(Case("export/export_dir-the-variables-folder/translate", ERROR, wrong_level, "no SavedModel there"))

    def only_temporary(ctx):
        os.makedirs(ctx.path("serving", ".tmp-1-host-1-abcd"))
        write(ctx.path("serving", ".tmp-1-host-1-abcd", "saved_model.pb"), b"")
        return translate(f"--export_dir={ctx.path('serving')}", f"--input={ctx.f.src}", f"--output={ctx.out()}")
    cases.append(Case("export/base-with-only-a-temporary/translate", ERROR, only_temporary, "no version",
                      leftovers_ok=True))

    def export_beside(kind: str):
        def prepare(ctx):
            serving = ctx.copy(ctx.f.export, "serving")
            if kind == "file":
                write(os.path.join(serving, "2"), "not a version\n")
            elif kind == "stale":  # as a killed export names it: version, host, pid (now dead), token
                dead = subprocess.Popen(["true"])
                dead.wait()
                host = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()) or "localhost"
                os.makedirs(os.path.join(serving, f".tmp-2-{host}-{dead.pid}-1f2e3d4c", "variables"))
            ctx.watch_export(serving)
            return export(f"--model_dir={ctx.f.run}", f"--export_dir={serving}", "--nocheck_ops")
        return prepare

    def new_version_complete(ctx, result):
        if result.code != 0:
            return []
        new = [v for v in versions_in(ctx.path("serving")) if v != "1" and os.path.isdir(ctx.path("serving", v))]
        return [] if new else ["no new version folder published"]
    cases.append(Case("export/export-beside-a-file-named-2", EITHER, export_beside("file"),
                      "a new version may take the next free number or the base may be refused",
                      check=new_version_complete))
    cases.append(Case("export/export-beside-a-stale-temporary-of-a-dead-export", OK, export_beside("stale"),
                      "a dead export's hidden folder on this host is removed, the new version published",
                      check=new_version_complete))

    def n_best_sampled(ctx):
        return translate(f"--export_dir={ctx.f.export}", f"--input={ctx.f.src}", f"--output={ctx.out()}",
                         "--sampling_topk=5", "--seed=1")
    cases.append(Case("export/translate-sampled-from-an-export", OK, n_best_sampled,
                      "the export has a sampling signature", check=output_lines(2)))
    return cases


def signal_cases() -> list:
    """SIGINT/SIGTERM at moments of train, translate, score, export, averaging, tokenizer training."""
    cases = []
    int_, term = signal.SIGINT, signal.SIGTERM

    def long_train(ctx):
        return train(f"--model_dir={ctx.path('run')}", *LONG)

    def resumes(ctx, result):
        """The run stopped at a saved step N resumes there and trains to N + 2."""
        problems = []
        stopped = re.search(r"(SIGINT|SIGTERM) at step (\d+): saved ckpt-\d+", result.stdout)
        if result.code in (130, 143) and not stopped and len(result.errors) != 1:  # stopped before the loop
            problems.append("the stop neither said which step it saved nor printed one error line")
        steps = int(stopped.group(2)) if stopped else 0
        again = ctx.run(train(f"--model_dir={ctx.path('run')}", *LONG[1:], f"--train_steps={steps + 2}"))
        if again.code != 0:
            return problems + [f"the resume exited {again.code}: {again.tail(2)}"]
        expected = f"resumed at step {steps}" if steps else "starting at step 0"
        if expected not in again.stdout:
            problems.append(f"the resume did not say {expected!r}")
        return problems

    cases.append(Case("signals/train-SIGINT-after-step-3-then-resume", SIGNAL, long_train,
                      "Ctrl-C finishes the update, saves, exits 130; the same command resumes",
                      check=resumes, signals=(Signal(int_, 0.0, r"^step 3/"),), codes=(130,), error_lines=(0, 1)))
    cases.append(Case("signals/train-SIGTERM-after-step-3-then-resume", SIGNAL, long_train,
                      "kill finishes the update, saves, exits 143; the same command resumes",
                      check=resumes, signals=(Signal(term, 0.0, r"^step 3/"),), codes=(143,), error_lines=(0, 1)))
    cases.append(Case("signals/train-two-SIGINTs-mid-run", SIGNAL, long_train,
                      "a second Ctrl-C while the first is handled stops at once, still 130, no traceback",
                      check=resumes, signals=(Signal(int_, 0.0, r"^step 5/"), Signal(int_, 0.05)),
                      codes=(130,), error_lines=(0, 1)))
    cases.append(Case("signals/train-SIGINT-after-the-tokenizer-line-then-rerun", SIGNAL, long_train,
                      "Ctrl-C while the model is built on a first start: 130, then the run starts or resumes",
                      check=resumes, signals=(Signal(int_, 0.3, r"^tokenizer: "),), codes=(130,), error_lines=(0, 1)))
    cases.append(Case("signals/train-SIGINT-during-imports", SIGNAL, long_train,
                      "Ctrl-C before anything starts: 130 and one error line, nothing written",
                      check=lambda ctx, r: [] if not os.path.exists(ctx.path("run")) or r.code != 130 else
                      resumes(ctx, r), signals=(Signal(int_, 0.6),), codes=(130,)))

    def translating(source="model_dir", existing=False):
        def prepare(ctx):
            out = ctx.path("out.txt")
            if existing:
                write(out, "an earlier translation\n")
            ctx.watch(out)
            model = f"--model_dir={ctx.f.run}" if source == "model_dir" else f"--export_dir={ctx.f.export}"
            extra = ("--beam_size=1",) if source == "model_dir" else ()
            return translate(model, f"--input={ctx.f.many}", f"--output={out}", "--batch_size=16", *extra)
        return prepare
    cases.append(Case("signals/translate-SIGINT-mid-translation", SIGNAL, translating(),
                      "Ctrl-C: 130, one error line, no output file", signals=(Signal(int_, 2.0, r"^translating "),)))
    cases.append(Case("signals/translate-SIGINT-mid-translation-existing-output", SIGNAL, translating(existing=True),
                      "Ctrl-C: 130, one error line, the earlier output kept",
                      signals=(Signal(int_, 2.0, r"^translating "),)))
    cases.append(Case("signals/translate-SIGTERM-mid-translation-existing-output", SIGNAL,
                      translating(existing=True), "kill: ended (143, or the default action), the earlier output kept",
                      signals=(Signal(term, 2.0, r"^translating "),), codes=(143, -15), error_lines=(0, 1)))
    cases.append(Case("signals/translate-export-SIGINT-mid-translation", SIGNAL, translating("export_dir"),
                      "Ctrl-C: 130, one error line, no output", signals=(Signal(int_, 2.0, r"^translating "),)))
    cases.append(Case("signals/translate-SIGINT-during-imports", SIGNAL, translating(),
                      "Ctrl-C before anything starts: 130 and one error line", signals=(Signal(int_, 0.5),)))
    cases.append(Case("signals/translate-SIGINT-while-the-model-loads", SIGNAL, translating(),
                      "Ctrl-C while TensorFlow starts and the model loads: 130, one error line",
                      signals=(Signal(int_, 3.0),)))

    def translated(ctx):  # the output is not watched: it is complete before the signal comes
        return translate(f"--model_dir={ctx.f.run}", f"--input={ctx.f.src}", f"--output={ctx.path('out.txt')}",
                         "--beam_size=1")
    for signum, name in ((int_, "SIGINT"), (term, "SIGTERM")):
        cases.append(Case(f"signals/translate-{name}-after-its-last-line", SIGNAL, translated,
                          "a signal as the interpreter exits, the output written: any end but a traceback "
                          "(0, 130/143, or the signal itself)", check=output_lines(2),
                          signals=(Signal(signum, 0.0, r"^2 sentences in "),),
                          codes=(0, 128 + signum, -signum), error_lines=(0, 1)))

    def scoring(ctx):
        return score(f"--model_dir={ctx.f.run}", f"--source={ctx.f.many}", f"--target={ctx.f.many_ref}",
                     f"--output={ctx.out()}", "--batch_tokens=256")
    cases.append(Case("signals/score-SIGINT-mid-scoring", SIGNAL, scoring, "Ctrl-C: 130, one error line, no output",
                      signals=(Signal(int_, 1.5, r"^scoring "),)))

    def exporting(ctx):
        ctx.watch_export(ctx.path("serving"))
        return export(f"--model_dir={ctx.f.run}", f"--export_dir={ctx.path('serving')}")

    def temporary_there(ctx):
        return lambda: any(n.startswith(".tmp") for n in os.listdir(ctx.path("serving"))) \
            if os.path.isdir(ctx.path("serving")) else False

    for moment, spec in (("during-imports", lambda ctx: Signal(int_, 1.5)),
                         ("while-tracing", lambda ctx: Signal(int_, 8.0)),
                         ("while-saving", lambda ctx: Signal(int_, 0.2, temporary_there(ctx))),
                         ("during-the-op-check", lambda ctx: Signal(int_, 2.5, temporary_there(ctx)))):
        def prepare(ctx, spec=spec):
            argv = exporting(ctx)
            ctx.dynamic_signals = (spec(ctx),)
            return argv
        cases.append(Case(f"signals/export-SIGINT-{moment}", SIGNAL, prepare,
                          "Ctrl-C: 130, one error line, no version and no temporary folder left",
                          signals=("dynamic",)))

    def export_again(ctx, result):
        problems = []
        if versions_in(ctx.path("serving")):
            problems.append("a version is visible after the kill")
        again = ctx.run(export(f"--model_dir={ctx.f.run}", f"--export_dir={ctx.path('serving')}", "--nocheck_ops"))
        if again.code != 0:
            return problems + [f"the next export exited {again.code}: {again.tail(2)}"]
        left = [n for n in os.listdir(ctx.path("serving")) if n.startswith(".tmp")]
        if left:
            problems.append(f"the next export left the killed one's {left}")
        return problems

    def export_term(ctx):
        argv = exporting(ctx)
        ctx.dynamic_signals = (Signal(term, 0.2, temporary_there(ctx)),)
        return argv
    cases.append(Case("signals/export-SIGTERM-while-saving-then-export-again", SIGNAL, export_term,
                      "kill: no version visible; the next export removes the hidden folder and publishes",
                      check=export_again, signals=("dynamic",), codes=(143, -15), error_lines=(0, 1),
                      leftovers_ok=True))

    def averaging(ctx):
        model_dir = ctx.copy(ctx.f.run)
        shutil.rmtree(os.path.join(model_dir, "averaged"))
        return average(f"--model_dir={model_dir}", "--num_checkpoints=2")

    def no_half_average(ctx, result):
        """averaged/ is absent, empty or a listed checkpoint; the command run again averages."""
        problems = []
        folder = ctx.path("run", "averaged")
        names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        if names and "checkpoint" not in names:
            problems.append(f"averaged/ left holding {names} without its state file (readers warn and use them)")
        again = ctx.run(average(f"--model_dir={ctx.path('run')}", "--num_checkpoints=2"))
        if again.code != 0 or not os.path.isfile(os.path.join(folder, "checkpoint")):
            problems.append(f"the rerun exited {again.code}: {again.tail(2)}")
        return problems
    cases.append(Case("signals/average_checkpoints-SIGINT-while-tensorflow-starts", SIGNAL, averaging,
                      "Ctrl-C: 130, one error line, no half-written average", check=no_half_average,
                      signals=(Signal(int_, 2.0),)))

    def average_appears(ctx):
        argv = averaging(ctx)
        index = ctx.path("run", "averaged", "ckpt-12.index")
        ctx.dynamic_signals = (Signal(int_, 0.0, lambda: os.path.exists(index)),)
        return argv
    def listed_or_finished(ctx, result):
        """A signal that came after the work (as the interpreter exits) ends the process by itself."""
        problems = []
        if result.code == -signal.SIGINT and "averaged ckpt-6, ckpt-12 ->" not in result.stdout:
            problems.append("ended by SIGINT itself before it had averaged")
        return problems + no_half_average(ctx, result)
    cases.append(Case("signals/average_checkpoints-SIGINT-as-the-average-appears", SIGNAL, average_appears,
                      "Ctrl-C between the save of the average's files and their listing (a race: the signal may "
                      "also come after the work, as the interpreter exits): 130 and one error line, no average "
                      "left without its state file", check=listed_or_finished, signals=("dynamic",),
                      codes=(130, -signal.SIGINT), error_lines=(0, 1)))

    def evaluating(ctx):
        model_dir = ctx.copy(ctx.f.run)
        return train(f"--model_dir={model_dir}", *FINISHED, "--evaluate_only", "--eval_max_sentences=0")
    cases.append(Case("signals/evaluate_only-SIGINT", SIGNAL, evaluating, "Ctrl-C: 130, no traceback",
                      signals=(Signal(int_, 6.0),), error_lines=(0, 1)))

    def tokenizing(ctx):
        return pipelines("train_tokenizer", "--vocab_size=400", f"--tokenizer_dir={ctx.path('tok')}")

    def no_half_tokenizer(ctx, result):
        folder = ctx.path("tok")
        if os.path.isdir(folder) and os.listdir(folder) and not os.path.isfile(os.path.join(folder, "tokenizer.json")):
            return [f"tok/ half-written: {os.listdir(folder)}"]
        return []
    cases.append(Case("signals/pipelines-train_tokenizer-SIGINT", SIGNAL, tokenizing,
                      "Ctrl-C: 130, one error line, no half-written tokenizer", check=no_half_tokenizer,
                      signals=(Signal(int_, 3.0),)))
    return cases


CASES = fixed_cases() + run_dir_cases() + flag_cases() + text_cases() + export_cases() + signal_cases()


def test_case_names_are_unique():
    names = [case.name for case in CASES]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


@pytest.fixture(scope="session")
def hostile(tmp_path_factory):
    """The fixtures (built once) and their hashes, which every case compares with."""
    fixtures = Fixtures(str(tmp_path_factory.mktemp("hostile") / "fixtures"))
    fixtures.build(tmp_path_factory)
    return fixtures, {name: tree_digest(folder) for name, folder in fixtures.guarded().items()}


# The signal cases time a signal to a moment of a command's run: `make test-slow` runs them alone, after the
# other slow tests, so that no other test file loads the host meanwhile (`test_hostile_signal`).
SIGNAL_CASES = [case for case in CASES if case.expect == SIGNAL]
OTHER_CASES = [case for case in CASES if case.expect != SIGNAL]


@pytest.mark.slow
@pytest.mark.parametrize("case", OTHER_CASES, ids=[case.name for case in OTHER_CASES])
def test_hostile_input(hostile, case, tmp_path):
    folder = tmp_path / "case"
    folder.mkdir()
    check_case(case, *hostile, str(folder))


@pytest.mark.slow
@pytest.mark.parametrize("case", SIGNAL_CASES, ids=[case.name for case in SIGNAL_CASES])
def test_hostile_signal(hostile, case, tmp_path):
    folder = tmp_path / "case"
    folder.mkdir()
    check_case(case, *hostile, str(folder))
