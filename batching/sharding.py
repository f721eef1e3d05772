"""Dealing the global batches to ranks in lock-step (no rank may run out of batches before another).

A plan is held as (order, cuts, seq): batch b is order[cuts[b]:cuts[b + 1]], and seq lists the
batches in step-major order, so rank r runs seq[s * world_size + r] at step s.
"""

from __future__ import annotations

import numpy as np


def arrange(
    order: np.ndarray,
    cuts: np.ndarray,
    lengths: np.ndarray,
    world_size: int,
    drop_last: bool,
    rng: np.random.Generator | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Make the batch count a multiple of world_size and order the steps.

    Tail: without drop_last, the largest batches are split in two (halves stay neighbours
    in length) until the count is a multiple of world_size; only when there are fewer
    samples than that count (e.g. fewer samples than ranks) are samples repeated, cyclically
    in plan order, as single-sample batches. With drop_last, the count % world_size batches
    with the fewest samples are dropped instead.
    Steps: the batches sorted by batch length are cut into steps of world_size neighbours,
    so ranks wait little on each other; the steps are shuffled when rng is given (BR),
    otherwise they keep the plan order of their earliest batch.
    """
    n_batches = cuts.size - 1
    keep = np.arange(n_batches)
    if n_batches % world_size and drop_last:
        sizes = np.diff(cuts)
        fewest = np.lexsort((-keep, sizes))[: n_batches % world_size]
        keep = np.delete(keep, fewest)
    elif n_batches % world_size:
        order, cuts = _split_largest(order, cuts, -n_batches % world_size)
        keep = np.arange(cuts.size - 1)
    if world_size == 1:
        steps = keep[:, None]
    else:
        batch_len = np.maximum.reduceat(lengths[order], cuts[keep]) if keep.size else keep
        steps = keep[np.argsort(batch_len, kind="stable")].reshape(-1, world_size)
    if rng is not None:
        steps = steps[rng.permutation(len(steps))]
    elif world_size > 1:
        steps = steps[np.argsort(steps.min(axis=1), kind="stable")]
    return order, cuts, steps.ravel()


def halve_largest(cuts: np.ndarray, need: int) -> tuple[np.ndarray, int]:
    """Split up to `need` of the largest segments (those of 2+ items) in two.

    Returns the new cuts and how many more segments are still needed (all left are singletons).
    """
    while need:
        sizes = np.diff(cuts)
        largest = np.argsort(-sizes, kind="stable")[:need]
        largest = largest[sizes[largest] >= 2]
        if not largest.size:
            break
        cuts = np.sort(np.concatenate([cuts, cuts[largest] + (sizes[largest] + 1) // 2]))
        need -= largest.size
    return cuts, need


def _split_largest(order: np.ndarray, cuts: np.ndarray, need: int) -> tuple[np.ndarray, np.ndarray]:
    """Add `need` batches by halving the largest ones; repeat samples only if all are singletons."""
    cuts, need = halve_largest(cuts, need)
    if need and order.size:
        order = np.concatenate([order, np.resize(order, need)])
        cuts = np.concatenate([cuts, cuts[-1] + np.arange(1, need + 1)])
    return order, cuts
