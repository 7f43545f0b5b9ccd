"""TF Serving's SavedModel warm-up: sample requests stored in the export, replayed at load.

    batches = warmup.translation_batches("sentences")       # [("serving_default", {"sentences": [...]}), ...]
    warmup.write(saved_model_dir, warmup.warmup_requests(batches))
    # -> <saved_model_dir>/assets.extra/tf_serving_warmup_requests
    warmup.read(saved_model_dir)                            # the same batches back, as NumPy arrays

The first request to a freshly loaded version pays for what TensorFlow does lazily: the
session builds an executor for that signature's feeds and fetches, instantiates and optimizes
(Grappler) the signature's function and the beam search loop inside it, and allocates. When
the version folder holds `assets.extra/tf_serving_warmup_requests`, TF Serving runs those
requests itself while it loads the version, so the first client request is not the one that
pays. The file is a TFRecord file of `tensorflow.serving.PredictionLog` protos.

What this module relies on, read in tensorflow/serving at 9d981c5 (2026-07-30):

* The file name and limit: `saved_model_warmup_util.h:32-33` (`tf_serving_warmup_requests`,
  `kMaxNumRecords = 1000`), in `assets.extra/` (`saved_model_warmup_util.cc:82-84`). A
  missing file is not an error (`:85-89`).
* Each record is parsed as a `PredictionLog` and run `num_request_iterations` times, default 1
  (`saved_model_warmup_util.cc:90-96, 117-125`; the server flag
  `--num_request_iterations_for_warmup`, `model_servers/main.cc:249-252`), one record after
  another unless `num_model_warmup_threads` > 1 (`:104-111`). Counting happens after a record
  has run: the 1001st record fails the load (`:126-131`), 1000 are fine. `write` refuses more.
* Warm-up is on by default (`model_servers/server.h:91`, `--enable_model_warmup`), runs inside
  the loader of the version (`saved_model_bundle_source_adapter.cc:76-83`): any failing
  record (unparseable, unknown signature, wrong inputs) fails the load of that version. So
  `write` checks every record against the SavedModel's signatures before writing.
* Predict, Classify, Regress and MultiInference logs are replayed, session_run and
  predict_streamed logs fail as Unimplemented (`saved_model_warmup.cc:43-76`); only
  `predict_log` is written here. A Predict request must name exactly the signature's inputs
  (`predict_util.cc:51-72`); an empty signature name means `serving_default` (`:86-89`);
  `model_spec.name` is not looked at during warm-up, so the records leave it empty (the
  version folder does not know the name it is served under).
* With `--enable_batching` the session is wrapped for batching before warm-up
  (`saved_model_bundle_factory.cc:195-210`), so warm-up requests go through the batcher: a
  record with more sentences than `max_batch_size` fails the load ("Task size N is larger than
  maximum input batch size", tensorflow `core/kernels/batching_util/shared_batch_scheduler.h`,
  `ValidateBatchTaskQueueCapacity`), even with `enable_large_batch_splitting`. Keep the
  largest warm-up batch (`DEFAULT_BATCH_SIZES`: 32) at most the server's `max_batch_size`.

The graph has no XLA and every shape is dynamic, so nothing is compiled per shape: the first
request of a signature should do most of the work (executor, function instantiation,
optimization); batches of 1, 8 and 32 sentences, short and long, add the allocations of
larger batches and more loop steps at little cost. Warm-up delays the moment a new version
becomes available, not the old version's service: the server's `AvailabilityPreservingPolicy`
(`model_servers/server.cc:312-313`) unloads the old version only once the new one has loaded,
warm-up included. Only `serving_default` is warmed by default: `translate_with_attention` is
for plots, and each signature is warmed separately (its own feeds and fetches).

Neither Model Garden (`official/core/export_base.py`) nor OpenNMT-tf (`utils/exporters.py`,
which copies only the model's own `export_assets` to assets.extra) writes a warm-up file;
this follows TF Serving's guide (`g3doc/saved_model_warmup.md`) and its
`example/resnet_warmup.py`.

`tensorflow_serving.apis` (the `tensorflow-serving-api` package: generated protos and gRPC
stubs, 250 KB; its requirements grpcio, protobuf and tensorflow are TensorFlow's own) is
imported inside the functions that need it, so importing `export` does not need it. Importing
it imports TensorFlow (the protos it uses live in `tensorflow.core`).
"""

from __future__ import annotations

import itertools
import os
from typing import Iterable, Mapping, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

