"""The token budget of a batch and the one error for a sample over a length limit: the budget is
shared by the strategies that cut batches under it (ordered.py with dbs, stream.py), the error also
by the block packer (bload.py's block_length)."""

from __future__ import annotations

import numpy as np

from .config import BatchingConfig
from .errors import UserError

#: What to do about a sample over capacity when samples over max_length may be skipped (stream).
SKIP_ADVICE = "raise capacity, or set max_length to skip such samples"


def over_limit(index: int, length: int, limit: str, advice: str, count: int | None = None) -> UserError:
    """The error for sample `index` of `length` frames over `limit` (e.g. "the batch capacity of 500
    frames"), with how many samples are (`count`, when known) and what to do."""
    such = "" if count is None else f" ({count} such samples)"
    return UserError(f"sample {index} has length {length} frames, over {limit}{such}: {advice}")


def token_budget(
    lengths: np.ndarray, config: BatchingConfig, kept: np.ndarray | None = None, advice: str = "raise capacity"
) -> int:
    """The token budget in frames: capacity, else batch_size * the longest kept sample (the paper's
    B0 * L_max). kept: the indices of the samples batched (None: all); each must fit in the budget
    alone, else the error names the first that does not."""
    kept_lengths = lengths if kept is None else lengths[kept]
    if config.capacity is None:
        return config.batch_size * int(kept_lengths.max(initial=1))
    too_long = np.flatnonzero(kept_lengths > config.capacity)
    if too_long.size:
        index = int(too_long[0] if kept is None else kept[too_long[0]])
        raise over_limit(
            index, lengths[index], f"the batch capacity of {config.capacity} frames", advice, too_long.size
        )
    return config.capacity
