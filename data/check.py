"""A fast data check of a train/val filelist pair, from WAV headers, before any training starts.

Training finds a bad clip only when a batch reaches it, possibly hours in, and stops at the first
one. This check reads every line and every WAV header and reports EVERY problem at once, one line
each, `FILELIST:LINE: what is wrong; what to do`, so that one round of fixes is enough. Whole-file
problems (a missing or empty filelist) have no line number: `FILELIST: ...`. The audio itself is
read only for float clips (FLOAT, DOUBLE), the only ones that can hold NaN or infinite samples, which
would make every step that meets them skip silently.

Accepted audio: a WAV (or WAVE_FORMAT_EXTENSIBLE) container holding PCM_16, PCM_24, PCM_32, FLOAT or
DOUBLE samples, mono, at the mel sample rate. 8-bit, mu-law, A-law and ADPCM clips are refused
even though libsndfile decodes them: their quantisation noise ends up in the mel targets.

No pool: the per-clip cost is Python/cffi overhead under the GIL, not I/O, so neither threads nor
processes made header reads faster, and a whole cold check of LJSpeech takes seconds (docs/data.md, "The data
check", and results.md have the figures; scripts/bench/check.py measures them). Texts are checked by
data/textcheck.py, once per distinct text, since inflect's number expansion is the slow part.

With a cache folder, the report is stored under a hash of both filelists, every clip's
(path, size, mtime_ns), the mel settings, the limits and this checker's code; a rerun on unchanged
data costs one stat() per clip.
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

import numpy as np
import soundfile as sf
from tqdm import tqdm

from data.atomic import atomic_open
from data.audio import MelConfig, n_frames

# the loader's own parser and encoding: the check accepts what it accepts
from data.filelist import FILELIST_ENCODING, FilelistError, Utterance, parse_line
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

SUPPORTED_FORMATS = ("WAV", "WAVEX")
SUPPORTED_SUBTYPES = ("PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE")
_FLOAT_DTYPES = {"FLOAT": "float32", "DOUBLE": "float64"}  # subtypes whose samples can be NaN or infinite
MAX_SHOWN = 200  # problems printed by error_message(); the rest are counted
# The code that decides the verdict: editing any of it invalidates cached reports.
_HERE = Path(__file__).parent
_CODE_DIGEST = hashlib.sha256(
    b"".join(
        path.read_bytes()
        for path in (
            *(_HERE / name for name in ("audio.py", "filelist.py", "textcheck.py", "check.py")),
            *sorted((_HERE / "text").glob("*.py")),
        )
    )
).hexdigest()
_PARSE_FIX = "write it as wav_path|text|frames (3 fields, non-empty text without '|', frames a positive integer)"


@dataclass(frozen=True)
class CheckLimits:
    """The longest training utterance the batching takes, decided by the caller, and why (for the
    message); it applies to the train filelist only."""

    max_frames: int | None = None
    source: str = "no limit"


@dataclass(frozen=True)
class Problem:
    filelist: str
    line: int | None  # None: the whole filelist
    what: str
    fix: str

    def __str__(self) -> str:
        where = self.filelist if self.line is None else f"{self.filelist}:{self.line}"
        return f"{where}: {self.what}; {self.fix}"


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


@dataclass
class _Entry:
    """A line that parses."""

    filelist: str
    line: int
    utt: Utterance
    stat: os.stat_result | None


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


@dataclass(frozen=True)
class _Header:
    sample_rate: int
    channels: int
    n_samples: int
    format: str
    subtype: str


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
        _save_cached(Path(cache_dir), key, report)
    return report


def _run_checks(
    listings: list[_Listing], mel_cfg: MelConfig, limits: CheckLimits, progress: bool, unknown_chars: str
) -> CheckReport:
    problems = [p for listing in listings for p in listing.problems]
    parsed = [_parse(listing, problems) for listing in listings]
    entries = [entry for group in parsed for entry in group]
    no_limit = CheckLimits()
    for entry in tqdm(entries, desc="checking clips", unit="clip", disable=None if progress else True):
        # the length limit is the training batches' (validation runs unpacked batches of its own size)
        problems += _check_clip(entry, mel_cfg, limits if entry.filelist == listings[0].name else no_limit)
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
            Problem(name, None, "holds no utterances", "list at least one wav_path|text|frames line")
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


def _parse(listing: _Listing, problems: list[Problem]) -> list[_Entry]:
    """The lines that parse as the loader parses them; the others become problems."""
    entries, folder = [], Path(listing.name).parent
    for line in listing.lines:
        try:
            entries.append(_Entry(listing.name, line.number, parse_line(line.text, folder), line.stat))
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


def _read_header(path: Path) -> _Header | str:
    """The header fields, or libsndfile's reason for refusing the file; the audio is not decoded."""
    try:
        with sf.SoundFile(str(path)) as wav:
            return _Header(wav.samplerate, wav.channels, wav.frames, wav.format, wav.subtype)
    except (RuntimeError, OSError) as err:  # sf.LibsndfileError is a RuntimeError
        return str(err)


