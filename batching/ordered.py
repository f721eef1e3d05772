"""The planner of the ordering strategies (RAND, SB, SSB, BKT, ATS): order the samples, cut the
order into batches of B0 or under a DBS token budget, deal the batches to ranks (Sections 2-5)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .budget import token_budget
from .config import BatchingConfig
from .grouping import dynamic_cuts, fixed_cuts, without_incomplete_last
from .plan import GlobalPlan
from .sharding import arrange

Ordering = Callable[[np.ndarray, BatchingConfig, np.random.Generator], np.ndarray]


def capacity_of(lengths: np.ndarray, config: BatchingConfig) -> int | None:
    """The DBS token budget in frames (None without dbs); every sample must fit in it alone."""
    return token_budget(lengths, config) if config.dbs else None


def plan_ordered(
    lengths: np.ndarray, config: BatchingConfig, epoch: int, world_size: int, *, order: Ordering
) -> GlobalPlan:
    """One epoch from a generator seeded with (seed, epoch): `order`, then cuts, then sharding."""
    capacity = capacity_of(lengths, config)
    rng = np.random.default_rng([config.seed, epoch])
    samples = order(lengths, config, rng)
    if capacity is None:
        cuts = fixed_cuts(samples.size, config.batch_size, config.drop_last)
    else:
        cuts = dynamic_cuts(lengths[samples], capacity)
        if config.drop_last:
            cuts = without_incomplete_last(cuts, lengths[samples], capacity)
    samples = samples[: cuts[-1]]
    samples, cuts, seq = arrange(samples, cuts, lengths, world_size, config.drop_last, rng if config.br else None)
    return GlobalPlan(samples, cuts, seq, world_size)
