"""What the corpora the project generates (demo.py, espeak.py) share: telling a finished corpus
made with the same settings, which is reused, from one to (re)generate; writing its split."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from data.corpora.errors import CorpusError
from data.filelist import Utterance, split_train_val, write_filelist


def is_complete(out_dir: Path, manifest: dict, train: Path, val: Path) -> bool:
    """manifest.json (written last, after every WAV and both filelists) records these settings,
    and the filelists and every WAV it lists exist."""
    try:
        stored = json.loads((out_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    if {k: stored.get(k) for k in manifest} != manifest or not (train.is_file() and val.is_file()):
        return False
    return all((out_dir / "wavs" / name).is_file() for name in stored.get("wavs", []))


def write_split(
    utterances: Sequence[Utterance], val_fraction: float, seed: int, train: Path, val: Path, size_setting: str
) -> None:
    """The project's one seeded split, written as the two filelists; a split with an empty side is
    refused, naming the setting that gives the corpus more utterances."""
    train_part, val_part = split_train_val(utterances, val_fraction, seed)
    if not train_part or not val_part:
        raise CorpusError(
            f"{len(utterances)} utterances with val_fraction {val_fraction} leave an empty split; raise {size_setting}"
        )
    write_filelist(train, train_part)
    write_filelist(val, val_part)
