"""`tasks.vocabulary.check_tokenizer_flags`: a run's saved tokenizer is reused, so the data flags it
was trained on, --source_tags among them (tagged sources, `pipelines.pos_tags`), cannot change."""

import dataclasses
import json

import pytest

from pipelines.data_config import DataConfig
from tasks.vocabulary import check_tokenizer_flags


def test_a_resume_with_other_source_tags_is_refused(tmp_path):
    data = DataConfig(dataset="ptb", data_dir=str(tmp_path), source_tags="predicted")
    (tmp_path / "model_config.json").write_text(json.dumps({"model": {}, "data": dataclasses.asdict(data)}))
    check_tokenizer_flags(str(tmp_path), data, "the run")  # the same flags pass
    with pytest.raises(ValueError, match="--source_tags=none: the run was trained with --source_tags=predicted"):
        check_tokenizer_flags(str(tmp_path), dataclasses.replace(data, source_tags="none"), "the run")
    older = {k: v for k, v in dataclasses.asdict(data).items() if k != "source_tags"}  # a run from before the flag
    (tmp_path / "model_config.json").write_text(json.dumps({"model": {}, "data": older}))
    check_tokenizer_flags(str(tmp_path), dataclasses.replace(data, source_tags="none"), "the run")
