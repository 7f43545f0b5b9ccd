"""A SavedModel export read back (`keras_transformer.export.loaded_saved_model`): its checks from
export.json alone, and its signatures as translate functions against the in-process `Translator`."""

import json
import os

import pytest
import tensorflow as tf

from keras_transformer.config import DecodingConfig
from keras_transformer.export import loaded_saved_model, serving_module, versions
from tests.helpers.export_models import shared_model_dir

DECODING = DecodingConfig(beam_size=3, max_extra_length=8)


def settings_only(folder, **settings):
    """A version folder with export.json only (no SavedModel is loaded by the checks)."""
    (folder / versions.ASSETS_EXTRA).mkdir(parents=True)
    (folder / versions.ASSETS_EXTRA / versions.SETTINGS_FILE).write_text(json.dumps(settings))
    return str(folder)


def test_the_signature_each_request_needs():
    assert loaded_saved_model.signature_for(1, False, False) is None
    assert loaded_saved_model.signature_for(2, False, False) == "translate_n_best"
    assert loaded_saved_model.signature_for(1, True, False) == "translate_sampled"
    assert loaded_saved_model.signature_for(1, False, True) == "translate_with_prefix"


def test_requests_are_checked_from_export_json_alone(tmp_path):
    loaded_saved_model.check_request(str(tmp_path / "nothing"))  # plain translation reads nothing
    folder = settings_only(tmp_path / "1", decoding=DECODING.to_dict(), signatures=["serving_default",
                                                                                    "translate_n_best"])
    loaded_saved_model.check_request(folder, n_best=3)
    with pytest.raises(ValueError, match=r"--n_best with the export .*: n_best must be an integer between 1 and "
                                         r"beam_size \(3\), got 4"):
        loaded_saved_model.check_request(folder, n_best=4)
    with pytest.raises(ValueError, match="has no translate_sampled signature .* export the model again with it"):
        loaded_saved_model.check_request(folder, sampled=True)
    damaged = settings_only(tmp_path / "2", decoding={"beam": 4}, signatures=["translate_n_best"])
    with pytest.raises(ValueError, match="export.json: its \"decoding\" is not an export's"):
        loaded_saved_model.check_request(damaged, n_best=2)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("loaded")
    shared_model_dir(tmp_path_factory, root / "run")
    translator, _ = serving_module.from_model_dir(str(root / "run"), DECODING,
                                                  signatures=["serving_default", "translate_n_best"])
    return translator, serving_module.export_saved_model(translator, str(root / "export"))


def test_loaded_signatures_translate_as_the_translator(exported):
    translator, folder = exported
    sentences = tf.constant(["A dog runs .", "The woman reads a book in the park .", ""])
    plain = loaded_saved_model.load(folder)(sentences=sentences)
    expected = translator.serving_default(sentences)
    assert plain["translations"].numpy().tolist() == expected["translations"].numpy().tolist()
    n_best = loaded_saved_model.load(folder, n_best=2)
    out = n_best(sentences)
    assert out["translations"].shape == (3, 2)
    assert out["translations"].numpy()[:, 0].tolist() == expected["translations"].numpy().tolist()
    assert n_best.saved_model is not None  # kept alive with the function
    with pytest.raises(ValueError, match="assets.extra: not a readable SavedModel"):  # a folder without one
        loaded_saved_model.load_saved_model(os.path.join(folder, versions.ASSETS_EXTRA))
