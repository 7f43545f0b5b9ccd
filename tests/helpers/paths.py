"""The folders the tests read: the repository root and the shared data folder beside it."""

import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED_DATA = pathlib.Path(os.environ.get("KT_SHARED_DATA", REPO.parent / "shared" / "data"))
