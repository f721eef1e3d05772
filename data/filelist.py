"""Filelists: one utterance per line, `wav_path|text|frames`, no header; UTF-8 (a byte-order mark
is skipped), any line ending (LF, CRLF, CR).

The frame count is stored so that the batch planner can plan a whole epoch without opening any
audio; relative wav paths are relative to the filelist's own directory (never the working
directory), so a corpus can be moved and a run started from anywhere.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from batching.errors import UserError
from batching.lengths import parse_frames
from batching.split import train_split
from data.atomic import atomic_open
from data.audio import MelConfig, check_format, n_frames, wav_info

__all__ = [
    "FILELIST_ENCODING",
    "FilelistError",
    "Utterance",
    "read_filelist",
    "write_filelist",
    "wav_info",
    "wav_frames",
    "split_train_val",
    "summarize",
]

T = TypeVar("T")
FILELIST_ENCODING = "utf-8-sig"  # UTF-8; a byte-order mark (Windows editors write one) is skipped


class FilelistError(UserError):
    """A filelist line that cannot be used; the message names the file and the line number."""


@dataclass(frozen=True)
class Utterance:
    path: Path
    text: str
    frames: int
    origin: str = field(default="", compare=False)  # `FILELIST:LINE` when read from a filelist, for messages


def parse_line(line: str, base_dir: Path, origin: str = "") -> Utterance:
    """One `wav_path|text|frames` line (relative paths against base_dir); FilelistError says what is wrong."""
    fields = line.split("|")
    if len(fields) != 3:
        raise FilelistError(f"expected 3 fields 'wav_path|text|frames', found {len(fields)}")
    wav, text, frames = (field.strip() for field in fields)
    if not wav:
        raise FilelistError("empty wav path")
    if not text:
        raise FilelistError("empty text")
    try:
        count = parse_frames(frames)
    except ValueError as error:
        raise FilelistError(str(error)) from None
    return Utterance(base_dir / wav, text, count, origin)


def read_filelist(path: str | Path) -> list[Utterance]:
    """Parse a filelist; blank lines are skipped, any other bad line is an error naming path:line."""
    path = Path(path)
    utterances = []
    try:
        text = path.read_text(encoding=FILELIST_ENCODING)
    except UnicodeDecodeError as err:
        raise FilelistError(
            f"{path}: is not UTF-8 text ({err}); convert it to UTF-8 (python train.py --check names the line)"
        ) from None
    for number, line in enumerate(io.StringIO(text, newline=None), start=1):
        if not line.strip():
            continue
        try:
            utterances.append(parse_line(line.rstrip("\n"), path.parent, f"{path}:{number}"))
        except FilelistError as err:
            raise FilelistError(f"{path}:{number}: {err}: {line.rstrip()!r}") from None
    return utterances


def write_filelist(path: str | Path, utterances: Iterable[Utterance]) -> None:
    """Write paths as given (relative ones are read back relative to the filelist's directory)."""
    lines = []
    for utt in utterances:
        if "|" in utt.text or "\n" in utt.text or not utt.text.strip():
            raise FilelistError(f"{utt.path}: text cannot be written to a filelist: {utt.text!r}")
        lines.append(f"{utt.path}|{utt.text}|{utt.frames}\n")
    with atomic_open(path) as out:
        out.writelines(lines)


def wav_frames(path: str | Path, cfg: MelConfig = MelConfig()) -> int:
    """Mel frames the loader will produce for this WAV, from its header; checks rate and channels."""
    sample_rate, channels, n_samples = wav_info(path)
    check_format(path, sample_rate, channels, cfg.sample_rate)
    return n_frames(n_samples, cfg.hop_length)


def split_train_val(items: Sequence[T], val_fraction: float, seed: int) -> tuple[list[T], list[T]]:
    """The project's one seeded split (batching.split.train_split, the paper's 80:20 with 0.2): the
    training set is the items train_split names, the rest is validation, both in input order, so
    `python -m batching table1`, the benchmarks and the filelists describe the same clips."""
    if not 0.0 <= val_fraction < 1.0:
        raise UserError(f"val_fraction must be in [0, 1), got {val_fraction}")
    in_train = set(train_split(len(items), 1.0 - val_fraction, seed).tolist())
    train = [item for i, item in enumerate(items) if i in in_train]
    val = [item for i, item in enumerate(items) if i not in in_train]
    return train, val


def summarize(name: str, utterances: Sequence[Utterance], cfg: MelConfig = MelConfig()) -> str:
    """One line: count, hours (from frames, within one hop per clip) and min/mean/max frames."""
    frames = [u.frames for u in utterances]
    if not frames:
        return f"{name}: 0 utterances"
    hours = sum(frames) * cfg.hop_length / cfg.sample_rate / 3600
    return (
        f"{name}: {len(frames)} utterances, {hours:.2f} h, frames min/mean/max "
        f"{min(frames)}/{sum(frames) / len(frames):.1f}/{max(frames)}"
    )
