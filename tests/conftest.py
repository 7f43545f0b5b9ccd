"""Shared test set-up: quiet TensorFlow, fixed seeds, the shared data folder, the `slow` marker."""

import os
import pathlib

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import pytest  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = pathlib.Path(os.environ.get("KT_SHARED_DATA", REPO.parent / "shared" / "data"))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than ~30 s; deselect with -m 'not slow'")


@pytest.fixture(autouse=True)
def _seed_and_policy():
    """Every test starts from the same seeds and the float32 policy."""
    keras.utils.set_random_seed(1234)
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.fixture
def shared_data():
    """The project's read-only data folder (../shared/data); tests needing it skip without it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found: {SHARED_DATA}")
    return SHARED_DATA
