import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from data.corpora.errors import CorpusError
from data.corpora.ljspeech import prepare_ljspeech, read_ljspeech
from data.filelist import read_filelist, wav_frames
from scripts.tools import prepare_ljspeech as prepare_script


@pytest.fixture
def corpus(ljspeech_mini_complete, tmp_path) -> Path:
    """A private copy of the mini corpus; copies, not symlinks, so that no test can write through to ../shared."""
    root = tmp_path / "LJSpeech-1.1"
    shutil.copytree(ljspeech_mini_complete, root, symlinks=False)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def set_line(root: Path, number: int, line: str) -> None:
    lines = (root / "metadata.csv").read_text(encoding="utf-8").splitlines()
    lines[number - 1] = line
    (root / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def replace_wav(root: Path, clip_id: str, samples: np.ndarray, sample_rate: int) -> None:
    (root / "wavs" / f"{clip_id}.wav").unlink()
    sf.write(root / "wavs" / f"{clip_id}.wav", samples, sample_rate, subtype="PCM_16")


def test_split_filelists_and_frames(corpus, tmp_path):
    set_line(corpus, 2, "LJ001-0002|in being comparatively modern.|")
    prepared = prepare_ljspeech(corpus, tmp_path / "filelists", seed=0, progress=False)
    train, val = read_filelist(prepared.train_path), read_filelist(prepared.val_path)
    assert prepared.train_path.name == "ljspeech_train.txt" and prepared.val_path.name == "ljspeech_val.txt"
    assert (len(train), len(val)) == (26, 6) and train == prepared.train
    assert len({u.path for u in train + val}) == 32
    for utt in train + val:
        assert utt.path.is_absolute() and utt.frames == wav_frames(utt.path)
    by_id = {u.path.stem: u for u in train + val}
    assert by_id["LJ001-0002"].text == "in being comparatively modern."
    assert by_id["LJ001-0001"].frames == 772
    assert "train: 26 utterances" in prepared.summary and "val: 6 utterances" in prepared.summary
    again = prepare_ljspeech(corpus, tmp_path / "again", seed=0, progress=False)
    assert again.val_path.read_text() == prepared.val_path.read_text()
    assert prepare_ljspeech(corpus, tmp_path / "other", seed=1, progress=False).val != prepared.val


@pytest.mark.parametrize(
    "breakage, expected",
    [
        (lambda root: (root / "wavs" / "LJ001-0004.wav").unlink(), r"metadata\.csv:4: missing wav .*LJ001-0004\.wav"),
        (
            lambda root: replace_wav(root, "LJ001-0005", np.zeros(16000), 16000),
            r"metadata\.csv:5: .*LJ001-0005\.wav: sample rate 16000 Hz, expected 22050",
        ),
        (
            lambda root: replace_wav(root, "LJ001-0006", np.zeros((22050, 2)), 22050),
            r"metadata\.csv:6: .*LJ001-0006\.wav: 2 channels, expected mono",
        ),
        (lambda root: set_line(root, 7, "LJ001-0007||"), r"metadata\.csv:7: empty text for LJ001-0007"),
        (lambda root: set_line(root, 8, "LJ001-0008 no separators"), r"metadata\.csv:8: malformed line"),
        (lambda root: set_line(root, 9, "LJ001-0009|a|b|c"), r"metadata\.csv:9: malformed line"),
        (
            lambda root: set_line(root, 10, "LJ001-0001|again|again"),
            r"metadata\.csv:10: duplicate id LJ001-0001 \(first at .*metadata\.csv:1\)",
        ),
        (
            lambda root: (root / "wavs" / "LJ001-0011.wav").write_bytes(b"garbage"),
            r"metadata\.csv:11: .*LJ001-0011\.wav",
        ),
    ],
)
def test_bad_inputs_name_file_and_line(corpus, tmp_path, breakage, expected):
    breakage(corpus)
    with pytest.raises(CorpusError, match=expected):
        prepare_ljspeech(corpus, tmp_path / "filelists", progress=False)
    assert not (tmp_path / "filelists").exists(), "no filelist is written from a broken corpus"


def test_all_problems_are_reported_at_once(corpus):
    set_line(corpus, 3, "LJ001-0003|Fish { chips|Fish { chips")
    set_line(corpus, 12, "LJ001-0012|50^ off } noon|50^ off } noon")
    (corpus / "wavs" / "LJ001-0020.wav").unlink()
    with pytest.raises(CorpusError) as caught:
        read_ljspeech(corpus, progress=False)
    problems = caught.value.problems
    assert len(problems) == 3
    assert any(p.startswith(f"{corpus / 'metadata.csv'}:3: unknown characters '{{' after cleaning") for p in problems)
    assert any(":12: unknown characters '^', '}' after cleaning" in p for p in problems)
    assert any(":20: missing wav" in p for p in problems)


def test_command_line(corpus, tmp_path, capsys):
    script = prepare_script
    assert script.main(["--ljspeech", str(corpus), "--out", str(tmp_path / "fl"), "--seed", "2"]) == 0
    assert "val: 6 utterances" in capsys.readouterr().out
    assert len(read_filelist(tmp_path / "fl" / "ljspeech_train.txt")) == 26
    set_line(corpus, 7, "LJ001-0007||")
    assert script.main(["--ljspeech", str(corpus), "--out", str(tmp_path / "fl2")]) == 2
    assert "metadata.csv:7: empty text" in capsys.readouterr().err


def test_the_filelists_hold_the_clips_the_papers_split_names(tmp_path):
    """One split everywhere: scripts.tools.prepare_ljspeech's training filelist is exactly train_split's clips,
    the clips `python -m batching table1` and the benchmarks use (a fake corpus, no ../shared)."""
    from batching import train_split

    root = tmp_path / "LJSpeech-1.1"
    (root / "wavs").mkdir(parents=True)
    ids = [f"LJ900-{i:04d}" for i in range(1, 26)]
    rng = np.random.default_rng(0)
    for clip_id in ids:
        sf.write(
            root / "wavs" / f"{clip_id}.wav",
            0.1 * rng.standard_normal(2000 + 97 * len(clip_id)),
            22050,
            subtype="PCM_16",
        )
    (root / "metadata.csv").write_text("".join(f"{c}|word {i}.|word {i}.\n" for i, c in enumerate(ids)))
    script = prepare_script
    assert script.main(["--ljspeech", str(root), "--out", str(tmp_path / "fl"), "--seed", "3"]) == 0
    train = [u.path.stem for u in read_filelist(tmp_path / "fl" / "ljspeech_train.txt")]
    val = [u.path.stem for u in read_filelist(tmp_path / "fl" / "ljspeech_val.txt")]
    assert train == [ids[i] for i in train_split(len(ids), 0.8, seed=3)]
    assert sorted(train + val) == ids and len(train) == 20
