"""export/warmup.py: the warm-up file TF Serving replays when it loads a version.

There is no TF Serving binary here, so each recorded request is replayed through the TF1 Session
loader (TF Serving's), fed from the records' TensorProtos through the signature_def's tensor
names, as TF Serving's Predict does, and on the float32 export also through `tf.saved_model.load`.
Both must give what the in-process `Translator` gives for the same sentences. The model is untrained and
decodes 8 extra tokens with beam 2: warm-up is about shapes, and each record runs two or three times.
Every test of the export runs on a float32 and on a bfloat16 export (`--precision`), and on the
float32 export of an ensemble (`--ensemble_model_dirs`).
"""

import ast
import os
import pathlib
import shutil
from concurrent import futures

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

from keras_transformer.export import client, serving_module, versions, warmup
from tests.helpers.export_models import make_model_dir, shared_model_dir
from keras_transformer.config import DecodingConfig
from keras_transformer.decoding import precision as precision_lib

DECODING = DecodingConfig(beam_size=2, alpha=0.6, max_extra_length=8)
INPUT = serving_module.SIGNATURE_INPUT


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    shared_model_dir(tmp_path_factory, run, steps=0)
    return run


@pytest.fixture(scope="module", params=precision_lib.PRECISIONS + ("ensemble",))
def translator(model_dir, request, tmp_path_factory):
    if request.param == "ensemble":  # with a model of another shape (`--ensemble_model_dirs`)
        member = tmp_path_factory.mktemp("member")
        make_model_dir(member, steps=0, seed=1, tokenizer_from=model_dir, num_layers=1, d_model=32, d_ff=64,
                       num_heads=4)
        return serving_module.from_model_dir(str(model_dir), DECODING, ensemble_model_dirs=[str(member)])[0]
    return serving_module.from_model_dir(str(model_dir), DECODING, precision=request.param)[0]


@pytest.fixture(scope="module")
def exported(translator, tmp_path_factory):
    """OUT/1 as export_saved_model writes it (with its warm-up file), with umask 022."""
    out = tmp_path_factory.mktemp("serving") / "transformer"
    umask = os.umask(0o022)
    try:
        path = serving_module.export_saved_model(translator, str(out))
    finally:
        os.umask(umask)
    return pathlib.Path(path)


def as_text(inputs):
    return {name: [value.decode("utf-8") if isinstance(value, bytes) else value for value in np.asarray(array).tolist()]
            for name, array in inputs.items()}


@pytest.mark.slow
def test_records_are_predict_logs_of_every_signature(exported, translator):
    path = exported / versions.ASSETS_EXTRA / warmup.FILE_NAME
    assert path.stat().st_mode & 0o777 == 0o644  # readable by a TF Serving of another user
    serialized = tf.data.TFRecordDataset(str(path)).as_numpy_iterator()
    records = [prediction_log_pb2.PredictionLog.FromString(r) for r in serialized]
    assert [r.WhichOneof("log_type") for r in records] == ["predict_log"] * len(records)
    names = [r.predict_log.request.model_spec.signature_name for r in records]
    assert names == ["serving_default"] * 3 + ["translate_n_best", "score", "translate_sampled",
                                                "translate_with_prefix"]
    for record, size in zip(records, warmup.DEFAULT_BATCH_SIZES):
        request = record.predict_log.request
        assert request.model_spec.name == "" and not request.model_spec.HasField("version")
        assert list(request.inputs) == [serving_module.SIGNATURE_INPUT]
        tensor = request.inputs[serving_module.SIGNATURE_INPUT]
        assert tensor.dtype == tf.string.as_datatype_enum
        assert [d.size for d in tensor.tensor_shape.dim] == [size]
    recorded = warmup.read(str(exported))  # a SavedModel folder or the file itself
    as_written = [(name, as_text(inputs)) for name, inputs in recorded]
    assert as_written == [(name, as_text(inputs)) for name, inputs in warmup.read(str(path))]
    assert as_written == [(name, as_text(inputs)) for name, inputs in translator.warmup_batches()]
    lengths = [len(s.split()) for s in as_written[2][1][serving_module.SIGNATURE_INPUT]]
    assert lengths[0] <= 3 and max(lengths) >= 40 and min(lengths) == 0  # short, long and an empty line


@pytest.mark.slow
def test_every_record_runs_on_the_loaders_as_the_signature_does(exported, translator, request):
    """TF Serving's loader (the TF1 Session) on every export, `tf.saved_model.load` on the float32
    one: the records are the same for every export, and that loader's agreement with the
    signatures of bfloat16 and ensemble exports is test_serving_module's and test_ensemble_members'."""
    recorded = warmup.read(str(exported))
    expected = [translator.signatures()[name](**{k: tf.constant(v) for k, v in inputs.items()})
                for name, inputs in translator.warmup_batches()]
    through_load = []
    if request.node.callspec.params["translator"] == "float32":
        loaded = tf.saved_model.load(str(exported))
        through_load = [loaded.signatures[name](**{k: tf.constant(v) for k, v in inputs.items()})
                        for name, inputs in recorded]
    through_session = []
    with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(exported))
        for name, inputs in recorded:
            signature = meta_graph.signature_def[name]
            assert sorted(inputs) == sorted(signature.inputs)  # TF Serving's Predict wants exactly these
            fetches = {key: tensor.name for key, tensor in signature.outputs.items()}
            through_session.append(session.run(fetches, {signature.inputs[k].name: v for k, v in inputs.items()}))
    assert len(through_session) == len(expected) == len(recorded)
    for index, want in enumerate(expected):
        for got in [through_session[index]] + ([through_load[index]] if through_load else []):
            assert sorted(got) == sorted(want)
            for key, value in want.items():
                if value.dtype == tf.string:
                    assert np.asarray(got[key]).tolist() == value.numpy().tolist()
                else:
                    np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-5)


