"""Text-mel pairs for training, with an optional on-disk mel cache.

Lengths come from the filelist (`.frames`, `.text_lengths`) so that batches can be planned without
audio; every mel is checked against its filelist length so the plan and the loader never disagree.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset
from tqdm import tqdm

from batching.errors import UserError
from data.atomic import atomic_open
from data.audio import MelConfig, MelExtractor, load_wav
from data.filelist import Utterance, read_filelist
from data.text import UnknownSymbolError, text_to_sequence


class FramesMismatchError(UserError):
    """The mel computed from a WAV does not have the frame count its filelist line promises."""


class NonFiniteFeaturesError(UserError):
    """A clip whose mel holds NaN or infinite values (NaN or infinite samples, or samples so large
    that the STFT overflows): every step that met it would be skipped, so it is refused by name."""


class TextMelDataset(Dataset):
    """(text ids [T_text], log mel [n_mels, T]) per utterance; lengths known up front, audio read lazily."""

    def __init__(self, utterances: Sequence[Utterance], mel_cfg: MelConfig = MelConfig(),
                 cache_dir: str | Path | None = None):
        self.utterances = list(utterances)
        self.mel_cfg = mel_cfg
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.texts = _encode_texts(self.utterances)
        self.text_lengths = np.array([len(t) for t in self.texts], dtype=np.int64)
        self.frames = np.array([u.frames for u in self.utterances], dtype=np.int64)
        self._extractor = MelExtractor(mel_cfg)

    def __len__(self) -> int:
        return len(self.utterances)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.texts[index], self.mel(index)

    def mel(self, index: int) -> torch.Tensor:
        """[n_mels, frames], from the cache when there is one, checked against the filelist length."""
        cache_path = self.cache_path(index)
        if cache_path is not None and cache_path.exists():
            mel = np.load(cache_path)
            self._check_finite(index, mel)
        else:
            utt = self.utterances[index]
            with torch.no_grad():
                mel = self._extractor(load_wav(utt.path, self.mel_cfg.sample_rate)).numpy()
            self._check_finite(index, mel)  # before caching: a bad mel is never stored
            if cache_path is not None:
                with atomic_open(cache_path, "wb") as out:
                    np.save(out, mel)
        self._check_frames(index, mel.shape[-1])
        return torch.from_numpy(mel)

    def cache_path(self, index: int) -> Path | None:
        """One .npy per utterance, keyed by its path, size and mtime and the mel settings."""
        if self.cache_dir is None:
            return None
        path = Path(self.utterances[index].path).resolve()
        stat = path.stat()
        key = f"{path}|{stat.st_size}|{stat.st_mtime_ns}|{self.mel_cfg.fingerprint()}"
        return self.cache_dir / f"{path.stem}-{hashlib.sha1(key.encode()).hexdigest()[:16]}.npy"

    def _check_finite(self, index: int, mel: np.ndarray) -> None:
        bad = mel.size - int(np.isfinite(mel).sum())
        if bad:
            utt = self.utterances[index]
            raise NonFiniteFeaturesError(
                f"{utt.origin or utt.path}: the mel of {utt.path} holds {bad} non-finite value(s) (NaN or infinite "
                f"samples, or samples so large that the STFT overflows); re-export the clip from its source as 16-bit "
                f"PCM, or remove the line")

    def _check_frames(self, index: int, actual: int) -> None:
        expected = int(self.frames[index])
        if actual != expected:
            raise FramesMismatchError(
                f"{self.utterances[index].path}: the mel has {actual} frames but the filelist says {expected}; "
                f"regenerate the filelist (frames = 1 + n_samples // {self.mel_cfg.hop_length})")


def _encode_texts(utterances: Sequence[Utterance]) -> list[torch.Tensor]:
    """Symbol ids for every text; all unencodable texts are reported together, each with its file."""
    texts, problems = [], []
    for utt in utterances:
        try:
            texts.append(torch.tensor(text_to_sequence(utt.text), dtype=torch.long))
        except UnknownSymbolError as err:
            problems.append(f"{utt.path}: {err}")
    if problems:
        shown = "\n".join(problems[:20])
        raise UnknownSymbolError(f"{len(problems)} texts hold characters outside the symbol table:\n{shown}")
    return texts


def precompute_mels(dataset: TextMelDataset, progress: bool = True) -> int:
    """Fill the dataset's mel cache once, ahead of training; returns how many mels were computed."""
    if dataset.cache_dir is None:
        raise ValueError("precompute_mels needs a dataset with a cache_dir")
    missing = [i for i in range(len(dataset)) if not dataset.cache_path(i).exists()]
    for index in tqdm(missing, desc="mels", unit="utt", disable=None if progress else True):
        dataset.mel(index)
    return len(missing)


def build_datasets(filelists: tuple[Path, Path], mel_cfg: MelConfig, cache_dir: str | Path | None,
                   progress: bool = True) -> tuple[TextMelDataset, TextMelDataset]:
    """The train and validation datasets of two filelists, whose `.frames` are the lengths the batch
    planner uses; with a cache_dir ("" or None: none) every mel is computed once, up front."""
    cache = Path(cache_dir) if cache_dir else None
    sets = tuple(TextMelDataset(read_filelist(path), mel_cfg, cache_dir=cache) for path in filelists)
    if cache is not None:
        for dataset in sets:
            precompute_mels(dataset, progress=progress)
    return sets


class PackedView(Dataset):
    """dataset[(row, start, index)] -> (row, start, text ids, mel) of a TextMelDataset-like dataset."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key):
        row, start, index = (int(k) for k in key)
        text, mel = self.dataset[index]
        return row, start, text, mel
