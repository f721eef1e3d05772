"""A spoken English corpus made on this machine with eSpeak NG: real words, no download.

eSpeak NG (libespeak-ng and its voice data, shipped by the PyPI package `espeakng-loader`) is
driven through ctypes in synchronous mode: a synth callback collects its 16-bit samples at the
library's native 22,050 Hz, LJSpeech's rate, so nothing is resampled. The words spoken are the
transcript after the project's own front end (`data.text.clean_text`: numbers and abbreviations
expanded), so eSpeak says exactly the words the model reads; the filelists keep the original
transcript, which the dataset cleans again.

Speaking rate. DEFAULT_RATE_WPM = 140 words per minute (eSpeak's own default is 175) was fitted so
the frame counts (`1 + n_samples // hop`) follow LJSpeech's over all its transcripts; eSpeak keeps
one pace where LJSpeech's clips stop at 10 s, so its longest utterances are longer than LJSpeech's.
Its leading and trailing silence is already about LJSpeech's, so nothing is trimmed or added. The
measurements behind both choices are in the README ("Data pipeline", the spoken corpus).

Determinism. Some of libespeak-ng's internal state outlives an utterance, and no API call resets
it. The phase of its pitch flutter changes the next utterances' durations, so the voice is en-us
with flutter off (`steady`, a variant this module adds); its breath noise, seeded from the clock,
is reseeded for every utterance. Sample counts, and so
every frame count in the filelists, then depend on the text alone (checked on 1,500 transcripts in
shuffled orders), whatever the worker count; the samples themselves still differ slightly (wave
phase) with what the process said before, so WAVs are not byte-identical between runs.

Generation runs on all cores, one engine per worker (README: how long a corpus takes, how much disk).

Files under out_dir: wavs/<id>.wav (the id of metadata.csv / lengths.tsv, `lineNNNNN` for a
sentence file), train.txt and val.txt (`wavs/<id>.wav|transcript|frames`), synthesis.json (the
settings the WAVs were made with) and manifest.json (written last: the corpus is complete).

Licence: libespeak-ng and its data are GPL-3.0-or-later (espeakng-loader's wheel bundles them and
declares no licence of its own); this module only loads the library at run time.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import random
import re
import tempfile
from dataclasses import dataclass
from importlib import metadata
from multiprocessing import Pool
from pathlib import Path

import numpy as np
from tqdm import tqdm

from batching.errors import UserError
from data.atomic import atomic_open
from data.audio import AudioFormatError, MelConfig, n_frames, save_wav, wav_info
from data.corpora.generated import is_complete, write_split
from data.corpora.ljspeech import DataPreparationError
from data.filelist import Utterance
from data.text import clean_text, find_unknown_symbols

__all__ = ["DEFAULT_RATE_WPM", "EspeakError", "Transcript", "TranscriptError", "choose", "loader_version",
           "make_espeak_corpus", "read_transcripts", "speak"]

FORMAT_VERSION = 1
VARIANT = "steady"  # written by _steady_data: en-us without pitch flutter
VOICE = f"en-us+{VARIANT}"
DEFAULT_RATE_WPM = 140
MIN_RATE_WPM, MAX_RATE_WPM = 80, 450  # espeakRATE_MINIMUM / espeakRATE_MAXIMUM in speak_lib.h
LJSPEECH_TSV_HEADER = ["id", "samples", "frames", "text"]
_CFG = MelConfig()
_TMP_SUFFIX = ".tmp.wav"  # soundfile picks the format from the suffix
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")

# Constants of eSpeak NG's C API (speak_lib.h).
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000  # report missing data with an error code instead of exit()
_ESPEAK_RATE = 1
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_EE_OK = 0
_NOISE_SEED = 1
_SYNTH_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)


class EspeakError(RuntimeError):
    """eSpeak NG is missing, failed to start, or reported an error."""


class TranscriptError(DataPreparationError):
    """Transcript lines that cannot be spoken; `problems` names each one's file:line."""


@dataclass(frozen=True)
class Transcript:
    id: str  # names the WAV
    text: str  # as written in the transcripts; the filelist keeps it
    line: int


@dataclass
class _Engine:
    """One initialised libespeak-ng per process, and the chunks its callback has collected."""
    lib: ctypes.CDLL
    chunks: list[np.ndarray]


@dataclass(frozen=True)
class _Job:
    wav_path: Path
    spoken: str  # the cleaned text eSpeak says
    rate_wpm: int


_ENGINE: _Engine | None = None


def _collect_samples(samples, n_samples: int, events) -> int:
    """Synth callback: copy each chunk out now, as eSpeak reuses its buffer; 0 means go on."""
    if samples and n_samples > 0:
        _ENGINE.chunks.append(np.ctypeslib.as_array(samples, shape=(n_samples,)).copy())
    return 0


