"""What translates on the host: a training directory built in process or an export of any
format, described once (`Engine`), and many lines through it in length-sorted batches.

`python -m keras_transformer.translate`, `score` and `parse` (section 6.3's trees are
translations too) describe what they translate with as an `Engine`, so each check of it (exactly
one of a training directory and an export, what a request may ask together, what an export
serves) is made in one place, with the same line from every command:

    engine = Engine(export_dir="/tmp/serving/transformer", request=Request(n_best=3))
    decoding = engine.check(DecodingConfig())           # before TensorFlow starts: files only
    translate_fn, source = engine.load(decoding)        # a SavedModel, a CTranslate2 model, ...
    translations, scores = translate_lines(translate_fn, [b"A dog runs."], batch_size=32)

An export is loaded by its format's `keras_transformer.export.exporters.Exporter` (the format
its folder records); from a training directory the export's `Translator` runs in process, the
same graph TF Serving runs.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence, Union

from keras_transformer import cli
from keras_transformer.config import DecodingConfig, SamplingConfig
from keras_transformer.export import exporters, loaded_saved_model
from keras_transformer.export.exporters import Request
from keras_transformer.export.loaded_saved_model import (  # noqa: F401  (the names callers import from here)
    BATCH_SEEDS, check_export_signature, load_saved_model)
from keras_transformer.training_directory import TrainingDirectory


def translate_lines(translate_fn, lines: list[bytes], batch_size: int, progress: Optional[bool] = None,
                    prefixes: Optional[list[bytes]] = None) -> tuple[list[str], list[float]]:
    """Runs `translate_fn(tf.string [N]) -> {"translations", "scores"}` (a `serving_default`) over
    batches of similar length (words, then bytes), longest first.

    `progress` shows a progress bar on stderr; by default only when stderr is a terminal
    (`cli.stderr_progress`).

    Returns translations (str) and scores in the order of `lines`; with a `translate_n_best`
    (`[N, K]` outputs, `load_translate_fn(n_best=K)`) each is a list of K, best first.
    With `prefixes` (one target prefix per line) `translate_fn` is a `translate_with_prefix`
    (`load_translate_fn(prefixed=True)`), called with the sentences and their prefixes.
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    from keras_transformer.decoding import sorted_batches  # pylint: disable=g-import-not-at-top

    on_batch = cli.stderr_progress(len(lines), "sentence", progress)

    def translate_batch(batch):
        if prefixes is None:
            out = translate_fn(tf.constant(batch, tf.string))
        else:
            out = translate_fn(tf.constant([line for line, _ in batch], tf.string),
                               tf.constant([prefix for _, prefix in batch], tf.string))
        return [(_texts(text), score.tolist())
                for text, score in zip(_array(out["translations"]), _array(out["scores"]))]

    lengths = [(len(line.split()), len(line)) for line in lines]
    items = lines if prefixes is None else list(zip(lines, prefixes))
    results = sorted_batches.map_in_input_order(translate_batch, items, lengths, batch_size, descending=True,
                                                on_batch=on_batch)
    return [t for t, _ in results], [s for _, s in results]


def _array(value):
    """A translate function's output (a tensor, an array or a list) as a NumPy array."""
    import numpy as np  # pylint: disable=g-import-not-at-top

    return value.numpy() if hasattr(value, "numpy") else np.asarray(value, dtype=object if _is_text(value) else None)


def _is_text(value) -> bool:
    """Whether a nested list holds strings (an array of them keeps Python's str and bytes)."""
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    return isinstance(value, (str, bytes))


def _texts(value):
    """A translation (bytes or str) or a row of n-best translations -> str or a list of str."""
    if isinstance(value, (bytes, str)):
        return value.decode("utf-8") if isinstance(value, bytes) else value
    return [_texts(text) for text in value]


def exactly_one(**given) -> None:
    """A one-line `ValueError` unless exactly one of `given` (what translates, by flag name:
    model_dir=..., export_dir=..., and a command's others) is not None: "give exactly one of
    --model_dir and --export_dir"."""
    names = [f"--{name}" for name in given]
    if sum(value is not None for value in given.values()) != 1:
        raise ValueError(f"give exactly one of {', '.join(names[:-1])} and {names[-1]}")


