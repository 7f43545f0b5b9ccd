"""What runs an export: a `serving_default` from a training directory or a SavedModel, and
many lines through it in length-sorted batches.

`python -m keras_transformer.translate` and `python -m keras_transformer.parse` (section 6.3's
trees are translations too) share both: the same graph TF Serving runs, whether it was built
in process from a checkpoint or loaded from the SavedModel.

    translate_fn, source = load_translate_fn(model_dir="runs/demo")        # or export_dir=...
    translations, scores = translate_lines(translate_fn, [b"A dog runs."], batch_size=32)
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence, Union

from keras_transformer.export.versions import N_BEST_SIGNATURE, PREFIX_SIGNATURE, SAMPLED_SIGNATURE
from keras_transformer import cli
from keras_transformer.config import DecodingConfig, SamplingConfig

# Batch i of a sampled file is drawn with seed * BATCH_SEEDS + i: batches get their own draws.
BATCH_SEEDS = 2**20


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
        return [(_texts(text), score.tolist()) for text, score in zip(out["translations"].numpy(), out["scores"].numpy())]

    lengths = [(len(line.split()), len(line)) for line in lines]
    items = lines if prefixes is None else list(zip(lines, prefixes))
    results = sorted_batches.map_in_input_order(translate_batch, items, lengths, batch_size, descending=True,
                                                on_batch=on_batch)
    return [t for t, _ in results], [s for _, s in results]


def _texts(value):
    """A translation (bytes) or a row of n-best translations -> str or a list of str."""
    return value.decode("utf-8") if isinstance(value, bytes) else [text.decode("utf-8") for text in value]


def load_translate_fn(model_dir: Optional[str] = None, export_dir: Optional[str] = None,
                      decoding: DecodingConfig = DecodingConfig(), checkpoint: Optional[str] = None,
                      n_best: int = 1, ensemble_model_dirs: Sequence[str] = (),
                      sampling: Optional[SamplingConfig] = None, prefixed: bool = False,
                      shortlist_file: Optional[str] = None):
    """(`serving_default`: tf.string [N] -> {"translations", "scores"}, where it came from).

    From `model_dir` the export's `Translator` (tokenizer + beam search, `decoding`) is built in
    process from the averaged or latest checkpoint (or `checkpoint`); `export_dir` loads the
    SavedModel (a version folder, or a base folder whose highest version is used), whose
    decoding settings were fixed at export time. With `ensemble_model_dirs` (and `model_dir`) the
    Translator decodes their ensemble (`serving_module.from_model_dir`); with `shortlist_file`
    (and `model_dir`) its searches are restricted by that vocabulary map (an export holds its own).

    With `n_best` > 1 the function is the `translate_n_best` signature asked for `n_best`
    hypotheses with the beam and alpha of `decoding` (from `model_dir`) or of the export
    (its `assets.extra/export.json`); its outputs are `[N, n_best]`, best first.

    With `sampling` the function is `translate_sampled` with its options (batch i drawn with
    seed `sampling.seed * BATCH_SEEDS + i`); with `prefixed`, `translate_with_prefix`
    (sentences, target prefixes). Either only with `n_best` 1 (the caller checks).

    Raises:
        ValueError: `n_best` larger than that beam (`DecodingConfig`'s check), or an export without
            the signature asked for.
    """
    if (model_dir is None) == (export_dir is None):
        raise ValueError("give exactly one of model_dir and export_dir")
    if model_dir:
        from keras_transformer.export import serving_module  # pylint: disable=g-import-not-at-top  (TensorFlow)

        decoding = dataclasses.replace(decoding, n_best=n_best)  # checked against its beam_size
        translator, source = serving_module.from_model_dir(model_dir, decoding, checkpoint,
                                                           ensemble_model_dirs=ensemble_model_dirs,
                                                           shortlist_file=shortlist_file)
        if sampling is not None:
            return _sampled_fn(translator.translate_sampled, sampling), source
        if prefixed:
            def prefixed_fn(sentences, prefixes):  # holds the Translator, as below
                return translator.translate_with_prefix(sentences, prefixes)

            return prefixed_fn, source
        if n_best > 1:
            options = _n_best_options(decoding)

            def n_best_fn(sentences):  # holds the Translator, as below
                return translator.translate_n_best(sentences, **options)

            return n_best_fn, source

        def serving_default(sentences):  # holds the Translator: its tf.function keeps only a weak reference
            return translator.serving_default(sentences)

        return serving_default, source
    from keras_transformer.export import versions  # pylint: disable=g-import-not-at-top

    source = versions.saved_model_path(export_dir)
    name = (SAMPLED_SIGNATURE if sampling is not None else PREFIX_SIGNATURE if prefixed
            else N_BEST_SIGNATURE if n_best > 1 else None)
    if name:  # export.json read once, before the SavedModel is loaded
        settings = versions.read_settings(source)
        if n_best > 1:
            exported = _exported_decoding(settings, n_best, source)  # a damaged "decoding" named first
        _check_signature(settings, source, name)
    loaded = load_saved_model(source)
    if sampling is not None:
        fn = _sampled_fn(loaded.signatures[SAMPLED_SIGNATURE], sampling)
    elif prefixed:
        signature = loaded.signatures[PREFIX_SIGNATURE]

        def fn(sentences, prefixes):
            return signature(sentences=sentences, target_prefixes=prefixes)
    if sampling is not None or prefixed:
        fn.saved_model = loaded  # a signature keeps only a weak reference to its SavedModel
        return fn, source
    if n_best == 1:
        return loaded.signatures["serving_default"], source
    signature, options = loaded.signatures[N_BEST_SIGNATURE], _n_best_options(exported)

    def loaded_n_best(sentences):
        return signature(sentences=sentences, **options)

    loaded_n_best.saved_model = loaded  # a signature keeps only a weak reference to its SavedModel
    return loaded_n_best, source


def _sampled_fn(signature, sampling: SamplingConfig):
    """`translate_sampled` as a function of the sentences alone, a seed of its own per call."""
    import itertools  # pylint: disable=g-import-not-at-top

    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    options = {"topk": tf.constant([sampling.topk], tf.int32), "topp": tf.constant([sampling.topp], tf.float32),
               "temperature": tf.constant([sampling.temperature], tf.float32)}
    calls = itertools.count()

    def sampled(sentences):
        seed = tf.constant([sampling.seed * BATCH_SEEDS + next(calls)], tf.int64)
        return signature(sentences=sentences, seed=seed, **options)

    return sampled


def check_export_signature(export_dir: str, name: str) -> None:
    """A one-line `ValueError` unless the export (a version folder or its base folder) has the
    signature `name` (older exports lack the newer ones, an export by `--signatures` those it
    left out). Reads export.json only."""
    from keras_transformer.export import versions  # pylint: disable=g-import-not-at-top

    source = versions.saved_model_path(export_dir)
    _check_signature(versions.read_settings(source), source, name)


def _check_signature(settings: dict, source: str, name: str) -> None:
    """A one-line `ValueError` unless the export.json `settings` of the SavedModel folder `source`
    list the signature `name`."""
    if name not in settings.get("signatures", []):
        raise ValueError(f"{source} has no {name} signature (exported without it by --signatures, or an older "
                         "export): export the model again with it")


def load_saved_model(source: str):
    """`tf.saved_model.load(source)` with tensorflow-text's ops; a damaged export (a
    saved_model.pb that does not parse, missing, truncated or damaged variables, no
    `serving_default`) is a one-line `ValueError` naming it, whatever TensorFlow's loader raised
    (a variables file cut short raises `IndexError` from its checkpoint reader). A file system's
    refusal (a file that may not be read) stays an `OSError` for the command's line
    (`cli.errors.os_error_message`)."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (tokenizer ops)

    try:
        with cli.silence_native_stderr():  # the tokenizer resource's "normalizer.cc" INFO lines
            loaded = tf.saved_model.load(source)
    except Exception as error:  # pylint: disable=broad-except  (any failure of the loader: a damaged export)
        if cli.errors.os_error_message(error) and not isinstance(error, tf.errors.NotFoundError):
            raise
        reason = " ".join(str(getattr(error, "message", error)).split())[:300]
        if not isinstance(error, (OSError, ValueError, tf.errors.OpError)):  # e.g. IndexError: a file cut short
            reason = f"{type(error).__name__}: {reason}; its files are damaged or cut short"
        raise ValueError(f"{source}: not a readable SavedModel ({reason}); export the model again") from None
    if "serving_default" not in loaded.signatures:
        raise ValueError(f"{source}: a SavedModel without a serving_default signature; not made by python -m keras_transformer.export")
    return loaded


