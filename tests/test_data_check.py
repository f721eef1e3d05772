import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from data.audio import MelConfig, n_frames
from data.check import CheckLimits, CheckReport, FilelistCounts, Problem, check_filelists
from data.text import clean_text

CFG = MelConfig()
NO_LIMIT = CheckLimits()


def make_wav(
    root: Path,
    name: str,
    n_samples: int = 2205,
    rate: int = 22050,
    channels: int = 1,
    subtype: str = "PCM_16",
    fmt: str = "WAV",
    text: str = "hello world.",
) -> str:
    """Write a silent clip under root/wavs and return its correct filelist line."""
    path = root / "wavs" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), np.zeros((n_samples, channels), dtype=np.float32), rate, subtype=subtype, format=fmt)
    return f"wavs/{name}|{text}|{n_frames(n_samples, CFG.hop_length)}"


def write_lists(root: Path, train_lines: list[str], val_lines: list[str] | None = None) -> tuple[Path, Path]:
    """train.txt and val.txt under root; val is one clean clip unless given."""
    if val_lines is None:
        val_lines = [make_wav(root, "val0.wav")]
    for name, lines in (("train.txt", train_lines), ("val.txt", val_lines)):
        (root / name).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return root / "train.txt", root / "val.txt"


def train_problems(root: Path, bad_line: str, limits: CheckLimits = NO_LIMIT) -> list[str]:
    """Problems of a train filelist whose line 1 is clean and line 2 is `bad_line`."""
    train, val = write_lists(root, [make_wav(root, "good.wav"), bad_line])
    return [str(p) for p in check_filelists(train, val, CFG, limits, cache_dir=None).problems]


def only(problems: list[str], prefix: str, *named: str) -> str:
    assert len(problems) == 1, problems
    assert problems[0].startswith(prefix), problems[0]
    for culprit in named:
        assert culprit in problems[0], (culprit, problems[0])
    assert "\n" not in problems[0] and "; " in problems[0], "one line: what is wrong; what to do"
    return problems[0]


def test_clean_corpus_has_no_problems(tmp_path):
    train, val = write_lists(tmp_path, [make_wav(tmp_path, f"c{i}.wav", 2205 * (i + 1)) for i in range(3)])
    report = check_filelists(train, val, CFG, CheckLimits(100, "block_length=100"), cache_dir=None)
    assert report.ok and report.problems == [] and not report.from_cache
    assert [(c.utterances, c.frames) for c in report.counts] == [(3, 8 + 16 + 24), (1, 8)]
    assert report.counts[0].hours == pytest.approx(48 * 276 / 22050 / 3600)


def test_progress_bar_stays_off_when_not_a_terminal(tmp_path, capsys):
    """The project's convention (tqdm disable=None): a bar on a terminal's stderr, nothing in a log."""
    train, val = write_lists(tmp_path, [make_wav(tmp_path, "a.wav")])
    assert check_filelists(train, val, CFG, NO_LIMIT, progress=True).ok
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("wavs/good.wav|hel|lo|8", "found 4 fields"),
        ("wavs/good.wav|hello|eight", "not an integer"),
        ("wavs/good.wav|hello|0", "must be a positive integer"),
        ("wavs/good.wav|   |8", "empty text"),
    ],
)
def test_unparsable_line(tmp_path, bad_line, message):
    only(
        train_problems(tmp_path, bad_line),
        f"{tmp_path / 'train.txt'}:2: ",
        message,
        repr(bad_line),
        "wav_path|text|frames",
    )


def test_missing_clip(tmp_path):
    only(
        train_problems(tmp_path, "wavs/absent.wav|hi there|8"),
        f"{tmp_path / 'train.txt'}:2: ",
        str(tmp_path / "wavs" / "absent.wav"),
        "not found",
    )


def test_unreadable_clip(tmp_path):
    (tmp_path / "wavs").mkdir()
    (tmp_path / "wavs" / "junk.wav").write_bytes(b"this is no audio file at all" * 10)
    only(
        train_problems(tmp_path, "wavs/junk.wav|hi there|8"),
        f"{tmp_path / 'train.txt'}:2: ",
        "cannot read the header",
        str(tmp_path / "wavs" / "junk.wav"),
        "ffmpeg",
    )


