"""The input pipeline on corpora larger than RAM: speed and memory by corpus size and cache mode.

The paper trained on 4.5M (WMT 2014 English-German) and 36M (English-French) sentence
pairs (section 5.1). The in-memory cache of `keras_transformer.pipelines.batching.make_dataset` holds every
tokenized pair, so its memory grows with the corpus; this measures, for corpora of 1M, 3M
and 10M pairs, what each cache mode ("none", "disk", "memory") costs in speed and memory,
and whether the pipeline still outruns training.

  .venv/bin/python bench/input_scale.py                                   # 1M, 3M, 10M pairs
  .venv/bin/python bench/input_scale.py --sizes=20000 --batches=100 --steps=2   # a smoke test

1. Corpora: pair i joins two (3 in 4) or three (1 in 4) Multi30k training pairs
   (../shared/data/multi30k/train.{en,de}.gz, 29,000 pairs) drawn by a seeded RNG, so
   sentences have a realistic length (about 27 English words) and lines seldom repeat. They are written as
   plain-text shards of --shard_pairs pairs, FOLDER/SIZE/train-000.en, train-000.de, ...,
   read back through the shard glob; shards with the right line count are reused.
   Without the Multi30k files the benchmark prints why and exits with status 0.
2. One shared 8k BPE tokenizer trained on the Multi30k training pairs, saved in
   FOLDER/tokenizer and reused (not measured).
3. Each (size, mode) runs in a fresh process that builds the pipeline as training does
   (`text_files.parallel_text_files` over the shard glob, then `batching.make_dataset` with
   shuffle, repeat, max_length 128 and the cache mode; "disk" caches under a temporary folder
   in FOLDER, deleted afterwards). "none" and "disk": --batches batches timed after 50
   warm-up batches (the first of which waits for the shuffle buffer to fill). "memory": one
   full epoch from the first batch on, until as many pairs as the corpus holds came out: the
   epoch that fills the cache. Each process reports its resident memory after building the
   pipeline (baseline) and its peak (VmHWM).
4. What training consumes: the Multi30k recipe's model (configs/multi30k_en_de.flags: N=3,
   d_model=256, h=4, d_ff=1024, float32) trained --steps steps after 2 warm-up steps on
   batches of the first size's pipeline (`bench/pipeline_throughput.time_step`), in a fresh
   process too. The pipeline should deliver at least 10x the pairs/s training consumes.

Tokens are non-padding source plus target ids (EOS included). A markdown table, the machine
and the command are printed; the figures go into docs/speed.md#corpora-larger-than-ram as CPU figures.
"""

import glob
import itertools
import json
import os
import platform
import shlex
import shutil
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from child import last_json, run_python  # noqa: E402
from pipeline_throughput import DEFAULT_SHARED_DATA, count, time_step  # noqa: E402

MODES = ("none", "disk", "memory")
FLAGS = flags.FLAGS
flags.DEFINE_list("sizes", ["1000000", "3000000", "10000000"], "Corpus sizes, in sentence pairs.")
flags.DEFINE_list("modes", list(MODES), "Cache modes of make_dataset to measure: none, disk, memory.")
flags.DEFINE_string("folder", "/tmp/input_scale", "Where the corpora, the tokenizer and the disk caches go.")
flags.DEFINE_string("shared_data", DEFAULT_SHARED_DATA, "Folder holding multi30k/train.{en,de}.gz.")
flags.DEFINE_integer("shard_pairs", 1_000_000, "Sentence pairs per shard file.", lower_bound=1)
flags.DEFINE_integer("batches", 3000, "Batches timed (cache modes none and disk), after the warm-up.",
                     lower_bound=1)
flags.DEFINE_integer("batch_tokens", 3000, "Token budget per batch and side (the Multi30k recipe's).")
flags.DEFINE_integer("shuffle_buffer", 200_000, "Pairs in the shuffle buffer.", lower_bound=1)
flags.DEFINE_integer("steps", 8, "Training steps timed (after 2 warm-up steps); 0 skips training.",
                     lower_bound=0)
flags.DEFINE_bool("keep", False, "Keep the generated corpora (they are reused by the next run).")
flags.DEFINE_string("child", None, "Internal: 'pipeline:SIZE:MODE' or 'train:SIZE'; prints one JSON line.")
flags.DEFINE_string("cache_path", None, "Internal: the disk cache's file prefix.")
flags.register_validator("modes", lambda modes: set(modes) <= set(MODES),
                         f"--modes: each one of {', '.join(MODES)}")
