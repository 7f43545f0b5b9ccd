"""`python -m keras_transformer.pipelines`: bad input is one line on stderr naming the file and exit status 2."""

import pytest

from tests.helpers.commands import assert_one_error_line, run_command
from tests.helpers.files import write_lines


@pytest.mark.parametrize("case", ["missing folder", "line counts differ", "empty file",
                                  "missing multi30k folder"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, case):
    good = write_lines(tmp_path / "good.de", ["Eins.", "Zwei."])
    if case == "missing multi30k folder":
        named = str(tmp_path / "no_multi30k")
        args = ["stats", "--dataset=multi30k_en_de", f"--data_dir={named}"]
    else:
        named = {
            "missing folder": str(tmp_path / "missing"),
            "line counts differ": write_lines(tmp_path / "three.en", ["1", "2", "3"]),
            "empty file": write_lines(tmp_path / "empty.en", []),
        }[case]
        source = str(tmp_path / "missing" / "x.en") if case == "missing folder" else named
        args = ["stats", "--dataset=files", f"--source_file={source}", f"--target_file={good}"]
    assert_one_error_line(run_command("-m", "keras_transformer.pipelines", *args), named)


def test_stats_on_small_files(tmp_path):
    source = write_lines(tmp_path / "train.en", [f"The dog number {i} runs, quickly!" for i in range(60)])
    target = write_lines(tmp_path / "train.de",
                         [f"Der Hund Nummer {i} läuft schnell über die Straße." for i in range(60)])
    result = run_command("-m", "keras_transformer.pipelines", "stats", "--dataset=files", f"--source_file={source}",
                         f"--target_file={target}", "--vocab_size=320", "--batch_tokens=1024", "--max_length=100",
                         f"--tokenizer_dir={tmp_path / 'tok'}")
    assert result.returncode == 0, result.stderr
    assert "pairs: 60 read, 0 longer than 100 tokens dropped, 60 batched" in result.stdout
    assert "padding share:" in result.stdout
    assert (tmp_path / "tok" / "tokenizer.json").is_file()
