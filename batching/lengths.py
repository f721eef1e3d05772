"""Reading utterance lengths (frames) from a filelist, a TSV or a plain list, with errors that point at the line."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import UserError


class LengthsFileError(UserError):
    """A lengths file that cannot be read; the message names the file and the line."""


FORMATS = (
    "a filelist (wav_path|text|frames, no header)",
    "a TSV whose header has a 'frames' column (e.g. LJSpeech's lengths.tsv)",
    "one length in frames per line, no header",
)


def read_lengths(path: str | Path, with_ids: bool = False):
    """Frame counts from `path`, in one of FORMATS, told apart by the first line: a tab makes it a
    TSV, a '|' a filelist, a lone integer one length per line (ids: the line numbers).

    Returns an int64 array, or (array, ids) with with_ids (ids: the wav path or id column).
    Only trailing empty lines are skipped; any other bad line is an error.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()  # a byte-order mark is skipped
    except (OSError, UnicodeDecodeError) as error:
        raise LengthsFileError(f"{path}: cannot read: {error}") from error
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise LengthsFileError(f"{path}: the file is empty")
    if "\t" in lines[0]:
        header = lines[0].split("\t")
        if "frames" not in header:
            raise LengthsFileError(f"{path}:1: TSV header has no 'frames' column (columns: {', '.join(header)})")
        rows = _fields(path, lines[1:], "\t", len(header), first_line=2)
        frames_col, id_col = header.index("frames"), header.index("id") if "id" in header else 0
    elif "|" in lines[0]:
        rows = _fields(path, lines, "|", 3, first_line=1)
        frames_col, id_col = 2, 0
    elif lines[0].strip().isdigit():
        rows = [(number, [str(number), line.strip()]) for number, line in enumerate(lines, start=1)]
        frames_col, id_col = 1, 0
    else:
        raise LengthsFileError(f"{path}:1: {lines[0][:80]!r} is none of the formats read here: {'; '.join(FORMATS)}")
    frames = np.array([_frames(path, number, row[frames_col]) for number, row in rows], dtype=np.int64)
    return (frames, [row[id_col] for _, row in rows]) if with_ids else frames


def _fields(path: Path, lines: list[str], sep: str, expected: int, first_line: int):
    rows = []
    for number, line in enumerate(lines, start=first_line):
        row = line.split(sep)
        if len(row) != expected:
            raise LengthsFileError(
                f"{path}:{number}: expected {expected} {sep!r}-separated fields, found {len(row)}: {line[:80]!r}"
            )
        rows.append((number, row))
    return rows


def _frames(path: Path, number: int, text: str) -> int:
    try:
        return parse_frames(text)
    except ValueError as error:
        raise LengthsFileError(f"{path}:{number}: {error}") from None


def parse_frames(text: str) -> int:
    """A frames field (of a filelist line or a TSV row): a positive integer. The ValueError says what
    is wrong with it; the caller adds where (file and line) in its own error type."""
    try:
        frames = int(text)
    except ValueError:
        raise ValueError(f"frames {text!r} is not an integer") from None
    if frames < 1:
        raise ValueError(f"frames {frames} must be a positive integer")
    return frames
