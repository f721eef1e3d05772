"""LJSpeech-1.1 -> train/validation filelists (scripts/tools/prepare_ljspeech.py): its metadata.csv
and wavs/ read by data/corpora/metadata.py, the reader of any corpus in that layout."""

from __future__ import annotations

from pathlib import Path

from data.audio import MelConfig
from data.corpora.errors import CorpusError
from data.corpora.metadata import PreparedFilelists, metadata_sources, prepare_filelists, read_sources
from data.filelist import Utterance

__all__ = ["PreparedFilelists", "prepare_ljspeech", "read_ljspeech"]


def read_ljspeech(ljspeech_dir: str | Path, cfg: MelConfig = MelConfig(), progress: bool = True) -> list[Utterance]:
    """Utterances with absolute wav paths and header frame counts, or one error listing every problem."""
    metadata = _metadata(ljspeech_dir)
    found, malformed = metadata_sources(metadata)
    utterances, problems, _ = read_sources(found, cfg, progress=progress)
    if malformed + problems:
        raise CorpusError.listing(metadata, malformed + problems)
    return utterances


def prepare_ljspeech(
    ljspeech_dir: str | Path,
    out_dir: str | Path = "filelists",
    seed: int = 0,
    val_fraction: float = 0.2,
    cfg: MelConfig = MelConfig(),
    progress: bool = True,
) -> PreparedFilelists:
    """Seeded train/validation split written to out_dir/ljspeech_{train,val}.txt (the paper: 10,480 / 2,620)."""
    metadata = _metadata(ljspeech_dir)
    return prepare_filelists(
        metadata_sources(metadata), metadata, Path(out_dir), "ljspeech", seed, val_fraction, cfg, progress=progress
    )


def _metadata(ljspeech_dir: str | Path) -> Path:
    metadata = Path(ljspeech_dir).absolute() / "metadata.csv"
    if not metadata.is_file():
        raise CorpusError(f"{metadata} not found: point --ljspeech at the LJSpeech-1.1 folder")
    return metadata
