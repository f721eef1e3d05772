"""The eSpeak NG engine driver: libespeak-ng (and its voice data, shipped by the PyPI package
`espeakng-loader`) driven through ctypes in synchronous mode; `speak` returns what it says.

A synth callback collects its 16-bit samples at the library's native 22,050 Hz, LJSpeech's rate,
so nothing is resampled. One engine per process, initialised on first use (a pool worker
initialises its own).

Determinism. Some of libespeak-ng's internal state outlives an utterance, and no API call resets
it. The phase of its pitch flutter changes the next utterances' durations, so the voice is en-us
with flutter off (`steady`, a variant this module adds); its breath noise, seeded from the clock,
is reseeded for every utterance. Sample counts then depend on the text alone (checked on 1,500
transcripts in shuffled orders), whatever the worker count; the samples themselves still differ
slightly (wave phase) with what the process said before.

Speaking rate. DEFAULT_RATE_WPM = 140 words per minute (eSpeak's own default is 175) was fitted so
the frame counts (`1 + n_samples // hop`) follow LJSpeech's over all its transcripts (the corpus
built from it: data/corpora/espeak.py).

Licence: libespeak-ng and its data are GPL-3.0-or-later (espeakng-loader's wheel bundles them and
declares no licence of its own); this module only loads the library at run time.
"""

from __future__ import annotations

import ctypes
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from batching.errors import UserError
from data.audio import MelConfig

__all__ = ["DEFAULT_RATE_WPM", "EspeakError", "VOICE", "check_rate", "loader_version", "speak"]

VARIANT = "steady"  # written by _steady_data: en-us without pitch flutter
VOICE = f"en-us+{VARIANT}"
DEFAULT_RATE_WPM = 140
MIN_RATE_WPM, MAX_RATE_WPM = 80, 450  # espeakRATE_MINIMUM / espeakRATE_MAXIMUM in speak_lib.h
_SAMPLE_RATE = MelConfig().sample_rate

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


@dataclass
class _Engine:
    """One initialised libespeak-ng per process, and the chunks its callback has collected."""

    lib: ctypes.CDLL
    chunks: list[np.ndarray]


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
        raise EspeakError(
            "eSpeak NG comes from the PyPI package espeakng-loader: pip install -r requirements.txt"
        ) from err
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
    lib.espeak_Synth.argtypes = [
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_uint,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]


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
    if sample_rate != _SAMPLE_RATE:
        raise EspeakError(f"eSpeak NG synthesises at {sample_rate} Hz, the project needs {_SAMPLE_RATE} Hz")
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


def check_rate(rate_wpm: int) -> None:
    """eSpeak clamps a rate outside its range silently; say so instead."""
    if not MIN_RATE_WPM <= rate_wpm <= MAX_RATE_WPM:
        raise UserError(f"rate_wpm must be in [{MIN_RATE_WPM}, {MAX_RATE_WPM}], got {rate_wpm}")


def speak(text: str, rate_wpm: int = DEFAULT_RATE_WPM) -> np.ndarray:
    """Float32 mono samples at 22,050 Hz of eSpeak NG (en-us) saying `text` as given."""
    check_rate(rate_wpm)
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