flags.register_validator("sizes", lambda sizes: all(s.isdigit() and int(s) > 0 for s in sizes),
                         "--sizes: positive integers (sentence pairs)")

# The Multi30k recipe (configs/multi30k_en_de.flags).
VOCAB_SIZE = 8000
MAX_LENGTH = 128
MODEL_SIZE = dict(num_layers=3, d_model=256, d_ff=1024, num_heads=4)

WARMUP_BATCHES = 50
SEED = 0
THREE_JOINED = 0.25  # generated pairs joining 3 Multi30k pairs, the others 2: ~27 English words


# Corpora ---------------------------------------------------------------------------------------


def multi30k_files():
    folder = os.path.join(FLAGS.shared_data, "multi30k")
    return os.path.join(folder, "train.en.gz"), os.path.join(folder, "train.de.gz")


def corpus_dir(size: int) -> str:
    return os.path.join(FLAGS.folder, str(size))


def shard_paths(size: int, shard="*") -> list[str]:
    """The source and target files of one shard of FOLDER/SIZE (by default the glob of all)."""
    name = shard if shard == "*" else f"{shard:03d}"
    return [os.path.join(corpus_dir(size), f"train-{name}.{side}") for side in ("en", "de")]


def sentence_table(sentences) -> tuple[list[bytes], list[bytes]]:
    """Each sentence in UTF-8 followed by a space (inside a line), and followed by a newline (last)."""
    encoded = [s.encode("utf-8") for s in sentences]
    return [e + b" " for e in encoded], [e + b"\n" for e in encoded]


def write_shard(tables, shard: int, lines: int, paths) -> None:
    """`lines` pairs, each joining 2 or 3 random Multi30k pairs, the same ones on both sides."""
    from keras_transformer.files.atomic import write_atomically  # pylint: disable=g-import-not-at-top

    rng = np.random.default_rng([SEED, shard])
    first, second, third = rng.integers(0, len(tables[0][0]), size=(3, lines)).tolist()
    three = (rng.random(lines) < THREE_JOINED).tolist()
    for (inner, last), path in zip(tables, paths):  # a Python join beats a NumPy byte gather here
        write_atomically(path, b"".join([inner[a] + inner[b] + last[c] if j else inner[a] + last[b]
                                         for a, b, c, j in zip(first, second, third, three)]))


def make_corpus(size: int, tables) -> str:
    """Writes (or reuses) FOLDER/SIZE/train-NNN.{en,de}; returns what was done."""
    from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines.errors import DataError  # pylint: disable=g-import-not-at-top

    folder = corpus_dir(size)
    os.makedirs(folder, exist_ok=True)
    shards = [min(FLAGS.shard_pairs, size - start) for start in range(0, size, FLAGS.shard_pairs)]
    wanted = {path for i in range(len(shards)) for path in shard_paths(size, i)}
    for path in set(glob.glob(os.path.join(folder, "train-*"))) - wanted:
        os.remove(path)  # shards of an earlier --shard_pairs
    start, written = time.perf_counter(), 0
    for i, lines in enumerate(shards):
        paths = shard_paths(size, i)
        try:
            if all(text_files.check_file(p) == lines for p in paths):
                continue
        except DataError:
            pass
        write_shard(tables, i, lines, paths)
        written += 1
    reused = len(shards) - written
    return (f"{size:,} pairs in {len(shards)} shard(s) under {folder}: {written} written"
            f"{f', {reused} reused' if reused else ''} in {time.perf_counter() - start:.1f} s")


def load_tokenizer(pairs=None):
    """The shared BPE tokenizer in FOLDER/tokenizer, trained on `pairs` if not saved yet."""
    from keras_transformer import cli  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import tokenizers  # pylint: disable=g-import-not-at-top

    with cli.silence_native_stderr():  # sentencepiece's C++ INFO lines
        tokenizer, _, trained = tokenizers.load_or_train_pair(
            os.path.join(FLAGS.folder, "tokenizer"), lambda: pairs,
            tokenizers.TokenizerConfig(vocab_size=VOCAB_SIZE))
    return tokenizer, trained


# Children: one measurement per fresh process ---------------------------------------------------