# TF Serving's folder; the same as `keras_transformer.export.versions.ASSETS_EXTRA` (a test checks), spelled
# here because this module imports nothing of the project (serving_module imports it).
ASSETS_EXTRA = "assets.extra"

FILE_NAME = "tf_serving_warmup_requests"
MAX_RECORDS = 1000  # TF Serving's kMaxNumRecords
DEFAULT_SIGNATURE = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY  # "serving_default"
DEFAULT_BATCH_SIZES = (1, 8, 32)

Inputs = Mapping[str, Union[np.ndarray, Sequence]]
Batch = tuple[str, Inputs]  # (signature name, {input name: values})

# Short and long sentences, interleaved: a batch of n takes the first n (cycling). The content
# does not matter to warm-up, the lengths do: 3 to 46 words, and one empty line.
SENTENCES = (
    "The dog runs.",
    "A woman is reading a book in the garden while her children play with a ball near the old "
    "wooden fence.",
    "Thank you very much!",
    "The committee, which had met every week since the beginning of the year, finally agreed "
    "on a proposal that would allow the city to build three new schools, repair the bridge "
    "over the river and extend the tram line to the northern districts before the winter.",
    "Where is the station?",
    "He said that he would come back tomorrow morning.",
    "",
    "In the last decade the number of people who work from home at least one day a week has "
    "more than doubled, and many companies now plan their offices around meetings rather than "
    "desks, although not every employee welcomes the change.",
    "I like green tea.",
    "The results of the experiment were published in March.",
    "Please close the door when you leave the room.",
    "After a long discussion about the budget, the members of the board decided to postpone "
    "the vote until the next meeting, when the final figures for the third quarter would be "
    "available and the auditors would have finished their report on the subsidiaries.",
    "It is raining.",
    "The children were tired but happy after the trip to the mountains.",
    "Two cats sleep on the sofa.",
    "She has lived in this small village near the coast for more than forty years.",
)


def _tensor_proto(values):
    """A TensorProto of `values`; str/bytes (also an empty list) become DT_STRING."""
    if isinstance(values, (list, tuple)) and all(isinstance(v, (str, bytes)) for v in values):
        return tf.make_tensor_proto(np.asarray(values, dtype=object), dtype=tf.string)
    array = np.asarray(values)
    if array.dtype.kind in "SUO":
        return tf.make_tensor_proto(array.astype(object), dtype=tf.string)
    return tf.make_tensor_proto(array)


def predict_request(signature_name: str, inputs: Inputs, model_name: str = "", version: Optional[int] = None):
    """A `tensorflow.serving.PredictRequest` for `signature_name` with `inputs` as TensorProtos.

    The one builder of the warm-up records and of the gRPC client's requests: they differ only
    in `model_spec.name` (and `version`), which warm-up does not look at.

    Args:
        signature_name: e.g. "serving_default".
        inputs: `{input name: values}`; a list of str/bytes becomes a tf.string tensor, anything
            else goes through `tf.make_tensor_proto`.
        model_name: the name TF Serving serves the model under (`MODEL_NAME`); "" for warm-up.
        version: a version number to ask for; None: the server's choice (the highest).
    """
    from tensorflow_serving.apis import predict_pb2  # pylint: disable=g-import-not-at-top

    request = predict_pb2.PredictRequest()
    request.model_spec.signature_name = signature_name
    if model_name:
        request.model_spec.name = model_name
    if version is not None:
        request.model_spec.version.value = version
    for name, values in inputs.items():
        request.inputs[name].CopyFrom(_tensor_proto(values))
    return request


def warmup_requests(batches: Iterable[Batch]) -> list:
    """`[(signature name, {input name: values}), ...]` -> `PredictionLog`s with a `predict_log`."""
    from tensorflow_serving.apis import prediction_log_pb2  # pylint: disable=g-import-not-at-top

    return [
        prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=predict_request(signature, inputs)))
        for signature, inputs in batches
    ]


def translation_batches(input_name: str, sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
                        signature_name: str = DEFAULT_SIGNATURE) -> list[Batch]:
    """The default warm-up of a translation export: one batch per size, the first `n` of
    `SENTENCES` (cycling) as `input_name` (`serving_module.SIGNATURE_INPUT`, passed in: this
    module imports nothing of `export`, which imports it), so the single sentence is short and
    larger batches mix lengths.

    With `--enable_batching`, no size may exceed the server's `max_batch_size`.
    """
    if not sizes or any(not isinstance(n, int) or n < 1 for n in sizes):
        raise ValueError(f"warm-up batch sizes must be integers >= 1, got {list(sizes)}")
    return [(signature_name, {input_name: list(itertools.islice(itertools.cycle(SENTENCES), n))})
            for n in sizes]


