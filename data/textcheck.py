"""The text part of the data check: what each line will be read as, and what cannot be said.

A text the cleaner cannot read, one empty after cleaning, one with phonemes in braces (NVIDIA's
ARPAbet) or (unknown_chars=error) one with characters outside the symbol table is a problem of its
line. Otherwise the check notes, for `train.py --check` and the run's log, every line that
normalisation rewrote (the first few are shown, all of them written to a file by data/check.py)
and, with unknown_chars=drop, every dropped character with the lines it was dropped from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from data.text import PUNCTUATION, arpabet_in, arpabet_problem, clean_text, unknown_in

MAX_EXAMPLES = 5  # rewritten lines shown by TextNotes.lines(); all are in rewrites_file
MAX_PLACES = 5  # lines named per dropped character; the rest are counted
_SPACES = re.compile(r"\s+")


@dataclass
class TextNotes:
    """What the check found usable but worth telling: rewritten lines and dropped characters."""

    rewrites: list[str] = field(default_factory=list)  # every "FILELIST:LINE: 'raw' -> 'spoken'"
    dropped: dict[str, list[str]] = field(default_factory=dict)  # character -> ["FILELIST:LINE", ...]
    rewrites_file: str = ""  # where all the rewrites are written (data/check.py: beside its cached report)

    def lines(self) -> list[str]:
        out = []
        if self.rewrites:
            shown = self.rewrites[:MAX_EXAMPLES]
            where = f"all of them in {self.rewrites_file}" if self.rewrites_file else "set mel_cache_dir to list all"
            out.append(
                f"text: normalisation rewrote {len(self.rewrites)} line(s) (numbers, symbols, abbreviations...); "
                f"the first {len(shown)} ({where}):"
            )
            out += [f"  {rewrite}" for rewrite in shown]
        if self.dropped:
            total = sum(len(places) for places in self.dropped.values())
            out.append(
                f"text: unknown_chars=drop drops {len(self.dropped)} unknown character(s), {total} time(s) "
                f"(once per line that holds it):"
            )
            for char, places in sorted(self.dropped.items()):
                more = f" and {len(places) - MAX_PLACES} more" if len(places) > MAX_PLACES else ""
                out.append(f"  {char!r} in {len(places)} line(s): {', '.join(places[:MAX_PLACES])}{more}")
        return out


@dataclass(frozen=True)
class Reading:
    """One distinct raw text, read once (inflect is slow): what it becomes and what is wrong."""

    spoken: str
    unknown: tuple[str, ...]
    problem: tuple[str, str] | None  # (what is wrong, what to do)


def read_text(raw: str, unknown_chars: str) -> Reading:
    spans = arpabet_in(raw)
    if spans:  # whatever unknown_chars says: dropping the braces would read the phonemes as letters
        return Reading("", (), arpabet_problem(spans))
    try:
        spoken = clean_text(raw)
    except Exception as err:  # inflect raises its own exception classes (e.g. NumOutOfRangeError)
        return Reading(
            "", (), (f"the text cleaner fails on {raw!r}: {type(err).__name__} {err}", "write the number in words")
        )
    unknown = tuple(unknown_in(spoken))
    problem = None
    if not spoken or (unknown_chars == "drop" and not spoken.strip("".join(unknown) + " ")):
        problem = (f"text {raw!r} is empty after cleaning", "write out what is said, in words")
    elif unknown and unknown_chars == "error":
        problem = (
            f"unknown characters {', '.join(map(repr, unknown))} after cleaning (cleaned text {spoken!r})",
            f"spell them out in words or remove them (known: a-z, space and {PUNCTUATION.strip()}), "
            f"or set unknown_chars=drop",
        )
    return Reading(spoken, unknown, problem)


def rewritten(raw: str, spoken: str) -> bool:
    """Whether normalisation changed more than letter case and spacing."""
    return _SPACES.sub(" ", raw.lower()).strip() != spoken


def check_texts(
    lines: Iterable[tuple[str, int, str]], unknown_chars: str
) -> tuple[list[tuple[str, int, str, str]], TextNotes]:
    """(filelist, line, raw text) of each parsed line -> ([(filelist, line, what, fix)], notes)."""
    readings: dict[str, Reading] = {}
    problems, notes = [], TextNotes()
    for filelist, number, raw in lines:
        if raw not in readings:
            readings[raw] = read_text(raw, unknown_chars)
        reading, where = readings[raw], f"{filelist}:{number}"
        if reading.problem:
            problems.append((filelist, number, *reading.problem))
            continue
        if rewritten(raw, reading.spoken):
            notes.rewrites.append(f"{where}: {raw!r} -> {reading.spoken!r}")
        for char in reading.unknown:
            notes.dropped.setdefault(char, []).append(where)
    return problems, notes
