"""A spoken English corpus made on this machine with eSpeak NG: real words, no download.

The engine (libespeak-ng through ctypes, its voice and rate, why its sample counts are
deterministic) is data/corpora/espeak_engine.py; this module chooses the transcripts, speaks
them on all cores (one engine per worker) and writes the corpus. The words spoken are the
transcript after the project's own front end (`data.text.clean_text`: numbers and abbreviations
expanded), so eSpeak says exactly the words the model reads; the filelists keep the original
transcript, which the dataset cleans again.

Speaking rate. At DEFAULT_RATE_WPM the frame counts follow LJSpeech's over all its transcripts;
eSpeak keeps one pace where LJSpeech's clips stop at 10 s, so its longest utterances are longer
than LJSpeech's. Its leading and trailing silence is already about LJSpeech's, so nothing is
trimmed or added. The measurements behind both choices are in docs/results.md ("The eSpeak corpus"), and
docs/data.md describes the corpus. Every frame count in the filelists depends on the text alone, whatever the worker
count; WAVs are not byte-identical between runs (the engine's wave phase).

Generation runs on all cores, one engine per worker (docs/data.md, "The eSpeak corpus": how long a corpus
takes, how much disk).

Files under out_dir: wavs/<id>.wav (the id of metadata.csv / lengths.tsv, `lineNNNNN` for a
sentence file), train.txt and val.txt (`wavs/<id>.wav|transcript|frames`), synthesis.json (the
settings the WAVs were made with) and manifest.json (written last: the corpus is complete).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path

import numpy as np
from tqdm import tqdm

from data.atomic import atomic_open
from data.audio import AudioFormatError, MelConfig, n_frames, save_wav, wav_info
from data.corpora.errors import CorpusError
from data.corpora.espeak_engine import DEFAULT_RATE_WPM, VOICE, EspeakError, check_rate, loader_version, speak
from data.corpora.generated import is_complete, write_split
from data.filelist import Utterance
from data.text import clean_text, find_unknown_symbols

__all__ = ["Transcript", "choose", "make_espeak_corpus", "read_transcripts"]

FORMAT_VERSION = 1
LJSPEECH_TSV_HEADER = ["id", "samples", "frames", "text"]
_CFG = MelConfig()
_TMP_SUFFIX = ".tmp.wav"  # soundfile picks the format from the suffix
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class Transcript:
    id: str  # names the WAV
    text: str  # as written in the transcripts; the filelist keeps it
    line: int


@dataclass(frozen=True)
class _Job:
    wav_path: Path
    spoken: str  # the cleaned text eSpeak says
    rate_wpm: int


# ---------------------------------------------------------------- transcripts


def _transcript_format(first_line: str) -> str:
    """'tsv' for lengths.tsv (its header), 'metadata' for LJSpeech's `id|text|normalized`, else 'sentences'."""
    if first_line.rstrip("\n").split("\t") == LJSPEECH_TSV_HEADER:
        return "tsv"
    return "metadata" if "|" in first_line else "sentences"


def _parse_metadata(line: str, number: int) -> Transcript:
    """`id|text|normalized text`: the normalized text wins unless empty, as in data/corpora/metadata.py."""
    fields = line.split("|")
    if len(fields) not in (2, 3) or not fields[0].strip():
        raise ValueError("expected 'id|text|normalized text'")
    text = (fields[2].strip() if len(fields) == 3 else "") or fields[1].strip()
    return Transcript(fields[0].strip(), text, number)


def _parse_tsv(line: str, number: int) -> Transcript:
    """`id<TAB>samples<TAB>frames<TAB>text`, the columns of shared/data/ljspeech/lengths.tsv."""
    fields = line.split("\t")
    if len(fields) != 4 or not fields[0].strip():
        raise ValueError(f"expected 4 tab-separated fields {'/'.join(LJSPEECH_TSV_HEADER)}, found {len(fields)}")
    if not (fields[1].strip().isdigit() and fields[2].strip().isdigit()):
        raise ValueError(f"samples and frames must be integers, found {fields[1]!r} and {fields[2]!r}")
    return Transcript(fields[0].strip(), fields[3].strip(), number)


def _parse_sentence(line: str, number: int) -> Transcript:
    """One sentence per line; its WAV is named after the line number. A tab means a TSV whose
    header is missing, whose ids and counts would otherwise be read out as words."""
    if "\t" in line:
        raise ValueError(f"a tab in a sentence (a TSV needs the header {' '.join(LJSPEECH_TSV_HEADER)})")
    return Transcript(f"line{number:05d}", line.strip(), number)


_PARSERS = {"metadata": _parse_metadata, "tsv": _parse_tsv, "sentences": _parse_sentence}