def memory_mb() -> dict:
    """VmRSS and VmHWM (peak) of this process, in MB."""
    with open("/proc/self/status", encoding="ascii") as f:
        fields = dict(line.split(":", 1) for line in f)
    return {key: int(fields[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM")}


def build_pipeline(size: int, mode: str, cache_path=None):
    """The training input pipeline over the shards of FOLDER/SIZE, as training builds it."""
    from keras_transformer.pipelines import batching, text_files  # pylint: disable=g-import-not-at-top

    tokenizer, _ = load_tokenizer()
    source_glob, target_glob = shard_paths(size)
    pairs = text_files.parallel_text_files(source_glob, target_glob, validate=False)
    ds = batching.make_dataset(pairs, tokenizer, batch_tokens=FLAGS.batch_tokens, max_length=MAX_LENGTH,
                               shuffle=True, seed=SEED, repeat=True, shuffle_buffer=FLAGS.shuffle_buffer,
                               cache=mode, cache_path=cache_path)
    return ds, tokenizer


def consume(batches, enough) -> tuple[int, int, int]:
    """Iterates until `enough(batches, pairs)`; returns (batches, pairs, tokens) seen."""
    done = pairs = tokens = 0
    for batch in batches:
        done, pairs, tokens = done + 1, pairs + int(batch[0].shape[0]), tokens + count(batch)
        if enough(done, pairs):
            break
    return done, pairs, tokens


def measure_pipeline(size: int, mode: str) -> dict:
    ds, _ = build_pipeline(size, mode, FLAGS.cache_path)
    baseline = memory_mb()["VmRSS"]
    start = time.perf_counter()
    batches = iter(ds)
    batch = next(batches)  # waits for the shuffle buffer to fill
    first_batch = time.perf_counter() - start
    if mode == "memory":  # one full epoch from the start: the one that fills the cache
        done, pairs, tokens = consume(itertools.chain([batch], batches), lambda n, p: p >= size)
    else:
        for _ in range(WARMUP_BATCHES - 1):
            next(batches)
        start = time.perf_counter()
        done, pairs, tokens = consume(batches, lambda n, p: n >= FLAGS.batches)
    seconds = time.perf_counter() - start
    memory = memory_mb()
    return dict(size=size, mode=mode, batches=done, pairs=pairs, tokens=tokens, seconds=seconds,
                pairs_per_second=pairs / seconds, tokens_per_second=tokens / seconds,
                first_batch_seconds=first_batch, baseline_rss_mb=baseline, peak_rss_mb=memory["VmHWM"])


def measure_training(size: int) -> dict:
    ds, tokenizer = build_pipeline(size, "none")
    batches = list(ds.take(2 + FLAGS.steps))
    tokens_per_second, pairs_per_second, params = time_step(batches, tokenizer.vocab_size, FLAGS.steps,
                                                            **MODEL_SIZE)
    return dict(size=size, pairs_per_second=pairs_per_second, tokens_per_second=tokens_per_second,
                params=params, pairs_per_batch=float(np.mean([int(s.shape[0]) for s, _ in batches[2:]])))


def child(spec: str) -> None:
    from keras_transformer import cli  # pylint: disable=g-import-not-at-top

    cli.start_tensorflow()  # as training starts it (the allocator it picks changes the RSS)
    kind, size, *mode = spec.split(":")
    result = measure_training(int(size)) if kind == "train" else measure_pipeline(int(size), mode[0])
    print(json.dumps(result), flush=True)


def run_child(spec: str, cache_path=None) -> dict:
    argv = [os.path.abspath(__file__), f"--child={spec}", f"--folder={FLAGS.folder}",
            f"--batches={FLAGS.batches}", f"--batch_tokens={FLAGS.batch_tokens}",
            f"--shuffle_buffer={FLAGS.shuffle_buffer}", f"--steps={FLAGS.steps}"]
    if cache_path:
        argv.append(f"--cache_path={cache_path}")
    start = time.perf_counter()
    result = run_python(*argv)
    wall = time.perf_counter() - start
    if result.returncode:
        lines = result.stderr.strip().splitlines() or ["(no output)"]
        print(f"{spec} failed (exit {result.returncode}):\n  " + "\n  ".join(lines[-15:]), flush=True)
        return {"error": lines[-1], "wall_seconds": wall}
    return dict(last_json(result), wall_seconds=wall)


# The parent ------------------------------------------------------------------------------------


def cpu_model() -> str:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def table(rows, training) -> str:
    lines = ["| pairs | cache | pairs/s | tokens/s | peak RSS MB | RSS growth over baseline MB | "
             "vs training | timed s | wall s |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        head = f"| {row['size']:,} | {row['mode']} |"
        if "error" in row:
            lines.append(f"{head} failed: {row['error'][:80]} | | | | | | {row['wall_seconds']:.0f} |")
            continue
        ratio = (f"{row['pairs_per_second'] / training['pairs_per_second']:.1f}x"
                 if training and "error" not in training else "-")
        lines.append(f"{head} {row['pairs_per_second']:,.0f} | {row['tokens_per_second']:,.0f} | "
                     f"{row['peak_rss_mb']:,.0f} | {row['peak_rss_mb'] - row['baseline_rss_mb']:,.0f} | "
                     f"{ratio} | {row['seconds']:.1f} | {row['wall_seconds']:.0f} |")
    return "\n".join(lines)


def main(argv):
    del argv
    if FLAGS.child:
        return child(FLAGS.child)
    source_file, target_file = multi30k_files()
    if not (os.path.isfile(source_file) and os.path.isfile(target_file)):
        print(f"skipped: {source_file} and {target_file} are needed to build the corpora")
        return 0
    from keras_transformer import cli  # pylint: disable=g-import-not-at-top
    from keras_transformer.pipelines import text_files  # pylint: disable=g-import-not-at-top

    cli.start_tensorflow()  # quietly, for the tokenizer
    command = " ".join(shlex.quote(a) for a in [os.path.relpath(sys.executable), *sys.argv])
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; command: {command}", flush=True)
    sizes = [int(s) for s in FLAGS.sizes]
    pairs = text_files.read_parallel_pairs(source_file, target_file)
    tables = [sentence_table(side) for side in zip(*pairs)]
    tokenizer, trained = load_tokenizer(pairs)
    print(f"tokenizer: shared BPE, {tokenizer.vocab_size} ids, "
          f"{'trained on' if trained else 'reused (trained on'} the {len(pairs):,} Multi30k training pairs"
          f"{'' if trained else ')'}; batch_tokens={FLAGS.batch_tokens}, max_length={MAX_LENGTH}, "
          f"shuffle_buffer={FLAGS.shuffle_buffer:,}", flush=True)
    rows, training = [], None
    try:
        for size in sizes:
            print(f"corpus: {make_corpus(size, tables)}", flush=True)
            if training is None and FLAGS.steps:
                training = run_child(f"train:{size}")
                if "error" not in training:
                    print(f"training (N={MODEL_SIZE['num_layers']}, d_model={MODEL_SIZE['d_model']}, "
                          f"h={MODEL_SIZE['num_heads']}, d_ff={MODEL_SIZE['d_ff']}, float32, "
                          f"{training['params'] / 1e6:.1f}M parameters, Adam; {FLAGS.steps} steps on "
                          f"batches of the {size:,}-pair pipeline, {training['pairs_per_batch']:.0f} "
                          f"pairs/batch): {training['pairs_per_second']:,.0f} pairs/s, "
                          f"{training['tokens_per_second']:,.0f} tokens/s", flush=True)
            for mode in FLAGS.modes:
                cache_dir = tempfile.mkdtemp(prefix="cache-", dir=FLAGS.folder) if mode == "disk" else None
                try:
                    row = run_child(f"pipeline:{size}:{mode}",
                                    os.path.join(cache_dir, "pairs") if cache_dir else None)
                finally:
                    if cache_dir:
                        shutil.rmtree(cache_dir, ignore_errors=True)
                rows.append(dict(row, size=size, mode=mode))
                if "error" not in row:
                    print(f"{size:,} {mode}: {row['batches']:,} batches, {row['pairs']:,} pairs in "
                          f"{row['seconds']:.1f} s (first batch after {row['first_batch_seconds']:.1f} s); "
                          f"RSS {row['baseline_rss_mb']:,.0f} MB before, peak {row['peak_rss_mb']:,.0f} MB",
                          flush=True)
            if not FLAGS.keep:
                shutil.rmtree(corpus_dir(size), ignore_errors=True)
    finally:
        print()
        print(table(rows, training))
        print(f"\nmachine: {cpu_model()}, {os.cpu_count()} cores; command: {command}")
        print("none and disk: pairs/s over the timed batches after 50 warm-up batches; memory: over the "
              "first epoch (the one that fills the cache). vs training: pipeline pairs/s over the pairs/s "
              "a training step consumes (needed: >= 10x).")
    return 1 if any("error" in row for row in rows) else 0


if __name__ == "__main__":
    app.run(main)
