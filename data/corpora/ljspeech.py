"""LJSpeech-1.1 -> train/validation filelists, with every clip's frame count read from its header.

All problems in the corpus are collected and reported together, each naming its file and line,
so a broken copy is fixed in one pass rather than one error per run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from data.audio import AudioFormatError, MelConfig
from data.corpora.errors import CorpusError
from data.filelist import Utterance, split_train_val, summarize, wav_frames, write_filelist
from data.text import find_unknown_symbols


@dataclass(frozen=True)
class PreparedFilelists:
    train_path: Path
    val_path: Path
    train: list[Utterance]
    val: list[Utterance]
    summary: str


def _parse_metadata_line(line: str) -> tuple[str, str]:
    """(clip id, text) from `id|text|normalized text`; the normalized text wins unless it is empty."""
    fields = line.split("|")
    if len(fields) not in (2, 3) or not fields[0].strip():
        raise ValueError(f"malformed line, expected 'id|text|normalized text': {line!r}")
    text = (fields[2].strip() if len(fields) == 3 else "") or fields[1].strip()
    if not text:
        raise ValueError(f"empty text for {fields[0].strip()}")
    return fields[0].strip(), text


def read_ljspeech(ljspeech_dir: str | Path, cfg: MelConfig = MelConfig(), progress: bool = True) -> list[Utterance]:
    """Utterances with absolute wav paths and header frame counts, or one error listing every problem."""
    ljspeech_dir = Path(ljspeech_dir).absolute()
    metadata = ljspeech_dir / "metadata.csv"
    if not metadata.is_file():
        raise CorpusError(f"{metadata} not found: point --ljspeech at the LJSpeech-1.1 folder")
    lines = metadata.read_text(encoding="utf-8").splitlines()
    utterances, line_numbers, problems, seen = [], [], [], {}
    for number, line in enumerate(
        tqdm(lines, desc="reading wav headers", unit="clip", disable=None if progress else True), 1
    ):
        if not line.strip():
            continue
        where = f"{metadata}:{number}"
        try:
            clip_id, text = _parse_metadata_line(line)
        except ValueError as err:
            problems.append(f"{where}: {err}")
            continue
        if clip_id in seen:
            problems.append(f"{where}: duplicate id {clip_id} (first on line {seen[clip_id]})")
            continue
        seen[clip_id] = number
        wav = ljspeech_dir / "wavs" / f"{clip_id}.wav"
        if not wav.is_file():
            problems.append(f"{where}: missing wav {wav}")
            continue
        try:
            utterances.append(Utterance(wav, text, wav_frames(wav, cfg)))
            line_numbers.append(number)
        except AudioFormatError as err:
            problems.append(f"{where}: {err}")
    problems += _unknown_symbol_problems(metadata, utterances, line_numbers)
    if problems:
        raise CorpusError.listing(metadata, problems)
    return utterances


def _unknown_symbol_problems(metadata: Path, utterances: list[Utterance], line_numbers: list[int]) -> list[str]:
    """One problem per line with characters outside the symbol table, after a total count of each."""
    total, problems = Counter(), []
    for utt, number in zip(utterances, line_numbers):
        unknown = find_unknown_symbols([utt.text])
        if unknown:
            total.update(unknown)
            problems.append(f"{metadata}:{number}: unknown characters {sorted(unknown)} in {utt.text!r}")
    if problems:
        problems.insert(0, f"{metadata}: characters outside the symbol table after cleaning: {dict(total)}")
    return problems


def prepare_ljspeech(
    ljspeech_dir: str | Path,
    out_dir: str | Path = "filelists",
    seed: int = 0,
    val_fraction: float = 0.2,
    cfg: MelConfig = MelConfig(),
    progress: bool = True,
) -> PreparedFilelists:
    """Seeded train/validation split written to out_dir/ljspeech_{train,val}.txt (the paper: 10,480 / 2,620)."""
    utterances = read_ljspeech(ljspeech_dir, cfg, progress)
    train, val = split_train_val(utterances, val_fraction, seed)
    out_dir = Path(out_dir)
    train_path, val_path = out_dir / "ljspeech_train.txt", out_dir / "ljspeech_val.txt"
    write_filelist(train_path, train)
    write_filelist(val_path, val)
    summary = "\n".join([summarize("train", train, cfg), summarize("val", val, cfg)])
    return PreparedFilelists(train_path, val_path, train, val, summary)