def test_more_than_1000_records_are_refused_and_nothing_is_written(exported, tmp_path):
    shutil.copy(exported / "saved_model.pb", tmp_path)  # all `write` reads of the SavedModel
    record = warmup.warmup_requests(warmup.translation_batches(INPUT, sizes=(1,)))[0]
    with pytest.raises(ValueError, match="1001 warm-up records; .* more than 1000"):
        warmup.write(str(tmp_path), [record] * (warmup.MAX_RECORDS + 1))
    assert not (tmp_path / versions.ASSETS_EXTRA).exists()
    path = warmup.write(str(tmp_path), [record] * warmup.MAX_RECORDS)  # TF Serving's limit itself loads
    assert len(warmup.read(path)) == warmup.MAX_RECORDS


@pytest.mark.parametrize("batch, fragment", [
    (("translate", {"sentences": ["a"]}), "asks for signature 'translate'; the SavedModel has"),
    (("serving_default", {"text": ["a"]}),
     "the inputs {'text': 'string'}; the signature takes {'sentences': 'string'}"),
    (("serving_default", {"sentences": np.zeros([1], np.int32)}), "the inputs {'sentences': 'int32'}"),
    (("serving_default", {"sentences": ["a"], "lengths": [1]}), "'lengths': 'int64'"),
], ids=["unknown_signature", "wrong_input_name", "wrong_dtype", "extra_input"])
def test_records_tf_serving_would_fail_the_load_on_are_refused(exported, tmp_path, batch, fragment):
    shutil.copy(exported / "saved_model.pb", tmp_path)
    good = warmup.warmup_requests(warmup.translation_batches(INPUT, sizes=(1,)))
    with pytest.raises(ValueError, match="warm-up record 1 ") as raised:
        warmup.write(str(tmp_path), good + warmup.warmup_requests([batch]))
    assert fragment in str(raised.value)
    assert not (tmp_path / versions.ASSETS_EXTRA).exists()


def test_empty_and_non_predict_records_and_a_base_folder_are_refused(exported, tmp_path):
    shutil.copy(exported / "saved_model.pb", tmp_path)
    with pytest.raises(ValueError, match="no warm-up records"):
        warmup.write(str(tmp_path), [])
    with pytest.raises(ValueError, match=r"record 0 is not a predict_log \(it is empty\)"):
        warmup.write(str(tmp_path), [prediction_log_pb2.PredictionLog()])
    with pytest.raises(FileNotFoundError, match="no saved_model.pb"):  # OUT instead of OUT/1
        warmup.write(str(exported.parent), warmup.warmup_requests(warmup.translation_batches(INPUT)))
    with pytest.raises(ValueError, match="integers >= 1"):
        warmup.translation_batches(INPUT, sizes=(0,))


def test_grpc_client_sends_the_warmup_request_and_reads_the_response(exported):
    """An in-process PredictionService stands in for TF Serving: it records the request and
    answers with the loaded signature's outputs as TensorProtos."""
    import grpc  # pylint: disable=g-import-not-at-top
    from tensorflow_serving.apis import prediction_service_pb2_grpc  # pylint: disable=g-import-not-at-top

    loaded = tf.saved_model.load(str(exported))
    received = []

    class Service(prediction_service_pb2_grpc.PredictionServiceServicer):
        def Predict(self, request, context):  # noqa: N802 (the gRPC method's name)
            received.append(request)
            outputs = loaded.signatures[request.model_spec.signature_name](
                **{name: tf.constant(tf.make_ndarray(tensor)) for name, tensor in request.inputs.items()})
            response = predict_pb2.PredictResponse(model_spec=request.model_spec)
            for name, value in outputs.items():
                response.outputs[name].CopyFrom(tf.make_tensor_proto(value.numpy()))
            return response

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    (batch,) = warmup.translation_batches(INPUT, sizes=(8,))
    sentences = batch[1][serving_module.SIGNATURE_INPUT]
    try:
        translations, scores = client.translate_grpc(sentences, target=f"127.0.0.1:{port}", timeout=300)
    finally:
        server.stop(None)

    (request,) = received
    assert request.model_spec.name == "transformer"
    request.model_spec.ClearField("name")
    assert request == warmup.warmup_requests([batch])[0].predict_log.request  # the warm-up record's proto
    direct = loaded.signatures["serving_default"](sentences=tf.constant(sentences))
    assert translations == [t.decode("utf-8") for t in direct["translations"].numpy().tolist()]
    np.testing.assert_allclose(scores, direct["scores"].numpy(), rtol=1e-6)


def imported_modules(module, top_level_only):
    tree = ast.parse(pathlib.Path(module.__file__).read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    return ({alias.name for n in nodes if isinstance(n, ast.Import) for alias in n.names}
            | {n.module or "" for n in nodes if isinstance(n, ast.ImportFrom)})


def test_tensorflow_serving_is_imported_only_inside_functions():
    """`export` imports without tensorflow-serving-api; only writing, reading and gRPC need it."""
    for module in (warmup, client):
        names = imported_modules(module, top_level_only=True)
        assert not [n for n in names if n.startswith(("tensorflow_serving", "grpc"))], module.__name__


def test_warmup_imports_nothing_of_the_project():
    """serving_module imports it: an import back would be a cycle (tests/project/test_import_rules.py)."""
    names = imported_modules(warmup, top_level_only=False)
    assert not [n for n in names if n.split(".")[0] == "keras_transformer"]
    assert warmup.ASSETS_EXTRA == versions.ASSETS_EXTRA  # so it spells the folder itself
    assert warmup.DEFAULT_SIGNATURE == versions.DEFAULT_SIGNATURE  # and the default signature
