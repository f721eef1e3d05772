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
        ("a.wav|te|xt|5", "found 4 fields"),
        ("missing.wav|text", "frames come from its clip's header: .*missing.wav"),
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


def test_a_wav_text_line_reads_its_frames_from_the_header_once(tmp_path, monkeypatch):
    import numpy as np
    import soundfile as sf

    import data.filelist as filelist
    from data.audio import MelConfig, n_frames

    sf.write(str(tmp_path / "a.wav"), np.zeros(5000, np.float32), 22050, subtype="PCM_16")
    (tmp_path / "list.txt").write_text("a.wav|NVIDIA style.\na.wav|with frames.|9\n")
    expected = [
        Utterance(tmp_path / "a.wav", "NVIDIA style.", n_frames(5000, 276)),
        Utterance(tmp_path / "a.wav", "with frames.", 9),
    ]
    assert read_filelist(tmp_path / "list.txt") == expected
    assert read_filelist(tmp_path / "list.txt", MelConfig(hop_length=100))[0].frames == n_frames(5000, 100)
    monkeypatch.setattr(filelist, "wav_frames", lambda *args: pytest.fail("the header was read again"))
    assert read_filelist(tmp_path / "list.txt") == expected
