"""A SavedModel export read back: loaded, and its signatures as translate functions.

The `saved_model` format's loader (`keras_transformer.export.exporters.SavedModelExporter`):

    check_request("OUT/1", n_best=3, sampled=False, prefixed=False)   # export.json only
    translate_fn = load("OUT/1", n_best=3)                            # translate_n_best, its beam

`check_request` reads export.json only, so a command calls it before TensorFlow starts;
`load_saved_model` turns any failure of TensorFlow's loader on a damaged export into one line.
The request options (`n_best_options`, `sampled_fn`) are shared with the `Translator` built in
process from a training directory (`keras_transformer.export.client`).
"""

from __future__ import annotations

import itertools
from typing import Optional

from keras_transformer import cli
from keras_transformer.config import DecodingConfig, SamplingConfig
from keras_transformer.export import versions

# Batch i of a sampled file is drawn with seed * BATCH_SEEDS + i: batches get their own draws.
BATCH_SEEDS = 2**20


def signature_for(n_best: int, sampled: bool, prefixed: bool) -> Optional[str]:
    """The signature a request needs beyond `serving_default` (None for plain translation)."""
    return (versions.SAMPLED_SIGNATURE if sampled else versions.PREFIX_SIGNATURE if prefixed
            else versions.N_BEST_SIGNATURE if n_best > 1 else None)


def check_request(folder: str, n_best: int = 1, sampled: bool = False, prefixed: bool = False) -> None:
    """A one-line `ValueError` unless the SavedModel in `folder` has the signature the request
    needs (older exports lack the newer ones, an export by `--signatures` those it left out)
    and, for `n_best` > 1, its beam keeps that many (a damaged "decoding" named first). Plain
    translation reads nothing (an export needs no export.json for it)."""
    name = signature_for(n_best, sampled, prefixed)
    if name is None:
        return
    settings = versions.read_settings(folder)
    if n_best > 1:
        versions.recorded_decoding(settings, versions.settings_path(folder), folder, n_best)
    check_signature(settings, folder, name)


def check_export_signature(export_dir: str, name: str) -> None:
    """A one-line `ValueError` unless the export (a version folder or its base folder) has the
    signature `name`. Reads export.json only."""
    source = versions.saved_model_path(export_dir)
    check_signature(versions.read_settings(source), source, name)


def check_signature(settings: dict, source: str, name: str) -> None:
    """A one-line `ValueError` unless the export.json `settings` of the SavedModel folder `source`
    list the signature `name`."""
    if name not in settings.get("signatures", []):
        raise ValueError(f"{source} has no {name} signature (exported without it by --signatures, or an older "
                         "export): export the model again with it")


def load(folder: str, n_best: int = 1, sampling: Optional[SamplingConfig] = None, prefixed: bool = False):
    """The SavedModel in `folder` as a translate function: `serving_default`; with `n_best` > 1
    `translate_n_best` asked for that many with the export's beam and alpha; with `sampling`
    `translate_sampled` (`sampled_fn`); with `prefixed` `translate_with_prefix(sentences,
    prefixes)`. `check_request` has passed."""
    exported = None
    if n_best > 1:
        exported = versions.recorded_decoding(versions.read_settings(folder), versions.settings_path(folder), folder,
                                              n_best)
    loaded = load_saved_model(folder)
    if sampling is not None:
        fn = sampled_fn(loaded.signatures[versions.SAMPLED_SIGNATURE], sampling)
    elif prefixed:
        signature = loaded.signatures[versions.PREFIX_SIGNATURE]

        def fn(sentences, prefixes):
            return signature(sentences=sentences, target_prefixes=prefixes)
    elif exported is not None:
        signature, options = loaded.signatures[versions.N_BEST_SIGNATURE], n_best_options(exported)

        def fn(sentences):
            return signature(sentences=sentences, **options)
    else:
        return loaded.signatures[versions.DEFAULT_SIGNATURE]
    fn.saved_model = loaded  # a signature keeps only a weak reference to its SavedModel
    return fn


def sampled_fn(signature, sampling: SamplingConfig):
    """`translate_sampled` as a function of the sentences alone, a seed of its own per call."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    options = {"topk": tf.constant([sampling.topk], tf.int32), "topp": tf.constant([sampling.topp], tf.float32),
               "temperature": tf.constant([sampling.temperature], tf.float32)}
    calls = itertools.count()

    def sampled(sentences):
        seed = tf.constant([sampling.seed * BATCH_SEEDS + next(calls)], tf.int64)
        return signature(sentences=sentences, seed=seed, **options)

    return sampled


def n_best_options(decoding: DecodingConfig) -> dict:
    """A `translate_n_best` request's options: `decoding`'s n_best, beam_size and alpha."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    return {"n_best": tf.constant([decoding.n_best], tf.int32),
            "beam_size": tf.constant([decoding.beam_size], tf.int32),
            "alpha": tf.constant([decoding.alpha], tf.float32)}


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
    if versions.DEFAULT_SIGNATURE not in loaded.signatures:
        raise ValueError(f"{source}: a SavedModel without a serving_default signature; not made by python -m keras_transformer.export")
    return loaded