# Module level, so the C function pointer stays alive as long as the library may call it.
_CALLBACK = _SYNTH_CALLBACK(_collect_samples)


def _loader():
    """The espeakng_loader module, or an error that says how to install it."""
    try:
        import espeakng_loader
    except ImportError as err:
        raise EspeakError("eSpeak NG comes from the PyPI package espeakng-loader: "
                          "pip install -r requirements.txt") from err
    return espeakng_loader


def loader_version() -> str:
    """The installed espeakng-loader version: a different one may speak differently."""
    try:
        return metadata.version("espeakng-loader")
    except metadata.PackageNotFoundError:
        _loader()  # raises the error that says how to install it
        raise


def _declare(lib: ctypes.CDLL) -> None:
    """Argument and result types, so ctypes passes size_t and pointers correctly on 64-bit."""
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.espeak_SetSynthCallback.argtypes = [_SYNTH_CALLBACK]
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
    lib.espeak_Synth.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                 ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]


def _steady_data(package_data: Path, into: Path) -> Path:
    """The package's espeak-ng-data (linked, not copied) plus our voice variant `steady`: pitch
    flutter off. Flutter's phase is a static inside libespeak-ng that nothing resets, so with it on
    an utterance's samples depend on everything the process said before; without it, on its text."""
    data = into / "espeak-ng-data"
    variants = data / "voices" / "!v"
    variants.mkdir(parents=True)
    for entry in package_data.iterdir():
        if entry.name != "voices":
            (data / entry.name).symlink_to(entry)
    for entry in (package_data / "voices").iterdir():
        if entry.name != "!v":
            (data / "voices" / entry.name).symlink_to(entry)
    (variants / VARIANT).write_text(f"language variant\nname {VARIANT}\nflutter 0\n")
    return data


def _start(lib: ctypes.CDLL, data_path: Path) -> None:
    """Initialise in synchronous mode from data_path and select the voice; check the sample rate."""
    sample_rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, str(data_path).encode(), _INITIALIZE_DONT_EXIT)
    if sample_rate <= 0:
        raise EspeakError(f"espeak_Initialize failed (code {sample_rate}) with data at {data_path}")
    if sample_rate != _CFG.sample_rate:
        raise EspeakError(f"eSpeak NG synthesises at {sample_rate} Hz, the project needs {_CFG.sample_rate} Hz")
    lib.espeak_SetSynthCallback(_CALLBACK)
    status = lib.espeak_SetVoiceByName(VOICE.encode())
    if status != _EE_OK:
        raise EspeakError(f"eSpeak NG cannot load voice {VOICE!r} from {data_path} (code {status})")


def _initialise() -> _Engine:
    """libespeak-ng with the package's data and the voice loaded. The data view is temporary, as
    eSpeak reads all it needs (phonemes, the English dictionary, the voice) while starting, and
    short: libespeak-ng cuts its data path at 160 characters, which a deep virtualenv can exceed."""
    loader = _loader()
    lib = ctypes.CDLL(loader.get_library_path())
    _declare(lib)
    with tempfile.TemporaryDirectory(prefix="espeak-ng-data-") as tmp:
        _start(lib, _steady_data(Path(loader.get_data_path()), Path(tmp)))
    return _Engine(lib, [])


def _engine() -> _Engine:
    """This process's engine, initialised on first use (a pool worker initialises its own)."""
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = _initialise()
    return _ENGINE


def _check_rate(rate_wpm: int) -> None:
    """eSpeak clamps a rate outside its range silently; say so instead."""
    if not MIN_RATE_WPM <= rate_wpm <= MAX_RATE_WPM:
        raise UserError(f"rate_wpm must be in [{MIN_RATE_WPM}, {MAX_RATE_WPM}], got {rate_wpm}")


def speak(text: str, rate_wpm: int = DEFAULT_RATE_WPM) -> np.ndarray:
    """Float32 mono samples at 22,050 Hz of eSpeak NG (en-us) saying `text` as given."""
    _check_rate(rate_wpm)
    engine = _engine()
    status = engine.lib.espeak_SetParameter(_ESPEAK_RATE, int(rate_wpm), 0)
    if status != _EE_OK:
        raise EspeakError(f"espeak_SetParameter(rate={rate_wpm}) failed (code {status})")
    engine.chunks.clear()
    engine.lib.espeak_ng_SetRandSeed(_NOISE_SEED)  # the breath noise, else seeded from the clock
    data = text.encode("utf-8")
    status = engine.lib.espeak_Synth(data, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None)
    if status != _EE_OK:
        raise EspeakError(f"espeak_Synth failed (code {status}) on {text!r}")
    samples = np.concatenate(engine.chunks) if engine.chunks else np.zeros(0, np.int16)
    engine.chunks.clear()
    return samples.astype(np.float32) / 32768.0


