"""The planner of the ordering strategies (RAND, SB, SSB, BKT, ATS): order the samples, cut the
order into batches of B0 or under a DBS token budget, deal the batches to ranks (Sections 2-5)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from .config import BatchingConfig
from .errors import UserError
from .grouping import dynamic_cuts, fixed_cuts
from .plan import GlobalPlan
from .sharding import arrange

Ordering = Callable[[np.ndarray, BatchingConfig, np.random.Generator], np.ndarray]


def capacity_of(lengths: np.ndarray, config: BatchingConfig) -> int | None:
    """The DBS token budget in frames (None without dbs); every sample must fit in it alone."""
    if not config.dbs:
        return None
    if config.capacity is None:
        return config.batch_size * int(lengths.max(initial=1))
    too_long = np.flatnonzero(lengths > config.capacity)
    if too_long.size:
        i = int(too_long[0])
        raise UserError(f"sample {i} has length {lengths[i]} frames, over the batch capacity of "
                        f"{config.capacity} frames ({too_long.size} such samples): raise capacity")
    return config.capacity


def plan_ordered(lengths: np.ndarray, config: BatchingConfig, epoch: int, world_size: int, *,
                 order: Ordering) -> GlobalPlan:
    """One epoch from a generator seeded with (seed, epoch): `order`, then cuts, then sharding."""
    capacity = capacity_of(lengths, config)
    rng = np.random.default_rng([config.seed, epoch])
    samples = order(lengths, config, rng)
    if capacity is None:
        cuts = fixed_cuts(samples.size, config.batch_size, config.drop_last)
        samples = samples[: cuts[-1]]
    else:
        cuts = dynamic_cuts(lengths[samples], capacity)
    samples, cuts, seq = arrange(samples, cuts, lengths, world_size, config.drop_last, rng if config.br else None)
    return GlobalPlan(samples, cuts, seq, world_size)
