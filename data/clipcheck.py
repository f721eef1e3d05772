"""The clip pass of the data check (data/check.py): one clip's existence, container, sample format,
rate, channels, length, frames field, truncation and (float clips only) finite samples, from its
header and a few chunk reads; the audio itself is read only for FLOAT and DOUBLE clips.

Accepted audio: a WAV (or WAVE_FORMAT_EXTENSIBLE) container holding PCM_16, PCM_24, PCM_32, FLOAT or
DOUBLE samples, mono, at the mel sample rate. 8-bit, mu-law, A-law and ADPCM clips are refused
even though libsndfile decodes them: their quantisation noise ends up in the mel targets.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from data.audio import MelConfig, n_frames
from data.filelist import Utterance

SUPPORTED_FORMATS = ("WAV", "WAVEX")
SUPPORTED_SUBTYPES = ("PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE")
_FLOAT_DTYPES = {"FLOAT": "float32", "DOUBLE": "float64"}  # subtypes whose samples can be NaN or infinite


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


@dataclass
class Entry:
    """A line that parses."""

    filelist: str
    line: int
    utt: Utterance
    stat: os.stat_result | None
    frames_given: bool = True  # False: a `wav_path|text` line, whose frames the header gives (check_clip sets them)


@dataclass(frozen=True)
class _Header:
    sample_rate: int
    channels: int
    n_samples: int
    format: str
    subtype: str


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


def check_clip(entry: Entry, mel_cfg: MelConfig, limits: CheckLimits) -> list[Problem]:
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
    if not entry.frames_given:
        entry.utt = dataclasses.replace(utt, frames=frames)
    problems += _check_finite(entry, header, mel_cfg)
    return problems + _check_samples(entry, header.n_samples, mel_cfg) + _check_length(entry, frames, limits, mel_cfg)


def _check_truncated(entry: Entry, header: _Header) -> list[Problem]:
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


def _check_finite(entry: Entry, header: _Header, mel_cfg: MelConfig) -> list[Problem]:
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


def _check_format(entry: Entry, header: _Header, mel_cfg: MelConfig) -> list[Problem]:
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


def _check_samples(entry: Entry, n_samples: int, mel_cfg: MelConfig) -> list[Problem]:
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
    if entry.frames_given and utt.frames != expected:
        problems.append(
            Problem(
                *where,
                f"frames field {utt.frames} does not match {utt.path} ({n_samples} samples)",
                f"regenerate the frames field: it should be 1 + {n_samples} // {hop} = {expected}",
            )
        )
    return problems


def _check_length(entry: Entry, frames: int, limits: CheckLimits, mel_cfg: MelConfig) -> list[Problem]:
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
