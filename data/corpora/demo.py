"""The embedded demo corpus: a tiny, learnable text-to-audio mapping the project generates itself.

Each letter of a 14-letter alphabet is a steady harmonic tone with its own pitch, its own
formant (timbre) and its own duration of 3-6 frames; a space is 2 frames of silence, a comma 5
and the final full stop 8. The mapping is deterministic and monotonic, so a small Tacotron2 can
learn it in minutes with a diagonal alignment. Target lengths are drawn from a Beta(2, 1.3) scaled
to 20-200 frames, fitted to LJSpeech's own length distribution: a long tail of short utterances
and most mass near the maximum, so that how batches are formed matters.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from data.atomic import atomic_open
from data.audio import MelConfig, n_frames, save_wav
from data.corpora.generated import is_complete, write_split
from data.filelist import Utterance
from data.text import clean_text

ALPHABET = "abdeiklmnorstu"
SILENCE_FRAMES = {" ": 2, ",": 5, ".": 8}
LEAD_FRAMES = 2
MIN_FRAMES, MAX_FRAMES = 20, 200
FADE_SECONDS = 0.005
FORMAT_VERSION = 2  # 2: the train/val split is batching.split.train_split
_CFG = MelConfig()


def letter_frames(letter: str) -> int:
    """Each letter's fixed duration in frames, 3 to 6, spread over the alphabet."""
    return 3 + (ALPHABET.index(letter) * 5) % 4


def _letter_tone(letter: str, n_samples: int, sample_rate: int) -> np.ndarray:
    """Harmonics of a letter-specific pitch (120-480 Hz) shaped by a letter-specific formant."""
    index = ALPHABET.index(letter)
    f0 = 120.0 * 4.0 ** (index / (len(ALPHABET) - 1))
    formant = 500.0 + 3000.0 * ((index * 9) % len(ALPHABET)) / (len(ALPHABET) - 1)
    harmonics = np.arange(1, int(7000.0 // f0) + 1)
    amplitudes = np.exp(-(((harmonics * f0 - formant) / 600.0) ** 2)) + 0.3 / harmonics
    t = np.arange(n_samples) / sample_rate
    tone = np.sin(2 * np.pi * f0 * np.outer(harmonics, t)).T @ amplitudes
    fade = min(int(FADE_SECONDS * sample_rate), n_samples // 2)
    ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(fade) / fade)
    tone[:fade] *= ramp
    tone[n_samples - fade :] *= ramp[::-1]
    return (0.5 * tone / np.abs(tone).max()).astype(np.float32)


def _symbol_frames(symbol: str) -> int:
    return SILENCE_FRAMES.get(symbol) or letter_frames(symbol)


@functools.cache
def _symbol_audio() -> dict[str, np.ndarray]:
    hop = _CFG.hop_length
    sounds = {s: np.zeros(n * hop, dtype=np.float32) for s, n in SILENCE_FRAMES.items()}
    sounds.update({c: _letter_tone(c, letter_frames(c) * hop, _CFG.sample_rate) for c in ALPHABET})
    return sounds


def render(text: str) -> np.ndarray:
    """The waveform of a demo text: a short lead silence, then each symbol's sound in turn."""
    sounds = _symbol_audio()
    return np.concatenate([np.zeros(LEAD_FRAMES * _CFG.hop_length, np.float32), *(sounds[s] for s in text)])


def text_frames(text: str) -> int:
    """Mel frames of render(text), known without rendering it."""
    return n_frames((LEAD_FRAMES + sum(_symbol_frames(s) for s in text)) * _CFG.hop_length, _CFG.hop_length)


def _random_word(rng: np.random.Generator) -> str:
    """1-5 random letters, redrawn if the cleaners would rewrite it (e.g. 'st.' -> 'saint')."""
    while True:
        word = "".join(rng.choice(list(ALPHABET), size=rng.integers(1, 6)))
        if clean_text(word + ".") == word + ".":
            return word


def random_text(rng: np.random.Generator, target_frames: int) -> str:
    """Words (some followed by commas) ending in a full stop, with frames as near the target as can be."""
    text = _random_word(rng) + "."
    frames = text_frames(text)
    while frames < target_frames:
        separator = ", " if rng.random() < 0.15 else " "
        longer = f"{text[:-1]}{separator}{_random_word(rng)}."
        longer_frames = text_frames(longer)
        if longer_frames > MAX_FRAMES or longer_frames - target_frames > target_frames - frames:
            break
        text, frames = longer, longer_frames
    return text


def demo_texts(n_utterances: int, seed: int) -> list[str]:
    """Texts whose target frame counts follow Beta(2, 1.3) on [MIN_FRAMES, MAX_FRAMES]: that Beta
    fits LJSpeech's frame counts mapped onto the same range (quartiles at 0.43 and 0.81)."""
    rng = np.random.default_rng(seed)
    targets = np.rint(MIN_FRAMES + (MAX_FRAMES - MIN_FRAMES) * rng.beta(2.0, 1.3, size=n_utterances))
    return [random_text(rng, int(target)) for target in targets]


def _manifest(n_utterances: int, seed: int, val_fraction: float) -> dict:
    return {
        "format_version": FORMAT_VERSION,
        "n_utterances": n_utterances,
        "seed": seed,
        "val_fraction": val_fraction,
        "sample_rate": _CFG.sample_rate,
        "hop_length": _CFG.hop_length,
    }


def make_demo_corpus(
    out_dir: str | Path, n_utterances: int = 400, seed: int = 0, val_fraction: float = 0.2
) -> tuple[Path, Path]:
    """Write wavs/, train.txt, val.txt and manifest.json under out_dir; reuse a complete identical corpus."""
    out_dir = Path(out_dir)
    train_path, val_path = out_dir / "train.txt", out_dir / "val.txt"
    manifest = _manifest(n_utterances, seed, val_fraction)
    if is_complete(out_dir, manifest, train_path, val_path):
        return train_path, val_path

    (out_dir / "manifest.json").unlink(missing_ok=True)
    wav_dir = out_dir / "wavs"
    for stale in wav_dir.glob("demo_*.wav"):
        stale.unlink()
    utterances = []
    for i, text in enumerate(demo_texts(n_utterances, seed)):
        wav = render(text)
        name = f"demo_{i:04d}.wav"
        save_wav(wav_dir / name, wav, _CFG.sample_rate)
        utterances.append(Utterance(Path("wavs") / name, text, n_frames(len(wav), _CFG.hop_length)))

    write_split(utterances, val_fraction, seed, train_path, val_path, "demo_utterances")
    frames = np.array([u.frames for u in utterances])
    manifest.update(
        wavs=[u.path.name for u in utterances],
        frames={"min": int(frames.min()), "mean": float(frames.mean()), "max": int(frames.max())},
    )
    with atomic_open(out_dir / "manifest.json") as out:
        json.dump(manifest, out, indent=1)
    return train_path, val_path
