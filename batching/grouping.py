"""Cutting an ordered sample sequence into batches: fixed B0, or greedy dynamic sizes (paper Section 4)."""

from __future__ import annotations

import numba
import numpy as np


def ceil_div(value, divisor):
    """value / divisor rounded up, for ints and integer arrays: batching/'s one spelling."""
    return -(-value // divisor)


def fixed_cuts(n: int, batch_size: int, drop_last: bool) -> np.ndarray:
    """Batch boundaries for batches of batch_size; the last one holds the n % B0 rest unless drop_last."""
    stop = n - n % batch_size if drop_last else n
    return np.append(np.arange(0, stop, batch_size, dtype=np.int64), stop)


def dynamic_cuts(ordered_lengths: np.ndarray, capacity: int) -> np.ndarray:
    """Batch boundaries from the greedy walk: add the next sample while (B + 1) * L <= capacity.

    L is the batch length with the next sample included, so no batch exceeds the capacity
    (the caller checks that every single sample fits).
    """
    if ordered_lengths.size == 0:
        return np.zeros(1, np.int64)
    return _greedy_cuts(np.ascontiguousarray(ordered_lengths, dtype=np.int64), np.int64(capacity))


def without_incomplete_last(cuts: np.ndarray, ordered_lengths: np.ndarray, capacity: int) -> np.ndarray:
    """drop_last under a budget: the walk's last batch, the rest the data left, is dropped when it is
    incomplete, i.e. one more sample as long as its longest would still fit (Lhotse's drop_last test,
    close_to_exceeding); the fixed-size twin is fixed_cuts' n % B0 rest."""
    if cuts.size < 2:
        return cuts
    start = cuts[-2]
    size, longest = cuts[-1] - start, int(ordered_lengths[start : cuts[-1]].max())
    return cuts[:-1] if (size + 1) * longest <= capacity else cuts


@numba.njit(cache=True, nogil=True)
def _greedy_cuts(lengths, capacity):  # pragma: no cover - compiled
    cuts = np.empty(lengths.size + 1, np.int64)
    cuts[0] = 0
    n_cuts = 1
    start = 0
    batch_len = 0
    for i in range(lengths.size):
        grown = max(batch_len, lengths[i])
        if (i - start + 1) * grown > capacity:
            cuts[n_cuts] = i
            n_cuts += 1
            start = i
            batch_len = lengths[i]
        else:
            batch_len = grown
    cuts[n_cuts] = lengths.size
    return cuts[: n_cuts + 1].copy()  # not a view: the n + 1 slots would stay alive with the plan