def test_wrong_sample_rate(tmp_path):
    only(
        train_problems(tmp_path, make_wav(tmp_path, "fast.wav", rate=16000)),
        f"{tmp_path / 'train.txt'}:2: ",
        "fast.wav",
        "16000 Hz, expected 22050 Hz",
        "-ar 22050",
    )


def test_not_mono(tmp_path):
    only(
        train_problems(tmp_path, make_wav(tmp_path, "stereo.wav", channels=2)),
        f"{tmp_path / 'train.txt'}:2: ",
        "stereo.wav",
        "2 channels",
        "-ac 1",
    )


@pytest.mark.parametrize("subtype, fmt", [("PCM_U8", "WAV"), ("ULAW", "WAV"), ("PCM_16", "FLAC")])
def test_unsupported_sample_format(tmp_path, subtype, fmt):
    only(
        train_problems(tmp_path, make_wav(tmp_path, "odd.wav", subtype=subtype, fmt=fmt)),
        f"{tmp_path / 'train.txt'}:2: ",
        "odd.wav",
        f"{fmt}/{subtype}",
        "pcm_s16le",
    )


@pytest.mark.parametrize("subtype", ["PCM_24", "PCM_32", "FLOAT", "DOUBLE"])
def test_supported_sample_formats(tmp_path, subtype):
    assert train_problems(tmp_path, make_wav(tmp_path, "fine.wav", subtype=subtype)) == []


def test_frames_field_disagrees_with_header(tmp_path):
    line = make_wav(tmp_path, "clip.wav", n_samples=224_000).replace("|812", "|800")
    only(
        train_problems(tmp_path, line),
        f"{tmp_path / 'train.txt'}:2: ",
        "clip.wav",
        "frames field 800",
        "it should be 1 + 224000 // 276 = 812",
    )


def test_clip_too_short_for_the_stft(tmp_path):
    only(
        train_problems(tmp_path, make_wav(tmp_path, "blip.wav", n_samples=1000)),
        f"{tmp_path / 'train.txt'}:2: ",
        "blip.wav",
        "only 1000 samples",
    )


def test_text_empty_after_cleaning(tmp_path):
    only(
        train_problems(tmp_path, make_wav(tmp_path, "space.wav", text="\u200b")),  # a zero-width space
        f"{tmp_path / 'train.txt'}:2: ",
        "empty after cleaning",
        repr("\u200b"),
    )


def test_unknown_characters_are_named(tmp_path):
    problem = only(
        train_problems(tmp_path, make_wav(tmp_path, "amp.wav", text="fish } chips { 5^")),
        f"{tmp_path / 'train.txt'}:2: ",
        "'^', '{', '}'",
        "five",
        "unknown_chars=drop",
    )
    assert "'f'" not in problem.split("after cleaning")[0]


def failing_cleaner(text: str) -> str:
    """The cleaner, failing on numbers."""
    if any(ch.isdigit() for ch in text):
        raise OverflowError("forced")
    return clean_text(text)


def test_text_the_cleaner_cannot_read(tmp_path, monkeypatch):
    """A cleaner that raises is one problem of its line (a 40-digit number no longer does: it is
    read digit by digit, so the failure is forced here)."""
    assert train_problems(tmp_path, make_wav(tmp_path, "big.wav", text="1" * 40)) == []
    monkeypatch.setattr("data.textcheck.clean_text", failing_cleaner)
    only(
        train_problems(tmp_path, make_wav(tmp_path, "big.wav", text="1" * 40)),
        f"{tmp_path / 'train.txt'}:2: ",
        "the text cleaner fails",
        "OverflowError forced",
        "1" * 40,
    )


def test_duplicate_clip_by_path_and_by_symlink(tmp_path):
    line = make_wav(tmp_path, "a.wav")
    os.symlink(tmp_path / "wavs" / "a.wav", tmp_path / "wavs" / "alias.wav")
    train, val = write_lists(tmp_path, [line, line, line.replace("wavs/a.wav", "./wavs/alias.wav")])
    problems = [str(p) for p in check_filelists(train, val, CFG, NO_LIMIT).problems]
    assert len(problems) == 2, problems
    for number, problem in zip((2, 3), problems):
        assert problem.startswith(f"{train}:{number}: duplicate clip") and "already at line 1" in problem, problem
    assert "alias.wav" in problems[1]


