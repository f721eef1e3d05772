"""A fast data check of a train/val filelist pair, from WAV headers, before any training starts.

Training finds a bad clip only when a batch reaches it, possibly hours in, and stops at the first
one. This check reads every line and every WAV header and reports EVERY problem at once, one line
each, `FILELIST:LINE: what is wrong; what to do`, so that one round of fixes is enough. Whole-file
problems (a missing or empty filelist) have no line number: `FILELIST: ...`. The audio itself is
read only for float clips (FLOAT, DOUBLE), the only ones that can hold NaN or infinite samples, which
would make every step that meets them skip silently.

Three passes over the lines that parse: the clips (data/clipcheck.py, which says what audio is
accepted), the texts (data/textcheck.py) and duplicates (here). A `wav_path|text` line (NVIDIA's)
takes its frames from the header the clip pass reads.

No pool: the per-clip cost is Python/cffi overhead under the GIL, not I/O, so neither threads nor
processes made header reads faster, and a whole cold check of LJSpeech takes seconds (docs/data.md, "The data
check", and results.md have the figures; scripts/bench/check.py measures them). Texts are checked by
data/textcheck.py, once per distinct text, since inflect's number expansion is the slow part.

With a cache folder, the report is stored under a hash of both filelists, every clip's
(path, size, mtime_ns), the mel settings, the limits and this checker's code; a rerun on unchanged
data costs one stat() per clip. Every line that normalisation rewrote is written beside it,
`rewrites-KEY.txt`, whose path the report's text notes print.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import soundfile as sf
from tqdm import tqdm

from data.atomic import atomic_open
from data.audio import MelConfig
from data.clipcheck import SUPPORTED_FORMATS, SUPPORTED_SUBTYPES, CheckLimits, Entry, Problem, check_clip

# the loader's own parser and encoding: the check accepts what it accepts
from data.filelist import FILELIST_ENCODING, FilelistError, Utterance, parse_fields
from data.textcheck import TextNotes, check_texts

__all__ = [
    "CheckLimits",
    "Problem",
    "FilelistCounts",
    "CheckReport",
    "check_filelists",
    "SUPPORTED_FORMATS",
    "SUPPORTED_SUBTYPES",
]

MAX_SHOWN = 200  # problems printed by error_message(); the rest are counted
# The code that decides the verdict: editing any of it invalidates cached reports.
_HERE = Path(__file__).parent
_CODE_DIGEST = hashlib.sha256(
    b"".join(
        path.read_bytes()
        for path in (
            *(_HERE / name for name in ("audio.py", "filelist.py", "textcheck.py", "clipcheck.py", "check.py")),
            *sorted((_HERE / "text").glob("*.py")),
        )
    )
).hexdigest()
_PARSE_FIX = "write it as wav_path|text|frames or wav_path|text (non-empty text without '|', frames a positive integer)"


@dataclass(frozen=True)
class FilelistCounts:
    filelist: str
    utterances: int
    frames: int  # sum of the frames fields of the lines that parse
    hours: float


@dataclass
class CheckReport:
    problems: list[Problem]
    counts: list[FilelistCounts]  # train, then val
    text: TextNotes = field(default_factory=TextNotes)  # rewritten lines, dropped characters
    from_cache: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    def error_message(self) -> str:
        """'N problem(s) in the data:' then one line per problem (the first MAX_SHOWN, the rest counted)."""
        lines = [f"{len(self.problems)} problem(s) in the data:"]
        lines += [f"  {problem}" for problem in self.problems[:MAX_SHOWN]]
        if len(self.problems) > MAX_SHOWN:
            lines.append(f"  ... and {len(self.problems) - MAX_SHOWN} more")
        return "\n".join(lines)


@dataclass(frozen=True)
class _Line:
    """A non-blank filelist line and the stat of the wav path it names, from plain strings: this is all a
    cache hit needs, and pathlib objects for 13,100 lines would cost more than the stat calls."""

    number: int
    text: str
    wav: str
    stat: os.stat_result | None


@dataclass
class _Listing:
    name: str
    data: bytes
    lines: list[_Line] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def check_filelists(
    train_path: str | Path,
    val_path: str | Path,
    mel_cfg: MelConfig,
    limits: CheckLimits,
    cache_dir: str | Path | None = None,
    progress: bool = False,
    unknown_chars: str = "error",
) -> CheckReport:
    """Check both filelists and their clips; every problem is reported, none raises. Characters
    outside the symbol table are problems, or (unknown_chars="drop") notes of what is dropped."""
    listings = [_read_listing(Path(train_path)), _read_listing(Path(val_path))]
    if _same_file(Path(train_path), Path(val_path)):
        listings[1].problems.append(
            Problem(
                listings[1].name,
                None,
                f"is the same file as the train filelist {listings[0].name}",
                "give validation its own utterances, e.g. with data.filelist.split_train_val",
            )
        )
        listings[1].lines = []
    if cache_dir is None:
        return _run_checks(listings, mel_cfg, limits, progress, unknown_chars)
    key = _cache_key(listings, mel_cfg, limits, unknown_chars)
    report = _load_cached(Path(cache_dir), key)
    if report is None:
        report = _run_checks(listings, mel_cfg, limits, progress, unknown_chars)
        report.text.rewrites_file = _write_rewrites(Path(cache_dir) / f"rewrites-{key}.txt", report.text.rewrites)
        _save_cached(Path(cache_dir), key, report)
    return report


def _write_rewrites(path: Path, rewrites: list[str]) -> str:
    """Every rewritten line, one a line, FILELIST:LINE: 'raw' -> 'spoken'; the path ("" for none)."""
    if not rewrites:
        return ""
    with atomic_open(path) as out:
        out.writelines(f"{rewrite}\n" for rewrite in rewrites)
    return str(path)


def _run_checks(
    listings: list[_Listing], mel_cfg: MelConfig, limits: CheckLimits, progress: bool, unknown_chars: str
) -> CheckReport:
    problems = [p for listing in listings for p in listing.problems]
    parsed = [_parse(listing, problems) for listing in listings]
    entries = [entry for group in parsed for entry in group]
    no_limit = CheckLimits()
    for entry in tqdm(entries, desc="checking clips", unit="clip", disable=None if progress else True):
        # the length limit is the training batches' (validation runs unpacked batches of its own size)
        problems += check_clip(entry, mel_cfg, limits if entry.filelist == listings[0].name else no_limit)
    text_problems, notes = check_texts(((e.filelist, e.line, e.utt.text) for e in entries), unknown_chars)
    problems += [Problem(*problem) for problem in text_problems]
    problems += _check_duplicates(entries)
    order = {listing.name: i for i, listing in enumerate(listings)}
    ranked = sorted((order[p.filelist], p.line or 0, i) for i, p in enumerate(problems))  # stable: i breaks ties
    problems = [problems[i] for _, _, i in ranked]
    counts = [_counts(listing.name, group, mel_cfg) for listing, group in zip(listings, parsed)]
    return CheckReport(problems, counts, notes)


def _read_listing(path: Path) -> _Listing:
    """The non-blank lines as read_filelist sees them (UTF-8 with or without a byte-order mark,
    universal newlines: LF, CRLF or CR), each with its wav's stat."""
    name = str(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        return _Listing(
            name,
            b"",
            problems=[Problem(name, None, f"cannot be read: {err}", "pass the path of a UTF-8 filelist that exists")],
        )
    try:
        content = data.decode(FILELIST_ENCODING)
    except UnicodeDecodeError as err:
        return _Listing(name, data, problems=[_not_utf8(name, data, err)])
    listing, folder = _Listing(name, data), os.path.dirname(name)
    for number, line in enumerate(io.StringIO(content, newline=None), start=1):
        if line.strip():
            wav = os.path.join(folder, line.split("|", 1)[0].strip())
            listing.lines.append(_Line(number, line.rstrip("\n"), wav, _stat(wav)))
    if not listing.lines:
        listing.problems.append(
            Problem(name, None, "holds no utterances", "list at least one wav_path|text|frames (or wav_path|text) line")
        )
    return listing


def _not_utf8(name: str, data: bytes, err: UnicodeDecodeError) -> Problem:
    """Where the first byte that is not UTF-8 is, and the line as Latin-1 (Windows-1252's base) reads it."""
    number = data.count(b"\n", 0, err.start) + 1
    start = data.rfind(b"\n", 0, err.start) + 1
    end = data.find(b"\n", err.start)
    line = data[start : end if end >= 0 else len(data)].decode("latin-1").rstrip("\r")
    return Problem(
        name,
        number,
        f"is not UTF-8 text (byte 0x{data[err.start]:02x}; as Latin-1 the line reads {line!r})",
        f"convert the filelist to UTF-8, e.g. iconv -f latin1 -t utf-8 {shlex.quote(name)} > utf8.txt "
        "(Latin-1 / Windows-1252 is what most other tools write)",
    )


def _parse(listing: _Listing, problems: list[Problem]) -> list[Entry]:
    """The lines that parse as the loader parses them; the others become problems."""
    entries, folder = [], Path(listing.name).parent
    for line in listing.lines:
        try:
            wav, text, frames = parse_fields(line.text)
            utt = Utterance(folder / wav, text, frames or 0, f"{listing.name}:{line.number}")
            entries.append(Entry(listing.name, line.number, utt, line.stat, frames is not None))
        except FilelistError as err:
            problems.append(Problem(listing.name, line.number, f"{err}: {line.text.rstrip()!r}", _PARSE_FIX))
    return entries


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _check_duplicates(entries: Sequence[Entry]) -> list[Problem]:
    """A clip (the same file, through symlinks and hard links too) or an id (file stem) seen on an earlier line."""
    by_file: dict[object, Entry] = {}
    by_id: dict[str, Entry] = {}
    problems = []
    for entry in entries:
        path, stem = entry.utt.path, entry.utt.path.stem
        ident = (entry.stat.st_dev, entry.stat.st_ino) if entry.stat else os.path.abspath(path)
        if ident in by_file:
            problems.append(_duplicate(entry, by_file[ident], f"clip {path}", "remove one of the two lines"))
        elif stem in by_id:
            same = f"id {stem!r} (file stem) of {path} and {by_id[stem].utt.path}"
            problems.append(_duplicate(entry, by_id[stem], same, "rename one of the clips, or remove one line"))
        by_file.setdefault(ident, entry)
        by_id.setdefault(stem, entry)
    return problems


def _duplicate(entry: Entry, first: Entry, same: str, fix: str) -> Problem:
    if first.filelist == entry.filelist:
        return Problem(entry.filelist, entry.line, f"duplicate {same}, already at line {first.line}", fix)
    return Problem(
        entry.filelist,
        entry.line,
        f"train and val overlap: same {same} as {first.filelist}:{first.line}",
        "remove the line from one of the two filelists",
    )


def _counts(name: str, entries: list[Entry], mel_cfg: MelConfig) -> FilelistCounts:
    frames = sum(e.utt.frames for e in entries)
    return FilelistCounts(name, len(entries), frames, frames * mel_cfg.hop_length / mel_cfg.sample_rate / 3600)


def _cache_key(listings: list[_Listing], mel_cfg: MelConfig, limits: CheckLimits, unknown_chars: str) -> str:
    """Everything the verdict depends on: filelists, clips' (path, size, mtime), settings and code."""
    digest = hashlib.sha256(_CODE_DIGEST.encode())
    digest.update(json.dumps([asdict(mel_cfg), asdict(limits), sf.__libsndfile_version__, unknown_chars]).encode())
    for listing in listings:
        digest.update(f"\0{os.path.abspath(listing.name)}\0{len(listing.data)}\0".encode() + listing.data)
        for line in listing.lines:
            st = line.stat
            digest.update(f"{line.wav}|{st and st.st_size}|{st and st.st_mtime_ns}|{st and st.st_ino}\n".encode())
    return digest.hexdigest()[:32]


def _load_cached(cache_dir: Path, key: str) -> CheckReport | None:
    try:
        stored = json.loads((cache_dir / f"check-{key}.json").read_text(encoding="utf-8"))
        if stored["text"]["rewrites_file"] and not os.path.isfile(stored["text"]["rewrites_file"]):
            return None  # the list of rewrites was removed: check again, which writes it again
        return CheckReport(
            [Problem(**p) for p in stored["problems"]],
            [FilelistCounts(**c) for c in stored["counts"]],
            TextNotes(**stored["text"]),
            from_cache=True,
        )
    except (OSError, ValueError, KeyError, TypeError):  # absent or damaged: check again
        return None


def _save_cached(cache_dir: Path, key: str, report: CheckReport) -> None:
    stored = {
        "problems": [asdict(p) for p in report.problems],
        "counts": [asdict(c) for c in report.counts],
        "text": asdict(report.text),
    }
    with atomic_open(cache_dir / f"check-{key}.json") as out:
        json.dump(stored, out)
