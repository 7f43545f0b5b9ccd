"""The folders the tests read: the repository root and the shared data folder beside it (and what a test
that needs the data does without it)."""

import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED_DATA = pathlib.Path(os.environ.get("KT_SHARED_DATA", REPO.parent / "shared" / "data"))

# CI sets it (.ci/run): a test that needs the shared data fails without it instead of skipping.
REQUIRE_SHARED_DATA = os.environ.get("KT_REQUIRE_SHARED_DATA") == "1"


def skip_without_shared_data() -> None:
    """Skips the calling test when the shared data folder is missing, or fails it where KT_REQUIRE_SHARED_DATA=1."""
    import pytest  # pylint: disable=import-outside-toplevel  (the paths alone need no pytest)

    if not SHARED_DATA.is_dir():
        message = f"shared data folder not found: {SHARED_DATA}"
        if REQUIRE_SHARED_DATA:
            pytest.fail(message + " (KT_REQUIRE_SHARED_DATA=1)")
        pytest.skip(message)