def test_duplicate_id(tmp_path):
    first = make_wav(tmp_path, "one/LJ001-0001.wav")
    second = make_wav(tmp_path, "two/LJ001-0001.wav")
    train, val = write_lists(tmp_path, [first, second])
    problems = [str(p) for p in check_filelists(train, val, CFG, NO_LIMIT).problems]
    only(problems, f"{train}:2: ", "duplicate id 'LJ001-0001'", "one/LJ001-0001.wav", "two/LJ001-0001.wav", "line 1")


def test_train_and_val_overlap(tmp_path):
    shared, clip = make_wav(tmp_path, "a.wav"), make_wav(tmp_path, "b.wav")
    same_id = make_wav(tmp_path, "copy/b.wav")
    train, val = write_lists(tmp_path, [shared, clip], [make_wav(tmp_path, "v.wav"), shared, same_id])
    problems = [str(p) for p in check_filelists(train, val, CFG, NO_LIMIT).problems]
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"{val}:2: train and val overlap: same clip") and f"{train}:1" in problems[0]
    assert problems[1].startswith(f"{val}:3: train and val overlap: same id 'b'") and f"{train}:2" in problems[1]


def test_same_file_for_train_and_val(tmp_path):
    train, _ = write_lists(tmp_path, [make_wav(tmp_path, "a.wav")])
    os.symlink(train, tmp_path / "alias.txt")
    report = check_filelists(train, str(tmp_path / "alias.txt"), CFG, NO_LIMIT)
    only(
        [str(p) for p in report.problems],
        f"{tmp_path / 'alias.txt'}: is the same file as the train filelist",
        str(train),
    )


def test_longer_than_the_limit(tmp_path):
    limits = CheckLimits(max_frames=20, source="block_length=20")
    only(
        train_problems(tmp_path, make_wav(tmp_path, "long.wav", n_samples=22050), limits),
        f"{tmp_path / 'train.txt'}:2: ",
        "long.wav",
        "80 frames (1.0 s)",
        "block_length=20",
    )


def test_missing_and_empty_filelists(tmp_path):
    (tmp_path / "empty.txt").write_text("\n  \n")
    report = check_filelists(tmp_path / "absent.txt", tmp_path / "empty.txt", CFG, NO_LIMIT)
    problems = [str(p) for p in report.problems]
    assert problems[0].startswith(f"{tmp_path / 'absent.txt'}: cannot be read"), problems
    assert problems[1].startswith(f"{tmp_path / 'empty.txt'}: holds no utterances"), problems


@pytest.mark.parametrize("newline, bom", [("\r\n", ""), ("\r", ""), ("\n", "\ufeff"), ("\r\n", "\ufeff")])
def test_windows_and_old_mac_line_ends_and_a_byte_order_mark_are_taken(tmp_path, newline, bom):
    """Filelists written by other systems' editors: what the check passes, the loader reads alike."""
    from data.filelist import read_filelist

    lines = [make_wav(tmp_path, "a.wav"), make_wav(tmp_path, "b.wav", 4410)]
    train, val = write_lists(tmp_path, lines)
    train.write_bytes((bom + newline.join(lines) + newline).encode("utf-8"))
    report = check_filelists(train, val, CFG, NO_LIMIT)
    assert report.ok, report.error_message()
    assert [(u.path, u.text, u.frames) for u in read_filelist(train)] == [
        (tmp_path / "wavs" / "a.wav", "hello world.", 8),
        (tmp_path / "wavs" / "b.wav", "hello world.", 16),
    ]


def test_a_latin1_filelist_is_named_with_its_line(tmp_path):
    lines = [make_wav(tmp_path, "a.wav"), make_wav(tmp_path, "b.wav", text="caf\u00e9 au lait")]
    train, val = write_lists(tmp_path, lines)
    train.write_bytes(train.read_text(encoding="utf-8").encode("latin-1"))
    only(
        [str(p) for p in check_filelists(train, val, CFG, NO_LIMIT).problems],
        f"{train}:2: is not UTF-8 text",
        "byte 0xe9",
        "café au lait",
        "iconv -f latin1 -t utf-8",
    )


