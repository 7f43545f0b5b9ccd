"""`keras_transformer.files.command_files.read_lines`: the lines a command reads, plain or gzipped."""

import gzip

import pytest

from keras_transformer.files import command_files

# A UTF-8 line, an empty one, a CRLF ending and a line that is not UTF-8 (kept as bytes).
DATA = b"Ein Mann f\xc3\xa4hrt Rad.\n\nZwei Hunde\r\n\xff ist kein UTF-8 hier\n"


def test_gzipped_text_reads_as_the_plain_text_whatever_its_name(tmp_path):
    data = DATA
    (tmp_path / "plain.txt").write_bytes(data)
    (tmp_path / "text.gz").write_bytes(gzip.compress(data))
    (tmp_path / "no_suffix").write_bytes(gzip.compress(data[:20]) + gzip.compress(data[20:]))  # two members
    plain = command_files.read_lines(str(tmp_path / "plain.txt"))
    assert len(plain) == 4 and plain[2] == b"Zwei Hunde" and b"\xff" in plain[3]  # CR dropped, bytes kept
    assert command_files.read_lines(str(tmp_path / "text.gz")) == plain
    assert command_files.read_lines(str(tmp_path / "no_suffix")) == plain


def test_damaged_gzip_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "cut.gz"
    path.write_bytes(gzip.compress(DATA)[:-6])
    with pytest.raises(ValueError, match=r"cut\.gz: damaged gzip data") as error:
        command_files.read_lines(str(path))
    assert "\n" not in str(error.value)
