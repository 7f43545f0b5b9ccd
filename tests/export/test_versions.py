"""TF Serving's version folders: numbering a new export and finding the one to load."""

import pytest

from export import versions


def test_next_version_counts_up_from_the_largest_integer_folder(tmp_path):
    assert versions.next_version(str(tmp_path / "missing")) == 1
    for name in ("1", "3", ".tmp-4-abc", "notes"):
        (tmp_path / name).mkdir()
    assert versions.versions(str(tmp_path)) == [1, 3]
    assert versions.next_version(str(tmp_path)) == 4


def test_saved_model_path_is_the_folder_itself_or_its_highest_complete_version(tmp_path):
    for version in ("1", "2", "10"):
        (tmp_path / version).mkdir()
    (tmp_path / "1" / "saved_model.pb").write_bytes(b"")
    (tmp_path / "2" / "saved_model.pb").write_bytes(b"")  # 10 is incomplete (no saved_model.pb)
    assert versions.saved_model_path(str(tmp_path)) == str(tmp_path / "2")
    assert versions.saved_model_path(str(tmp_path / "1")) == str(tmp_path / "1")
    with pytest.raises(FileNotFoundError, match="no saved_model.pb in it or in a version folder"):
        versions.saved_model_path(str(tmp_path / "10"))
