from pathlib import Path

import pytest

from data.filelist import FilelistError, Utterance, read_filelist, split_train_val, summarize, write_filelist


def test_round_trip_with_relative_and_absolute_paths(tmp_path):
    utterances = [Utterance(Path("wavs/a.wav"), "hello there.", 120), Utterance(Path("/abs/b.wav"), "b, c!", 7)]
    write_filelist(tmp_path / "list.txt", utterances)
    assert (tmp_path / "list.txt").read_text() == "wavs/a.wav|hello there.|120\n/abs/b.wav|b, c!|7\n"
    assert read_filelist(tmp_path / "list.txt") == [
        Utterance(tmp_path / "wavs/a.wav", "hello there.", 120),
        Utterance(Path("/abs/b.wav"), "b, c!", 7),
    ]
    assert not [p for p in tmp_path.iterdir() if p.name != "list.txt"], "temporary file left behind"


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("a.wav|text", "expected 3 fields"),
        ("a.wav|te|xt|5", "expected 3 fields"),
        ("a.wav|text|five", "not an integer"),
        ("a.wav|text|0", "must be a positive integer"),
        ("a.wav|text|-3", "must be a positive integer"),
        ("a.wav|  |5", "empty text"),
        ("|text|5", "empty wav path"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path, bad_line, message):
    path = tmp_path / "list.txt"
    path.write_text(f"ok.wav|fine|3\n\n{bad_line}\n")
    with pytest.raises(FilelistError, match=rf"list\.txt:3: .*{message}"):
        read_filelist(path)


def test_unwritable_text_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="a.wav"):
        write_filelist(tmp_path / "x.txt", [Utterance(Path("a.wav"), "pipe | inside", 3)])


def test_split_is_seeded_and_sized_like_the_paper():
    items = list(range(13100))
    train, val = split_train_val(items, 0.2, seed=0)
    assert (len(train), len(val)) == (10480, 2620)
    assert sorted(train + val) == items
    assert split_train_val(items, 0.2, seed=0) == (train, val)
    assert split_train_val(items, 0.2, seed=1)[1] != val


def test_summarize():
    utts = [Utterance(Path("a"), "a", 80), Utterance(Path("b"), "b", 160)]
    assert summarize("train", utts) == "train: 2 utterances, 0.00 h, frames min/mean/max 80/120.0/160"
