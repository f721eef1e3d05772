"""How random a strategy's batches are from one epoch to the next (the padding metrics, ZPR and
ABL, are the plan's own: batching.plan.batch_stats and GlobalPlan.stats)."""

from __future__ import annotations

import numpy as np

from .config import BatchingConfig
from .plan import as_lengths
from .planner import plan_global


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
