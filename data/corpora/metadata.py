"""A corpus as users have it -> the recipe's filelists: an LJSpeech/NVIDIA-style metadata file
(`id|text|normalized text`, `id|text` or `wav_path|text`) or a folder of WAVs each with a transcript
beside it (`clip.wav` and `clip.txt`), every clip's frames read from its header, split with the
project's one seeded split and written as NAME_train.txt and NAME_val.txt.

All problems are collected and reported together, each naming its file and line, so that a broken
copy is fixed in one pass; nothing is written from a corpus with problems. Texts are read as the
data check reads them (data/textcheck.py): characters outside the symbol table are problems, or,
with unknown_chars="drop", counted by character in the summary; phonemes in braces are refused.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from data.audio import AudioFormatError, MelConfig
from data.corpora.errors import CorpusError
from data.filelist import Utterance, split_train_val, summarize, wav_frames, write_filelist
from data.text import UNKNOWN_CHARS
from data.textcheck import read_text

#: The extensions of a transcript beside its clip in a folder of WAVs (`clip.txt`, Montreal Forced
#: Aligner's `clip.lab`), in the order they are looked for.
TRANSCRIPT_SUFFIXES = (".txt", ".lab")


@dataclass(frozen=True)
class PreparedFilelists:
    train_path: Path
    val_path: Path
    train: list[Utterance]
    val: list[Utterance]
    summary: str


@dataclass(frozen=True)
class _Source:
    """One clip to read: where it was named (FILE:LINE), its id, its wav and its text."""

    where: str
    clip_id: str
    wav: Path
    text: str


def parse_metadata_line(line: str) -> tuple[str, str]:
    """(clip id or wav path, text) from `id|text|normalized text`, `id|text` or `wav_path|text`; the
    normalized text wins unless it is empty. ValueError says what is wrong."""
    fields = line.split("|")
    if len(fields) not in (2, 3) or not fields[0].strip():
        raise ValueError(f"malformed line, expected 'id|text|normalized text' or 'wav_path|text': {line!r}")
    text = (fields[2].strip() if len(fields) == 3 else "") or fields[1].strip()
    if not text:
        raise ValueError(f"empty text for {fields[0].strip()}")
    return fields[0].strip(), text


def metadata_sources(metadata: Path, wav_dir: Path | None = None) -> tuple[list[_Source], list[str]]:
    """The clips a metadata file names, and its malformed lines. A first field ending in .wav is a path
    (relative ones start at wav_dir, else at the metadata's folder); any other is an id, whose clip is
    wav_dir/ID.wav (default: the metadata's folder's wavs/, LJSpeech's layout)."""
    if not metadata.is_file():
        raise CorpusError(f"{metadata} not found: pass the metadata file (e.g. LJSpeech's metadata.csv)")
    folder = metadata.absolute().parent
    sources, problems = [], []
    for number, line in enumerate(metadata.read_text(encoding="utf-8-sig").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{metadata}:{number}"
        try:
            first, text = parse_metadata_line(line)
        except ValueError as err:
            problems.append(f"{where}: {err}")
            continue
        if first.lower().endswith(".wav"):
            wav = (wav_dir.absolute() if wav_dir else folder) / first
        else:
            wav = (wav_dir.absolute() if wav_dir else folder / "wavs") / f"{first}.wav"
        sources.append(_Source(where, wav.stem, wav, text))
    return sources, problems


def folder_sources(wav_dir: Path) -> tuple[list[_Source], list[str]]:
    """Every WAV under wav_dir (sorted) with its transcript beside it (TRANSCRIPT_SUFFIXES)."""
    if not wav_dir.is_dir():
        raise CorpusError(f"{wav_dir} is not a folder: pass the folder holding the WAVs")
    wavs = sorted(path.absolute() for path in wav_dir.rglob("*") if path.suffix.lower() == ".wav")
    if not wavs:
        raise CorpusError(f"{wav_dir} holds no .wav files")
    sources, problems = [], []
    for wav in wavs:
        transcript = next((t for t in map(wav.with_suffix, TRANSCRIPT_SUFFIXES) if t.is_file()), None)
        if transcript is None:
            problems.append(f"{wav}: no transcript beside it (expected {wav.with_suffix('.txt')})")
            continue
        text = " ".join(transcript.read_text(encoding="utf-8-sig").split())
        if not text:
            problems.append(f"{transcript}: empty text for {wav.stem}")
            continue
        sources.append(_Source(str(transcript), wav.stem, wav, text))
    return sources, problems


def read_sources(
    sources: list[_Source], cfg: MelConfig, unknown_chars: str = "error", progress: bool = True
) -> tuple[list[Utterance], list[str], Counter]:
    """Utterances with absolute wav paths and header frame counts, every problem (missing or
    duplicate clips, wrong audio, unreadable texts), and the characters drop would drop."""
    if unknown_chars not in UNKNOWN_CHARS:
        raise CorpusError(f"unknown_chars={unknown_chars!r} is not one of {', '.join(UNKNOWN_CHARS)}")
    utterances, problems, seen, dropped = [], [], {}, Counter()
    for source in tqdm(sources, desc="reading wav headers", unit="clip", disable=None if progress else True):
        if source.clip_id in seen:
            problems.append(f"{source.where}: duplicate id {source.clip_id} (first at {seen[source.clip_id]})")
            continue
        seen[source.clip_id] = source.where
        if not source.wav.is_file():
            problems.append(f"{source.where}: missing wav {source.wav}")
            continue
        reading = read_text(source.text, unknown_chars)
        if reading.problem:
            problems.append(f"{source.where}: {'; '.join(reading.problem)}")
            continue
        dropped.update(reading.unknown)
        try:
            utterances.append(Utterance(source.wav, source.text, wav_frames(source.wav, cfg)))
        except AudioFormatError as err:
            problems.append(f"{source.where}: {err}")
    return utterances, problems, dropped


def prepare_filelists(
    sources: tuple[list[_Source], list[str]],
    origin: Path,
    out_dir: Path,
    name: str,
    seed: int = 0,
    val_fraction: float = 0.2,
    cfg: MelConfig = MelConfig(),
    unknown_chars: str = "error",
    progress: bool = True,
) -> PreparedFilelists:
    """Read the sources (metadata_sources or folder_sources), then write out_dir/NAME_{train,val}.txt
    from the project's seeded split; CorpusError lists every problem of `origin`."""
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise CorpusError(f"--name {name!r}: use letters, digits, '-' and '_' (it names the filelists)")
    found, malformed = sources
    utterances, problems, dropped = read_sources(found, cfg, unknown_chars, progress)
    if malformed + problems:
        raise CorpusError.listing(origin, malformed + problems)
    train, val = split_train_val(utterances, val_fraction, seed)
    train_path, val_path = out_dir / f"{name}_train.txt", out_dir / f"{name}_val.txt"
    write_filelist(train_path, train)
    write_filelist(val_path, val)
    summary = [summarize("train", train, cfg), summarize("val", val, cfg)]
    if dropped:
        counts = ", ".join(f"{char!r} in {count} line(s)" for char, count in sorted(dropped.items()))
        summary.append(f"unknown_chars=drop: training will drop {counts}; train with --hparams unknown_chars=drop")
    return PreparedFilelists(train_path, val_path, train, val, "\n".join(summary))
