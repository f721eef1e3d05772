"""The paper's seeded random train/validation split (80:20 of LJSpeech: 10,480 training clips).

The project's only split: data.filelist.split_train_val (prepare_ljspeech.py, the demo and espeak
corpora) and `python -m batching` / the benchmarks all call train_split, so they name the same clips.
"""

from __future__ import annotations

import numpy as np

from .errors import UserError


def train_split(n_samples: int, fraction: float = 0.8, seed: int = 0) -> np.ndarray:
    """The training indices, in metadata order: a random round(fraction * n) subset drawn with a
    numpy generator seeded with `seed`; fraction 1.0 keeps everything."""
    if not 0 < fraction <= 1:
        raise UserError(f"split={fraction} must be in (0, 1]")
    if fraction == 1:
        return np.arange(n_samples)
    chosen = np.random.default_rng(seed).permutation(n_samples)[: round(fraction * n_samples)]
    return np.sort(chosen)