def path_of(saved_model_dir: str) -> str:
    """`<saved_model_dir>/assets.extra/tf_serving_warmup_requests`."""
    return os.path.join(saved_model_dir, ASSETS_EXTRA, FILE_NAME)


def _signature_inputs(saved_model_dir: str) -> dict[str, dict[str, int]]:
    """`{signature: {input name: DataType enum}}` of the "serve" MetaGraph (no graph is loaded)."""
    from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=g-import-not-at-top

    path = os.path.join(saved_model_dir, "saved_model.pb")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{saved_model_dir}: no saved_model.pb (give the version folder)")
    saved_model = saved_model_pb2.SavedModel()
    with open(path, "rb") as file:
        saved_model.ParseFromString(file.read())
    for meta_graph in saved_model.meta_graphs:
        if "serve" in meta_graph.meta_info_def.tags:
            return {name: {key: tensor.dtype for key, tensor in signature.inputs.items()}
                    for name, signature in meta_graph.signature_def.items()}
    raise ValueError(f"{saved_model_dir}: no MetaGraph with the tag 'serve'")


def _dtype_names(inputs: dict[str, int]) -> dict[str, str]:
    return {name: tf.dtypes.as_dtype(dtype).name for name, dtype in sorted(inputs.items())}


def _check(records: list, signatures: dict[str, dict[str, int]]) -> None:
    """Raises ValueError for the first record TF Serving would fail the load on."""
    for index, record in enumerate(records):
        kind = record.WhichOneof("log_type")
        if kind != "predict_log":
            raise ValueError(f"warm-up record {index} is not a predict_log (it is {kind or 'empty'})")
        request = record.predict_log.request
        name = request.model_spec.signature_name or DEFAULT_SIGNATURE
        if name not in signatures:
            raise ValueError(f"warm-up record {index} asks for signature {name!r}; the SavedModel has "
                             f"{sorted(signatures)}")
        given = {key: tensor.dtype for key, tensor in request.inputs.items()}
        if given != signatures[name]:
            raise ValueError(f"warm-up record {index} gives {name!r} the inputs {_dtype_names(given)}; the "
                             f"signature takes {_dtype_names(signatures[name])}")


def write(saved_model_dir: str, records: Iterable) -> str:
    """Writes `records` (`PredictionLog`s) as `<saved_model_dir>/assets.extra/tf_serving_warmup_requests`.

    Every record is checked first against the SavedModel's signatures (a predict_log, an existing
    signature, exactly its inputs with their dtypes): TF Serving fails the load of a version on
    a bad record. Nothing is written if a check fails. An existing warm-up file is replaced.

    Returns:
        The path of the file.

    Raises:
        FileNotFoundError: `saved_model_dir` has no saved_model.pb.
        ValueError: no records, more than `MAX_RECORDS` (1000), or a record that would fail.
    """
    records = list(records)
    if not records:
        raise ValueError("no warm-up records to write")
    if len(records) > MAX_RECORDS:
        raise ValueError(f"{len(records)} warm-up records; TF Serving refuses to load a version with more "
                         f"than {MAX_RECORDS}")
    _check(records, _signature_inputs(saved_model_dir))
    path = path_of(saved_model_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record.SerializeToString())
    return path


def read(path: str) -> list[tuple[str, dict[str, np.ndarray]]]:
    """The requests of a warm-up file (or of a SavedModel folder's) as `(signature name, {input:
    array})`, in file order; strings come back as arrays of bytes. An empty signature name reads
    as "serving_default", as TF Serving reads it.

    Raises:
        ValueError: a record is not a `PredictionLog` with a `predict_log`.
    """
    from tensorflow_serving.apis import prediction_log_pb2  # pylint: disable=g-import-not-at-top

    if os.path.isdir(path):
        path = path_of(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such warm-up file")
    requests = []
    for index, serialized in enumerate(tf.data.TFRecordDataset(path).as_numpy_iterator()):
        record = prediction_log_pb2.PredictionLog.FromString(serialized)
        if record.WhichOneof("log_type") != "predict_log":
            raise ValueError(f"{path}: record {index} is not a predict_log")
        request = record.predict_log.request
        requests.append((request.model_spec.signature_name or DEFAULT_SIGNATURE,
                         {name: tf.make_ndarray(tensor) for name, tensor in request.inputs.items()}))
    return requests