def _convert(path: Path, mel_cfg: MelConfig) -> str:
    """The ffmpeg command that turns any clip into what the loader expects."""
    return f"ffmpeg -i {shlex.quote(str(path))} -ar {mel_cfg.sample_rate} -ac 1 -c:a pcm_s16le fixed.wav"


def _check_clip(entry: _Entry, mel_cfg: MelConfig, limits: CheckLimits) -> list[Problem]:
    """Existence, format, rate, channels, length and the frames field of one clip, from its header."""
    utt, where = entry.utt, (entry.filelist, entry.line)
    if entry.stat is None:
        folder = Path(entry.filelist).parent
        return [
            Problem(
                *where,
                f"clip {utt.path} not found",
                f"fix the path (a relative one starts at the filelist's folder, {folder}) or restore the file",
            )
        ]
    if entry.stat.st_size == 0:
        return [
            Problem(
                *where,
                f"{utt.path} is an empty file (0 bytes; a failed export or copy)",
                "export or copy the clip again from its source, or remove the line",
            )
        ]
    header = _read_header(utt.path)
    if isinstance(header, str):
        return [
            Problem(
                *where,
                f"cannot read the header of {utt.path} ({header})",
                f"replace the file, or convert it: {_convert(utt.path, mel_cfg)}",
            )
        ]
    problems = _check_format(entry, header, mel_cfg) + _check_truncated(entry, header)
    if header.sample_rate != mel_cfg.sample_rate:  # its sample count means nothing until it is resampled
        return problems + _check_length(entry, utt.frames, limits, mel_cfg)
    frames = n_frames(header.n_samples, mel_cfg.hop_length)
    problems += _check_finite(entry, header, mel_cfg)
    return problems + _check_samples(entry, header.n_samples, mel_cfg) + _check_length(entry, frames, limits, mel_cfg)


def _check_truncated(entry: _Entry, header: _Header) -> list[Problem]:
    """A RIFF WAV whose data chunk declares more bytes than the file holds: an export cut off
    (libsndfile then reads what is there, so the clip would silently lose its end)."""
    declared = _declared_data(entry.utt.path)
    if declared is None:
        return []
    offset, size, block_align = declared
    if size in (0, 0xFFFFFFFF) or size <= entry.stat.st_size - offset or not block_align:  # 0, ~0: streamed
        return []
    return [
        Problem(
            entry.filelist,
            entry.line,
            f"{entry.utt.path} is cut short: its header declares {size // block_align} samples, the file "
            f"holds {header.n_samples} (a truncated export or copy)",
            "export or copy the clip again from its source, or remove the line",
        )
    ]


def _declared_data(path: Path) -> tuple[int, int, int] | None:
    """(offset, declared size in bytes, bytes per sample frame) of a RIFF WAV's data chunk, from the
    chunk headers alone (a few small reads); None for anything else."""
    try:
        with open(path, "rb") as wav:
            if wav.read(12)[8:] != b"WAVE":
                return None
            block_align = 0
            while len(head := wav.read(8)) == 8:
                chunk, size = head[:4], int.from_bytes(head[4:], "little")
                if chunk == b"data":
                    return wav.tell(), size, block_align
                if chunk == b"fmt ":
                    block_align = int.from_bytes(wav.read(14)[12:14], "little")
                    size -= 14
                wav.seek(size + (size & 1), os.SEEK_CUR)
    except OSError:
        return None
    return None


