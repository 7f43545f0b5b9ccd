"""Translating files: what `python -m keras_transformer.translate` does.

    translate_file("test.en", "test.hyp", model_dir=model_dir)

`translate_file` runs the export's `Translator` (built in process from a training directory)
or an export of any format (`keras_transformer.export.client.Engine`), so a file is translated
by the same graph TF Serving runs (section 6.1's search, `keras_transformer.decoding.search`).
"""

from __future__ import annotations

import sys
import time
from typing import Optional, Sequence

from keras_transformer.config import DecodingConfig, SamplingConfig
from keras_transformer.export import client
from keras_transformer.files import atomic, command_files


def translate_file(input_path: str, output_path: str = "-", *, model_dir: Optional[str] = None,
                   export_dir: Optional[str] = None, decoding: DecodingConfig = DecodingConfig(),
                   checkpoint: Optional[str] = None, reference: Optional[str] = None, batch_size: int = 32,
                   progress: Optional[bool] = None, n_best: int = 1,
                   moses_bleu_lang: Optional[str] = None, ensemble_model_dirs: Sequence[str] = (),
                   sampling: Optional[SamplingConfig] = None,
                   target_prefix_file: Optional[str] = None, shortlist_file: Optional[str] = None) -> Optional[str]:
    """Translates a file (or stdin) line by line with a training directory or an export.

    What translates is a `keras_transformer.export.client.Engine` of the arguments (exactly one
    of `model_dir` and `export_dir`, checked there as for every command). From `model_dir` the
    export's `Translator` (tokenizer + beam search, `decoding`) is built in process from the
    averaged or latest checkpoint (or `checkpoint`); `export_dir` loads an export of any
    registered format (a version folder, or a base folder whose highest version is used), whose
    decoding settings were fixed at export time. `ensemble_model_dirs` (with `model_dir`) decodes
    the ensemble of those runs' models and `model_dir`'s (`keras_transformer.decoding.ensemble`).

    Bad input is found before the model loads (`check_files`): an `output_path` that is a folder,
    cannot be written or is the input or the reference (`command_files.check_output_path`), a missing input
    or reference, a reference whose line count is not the input's. The output file is replaced
    at the end, atomically: a failure leaves an existing file as it was. `progress`: the progress
    bar on stderr (default: when stderr is a terminal, see `keras_transformer.export.client.translate_lines`); the
    first and last lines on stderr (sentences and model, time and speed) are always written.

    With `n_best` > 1 (at most the beam size) each sentence gets up to `n_best` lines, best
    first, in the Moses n-best format Marian and fairseq also write, `i ||| translation ||| score`
    (i the sentence's 0-based line number, score log P(Y) / lp(|Y|)); a sentence with fewer
    hypotheses (an empty line has one, "") gets fewer lines. BLEU is then of the best ones.

    With `sampling` each sentence gets one random sample (the export's `translate_sampled`;
    batch i drawn with seed `sampling.seed * client.BATCH_SEEDS + i`, so the same file, seed and
    `batch_size` give the same output), scored log P(Y). With `target_prefix_file` (one target
    prefix per input line, an empty line for none) each translation continues its prefix (the
    export's `translate_with_prefix`). Neither goes with `n_best` > 1, nor both together
    (`keras_transformer.export.exporters.Request`).

    Returns:
        With `reference`, sacreBLEU's report as text (`metrics.corpus_scores`): BLEU (section 6.1),
        chrF and chrF++ (Popović 2015, 2017; not in the paper), each with its signature, and with
        `moses_bleu_lang` BLEU lowercased and Moses-tokenized (`metrics.moses_bleu`); else None.
    """
    from keras_transformer import metrics  # pylint: disable=g-import-not-at-top

    engine = client.Engine(model_dir, export_dir, checkpoint, ensemble_model_dirs, shortlist_file,
                           client.Request(n_best=n_best, sampling=sampling, prefixed=bool(target_prefix_file)))
    command_files.check_output_path(output_path, inputs={"input": input_path, "reference": reference})
    lines = command_files.read_lines(input_path)
    references = read_references(reference, len(lines), input_path)
    prefixes = read_prefixes(target_prefix_file, len(lines), input_path)
    start = time.perf_counter()
    translate_fn, source = engine.load(decoding)
    print(f"translating {len(lines)} sentences with {source}", file=sys.stderr)
    translations, scores = client.translate_lines(translate_fn, lines, batch_size, progress, prefixes=prefixes)
    if n_best > 1:
        text = n_best_lines(translations, scores)
        translations = [hypotheses[0] for hypotheses in translations]
    else:
        text = "".join(one_line(t) + "\n" for t in translations)
    atomic.write_output(output_path, text)
    elapsed = time.perf_counter() - start
    print(f"{len(lines)} sentences in {elapsed:.1f} s ({len(lines) / max(elapsed, 1e-9):.1f} sentences/s)",
          file=sys.stderr)
    if references is None:
        return None
    return str(metrics.corpus_scores(translations, references, moses_lang=moses_bleu_lang))


def one_line(translation: str) -> str:
    """A translation as one line of the output: a line break in it (a byte-fallback piece, more
    likely sampled than searched) becomes a space."""
    return translation.replace("\r", " ").replace("\n", " ")


def check_files(input_path: str, output_path: str = "-", reference: Optional[str] = None,
                target_prefix_file: Optional[str] = None) -> None:
    """What `translate_file` checks first, for a command to call before TensorFlow starts: the
    output can be written and is neither input (`command_files.check_output_path`), and a reference and a
    target prefix file have the input's line count (when the input is a file: stdin or a pipe is
    read once, by `translate_file`)."""
    command_files.check_output_path(output_path, inputs={"input": input_path, "reference": reference,
                                               "target_prefix_file": target_prefix_file})
    if (reference or target_prefix_file) and not command_files.is_stream(input_path):
        count = len(command_files.read_lines(input_path))
        read_references(reference, count, input_path)
        read_prefixes(target_prefix_file, count, input_path)


def read_prefixes(path: Optional[str], count: int, input_path: str) -> Optional[list[bytes]]:
    """The lines of a target prefix file (None without one); a one-line `ValueError` unless there
    are `count`, the input's."""
    if not path:
        return None
    prefixes = command_files.read_lines(path)
    if len(prefixes) != count:
        raise ValueError(f"{path} has {len(prefixes)} target prefixes but the input ({input_path}) has {count} lines")
    return prefixes


def read_references(reference: Optional[str], count: int, input_path: str) -> Optional[list[str]]:
    """The lines of `reference` (None without one); a one-line `ValueError` unless there are
    `count`, the input's."""
    if not reference:
        return None
    references = [line.decode("utf-8", errors="replace") for line in command_files.read_lines(reference)]
    if len(references) != count:
        raise ValueError(f"{reference} has {len(references)} lines but the input ({input_path}) has {count}")
    return references


def n_best_lines(translations: list[list[str]], scores: list[list[float]]) -> str:
    """Moses n-best lines, `i ||| translation ||| score`, of every filled slot (score above
    `serving_module.NO_HYPOTHESIS_SCORE`), best first. A translation never holds a line break:
    the tokenizer's normalization turns whitespace into spaces."""
    from keras_transformer.export import serving_module  # pylint: disable=g-import-not-at-top

    return "".join(f"{i} ||| {text} ||| {score:.6f}\n"
                   for i, (texts, values) in enumerate(zip(translations, scores))
                   for text, score in zip(texts, values) if score > serving_module.NO_HYPOTHESIS_SCORE / 2)
