"""Sample orderings of the five strategies (paper Sections 2-3), each starting from a shuffle (Section 5)."""
from __future__ import annotations

import numpy as np

from .config import BatchingConfig


def order_samples(lengths: np.ndarray, config: BatchingConfig, rng: np.random.Generator) -> np.ndarray:
    """Return the epoch's sample order (int64 indices) for config.batching.

    The first step is a shuffle, so samples of equal length come in a new random order every
    epoch even under strict sorting (prepare-trainset-per-epoch). For ssb with a > 0 the
    i.i.d. continuous noise already orders ties at random, so the shuffle is folded into it
    (it would cost as much as the sort itself on tens of millions of lengths).
    """
    a = _noise_bound(lengths, config.lrf) if config.batching == "ssb" else 0.0
    if a > 0:
        return np.argsort(lengths + rng.uniform(-a / 2, a / 2, lengths.size))
    perm = rng.permutation(len(lengths))
    if config.batching == "rand":
        return perm
    keys = lengths[perm]
    if config.batching == "ats":
        return perm[_alternated_sort(keys, config.n_bins)]
    by_length = perm[np.argsort(keys, kind="stable")]
    if config.batching == "bkt":
        return _shuffle_buckets(by_length, config.bucket_size, rng)
    return by_length


def _noise_bound(lengths: np.ndarray, lrf: float) -> float:
    """SSB's a = (max - min) * lrf (equation 3); with a = 0 SSB is SB."""
    return float(lengths.max() - lengths.min()) * lrf if lengths.size else 0.0


def _shuffle_buckets(by_length: np.ndarray, bucket_size: int, rng: np.random.Generator) -> np.ndarray:
    """Cut the sorted order into buckets of bucket_size samples and shuffle each bucket."""
    full = by_length.size - by_length.size % bucket_size
    head = rng.permuted(by_length[:full].reshape(-1, bucket_size), axis=1).ravel()
    return np.concatenate([head, rng.permutation(by_length[full:])])


def _alternated_sort(keys: np.ndarray, n_bins: int) -> np.ndarray:
    """Split the shuffled samples into n_bins near-equal bins; sort bins 1, 3, ... up and 2, 4, ... down."""
    bins = np.arange(keys.size, dtype=np.int64) * n_bins // max(keys.size, 1)
    signed = np.where(bins % 2 == 0, keys, -keys)
    return np.lexsort((signed, bins))
