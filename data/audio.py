"""Audio I/O and the paper's mel features: 22,050 Hz, 50 ms window, 12.5 ms hop, 80 bands 0-8 kHz.

The frame count is fixed by the hop alone (centred STFT): `1 + n_samples // hop_length`, so the
batch planner can know every utterance's length from the WAV header without decoding audio.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import librosa
import numpy as np
import soundfile as sf
import torch

from batching.errors import UserError


@dataclass(frozen=True)
class MelConfig:
    sample_rate: int = 22050
    win_length: int = 1103  # 50 ms
    hop_length: int = 276  # 12.5 ms
    n_fft: int = 2048
    n_mels: int = 80
    fmin: float = 0.0
    fmax: float = 8000.0
    clamp: float = 1e-5

    @classmethod
    def from_ms(
        cls, sample_rate: int, win_ms: float, hop_ms: float, n_fft: int, n_mels: int, fmin: float, fmax: float
    ) -> MelConfig:
        """From the hparams' units: window and hop in milliseconds, rounded half up to samples
        (22,050 Hz: 50 ms -> 1103, 12.5 ms -> 276, the paper's). Errors name the hparam."""
        win_length, hop_length = (int(sample_rate * ms / 1000 + 0.5) for ms in (win_ms, hop_ms))
        for name, value in (
            ("sample_rate", sample_rate),
            ("win_ms", win_length),
            ("hop_ms", hop_length),
            ("n_fft", n_fft),
            ("n_mels", n_mels),
        ):
            if value < 1:
                raise UserError(f"hparam '{name}' gives {value}, must be >= 1")
        if win_length > n_fft:
            raise UserError(
                f"hparam 'win_ms': a {win_ms} ms window is {win_length} samples, more than n_fft={n_fft}: raise n_fft"
            )
        if not 0 <= fmin < fmax <= sample_rate / 2:
            raise UserError(
                f"hparams 'fmin', 'fmax': need 0 <= fmin < fmax <= sample_rate / 2 = "
                f"{sample_rate / 2:g} Hz, got {fmin:g} and {fmax:g}"
            )
        return cls(sample_rate, win_length, hop_length, n_fft, n_mels, float(fmin), float(fmax))

    def fingerprint(self) -> str:
        """A short hash of every setting, so cached features are never reused across configs."""
        return hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


class AudioFormatError(UserError):
    """A WAV file that is unreadable, not mono, or not at the expected sample rate."""


def n_frames(n_samples: int, hop_length: int = 276) -> int:
    """Frames of a centred STFT: one per hop, plus the frame centred on sample 0."""
    return 1 + n_samples // hop_length


def wav_info(path: str | Path) -> tuple[int, int, int]:
    """(sample_rate, channels, n_samples) from the header alone, without decoding the audio."""
    try:
        info = sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError, OSError) as err:
        raise AudioFormatError(f"{path}: cannot read audio header: {err}") from err
    return info.samplerate, info.channels, info.frames


def check_format(path: str | Path, sample_rate: int, channels: int, expected_rate: int) -> None:
    if channels != 1:
        raise AudioFormatError(f"{path}: {channels} channels, expected mono")
    if sample_rate != expected_rate:
        raise AudioFormatError(f"{path}: sample rate {sample_rate} Hz, expected {expected_rate} Hz")


def load_wav(path: str | Path, sample_rate: int = 22050) -> np.ndarray:
    """Mono float32 samples in [-1, 1]; a wrong rate or channel count is an error, not resampled."""
    try:
        wav, file_rate = sf.read(str(path), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, OSError) as err:
        raise AudioFormatError(f"{path}: cannot read audio: {err}") from err
    check_format(path, file_rate, wav.shape[1], sample_rate)
    return wav[:, 0]


def save_wav(path: str | Path, wav: np.ndarray | torch.Tensor, sample_rate: int = 22050) -> None:
    """Write 16-bit PCM mono, clipping to [-1, 1] so that loud output does not wrap around."""
    samples = np.clip(np.asarray(wav, dtype=np.float32).reshape(-1), -1.0, 1.0)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), samples, sample_rate, subtype="PCM_16")


def mel_basis(cfg: MelConfig) -> np.ndarray:
    """librosa's Slaney-normalised filter bank, [n_mels, n_fft // 2 + 1]."""
    return librosa.filters.mel(
        sr=cfg.sample_rate, n_fft=cfg.n_fft, n_mels=cfg.n_mels, fmin=cfg.fmin, fmax=cfg.fmax, htk=False, norm="slaney"
    )


class MelExtractor(torch.nn.Module):
    """log(clamp(mel_basis @ |STFT|)) with a centred, reflect-padded STFT and a Hann window."""

    def __init__(self, cfg: MelConfig = MelConfig()):
        super().__init__()
        self.cfg = cfg
        self.register_buffer("mel_basis", torch.from_numpy(mel_basis(cfg)), persistent=False)
        # torch.stft centres the win_length window inside n_fft with zeros, as librosa does.
        self.register_buffer("window", torch.hann_window(cfg.win_length), persistent=False)

    def forward(self, wav: np.ndarray | torch.Tensor) -> torch.Tensor:
        """[n_samples] -> [n_mels, n_frames] (or batched [B, n_samples] -> [B, n_mels, n_frames])."""
        wav = torch.as_tensor(wav, dtype=torch.float32, device=self.window.device)
        if wav.shape[-1] <= self.cfg.n_fft // 2:
            raise AudioFormatError(
                f"audio of {wav.shape[-1]} samples is too short for the reflect padding "
                f"of a {self.cfg.n_fft}-point STFT (needs more than {self.cfg.n_fft // 2})"
            )
        spec = torch.stft(
            wav,
            n_fft=self.cfg.n_fft,
            hop_length=self.cfg.hop_length,
            win_length=self.cfg.win_length,
            window=self.window,
            center=True,
            pad_mode="reflect",
            return_complex=True,
        )
        mel = torch.matmul(self.mel_basis, spec.abs())
        return torch.log(torch.clamp(mel, min=self.cfg.clamp))


def griffin_lim(log_mel: np.ndarray | torch.Tensor, cfg: MelConfig = MelConfig(), n_iter: int = 60) -> np.ndarray:
    """Approximate waveform from a log mel: invert the filter bank, then Griffin-Lim phases.
    Fewer than 2 frames have no overlap to estimate phases from (librosa cannot pad them): they
    become hop_length samples of silence a frame, and the caller says so."""
    if isinstance(log_mel, torch.Tensor):
        log_mel = log_mel.detach().cpu().numpy()
    if log_mel.shape[1] < 2:
        return np.zeros(log_mel.shape[1] * cfg.hop_length, dtype=np.float32)
    magnitude = librosa.feature.inverse.mel_to_stft(
        np.exp(np.asarray(log_mel, dtype=np.float32)),
        sr=cfg.sample_rate,
        n_fft=cfg.n_fft,
        power=1.0,
        fmin=cfg.fmin,
        fmax=cfg.fmax,
        htk=False,
        norm="slaney",
    )
    return librosa.griffinlim(
        magnitude,
        n_iter=n_iter,
        hop_length=cfg.hop_length,
        win_length=cfg.win_length,
        n_fft=cfg.n_fft,
        window="hann",
        center=True,
        pad_mode="reflect",
    )