def test_a_float_clip_with_nan_or_infinite_samples_is_named(tmp_path):
    line = make_wav(tmp_path, "broken.wav", n_samples=4410, subtype="FLOAT")
    samples, rate = sf.read(str(tmp_path / "wavs" / "broken.wav"), dtype="float32")
    samples[2205:2208] = [np.nan, np.inf, -np.inf]
    sf.write(str(tmp_path / "wavs" / "broken.wav"), samples, rate, subtype="FLOAT")
    only(
        train_problems(tmp_path, line),
        f"{tmp_path / 'train.txt'}:2: ",
        "broken.wav",
        "holds 3 NaN or infinite sample(s), the first at 0.100 s",
        "re-export the clip",
    )


def test_a_truncated_and_an_empty_clip_are_named(tmp_path):
    line = make_wav(tmp_path, "cut.wav", n_samples=4410)
    whole = (tmp_path / "wavs" / "cut.wav").read_bytes()
    (tmp_path / "wavs" / "cut.wav").write_bytes(whole[: len(whole) - 2 * 2205])  # the last 2205 16-bit samples
    problems = train_problems(tmp_path, line)
    assert (
        problems[0].startswith(f"{tmp_path / 'train.txt'}:2: ")
        and "cut.wav is cut short: its header declares 4410 samples, the file holds 2205" in problems[0]
    ), problems
    (tmp_path / "wavs" / "none.wav").write_bytes(b"")
    only(
        train_problems(tmp_path, "wavs/none.wav|hello world.|8"),
        f"{tmp_path / 'train.txt'}:2: ",
        "none.wav is an empty file (0 bytes",
    )


def test_relative_paths_start_at_the_filelist_not_the_working_directory(tmp_path, monkeypatch):
    from data.filelist import read_filelist

    corpus = tmp_path / "corpus"
    train, val = write_lists(corpus, [make_wav(corpus, "a.wav")])
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert check_filelists(train, val, CFG, NO_LIMIT).ok
    assert read_filelist(train)[0].path == corpus / "wavs" / "a.wav"


def test_every_problem_is_reported_in_line_order(tmp_path):
    lines = [
        make_wav(tmp_path, "ok.wav"),
        "wavs/gone.wav|hi|8",
        make_wav(tmp_path, "mono.wav", channels=2),
        "",
        "wavs/ok2.wav|only two fields",
    ]
    train, val = write_lists(tmp_path, lines, [make_wav(tmp_path, "v.wav", text="a_b")])
    report = check_filelists(train, val, CFG, NO_LIMIT)
    assert [str(p).split(": ", 1)[0] for p in report.problems] == [f"{train}:2", f"{train}:3", f"{train}:5", f"{val}:1"]
    message = report.error_message()
    assert message.splitlines()[0] == "4 problem(s) in the data:" and len(message.splitlines()) == 5
    assert not report.ok


def test_error_message_shows_200_and_counts_the_rest():
    report = CheckReport(
        [Problem("t.txt", i, f"bad {i}", "fix it") for i in range(1, 251)], [FilelistCounts("t.txt", 250, 1000, 0.1)]
    )
    lines = report.error_message().splitlines()
    assert lines[0] == "250 problem(s) in the data:" and len(lines) == 202
    assert lines[1].strip() == "t.txt:1: bad 1; fix it" and lines[200].strip().startswith("t.txt:200:")
    assert "50 more" in lines[-1]