# ---------------------------------------------------------------- transcripts


def _transcript_format(first_line: str) -> str:
    """'tsv' for lengths.tsv (its header), 'metadata' for LJSpeech's `id|text|normalized`, else 'sentences'."""
    if first_line.rstrip("\n").split("\t") == LJSPEECH_TSV_HEADER:
        return "tsv"
    return "metadata" if "|" in first_line else "sentences"


def _parse_metadata(line: str, number: int) -> Transcript:
    """`id|text|normalized text`: the normalized text wins unless empty, as in data/corpora/ljspeech.py."""
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
        raise TranscriptError(path, [f"{path}: no transcripts"])
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
        raise TranscriptError(path, problems or [f"{path}: no transcripts"])
    return transcripts


def choose(transcripts: list[Transcript], n_utterances: int | None, seed: int) -> list[Transcript]:
    """A seeded uniform subset in file order, so it keeps the source's length skew; subsets are
    nested (a larger n with the same seed keeps a smaller n's choice), so growing a corpus reuses it."""
    if n_utterances is None:
        return list(transcripts)
    if not 1 <= n_utterances <= len(transcripts):
        raise UserError(f"n_utterances must be in [1, {len(transcripts)}] (the transcripts), got {n_utterances}")
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


def _synthesise_missing(wav_dir: Path, chosen: list[Transcript], rate_wpm: int, workers: int,
                        progress: bool) -> list[Utterance]:
    """Reuse the WAVs already on disk, synthesise the others in parallel; one Utterance each."""
    n_samples, jobs = {}, []
    for transcript in chosen:
        path = wav_dir / f"{transcript.id}.wav"
        existing = _existing_samples(path)
        if existing is None:
            jobs.append(_Job(path, clean_text(transcript.text), rate_wpm))
        else:
            n_samples[path.name] = existing
    with tqdm(total=len(chosen), initial=len(n_samples), desc="eSpeak NG", unit="utt",
              disable=None if progress else True) as bar:
        n_samples.update(_run(jobs, workers, bar))
    return [Utterance(Path("wavs") / f"{t.id}.wav", t.text, n_frames(n_samples[f"{t.id}.wav"], _CFG.hop_length))
            for t in chosen]


def _file_sha256(path: Path) -> str:
    """The transcripts' content, not their path or mtime, decides whether WAVs are still valid."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _synthesis_settings(transcripts: Path, rate_wpm: int) -> dict:
    """Everything a WAV's audio depends on: WAVs made under other settings are never reused."""
    return {"format_version": FORMAT_VERSION, "espeakng_loader": loader_version(), "voice": VOICE,
            "rate_wpm": rate_wpm, "sample_rate": _CFG.sample_rate, "transcripts_sha256": _file_sha256(transcripts)}


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
    manifest = {**manifest, "wavs": [u.path.name for u in utterances],
                "frames": {"mean": float(frames.mean()), "q25": float(quartiles[0]), "median": float(quartiles[1]),
                           "q75": float(quartiles[2]), "min": int(frames.min()), "max": int(frames.max())}}
    with atomic_open(out_dir / "manifest.json") as out:
        json.dump(manifest, out, indent=1)


def make_espeak_corpus(out_dir: str | Path, transcripts: str | Path, n_utterances: int | None, seed: int,
                       val_fraction: float = 0.2, rate_wpm: int = DEFAULT_RATE_WPM, workers: int | None = None,
                       progress: bool = True) -> tuple[Path, Path]:
    """Write wavs/, train.txt, val.txt, synthesis.json and manifest.json under out_dir and return
    the two filelists; a complete identical corpus is reused, an interrupted one resumed."""
    out_dir, transcripts = Path(out_dir), Path(transcripts)
    train_path, val_path = out_dir / "train.txt", out_dir / "val.txt"
    synthesis = _synthesis_settings(transcripts, rate_wpm)
    manifest = {**synthesis, "n_utterances": n_utterances, "seed": seed, "val_fraction": val_fraction,
                "hop_length": _CFG.hop_length}
    if is_complete(out_dir, manifest, train_path, val_path):
        return train_path, val_path

    _check_rate(rate_wpm)
    chosen = choose(read_transcripts(transcripts), n_utterances, seed)
    (out_dir / "manifest.json").unlink(missing_ok=True)
    wav_dir = _prepare_wav_dir(out_dir, synthesis)
    utterances = _synthesise_missing(wav_dir, chosen, rate_wpm, workers or _default_workers(), progress)
    _remove_unlisted(wav_dir, utterances)
    write_split(utterances, val_fraction, seed, train_path, val_path, "n_utterances")
    _write_manifest(out_dir, manifest, utterances)
    return train_path, val_path
