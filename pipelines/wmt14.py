"""WMT 2014 through tensorflow-datasets' own `wmt14_translate`, in either direction.

Vaswani et al. (2017), section 5.1: "We trained on the standard WMT 2014
English-German dataset consisting of about 4.5 million sentence pairs ...
For English-French, we used the significantly larger WMT 2014 English-French
dataset consisting of 36M sentences". tfds builds both (configs "de-en" and
"fr-en"; validation = newstest2013, test = newstest2014). Building needs the
network and several GB of disk on the user's machine; tests use
`tfds.testing.mock_data`.
"""

import tensorflow as tf
import tensorflow_datasets as tfds

PAIRS = ("de-en", "fr-en")


def languages(pair: str, source_lang: str) -> tuple[str, str]:
    """(source, target) language codes for a tfds pair name and a source language."""
    if pair not in PAIRS:
        raise ValueError(f"wmt14 pair must be one of {PAIRS}, got {pair!r}")
    a, b = pair.split("-")
    if source_lang not in (a, b):
        raise ValueError(f"source_lang must be {a!r} or {b!r} for {pair}, got {source_lang!r}")
    return (a, b) if source_lang == a else (b, a)


def wmt14(pair: str = "de-en", source_lang: str = "en", split: str = "train",
          data_dir: str | None = None, download: bool = True) -> tf.data.Dataset:
    """(source, target) `tf.string` scalar pairs of `wmt14_translate/<pair>`.

    Args:
        pair: "de-en" or "fr-en" (the tfds config).
        source_lang: which side is the source, e.g. "en" for en->de (the paper's
            direction) or "de" for de->en.
        split: "train", "validation" (newstest2013) or "test" (newstest2014); any
            tfds split expression such as "train[:1%]" works too.
        data_dir: tfds data folder (default ~/tensorflow_datasets).
        download: build the data set if it is not there yet (needs the network).
    """
    source, target = languages(pair, source_lang)
    ds = tfds.load(f"wmt14_translate/{pair}", split=split, data_dir=data_dir,
                   download=download, shuffle_files=False)
    return ds.map(lambda ex: (ex[source], ex[target]),
                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