def check_export_n_best(export_dir: str, n_best: int) -> Optional[DecodingConfig]:
    """A one-line error unless `export_dir` (a version folder or its base folder) holds a
    SavedModel and, for `n_best` > 1, its export.json lists `translate_n_best` (an older export
    does not) and its beam keeps `n_best` hypotheses (then its `DecodingConfig`, with `n_best`;
    else None).
    Reads files only: a command calls it before TensorFlow starts."""
    from keras_transformer.export import versions  # pylint: disable=g-import-not-at-top

    source = versions.saved_model_path(export_dir)
    if n_best == 1:
        return None
    settings = versions.read_settings(source)
    exported = _exported_decoding(settings, n_best, source)  # a damaged "decoding" named first
    _check_signature(settings, source, N_BEST_SIGNATURE)
    return exported


def _exported_decoding(settings: dict, n_best: int, source: str) -> DecodingConfig:
    """The `DecodingConfig` of an export's export.json `settings` with `n_best`: a one-line
    `ValueError` naming the export unless its beam keeps that many (`DecodingConfig`'s check)."""
    from keras_transformer.export import versions  # pylint: disable=g-import-not-at-top

    try:
        exported = DecodingConfig(**settings.get("decoding", {}))
    except TypeError as error:  # an unknown field
        raise ValueError(f"{versions.settings_path(source)}: its \"decoding\" is not an export's ({error})") from None
    try:
        return dataclasses.replace(exported, n_best=n_best)
    except ValueError as error:  # the export's beam_size, fixed when it was exported
        raise ValueError(f"--n_best with the export {source}: {error}") from None


def _n_best_options(decoding: DecodingConfig) -> dict:
    """A `translate_n_best` request's options: `decoding`'s n_best, beam_size and alpha."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    return {"n_best": tf.constant([decoding.n_best], tf.int32),
            "beam_size": tf.constant([decoding.beam_size], tf.int32),
            "alpha": tf.constant([decoding.alpha], tf.float32)}


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