def test_cache_returns_the_same_report_until_data_changes(tmp_path):
    train, val = write_lists(tmp_path, [make_wav(tmp_path, "a.wav"), "wavs/gone.wav|hi|8"])
    cache = tmp_path / "cache"
    first = check_filelists(train, val, CFG, NO_LIMIT, cache_dir=cache)
    again = check_filelists(train, val, CFG, NO_LIMIT, cache_dir=cache)
    assert again.from_cache and not first.from_cache
    assert (again.problems, again.counts) == (first.problems, first.counts) and len(again.problems) == 1
    other_limits = check_filelists(train, val, CFG, CheckLimits(1, "x"), cache_dir=cache)
    assert not other_limits.from_cache, "the limits are part of the key"

    stat = os.stat(tmp_path / "wavs" / "a.wav")
    os.utime(tmp_path / "wavs" / "a.wav", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert not check_filelists(train, val, CFG, NO_LIMIT, cache_dir=cache).from_cache, "a clip's mtime changed"
    assert check_filelists(train, val, CFG, NO_LIMIT, cache_dir=cache).from_cache

    train.write_text(train.read_text().replace("wavs/gone.wav|hi|8\n", ""))
    fixed = check_filelists(train, val, CFG, NO_LIMIT, cache_dir=cache)
    assert not fixed.from_cache and fixed.ok, "the filelist changed"
    assert not [p for p in cache.iterdir() if p.suffix != ".json"], "temporary file left behind"


def test_damaged_cache_file_is_checked_again(tmp_path):
    train, val = write_lists(tmp_path, [make_wav(tmp_path, "a.wav")])
    check_filelists(train, val, CFG, NO_LIMIT, cache_dir=tmp_path / "cache")
    for stored in (tmp_path / "cache").iterdir():
        stored.write_text("{not json")
    report = check_filelists(train, val, CFG, NO_LIMIT, cache_dir=tmp_path / "cache")
    assert report.ok and not report.from_cache
    assert check_filelists(train, val, CFG, NO_LIMIT, cache_dir=tmp_path / "cache").from_cache


def test_the_text_notes_are_cached_with_the_report_and_keyed_by_unknown_chars(tmp_path):
    train, val = write_lists(
        tmp_path, [make_wav(tmp_path, "a.wav", text="It cost $5."), make_wav(tmp_path, "b.wav", text="a ^ b")]
    )
    cache = tmp_path / "cache"
    first = check_filelists(train, val, CFG, NO_LIMIT, cache_dir=cache, unknown_chars="drop")
    again = check_filelists(train, val, CFG, NO_LIMIT, cache_dir=cache, unknown_chars="drop")
    assert first.ok and again.from_cache and again.text == first.text
    assert first.text.dropped == {"^": [f"{train}:2"]} and len(first.text.rewrites) == 1
    refused = check_filelists(train, val, CFG, NO_LIMIT, cache_dir=cache)
    assert not refused.from_cache and [p.line for p in refused.problems] == [2]


def test_an_nvidia_style_wav_text_line_takes_its_frames_from_the_header(tmp_path):
    train, val = write_lists(tmp_path, [make_wav(tmp_path, "a.wav").rsplit("|", 1)[0], make_wav(tmp_path, "b.wav")])
    report = check_filelists(train, val, CFG, NO_LIMIT)
    assert report.ok and report.counts[0].frames == 2 * n_frames(2205, CFG.hop_length)
    (tmp_path / "wavs" / "a.wav").unlink()
    only([str(p) for p in check_filelists(train, val, CFG, NO_LIMIT).problems], f"{train}:1: clip ", "not found")


def test_arpabet_in_braces_is_refused_by_file_line_and_braces(tmp_path):
    problems = train_problems(tmp_path, make_wav(tmp_path, "b.wav", text="turn left on {HH AW1 S T AH0 N} street."))
    only(problems, f"{tmp_path / 'train.txt'}:2: ARPAbet in braces {{HH AW1 S T AH0 N}}", "write the words in letters")


def test_every_rewritten_line_is_written_to_a_file_beside_the_cached_report(tmp_path):
    lines = [make_wav(tmp_path, f"{i}.wav", text=f"It cost ${i}.") for i in range(8)]
    report = check_filelists(*write_lists(tmp_path, lines), CFG, NO_LIMIT, cache_dir=tmp_path / "cache")
    written = Path(report.text.rewrites_file).read_text(encoding="utf-8").splitlines()
    assert written == report.text.rewrites and len(written) == 8
    assert written[7] == f"{tmp_path / 'train.txt'}:8: 'It cost $7.' -> 'it cost seven dollars.'"
    assert f"the first 5 (all of them in {report.text.rewrites_file}):" in report.text.lines()[0]
