"""The paper's padding metrics (ZPR, ABL; Sections 2 and 4) and a measure of batch randomness."""
from __future__ import annotations

import numpy as np

from .config import BatchingConfig
from .planner import as_lengths, plan_global


def batch_stats(lengths, batches: list[np.ndarray]) -> dict:
    """Padding statistics of a list of batches.

    zpr: equation (1) per batch, averaged with weights B_j (Section 4: sum B_j ZPR_j / sum B_j;
    the plain mean when all batches have B0 samples), in percent. abl: sum B_j L_j / sum B_j,
    L_j the batch's longest sample. capacity_max: max B_j L_j, the largest padded batch.
    """
    lengths = as_lengths(lengths)
    batches = [b for b in batches if len(b)]
    if not batches:
        return dict(n_batches=0, n_samples=0, zpr=0.0, abl=0.0, capacity_max=0, padded_frames=0, real_frames=0)
    sizes = np.fromiter(map(len, batches), np.int64, len(batches))
    flat = lengths[np.concatenate(batches)]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    real = np.add.reduceat(flat, starts)
    padded = sizes * np.maximum.reduceat(flat, starts)
    weights = sizes / sizes.sum()
    return dict(
        n_batches=int(len(batches)),
        n_samples=int(sizes.sum()),
        zpr=float(100 * weights @ (1 - real / padded)),
        abl=float(weights @ (padded / sizes)),
        capacity_max=int(padded.max()),
        padded_frames=int(padded.sum()),
        real_frames=int(real.sum()),
    )


def pair_repeat(batches_a: list[np.ndarray], batches_b: list[np.ndarray], n_samples: int) -> float:
    """Fraction of the sample pairs sharing a batch in plan a that share a batch again in plan b.

    1.0: the same batches (no randomness left between epochs); about (B - 1) / (N - 1): as
    fresh as a full reshuffle. Batch order is ignored: BR's randomness is not measured here.
    Vectorised: samples are grouped by (batch in a, batch in b); a group of g holds g(g-1)/2
    repeated pairs.
    """
    batch_a, batch_b = _batch_of(batches_a, n_samples), _batch_of(batches_b, n_samples)
    both = (batch_a >= 0) & (batch_b >= 0)
    pairs = _pairs(np.bincount(batch_a[both]))
    if not pairs:
        return 0.0
    _, groups = np.unique(batch_a[both] * (batch_b.max() + 1) + batch_b[both], return_counts=True)
    return float(_pairs(groups) / pairs)


def randomness(lengths, config: BatchingConfig, epochs: tuple[int, int] = (0, 1)) -> dict:
    """pair_repeat between the global plans of two epochs, and its value for a full reshuffle."""
    lengths = as_lengths(lengths)
    a, b = (plan_global(lengths, config, e).batches() for e in epochs)
    sizes = np.fromiter(map(len, b), np.int64, len(b))
    n = lengths.size
    chance = float(_pairs(sizes) / _pairs(np.array([n]))) if n > 1 else 0.0
    return dict(pair_repeat=pair_repeat(a, b, n), pair_repeat_chance=chance)


def _batch_of(batches: list[np.ndarray], n_samples: int) -> np.ndarray:
    """Batch number of every sample (-1 when absent; the last batch wins for repeated samples)."""
    owner = np.full(n_samples, -1, np.int64)
    if batches:
        sizes = np.fromiter(map(len, batches), np.int64, len(batches))
        owner[np.concatenate(batches)] = np.repeat(np.arange(len(batches)), sizes)
    return owner


def _pairs(counts: np.ndarray) -> int:
    counts = counts.astype(np.int64)
    return int((counts * (counts - 1) // 2).sum())
