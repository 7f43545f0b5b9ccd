"""Shared test set-up: quiet TensorFlow, fixed seeds, the `slow` marker; the fixtures several
folders use (the shared data folder, the treebank sample in it, the tiny training recipe).
Shared functions live in tests/helpers/."""

import os
import signal

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import pytest  # noqa: E402

from tests.helpers.paths import SHARED_DATA, skip_without_shared_data  # noqa: E402
from tests.helpers.train_runs import TINY  # noqa: E402


# A shell starts a background job (`make test &`, `nohup`) with SIGINT ignored, and every process it
# starts inherits that: the tests that send Ctrl-C to a command would see nothing happen. Python's
# own handler, as in a foreground run, makes the commands the tests start get SIGINT's default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Likewise SIGHUP under `nohup`: the tests that stop a harness with SIGHUP need its default in the children.
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: takes more than ~20 s on 2 cores; `make test` leaves it out, `make test-slow` runs it")


@pytest.fixture(autouse=True)
def _seed_and_policy():
    """Every test starts from the same seeds and the float32 policy."""
    keras.utils.set_random_seed(1234)
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


def _shared_data():
    skip_without_shared_data()
    return SHARED_DATA


@pytest.fixture
def shared_data():
    """The project's read-only data folder (../shared/data); tests needing it skip without it (fail in CI)."""
    return _shared_data()


@pytest.fixture
def flagfile(tmp_path):
    """The tiny training recipe (configs/tiny.flags), copied into the test's folder."""
    path = tmp_path / "tiny.flags"
    path.write_text(TINY)
    return path


@pytest.fixture(scope="session")
def ptb():
    """NLTK's PTB sample in the shared data folder; tests needing it skip without it (fail in CI)."""
    return _shared_data() / "ptb_sample"


@pytest.fixture(scope="session")
def sample(ptb):
    """{split: its cleaned sentences} of the PTB sample (`tests.helpers.treebank.read_sample`)."""
    from tests.helpers.treebank import read_sample  # pylint: disable=import-outside-toplevel

    return read_sample(ptb)