def _text_problem(text: str) -> str | None:
    """Why a text cannot go into the corpus, or None: filelists cannot hold '|', and the model's
    symbol table must cover the cleaned text, which must have a letter for eSpeak to say."""
    if "|" in text:
        return "text contains '|', which a filelist cannot hold"
    cleaned = clean_text(text)
    if not any(ch.isalpha() for ch in cleaned):
        return f"nothing to say: {text!r} has no letters after cleaning"
    unknown = find_unknown_symbols([text])
    return f"characters outside the symbol table after cleaning: {sorted(unknown)}" if unknown else None


def _transcript_problem(transcript: Transcript, seen: dict[str, int]) -> str | None:
    """A bad id (it names a file), a repeated id, or a text problem."""
    if not _SAFE_ID.fullmatch(transcript.id):
        return f"id {transcript.id!r} cannot name a file (letters, digits, '_', '-', '.')"
    if transcript.id in seen:
        return f"duplicate id {transcript.id} (first on line {seen[transcript.id]})"
    return _text_problem(transcript.text)


def read_transcripts(path: str | Path) -> list[Transcript]:
    """Every transcript of a metadata.csv, lengths.tsv or one-sentence-per-line file (the format is
    read from its first line); blank lines are skipped, and all bad lines are reported together."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    numbered = [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]
    if not numbered:
        raise CorpusError.listing(path, [f"{path}: no transcripts"])
    kind = _transcript_format(numbered[0][1])
    if kind == "tsv":
        numbered = numbered[1:]
    transcripts, problems, seen = [], [], {}
    for number, line in numbered:
        try:
            transcript = _PARSERS[kind](line, number)
        except ValueError as err:
            problems.append(f"{path}:{number}: {err}: {line!r}")
            continue
        problem = _transcript_problem(transcript, seen)
        if problem:
            problems.append(f"{path}:{number}: {problem}")
            continue
        seen[transcript.id] = number
        transcripts.append(transcript)
    if problems or not transcripts:
        raise CorpusError.listing(path, problems or [f"{path}: no transcripts"])
    return transcripts


def choose(transcripts: list[Transcript], n_utterances: int | None, seed: int) -> list[Transcript]:
    """A seeded uniform subset in file order, so it keeps the source's length skew; subsets are
    nested (a larger n with the same seed keeps a smaller n's choice), so growing a corpus reuses it."""
    if n_utterances is None:
        return list(transcripts)
    if not 1 <= n_utterances <= len(transcripts):
        raise CorpusError(f"n_utterances must be in [1, {len(transcripts)}] (the transcripts), got {n_utterances}")
    order = list(range(len(transcripts)))
    random.Random(seed).shuffle(order)
    return [transcripts[i] for i in sorted(order[:n_utterances])]


# ---------------------------------------------------------------- the corpus


def _synthesise(job: _Job) -> tuple[str, int]:
    """Pool worker: speak one text and write its WAV atomically; (file name, samples)."""
    wav = speak(job.spoken, job.rate_wpm)
    if len(wav) <= _CFG.n_fft // 2:
        raise EspeakError(f"eSpeak NG said {job.spoken!r} in {len(wav)} samples, too short for a mel spectrogram")
    tmp = job.wav_path.with_name(f".{job.wav_path.stem}.{os.getpid()}{_TMP_SUFFIX}")
    try:
        save_wav(tmp, wav, _CFG.sample_rate)
        os.replace(tmp, job.wav_path)
    finally:
        tmp.unlink(missing_ok=True)
    return job.wav_path.name, len(wav)


def _existing_samples(path: Path) -> int | None:
    """Samples of a WAV a previous run finished (writes are atomic), or None if it must be made."""
    if not path.is_file():
        return None
    try:
        sample_rate, channels, n_samples = wav_info(path)
    except AudioFormatError:
        return None
    return n_samples if (sample_rate, channels) == (_CFG.sample_rate, 1) and n_samples > 0 else None


def _default_workers() -> int:
    """The cores this process may use (a container's share, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _collect(results, bar: tqdm) -> dict[str, int]:
    """Samples per WAV name, advancing the progress bar as each utterance is done."""
    done = {}
    for name, n_samples in results:
        done[name] = n_samples
        bar.update()
    return done


def _run(jobs: list[_Job], workers: int, bar: tqdm) -> dict[str, int]:
    """Samples per WAV name; in this process for one worker, else a pool whose workers each start
    their own engine on their first job (an error there reaches the caller instead of a hang)."""
    if workers <= 1 or len(jobs) <= 1:
        return _collect(map(_synthesise, jobs), bar)
    with Pool(min(workers, len(jobs))) as pool:
        return _collect(pool.imap_unordered(_synthesise, jobs, chunksize=4), bar)


def _synthesise_missing(
    wav_dir: Path, chosen: list[Transcript], rate_wpm: int, workers: int, progress: bool
) -> list[Utterance]:
    """Reuse the WAVs already on disk, synthesise the others in parallel; one Utterance each."""
    n_samples, jobs = {}, []
    for transcript in chosen:
        path = wav_dir / f"{transcript.id}.wav"
        existing = _existing_samples(path)
        if existing is None:
            jobs.append(_Job(path, clean_text(transcript.text), rate_wpm))
        else:
            n_samples[path.name] = existing
    with tqdm(
        total=len(chosen), initial=len(n_samples), desc="eSpeak NG", unit="utt", disable=None if progress else True
    ) as bar:
        n_samples.update(_run(jobs, workers, bar))
    return [
        Utterance(Path("wavs") / f"{t.id}.wav", t.text, n_frames(n_samples[f"{t.id}.wav"], _CFG.hop_length))
        for t in chosen
    ]


def _file_sha256(path: Path) -> str:
    """The transcripts' content, not their path or mtime, decides whether WAVs are still valid."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _synthesis_settings(transcripts: Path, rate_wpm: int) -> dict:
    """Everything a WAV's audio depends on: WAVs made under other settings are never reused."""
    return {
        "format_version": FORMAT_VERSION,
        "espeakng_loader": loader_version(),
        "voice": VOICE,
        "rate_wpm": rate_wpm,
        "sample_rate": _CFG.sample_rate,
        "transcripts_sha256": _file_sha256(transcripts),
    }


def _prepare_wav_dir(out_dir: Path, synthesis: dict) -> Path:
    """wavs/ without temporary files of an interrupted run, and emptied if its WAVs were made
    under other settings; synthesis.json records the settings of the WAVs it holds."""
    wav_dir, record = out_dir / "wavs", out_dir / "synthesis.json"
    wav_dir.mkdir(parents=True, exist_ok=True)
    for stale in wav_dir.glob(f".*{_TMP_SUFFIX}"):
        stale.unlink(missing_ok=True)
    try:
        stored = json.loads(record.read_text())
    except (OSError, ValueError):
        stored = None
    if stored != synthesis:
        for wav in wav_dir.glob("*.wav"):
            wav.unlink()
        with atomic_open(record) as out:
            json.dump(synthesis, out, indent=1)
    return wav_dir


def _remove_unlisted(wav_dir: Path, utterances: list[Utterance]) -> None:
    """WAVs of an earlier, larger or other subset: wavs/ holds exactly the corpus."""
    keep = {u.path.name for u in utterances}
    for wav in wav_dir.glob("*.wav"):
        if wav.name not in keep:
            wav.unlink()


def _write_manifest(out_dir: Path, manifest: dict, utterances: list[Utterance]) -> None:
    """Written last, so that its presence means complete; the length summary is for people."""
    frames = np.array([u.frames for u in utterances])
    quartiles = np.percentile(frames, [25, 50, 75])
    manifest = {
        **manifest,
        "wavs": [u.path.name for u in utterances],
        "frames": {
            "mean": float(frames.mean()),
            "q25": float(quartiles[0]),
            "median": float(quartiles[1]),
            "q75": float(quartiles[2]),
            "min": int(frames.min()),
            "max": int(frames.max()),
        },
    }
    with atomic_open(out_dir / "manifest.json") as out:
        json.dump(manifest, out, indent=1)


def make_espeak_corpus(
    out_dir: str | Path,
    transcripts: str | Path,
    n_utterances: int | None,
    seed: int,
    val_fraction: float = 0.2,
    rate_wpm: int = DEFAULT_RATE_WPM,
    workers: int | None = None,
    progress: bool = True,
) -> tuple[Path, Path]:
    """Write wavs/, train.txt, val.txt, synthesis.json and manifest.json under out_dir and return
    the two filelists; a complete identical corpus is reused, an interrupted one resumed."""
    out_dir, transcripts = Path(out_dir), Path(transcripts)
    train_path, val_path = out_dir / "train.txt", out_dir / "val.txt"
    synthesis = _synthesis_settings(transcripts, rate_wpm)
    manifest = {
        **synthesis,
        "n_utterances": n_utterances,
        "seed": seed,
        "val_fraction": val_fraction,
        "hop_length": _CFG.hop_length,
    }
    if is_complete(out_dir, manifest, train_path, val_path):
        return train_path, val_path

    check_rate(rate_wpm)
    chosen = choose(read_transcripts(transcripts), n_utterances, seed)
    (out_dir / "manifest.json").unlink(missing_ok=True)
    wav_dir = _prepare_wav_dir(out_dir, synthesis)
    utterances = _synthesise_missing(wav_dir, chosen, rate_wpm, workers or _default_workers(), progress)
    _remove_unlisted(wav_dir, utterances)
    write_split(utterances, val_fraction, seed, train_path, val_path, "n_utterances")
    _write_manifest(out_dir, manifest, utterances)
    return train_path, val_path
