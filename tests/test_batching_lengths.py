"""Reading lengths files: the three formats, and errors that give the file and the line number."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batching import LengthsFileError, read_lengths
from batching.cli import main as batching_main
from batching.lengths import FORMATS


def write(tmp_path, text, name="list.txt"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_filelist_and_trailing_blank_lines(tmp_path):
    path = write(tmp_path, 'a.wav|Hello, world.|120\nb.wav|"Quoted" text|80\n\n\n')
    lengths, ids = read_lengths(path, with_ids=True)
    assert lengths.tolist() == [120, 80] and ids == ["a.wav", "b.wav"]


def test_tsv_with_quotes_in_text(tmp_path):
    path = write(tmp_path, 'id\tsamples\tframes\ttext\nLJ1\t100\t7\t"He said, "no"\nLJ2\t50\t3\tok\n', "l.tsv")
    lengths, ids = read_lengths(path, with_ids=True)
    assert lengths.dtype == np.int64 and lengths.tolist() == [7, 3] and ids == ["LJ1", "LJ2"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("a|t|10\nb|t\n", r":2: expected 3 '\|'-separated fields, found 2"),
        ("a|t|10\nb|t|ten\n", r":2: frames 'ten' is not an integer"),
        ("a|t|10\n\nb|t|5\n", r":2: expected 3 '\|'-separated fields, found 1"),
        ("a|t|0\n", r":1: frames 0 must be a positive integer"),
        ("id\tframes\nx\t5\ny\t-2\n", r":3: frames -2 must be a positive integer"),
        ("id\tsamples\nx\t5\n", r":1: TSV header has no 'frames' column"),
        ("\n\n", r": the file is empty"),
        ("120\n80\n\n7\n", r":3: frames '' is not an integer"),
        ("120\n8.5\n", r":2: frames '8.5' is not an integer"),
        ("120\n0\n", r":2: frames 0 must be a positive integer"),
    ],
)
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


@settings(max_examples=50, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 10**6), min_size=1, max_size=50),
    newline=st.sampled_from(["\n", "\r\n"]),
    trailing=st.sampled_from(["", "\n", "\n\n"]),
)
def test_one_length_per_line_reads_back_in_order(tmp_path_factory, lengths, newline, trailing):
    path = tmp_path_factory.mktemp("plain") / "lengths.txt"
    path.write_bytes((newline.join(map(str, lengths)) + trailing).encode())
    frames, ids = read_lengths(path, with_ids=True)
    assert frames.tolist() == lengths and ids == [str(n) for n in range(1, len(lengths) + 1)]


@pytest.mark.parametrize("first_line", ["hello world", "12.5", "a.wav,Hello,120", "-3"])
def test_a_file_of_no_format_is_told_which_formats_are_read(tmp_path, first_line):
    path = write(tmp_path, first_line + "\n7\n")
    with pytest.raises(LengthsFileError) as caught:
        read_lengths(path)
    assert str(caught.value).startswith(f"{path}:1: {first_line!r} is none of the formats read here: ")
    assert all(name in str(caught.value) for name in FORMATS)


def test_stats_reads_one_length_per_line(tmp_path, capsys):
    lengths = write(tmp_path, "".join(f"{100 + 37 * (i % 11)}\n" for i in range(64)))
    assert batching_main(["stats", "--lengths", str(lengths), "--split", "1.0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_samples"] == 64
    assert batching_main(["stats", "--lengths", str(write(tmp_path, "frames are here\n"))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "one length in frames per line" in err
