"""Sample orderings of the five strategies (paper Sections 2-3), each starting from a shuffle (Section 5).

Each takes (lengths, config, rng) and returns the epoch's sample order (int64 indices). The first
step is a shuffle, so samples of equal length come in a new random order every epoch even under
strict sorting (prepare-trainset-per-epoch). For ssb with a > 0 the i.i.d. continuous noise
already orders ties at random, so the shuffle is folded into it (it would cost as much as the
sort itself on tens of millions of lengths).
"""

from __future__ import annotations

import numpy as np

from .config import BatchingConfig
from .cost_key import cost_order


def order_random(lengths: np.ndarray, config: BatchingConfig, rng: np.random.Generator) -> np.ndarray:
    """RAND: a plain shuffle."""
    return rng.permutation(len(lengths))


def order_sorted(lengths: np.ndarray, config: BatchingConfig, rng: np.random.Generator) -> np.ndarray:
    """SB: shuffle, then a stable sort by length (ties stay in shuffled order)."""
    perm = rng.permutation(len(lengths))
    return perm[np.argsort(lengths[perm], kind="stable")]


def order_semi_sorted(lengths: np.ndarray, config: BatchingConfig, rng: np.random.Generator) -> np.ndarray:
    """SSB: sort by key + U(-a/2, a/2) noise, a = (max - min of the key) * lrf; a = 0 is SB.
    ssb_key=length (or None): the key is the length (equation 3); cost: G(l) in [0, 1] (cost_key.py)."""
    spread = int(lengths.max() - lengths.min()) if lengths.size else 0
    if config.ssb_key == "cost" and spread and config.lrf > 0:
        return cost_order(lengths, rng.uniform(-config.lrf / 2, config.lrf / 2, lengths.size), config.lrf)
    a = float(spread) * config.lrf
    if a > 0 and config.ssb_key != "cost":
        key = rng.uniform(-a / 2, a / 2, lengths.size)
        key += lengths  # in place: one float array, not two, on tens of millions of lengths
        return np.argsort(key)
    return order_sorted(lengths, config, rng)


def order_bucketed(lengths: np.ndarray, config: BatchingConfig, rng: np.random.Generator) -> np.ndarray:
    """BKT: the SB order cut into buckets of bucket_size samples, each bucket shuffled."""
    by_length = order_sorted(lengths, config, rng)
    full = by_length.size - by_length.size % config.bucket_size
    head = rng.permuted(by_length[:full].reshape(-1, config.bucket_size), axis=1).ravel()
    return np.concatenate([head, rng.permutation(by_length[full:])])


def order_alternated(lengths: np.ndarray, config: BatchingConfig, rng: np.random.Generator) -> np.ndarray:
    """ATS: shuffle, split into n_bins near-equal bins, sort bins 1, 3, ... up and 2, 4, ... down."""
    perm = rng.permutation(len(lengths))
    keys = lengths[perm]
    bins = np.arange(keys.size, dtype=np.int64) * config.n_bins // max(keys.size, 1)
    signed = np.where(bins % 2 == 0, keys, -keys)
    return perm[np.lexsort((signed, bins))]