def _check_finite(entry: _Entry, header: _Header, mel_cfg: MelConfig) -> list[Problem]:
    """NaN or infinite samples of a float clip (a broken export), with the time of the first."""
    dtype = _FLOAT_DTYPES.get(header.subtype)
    if dtype is None or header.format not in SUPPORTED_FORMATS:
        return []
    try:
        samples, _ = sf.read(str(entry.utt.path), dtype=dtype, always_2d=True)
    except (RuntimeError, OSError) as err:
        return [
            Problem(
                entry.filelist,
                entry.line,
                f"cannot read the audio of {entry.utt.path} ({err})",
                f"replace the file, or convert it: {_convert(entry.utt.path, mel_cfg)}",
            )
        ]
    bad = ~np.isfinite(samples).all(axis=1)
    if not bad.any():
        return []
    first = int(np.argmax(bad)) / header.sample_rate
    return [
        Problem(
            entry.filelist,
            entry.line,
            f"{entry.utt.path} holds {int(bad.sum())} NaN or infinite sample(s), the first at {first:.3f} s "
            "(a broken float export; training would skip every step that meets it)",
            "re-export the clip from its source, or remove the line",
        )
    ]


def _check_format(entry: _Entry, header: _Header, mel_cfg: MelConfig) -> list[Problem]:
    path, where, command = entry.utt.path, (entry.filelist, entry.line), _convert(entry.utt.path, mel_cfg)
    problems = []
    if header.format not in SUPPORTED_FORMATS or header.subtype not in SUPPORTED_SUBTYPES:
        problems.append(
            Problem(
                *where,
                f"{path} holds {header.format}/{header.subtype} audio, not a WAV of {', '.join(SUPPORTED_SUBTYPES)}",
                f"convert it: {command}",
            )
        )
    if header.channels != 1:
        problems.append(
            Problem(*where, f"{path} has {header.channels} channels, expected mono", f"mix it down to mono: {command}")
        )
    if header.sample_rate != mel_cfg.sample_rate:
        problems.append(
            Problem(
                *where,
                f"{path} is at {header.sample_rate} Hz, expected {mel_cfg.sample_rate} Hz",
                f"resample it, then regenerate its frames field: {command}",
            )
        )
    return problems


def _check_samples(entry: _Entry, n_samples: int, mel_cfg: MelConfig) -> list[Problem]:
    """The frames field against the header, and the STFT's minimum length (reflect padding)."""
    utt, where, hop = entry.utt, (entry.filelist, entry.line), mel_cfg.hop_length
    problems = []
    if n_samples <= mel_cfg.n_fft // 2:
        problems.append(
            Problem(
                *where,
                f"{utt.path} has only {n_samples} samples, too short for the reflect padding "
                f"of a {mel_cfg.n_fft}-point STFT (needs more than {mel_cfg.n_fft // 2})",
                "remove the line",
            )
        )
    expected = n_frames(n_samples, hop)
    if utt.frames != expected:
        problems.append(
            Problem(
                *where,
                f"frames field {utt.frames} does not match {utt.path} ({n_samples} samples)",
                f"regenerate the frames field: it should be 1 + {n_samples} // {hop} = {expected}",
            )
        )
    return problems


def _check_length(entry: _Entry, frames: int, limits: CheckLimits, mel_cfg: MelConfig) -> list[Problem]:
    if limits.max_frames is None or frames <= limits.max_frames:
        return []
    seconds = frames * mel_cfg.hop_length / mel_cfg.sample_rate
    return [
        Problem(
            entry.filelist,
            entry.line,
            f"{entry.utt.path} is {frames} frames ({seconds:.1f} s), longer than the {limits.max_frames} "
            f"allowed by {limits.source}",
            "split the clip or remove the line, or raise the bound",
        )
    ]


def _check_duplicates(entries: Sequence[_Entry]) -> list[Problem]:
    """A clip (the same file, through symlinks and hard links too) or an id (file stem) seen on an earlier line."""
    by_file: dict[object, _Entry] = {}
    by_id: dict[str, _Entry] = {}
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


def _duplicate(entry: _Entry, first: _Entry, same: str, fix: str) -> Problem:
    if first.filelist == entry.filelist:
        return Problem(entry.filelist, entry.line, f"duplicate {same}, already at line {first.line}", fix)
    return Problem(
        entry.filelist,
        entry.line,
        f"train and val overlap: same {same} as {first.filelist}:{first.line}",
        "remove the line from one of the two filelists",
    )


def _counts(name: str, entries: list[_Entry], mel_cfg: MelConfig) -> FilelistCounts:
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
