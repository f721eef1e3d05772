"""Filelists: one utterance per line, `wav_path|text|frames` or NVIDIA's `wav_path|text`, no header;
UTF-8 (a byte-order mark is skipped), any line ending (LF, CRLF, CR).

The frame count is stored so that the batch planner can plan a whole epoch without opening any
audio; a `wav_path|text` line has its frames read from the clip's header (once per process and
clip: header_frames caches them by path, size, mtime and mel settings). Relative wav paths are
relative to the filelist's own directory (never the working directory), so a corpus can be moved
and a run started from anywhere.
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from batching.errors import UserError
from batching.lengths import parse_frames
from batching.split import train_split
from data.atomic import atomic_open
from data.audio import AudioFormatError, MelConfig, check_format, n_frames, wav_info

__all__ = [
    "FILELIST_ENCODING",
    "FilelistError",
    "Utterance",
    "read_filelist",
    "write_filelist",
    "wav_info",
    "wav_frames",
    "header_frames",
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


def parse_fields(line: str) -> tuple[str, str, int | None]:
    """(wav path, text, frames) of a `wav_path|text|frames` line, frames None for a `wav_path|text`
    line (NVIDIA's); FilelistError says what is wrong."""
    fields = line.split("|")
    if len(fields) not in (2, 3):
        raise FilelistError(f"expected 'wav_path|text|frames' or 'wav_path|text', found {len(fields)} fields")
    wav, text = fields[0].strip(), fields[1].strip()
    if not wav:
        raise FilelistError("empty wav path")
    if not text:
        raise FilelistError("empty text")
    if len(fields) == 2:
        return wav, text, None
    try:
        return wav, text, parse_frames(fields[2].strip())
    except ValueError as error:
        raise FilelistError(str(error)) from None


def parse_line(line: str, base_dir: Path, origin: str = "", mel_cfg: MelConfig = MelConfig()) -> Utterance:
    """One filelist line (relative paths against base_dir); a `wav_path|text` line's frames come from
    the clip's header at mel_cfg's rate and hop. FilelistError says what is wrong."""
    wav, text, frames = parse_fields(line)
    path = base_dir / wav
    return Utterance(path, text, header_frames(path, mel_cfg) if frames is None else frames, origin)


def header_frames(path: Path, mel_cfg: MelConfig = MelConfig()) -> int:
    """A clip's mel frames from its header (wav_frames), cached by path, size, mtime and mel settings."""
    try:
        stat = os.stat(path)
        return _cached_frames(str(path), stat.st_size, stat.st_mtime_ns, mel_cfg)
    except (OSError, AudioFormatError) as err:
        raise FilelistError(f"a 'wav_path|text' line's frames come from its clip's header: {err}") from None


@functools.lru_cache(maxsize=1 << 17)
def _cached_frames(path: str, size: int, mtime_ns: int, mel_cfg: MelConfig) -> int:
    return wav_frames(path, mel_cfg)


def read_filelist(path: str | Path, mel_cfg: MelConfig = MelConfig()) -> list[Utterance]:
    """Parse a filelist; blank lines are skipped, any other bad line is an error naming path:line.
    mel_cfg gives the frames of `wav_path|text` lines (from their headers)."""
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
            utterances.append(parse_line(line.rstrip("\n"), path.parent, f"{path}:{number}", mel_cfg))
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
