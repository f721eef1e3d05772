"""Reading lengths files: both formats, and errors that give the file and the line number."""
import numpy as np
import pytest

from batching import LengthsFileError, read_lengths


def write(tmp_path, text, name="list.txt"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_filelist_and_trailing_blank_lines(tmp_path):
    path = write(tmp_path, "a.wav|Hello, world.|120\nb.wav|\"Quoted\" text|80\n\n\n")
    lengths, ids = read_lengths(path, with_ids=True)
    assert lengths.tolist() == [120, 80] and ids == ["a.wav", "b.wav"]


def test_tsv_with_quotes_in_text(tmp_path):
    path = write(tmp_path, 'id\tsamples\tframes\ttext\nLJ1\t100\t7\t"He said, "no"\nLJ2\t50\t3\tok\n', "l.tsv")
    lengths, ids = read_lengths(path, with_ids=True)
    assert lengths.dtype == np.int64 and lengths.tolist() == [7, 3] and ids == ["LJ1", "LJ2"]


@pytest.mark.parametrize("text, message", [
    ("a|t|10\nb|t\n", r":2: expected 3 '\|'-separated fields, found 2"),
    ("a|t|10\nb|t|ten\n", r":2: frames 'ten' is not an integer"),
    ("a|t|10\n\nb|t|5\n", r":2: expected 3 '\|'-separated fields, found 1"),
    ("a|t|0\n", r":1: frames 0 must be a positive integer"),
    ("id\tframes\nx\t5\ny\t-2\n", r":3: frames -2 must be a positive integer"),
    ("id\tsamples\nx\t5\n", r":1: TSV header has no 'frames' column"),
    ("\n\n", r": the file is empty"),
])
def test_bad_lines_are_named(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(LengthsFileError, match=str(path).replace(".", r"\.") + message):
        read_lengths(path)


def test_missing_file(tmp_path):
    with pytest.raises(LengthsFileError, match="cannot read"):
        read_lengths(tmp_path / "absent.txt")


def test_real_ljspeech_lengths(ljspeech_lengths_tsv):
    lengths = read_lengths(ljspeech_lengths_tsv)
    assert lengths.size == 13_100 and lengths.min() > 0
