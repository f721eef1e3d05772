"""scripts.tools.prepare_filelist: a metadata file or a folder of clips -> NAME_{train,val}.txt."""

from pathlib import Path

import numpy as np
import soundfile as sf

from data.audio import n_frames
from data.filelist import read_filelist, split_train_val
from scripts.tools import prepare_filelist


def clips(root: Path, n: int, transcripts: bool = False) -> list[Path]:
    """n short silent clips under root/wavs (lengths differ), with clip.txt beside each if asked."""
    (root / "wavs").mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = root / "wavs" / f"clip{i:02d}.wav"
        sf.write(str(path), np.zeros(2000 + 300 * i, np.float32), 22050, subtype="PCM_16")
        if transcripts:
            path.with_suffix(".txt").write_text(f"Sentence number {i}.\n")
        paths.append(path)
    return paths


def test_an_nvidia_style_metadata_file_becomes_named_filelists_with_the_seeded_split(tmp_path, capsys):
    paths = clips(tmp_path / "corpus", 10)
    metadata = tmp_path / "corpus" / "list.txt"
    metadata.write_text("".join(f"wavs/{p.name}|Line {i}.\n" for i, p in enumerate(paths)))
    argv = ["--metadata", str(metadata), "--name", "my_voice", "--out", str(tmp_path / "fl"), "--seed", "3"]
    assert prepare_filelist.main(argv) == 0
    train, val = (read_filelist(tmp_path / "fl" / f"my_voice_{part}.txt") for part in ("train", "val"))
    expected_train, expected_val = split_train_val(paths, 0.2, 3)
    assert [u.path for u in train] == expected_train and [u.path for u in val] == expected_val
    assert all(u.frames == n_frames(2000 + 300 * paths.index(u.path), 276) for u in train + val)
    assert "train: 8 utterances" in capsys.readouterr().out


def test_a_folder_with_transcripts_beside_the_clips_and_its_problems_all_at_once(tmp_path, capsys):
    paths = clips(tmp_path, 6, transcripts=True)
    out = ["--wavs", str(tmp_path / "wavs"), "--name", "folder", "--out", str(tmp_path / "fl")]
    assert prepare_filelist.main(out) == 0
    assert len(read_filelist(tmp_path / "fl" / "folder_train.txt")) == 5
    paths[1].with_suffix(".txt").unlink()
    paths[2].with_suffix(".txt").write_text("Say {HH AH0 L OW1} now.")
    paths[3].with_suffix(".txt").write_text("A face ^_^ here.")
    assert prepare_filelist.main([*out[:-1], str(tmp_path / "fl2")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'wavs'}: 3 problem(s):" in err and f"{paths[1]}: no transcript beside it" in err
    assert f"{paths[2].with_suffix('.txt')}: ARPAbet in braces {{HH AH0 L OW1}}" in err
    assert f"{paths[3].with_suffix('.txt')}: unknown characters '^', '_'" in err
    assert not (tmp_path / "fl2").exists(), "nothing is written from a corpus with problems"


def test_unknown_chars_drop_keeps_the_lines_and_counts_what_training_drops(tmp_path, capsys):
    paths = clips(tmp_path, 3)
    (tmp_path / "metadata.csv").write_text(
        "".join(f"{p.stem}|raw|{'Hi ^ there' if i else 'Plain.'}\n" for i, p in enumerate(paths))
    )
    argv = ["--metadata", str(tmp_path / "metadata.csv"), "--name", "x", "--out", str(tmp_path / "fl")]
    assert prepare_filelist.main(argv) == 2 and ":2: unknown characters '^'" in capsys.readouterr().err
    assert prepare_filelist.main([*argv, "--unknown-chars", "drop"]) == 0
    out = capsys.readouterr().out
    assert "training will drop '^' in 2 line(s)" in out and "unknown_chars=drop" in out.splitlines()[-1]
