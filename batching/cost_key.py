"""The cost key of SSB (`ssb_key=cost`): a length transform G that spends SSB's noise where it is cheap.

Under DBS a batch at length l holds about C/l samples and costs its longest sample, so noise of
one width h in frames everywhere wastes most where lengths are dense and long. Minimising the
decoder steps at a fixed pair_repeat (docs/batching/ssb_key.md) gives a local width
h(l) ∝ density(l)^(-1/2) · l^(-3/2); adding uniform noise of one width w to G(l) instead of to l
gives exactly that when G' ∝ density^(1/2) · l^(3/2). G is normalised to [0, 1], so `lrf` is the
noise width as a fraction of the key's range, as it is of the length range for `ssb_key=length`.

The density is a histogram of about √N equal-width bins, each floored at a tenth of the uniform
count so that an empty gap (between two modes, before an outlier) keeps some width. The order
is one histogram pass, one pass that computes G + noise as a 32-bit integer, and a two-pass
radix sort (numba): cheaper than numpy's argsort of the lengths themselves.
"""

from __future__ import annotations

import numba
import numpy as np

#: A bin's density is at least this share of the uniform count N / bins (a gap keeps some noise width).
DENSITY_FLOOR = 0.1
_LEVELS = 2.0**32 - 1  # G + noise is sorted as an unsigned 32-bit integer (ties keep index order)


def cost_key(lengths: np.ndarray) -> np.ndarray:
    """G(l) of every sample (float64 in [0, 1], rising strictly with l); all zeros when every length is equal."""
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    if lengths.size == 0:
        return np.zeros(0)
    return CostKey(lengths)(lengths)


class CostKey:
    """G fitted on a reference set of lengths, applied to any lengths (stream_key=cost's buckets).

    A streaming consumer fits it before it has seen the stream: on the planner's lengths, a
    lengths file or a sample. A length outside the reference's [low, high] is clamped to it:
    G = 0 below, 1 above (the first and the last bucket); `outside` counts such lengths. A
    constant reference has no shape to learn: G is 0 up to its length and 1 above it.
    """

    def __init__(self, reference: np.ndarray) -> None:
        reference = np.ascontiguousarray(reference, dtype=np.int64)
        if reference.size == 0:
            raise ValueError("a cost key needs at least one reference length")
        self.low, self.high = int(reference.min()), int(reference.max())
        self._tables = _tables(reference) if self.low < self.high else None

    def __call__(self, lengths: np.ndarray) -> np.ndarray:
        """G of each length (float64 in [0, 1]), lengths outside [low, high] clamped."""
        lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        if self._tables is None:
            return (lengths > self.high).astype(np.float64)
        return _keys(np.clip(lengths, self.low, self.high), *self._tables)

    def outside(self, lengths: np.ndarray) -> int:
        """How many of these lengths the reference did not span (their G is clamped)."""
        lengths = np.asarray(lengths)
        return int(np.count_nonzero((lengths < self.low) | (lengths > self.high)))

    def buckets(self, lengths: np.ndarray, n_buckets: int) -> np.ndarray:
        """Bucket of each length among n_buckets of equal width in G: floor(G * n), G = 1 in the last."""
        return np.minimum((self(lengths) * n_buckets).astype(np.int64), n_buckets - 1)


def cost_order(lengths: np.ndarray, noise: np.ndarray, width: float) -> np.ndarray:
    """The sample order by G(l) + noise (noise in [-width/2, width/2]), G + noise quantised to 2^32
    levels of its range and radix-sorted; lengths must not all be equal."""
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    return _radix_order(_quantised(lengths, noise, -width / 2, _LEVELS / (1.0 + width), *_tables(lengths)))


def _tables(lengths: np.ndarray) -> tuple:
    """(low, high, bins, slope, offset, total): G(l) = (offset_k + slope_k * 0.4 * l^(5/2)) / total in bin k."""
    low, high = int(lengths.min()), int(lengths.max())
    n_bins = max(1, min(int(round(np.sqrt(lengths.size))), high - low))
    edges = np.linspace(low, high, n_bins + 1)
    counts = _histogram(lengths, low, high, n_bins)
    slope = np.sqrt(np.maximum(counts, DENSITY_FLOOR * lengths.size / n_bins))  # G' = slope_k * l^(3/2) in bin k
    rise = slope * 0.4 * np.diff(edges**2.5)  # ∫ x^(3/2) dx = 0.4 x^(5/2), over each bin
    start = np.concatenate([[0.0], np.cumsum(rise)[:-1]])
    return low, high, n_bins, slope, start - slope * 0.4 * edges[:-1] ** 2.5, float(rise.sum())


@numba.njit(cache=True, nogil=True)
def _bin(length, low, high, n_bins):  # pragma: no cover - compiled
    """Equal-width bin of a length over [low, high] (high itself in the last bin)."""
    return min((length - low) * n_bins // (high - low), n_bins - 1)


@numba.njit(cache=True, nogil=True)
def _g(length, low, high, n_bins, slope, offset, total):  # pragma: no cover - compiled
    """G(l): the integral of G' from low to l, over its integral from low to high."""
    k = _bin(length, low, high, n_bins)
    x = float(length)
    return (offset[k] + slope[k] * 0.4 * x * x * np.sqrt(x)) / total


@numba.njit(cache=True, nogil=True)
def _histogram(lengths, low, high, n_bins):  # pragma: no cover - compiled
    counts = np.zeros(n_bins)
    for i in range(lengths.size):
        counts[_bin(lengths[i], low, high, n_bins)] += 1.0
    return counts


@numba.njit(cache=True, nogil=True)
def _keys(lengths, low, high, n_bins, slope, offset, total):  # pragma: no cover - compiled
    out = np.empty(lengths.size)
    for i in range(lengths.size):
        out[i] = _g(lengths[i], low, high, n_bins, slope, offset, total)
    return out


@numba.njit(cache=True, nogil=True)
def _quantised(lengths, noise, noise_low, scale, low, high, n_bins, slope, offset, total):  # pragma: no cover
    """(G(l) + noise - noise_low) * scale as uint32, clipped: G + noise spans [noise_low, 1 - noise_low]."""
    out = np.empty(lengths.size, np.uint32)
    for i in range(lengths.size):
        value = (_g(lengths[i], low, high, n_bins, slope, offset, total) + noise[i] - noise_low) * scale
        out[i] = np.uint32(min(max(value, 0.0), _LEVELS))
    return out


@numba.njit(cache=True, nogil=True)
def _radix_order(keys):  # pragma: no cover - compiled
    """Stable argsort of uint32 keys: least significant 16 bits first, then the most significant
    (carried along with the indices, so the second pass reads in sequence)."""
    n = keys.size
    low_counts = np.zeros(65537, np.int64)
    high_counts = np.zeros(65537, np.int64)
    for i in range(n):
        low_counts[(keys[i] & 0xFFFF) + 1] += 1
        high_counts[(keys[i] >> 16) + 1] += 1
    low_counts = np.cumsum(low_counts)
    high_counts = np.cumsum(high_counts)
    first = np.empty(n, np.int64)
    first_high = np.empty(n, np.uint16)
    for i in range(n):
        slot = low_counts[keys[i] & 0xFFFF]
        first[slot] = i
        first_high[slot] = keys[i] >> 16
        low_counts[keys[i] & 0xFFFF] += 1
    order = np.empty(n, np.int64)
    for j in range(n):
        order[high_counts[first_high[j]]] = first[j]
        high_counts[first_high[j]] += 1
    return order
