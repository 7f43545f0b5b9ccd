"""TF Serving's version folders: numbering a new export and finding the one to load."""

import pytest

from keras_transformer.export import versions


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


def test_chosen_signatures_default_to_all_but_a_tree_constraint_drops_the_prefix():
    assert versions.chosen_signatures(None) == versions.SIGNATURES
    assert versions.chosen_signatures(None, tree_constraint=True) == tuple(
        name for name in versions.SIGNATURES if name != versions.PREFIX_SIGNATURE)
    # A choice comes back in SIGNATURES' order, whatever order it was given in.
    assert versions.chosen_signatures(["score", "serving_default"]) == ("serving_default", "score")


@pytest.mark.parametrize("names, tree_constraint, message", [
    (["serving_default", "translate"], False, "--signatures: unknown translate; choose from serving_default, "),
    (["score"], False, "--signatures: serving_default is required"),
    (["serving_default", "score", "score"], False, "a signature named twice: serving_default,score,score"),
    (["serving_default", "translate_with_prefix"], True, "a tree-constrained search takes no prefix"),
])
def test_chosen_signatures_refuse_what_an_export_cannot_hold(names, tree_constraint, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        versions.chosen_signatures(names, tree_constraint)