@dataclasses.dataclass(frozen=True)
class Engine:
    """What translates: a training directory (its `Translator` built in process) or an export
    of any registered format, and what it is asked (`Request`). Checked on construction
    (`exactly_one`, the request's combinations, a shortlist only with a training directory).

    Args:
        model_dir: str or None, a training directory.
        export_dir: str or None, an export: a version folder or its base folder (the highest
            version holding an export).
        checkpoint: str or None, with `model_dir`: this checkpoint prefix instead of the
            averaged, best or latest one.
        ensemble_model_dirs: more training directories decoded with `model_dir`'s model as one
            (`serving_module.from_model_dir`).
        shortlist_file: str or None, with `model_dir`: a vocabulary map the searches are
            restricted by (an export holds its own).
        request: `Request`, n-best, sampling or target prefixes.
    """

    model_dir: Optional[str] = None
    export_dir: Optional[str] = None
    checkpoint: Optional[str] = None
    ensemble_model_dirs: Sequence[str] = ()
    shortlist_file: Optional[str] = None
    request: Request = Request()

    def __post_init__(self):
        exactly_one(model_dir=self.model_dir, export_dir=self.export_dir)
        if self.export_dir is not None and self.shortlist_file:
            raise ValueError("--shortlist: only with --model_dir (an export holds the shortlist it was exported with)")
        object.__setattr__(self, "ensemble_model_dirs", tuple(self.ensemble_model_dirs))

    def check(self, decoding: DecodingConfig = DecodingConfig()) -> DecodingConfig:
        """Refuses with one line, reading files only (a command calls it before TensorFlow
        starts), what `load` would refuse: a missing training directory or an n-best above
        `decoding`'s beam; an export that is missing, damaged, of an unknown format, or does not
        serve the request (its recorded beam, its signatures). Returns the decoding a training
        directory decodes with (`decoding` with the request's n_best)."""
        if self.model_dir is not None:
            decoding = dataclasses.replace(decoding, n_best=self.request.n_best)  # checked against its beam_size
            TrainingDirectory(self.model_dir).check_exists()
            return decoding
        exporter, folder = exporters.locate(self.export_dir)
        exporter.check_request(folder, self.request)
        return decoding

    def settings(self) -> dict:
        """What the export was made with (its format's export.json)."""
        exporter, folder = exporters.locate(self.export_dir)
        return exporter.settings(folder)

    def load(self, decoding: DecodingConfig = DecodingConfig()):
        """(translate function: tf.string [N] -> {"translations", "scores"}, where it came from).

        From `model_dir` the export's `Translator` (tokenizer + search with `decoding`) is built
        in process: `serving_default`, or with the request `translate_n_best` ([N, n_best]
        outputs, best first, with `decoding`'s beam and alpha), `translate_sampled` (batch i
        drawn with seed `sampling.seed * BATCH_SEEDS + i`) or `translate_with_prefix`
        (sentences, target prefixes). An export is loaded by its format's `Exporter.load`
        after `Exporter.check_request`; its decoding was fixed when it was exported.
        """
        request = self.request
        if self.export_dir is not None:
            exporter, folder = exporters.locate(self.export_dir)
            exporter.check_request(folder, request)
            return exporter.load(folder, request), folder
        from keras_transformer.export import serving_module  # pylint: disable=g-import-not-at-top  (TensorFlow)

        decoding = self.check(decoding)
        translator, source = serving_module.from_model_dir(self.model_dir, decoding, self.checkpoint,
                                                           ensemble_model_dirs=self.ensemble_model_dirs,
                                                           shortlist_file=self.shortlist_file)
        if request.sampling is not None:
            return loaded_saved_model.sampled_fn(translator.translate_sampled, request.sampling), source
        if request.prefixed:
            def prefixed_fn(sentences, prefixes):  # holds the Translator, as below
                return translator.translate_with_prefix(sentences, prefixes)

            return prefixed_fn, source
        if request.n_best > 1:
            options = loaded_saved_model.n_best_options(decoding)

            def n_best_fn(sentences):  # holds the Translator, as below
                return translator.translate_n_best(sentences, **options)

            return n_best_fn, source

        def serving_default(sentences):  # holds the Translator: its tf.function keeps only a weak reference
            return translator.serving_default(sentences)

        return serving_default, source


def load_translate_fn(model_dir: Optional[str] = None, export_dir: Optional[str] = None,
                      decoding: DecodingConfig = DecodingConfig(), checkpoint: Optional[str] = None,
                      n_best: int = 1, ensemble_model_dirs: Sequence[str] = (),
                      sampling: Optional[SamplingConfig] = None, prefixed: bool = False,
                      shortlist_file: Optional[str] = None):
    """`Engine(...).load(decoding)`: (translate function, where it came from) of a training
    directory or an export, with the request `n_best`, `sampling`, `prefixed`.

    Raises:
        ValueError: what `Engine` and `Engine.check` refuse (`n_best` larger than the beam, an
            export without the signature asked for, ...).
    """
    engine = Engine(model_dir, export_dir, checkpoint, ensemble_model_dirs, shortlist_file,
                    Request(n_best=n_best, sampling=sampling, prefixed=prefixed))
    return engine.load(decoding)


GRPC_PORT = 8500  # tensorflow/serving's Docker entry point: --port=8500 --rest_api_port=8501


def translate_grpc(sentences: Sequence[Union[str, bytes]], target: str = f"localhost:{GRPC_PORT}",
                   model_name: str = "transformer", version: Optional[int] = None,
                   timeout: float = 60.0) -> tuple[list[str], list[float]]:
    """Translations and scores of `sentences` from `serving_default` of a TF Serving model.

    Args:
        sentences: raw UTF-8 sentences (str or bytes); one request, so at most the server's
            `max_batch_size` of them when it batches.
        target: TF Serving's gRPC address, "host:port".
        model_name: the name it serves the export under (`MODEL_NAME`, `--model_name`).
        version: a version folder to ask for; None: the one TF Serving serves (the highest).
        timeout: seconds before the call fails with `grpc.RpcError` (DEADLINE_EXCEEDED).

    Returns:
        `(translations, scores)`, in the order of `sentences`.

    Raises:
        grpc.RpcError: the server refused or failed the request (`.code()`, `.details()`).
    """
    import grpc  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from tensorflow_serving.apis import prediction_service_pb2_grpc  # pylint: disable=g-import-not-at-top

    from keras_transformer.export import serving_module, warmup  # pylint: disable=g-import-not-at-top

    request = warmup.predict_request(warmup.DEFAULT_SIGNATURE, {serving_module.SIGNATURE_INPUT: list(sentences)},
                                     model_name=model_name, version=version)
    with grpc.insecure_channel(target) as channel:
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=timeout)
    translations = [text.decode("utf-8") for text in tf.make_ndarray(response.outputs["translations"]).tolist()]
    return translations, tf.make_ndarray(response.outputs["scores"]).tolist()
