"""Text-mel pairs for training, with an optional on-disk mel cache.

Lengths come from the filelist (`.frames`, `.text_lengths`) so that batches can be planned without
audio; every mel is checked against its filelist length so the plan and the loader never disagree.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset
from tqdm import tqdm

from batching.errors import UserError
from data.atomic import atomic_open
from data.audio import MelConfig, MelExtractor, load_wav
from data.filelist import Utterance, read_filelist
from data.text import UnknownSymbolError, text_to_sequence

CACHE_DTYPE = np.float32  # what the extractor computes and the cache holds
MAX_HEALED_SHOWN = 5  # damaged cache entries named one by one; the rest are counted


class FramesMismatchError(UserError):
    """The mel computed from a WAV does not have the frame count its filelist line promises."""


class NonFiniteFeaturesError(UserError):
    """A clip whose mel holds NaN or infinite values (NaN or infinite samples, or samples so large
    that the STFT overflows): every step that met it would be skipped, so it is refused by name."""


class TextMelDataset(Dataset):
    """(text ids [T_text], log mel [n_mels, T]) per utterance; lengths known up front, audio read lazily."""

    def __init__(
        self,
        utterances: Sequence[Utterance],
        mel_cfg: MelConfig = MelConfig(),
        cache_dir: str | Path | None = None,
        unknown_chars: str = "error",
    ):
        self.utterances = list(utterances)
        self.mel_cfg = mel_cfg
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.texts = _encode_texts(self.utterances, unknown_chars)
        self.text_lengths = np.array([len(t) for t in self.texts], dtype=np.int64)
        self.frames = np.array([u.frames for u in self.utterances], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.utterances)

    @functools.cached_property
    def _extractor(self) -> MelExtractor:
        """Built on the first mel not in the cache: its filter bank imports librosa.filters and with
        it scipy.signal (seconds), which a run whose mels are all cached never needs."""
        return MelExtractor(self.mel_cfg)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.texts[index], self.mel(index)

    def mel(self, index: int) -> torch.Tensor:
        """[n_mels, frames], from the cache when there is one, checked against the filelist length.
        A cache entry that cannot be used (unreadable, truncated, another shape or dtype, non-finite)
        is recomputed and rewritten, with one line on stderr: the cache is derived data."""
        cache_path = self.cache_path(index)
        if cache_path is None:
            return torch.from_numpy(self._compute(index))
        mel, problem = self._read_cached(index, cache_path)
        if mel is not None:
            return torch.from_numpy(mel)
        if problem is not None:
            print(f"mel cache: {cache_path} {problem}; recomputed and rewritten", file=sys.stderr)
        return torch.from_numpy(self.compute_and_store(index, cache_path))

    def cache_path(self, index: int) -> Path | None:
        """One .npy per utterance, keyed by its path, size and mtime and the mel settings."""
        if self.cache_dir is None:
            return None
        path = Path(self.utterances[index].path).resolve()
        stat = path.stat()
        key = f"{path}|{stat.st_size}|{stat.st_mtime_ns}|{self.mel_cfg.fingerprint()}"
        return self.cache_dir / f"{path.stem}-{hashlib.sha1(key.encode()).hexdigest()[:16]}.npy"

    def expected_shape(self, index: int) -> tuple[int, int]:
        return self.mel_cfg.n_mels, int(self.frames[index])

    def _read_cached(self, index: int, path: Path) -> tuple[np.ndarray | None, str | None]:
        """(the cached mel, None), or (None, why it cannot be used); (None, None) when there is none."""
        try:
            mel = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            return None, None
        except (OSError, ValueError, EOFError) as err:
            return None, f"is unreadable ({type(err).__name__}: {err})"
        problem = _mismatch(mel.dtype, mel.shape, self.expected_shape(index))
        if problem is None and not np.isfinite(mel).all():
            problem = "holds non-finite values"
        return (None, problem) if problem else (mel, None)

    def _compute(self, index: int) -> np.ndarray:
        with torch.no_grad():
            mel = self._extractor(load_wav(self.utterances[index].path, self.mel_cfg.sample_rate)).numpy()
        self._check_finite(index, mel)
        self._check_frames(index, mel.shape[-1])
        return mel

    def compute_and_store(self, index: int, cache_path: Path) -> np.ndarray:
        """The mel computed from the clip, checked, and written to cache_path atomically."""
        mel = self._compute(index)  # checked first: a bad mel is never stored
        with atomic_open(cache_path, "wb") as out:
            np.save(out, mel)
        return mel

    def _check_finite(self, index: int, mel: np.ndarray) -> None:
        bad = mel.size - int(np.isfinite(mel).sum())
        if bad:
            utt = self.utterances[index]
            raise NonFiniteFeaturesError(
                f"{utt.origin or utt.path}: the mel of {utt.path} holds {bad} non-finite value(s) (NaN or infinite "
                f"samples, or samples so large that the STFT overflows); re-export the clip from its source as 16-bit "
                f"PCM, or remove the line"
            )

    def _check_frames(self, index: int, actual: int) -> None:
        expected = int(self.frames[index])
        if actual != expected:
            raise FramesMismatchError(
                f"{self.utterances[index].path}: the mel has {actual} frames but the filelist says {expected}; "
                f"regenerate the filelist (frames = 1 + n_samples // {self.mel_cfg.hop_length})"
            )


def _encode_texts(utterances: Sequence[Utterance], unknown_chars: str) -> list[torch.Tensor]:
    """Symbol ids for every text; all unencodable texts are reported together, each with its file
    (unknown_chars="drop": the data check has counted what is dropped)."""
    texts, problems = [], []
    for utt in utterances:
        try:
            texts.append(torch.tensor(text_to_sequence(utt.text, unknown_chars), dtype=torch.long))
        except UnknownSymbolError as err:
            problems.append(f"{utt.path}: {err}")
    if problems:
        shown = "\n".join(problems[:20])
        raise UnknownSymbolError(f"{len(problems)} texts hold characters outside the symbol table:\n{shown}")
    return texts


def _mismatch(dtype: np.dtype, shape: tuple[int, ...], expected: tuple[int, int]) -> str | None:
    if dtype != CACHE_DTYPE or tuple(shape) != expected:
        return f"holds {dtype} {tuple(shape)}, not {np.dtype(CACHE_DTYPE)} {expected}"
    return None


def cache_entry_problem(path: Path, expected: tuple[int, int]) -> str | None:
    """Why the .npy at `path` cannot be this mel, from its header and size alone (garbage, a
    truncated file, another shape or dtype); None when it looks whole, "missing" when absent."""
    try:
        with open(path, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            if version not in _HEADER_READERS:
                return f"is a .npy of version {version}, which the cache never writes"
            shape, _, dtype = _HEADER_READERS[version](handle)
            data_start = handle.tell()
    except FileNotFoundError:
        return "missing"
    except (OSError, ValueError, EOFError) as err:
        return f"is unreadable ({type(err).__name__}: {err})"
    problem = _mismatch(dtype, shape, expected)
    if problem is None:
        size, whole = path.stat().st_size, data_start + int(np.prod(shape)) * dtype.itemsize
        if size != whole:
            problem = f"is {size} bytes, not {whole} (truncated or padded)"
    return problem


_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


@dataclass(frozen=True)
class CacheFill:
    computed: int  # mels computed and stored, the healed ones included
    healed: list[str]  # "PATH why" of each entry that was there but could not be used


def precompute_mels(dataset: TextMelDataset, progress: bool = True) -> CacheFill:
    """Fill the dataset's mel cache once, ahead of training, checking every entry that is there
    from its header and size (one small read each) and recomputing those that cannot be used."""
    if dataset.cache_dir is None:
        raise ValueError("precompute_mels needs a dataset with a cache_dir")
    todo, healed = [], []
    for index in range(len(dataset)):
        path = dataset.cache_path(index)
        problem = cache_entry_problem(path, dataset.expected_shape(index))
        if problem is not None:
            todo.append((index, path))
            if problem != "missing":
                healed.append(f"{path} {problem}")
    for index, path in tqdm(todo, desc="mels", unit="utt", disable=None if progress else True):
        dataset.compute_and_store(index, path)
    return CacheFill(len(todo), healed)


def build_datasets(
    filelists: tuple[Path, Path],
    mel_cfg: MelConfig,
    cache_dir: str | Path | None,
    progress: bool = True,
    unknown_chars: str = "error",
) -> tuple[TextMelDataset, TextMelDataset]:
    """The train and validation datasets of two filelists, whose `.frames` are the lengths the batch
    planner uses; with a cache_dir ("" or None: none) every mel is computed once, up front, and
    damaged cache entries are recomputed, counted on stderr."""
    cache = Path(cache_dir) if cache_dir else None
    sets = tuple(
        TextMelDataset(read_filelist(path, mel_cfg), mel_cfg, cache_dir=cache, unknown_chars=unknown_chars)
        for path in filelists
    )
    if cache is not None:
        healed = [entry for dataset in sets for entry in precompute_mels(dataset, progress=progress).healed]
        if healed:
            shown = "".join(f"\n  {entry}" for entry in healed[:MAX_HEALED_SHOWN])
            more = f"\n  ... and {len(healed) - MAX_HEALED_SHOWN} more" if len(healed) > MAX_HEALED_SHOWN else ""
            print(
                f"mel cache: {len(healed)} damaged or mismatched entries recomputed and rewritten:{shown}{more}",
                file=sys.stderr,
            )
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
