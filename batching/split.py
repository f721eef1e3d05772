"""The paper's seeded random train/validation split (80:20 of LJSpeech: 10,480 training clips)."""
from __future__ import annotations

import numpy as np


def train_split(n_samples: int, fraction: float = 0.8, seed: int = 0) -> np.ndarray:
    """Sorted indices of a random round(fraction * n) subset; fraction 1.0 keeps everything."""
    if not 0 < fraction <= 1:
        raise ValueError(f"split={fraction} must be in (0, 1]")
    if fraction == 1:
        return np.arange(n_samples)
    chosen = np.random.default_rng(seed).permutation(n_samples)[: round(fraction * n_samples)]
    return np.sort(chosen)
