"""The flags the serving benchmarks share: what they translate, in which batches, how often, where.

    import serving_flags
    serving_flags.define("every engine gets the same length-sorted batches")

`bench/serving_vs_ctranslate2.py` (one model, several engines) and `bench/model_shapes_speed.py`
(several models, two engines each) read the same sentences, cut them into the same kind of
batches and time their engines the same way (`engine_process`); one definition of those flags
keeps their meaning and defaults the same. The decoding flags are the commands' own
(`keras_transformer.tasks.flags.define_decoding_flags`: --beam_size 4, --alpha 0.6, --max_extra_length 50, section 6.1).
"""

from __future__ import annotations

from absl import flags

from keras_transformer.tasks import flags as task_flags


def define(batches: str) -> None:
    """--input, --reference, --sentences, --batch_size (its help ending with `batches`), the
    decoding flags, --threads, --repeats and --work_dir."""
    flags.DEFINE_string("input", None, "Source sentences, one per line, plain or gzipped UTF-8 "
                        "(e.g. Multi30k's test_2016_flickr.en.gz).")
    flags.DEFINE_string("reference", None, "Reference translations of --input, line by line: BLEU of every engine.")
    flags.DEFINE_integer("sentences", 0, "Translate the first N lines of --input (0: all).", lower_bound=0)
    flags.DEFINE_integer("batch_size", 32, f"Sentences per batch; {batches}.", lower_bound=1)
    task_flags.define_decoding_flags()
    flags.DEFINE_integer("threads", 0, "TensorFlow intra- and inter-op threads and CTranslate2 intra_threads in "
                         "every engine's process (0: the host's physical cores).", lower_bound=0)
    flags.DEFINE_integer("repeats", 3, "Timed rounds, the engines taking turns; each engine's best round is "
                         "reported.", lower_bound=1)
    flags.DEFINE_string("work_dir", None, "Where the exports go, in a new folder that is kept when the run ends "
                        "(default: a temporary folder, removed at the end).")
