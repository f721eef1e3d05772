"""One epoch's batches: order the samples, group them, deal them to ranks (paper Sections 2-5)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .config import BatchingConfig
from .grouping import dynamic_cuts, fixed_cuts
from .ordering import order_samples
from .sharding import arrange


@dataclass(frozen=True)
class GlobalPlan:
    """All ranks' batches of one epoch: batch b is order[cuts[b]:cuts[b+1]]; seq is step-major."""

    order: np.ndarray
    cuts: np.ndarray
    seq: np.ndarray
    world_size: int

    def batches(self, rank: int | None = None) -> list[np.ndarray]:
        """One rank's batches in run order, or with rank=None every batch in step-major order."""
        seq = self.seq if rank is None else self.seq[rank::self.world_size]
        starts, stops = self.cuts[seq].tolist(), self.cuts[seq + 1].tolist()
        return list(map(self.order.__getitem__, map(slice, starts, stops)))


def as_lengths(lengths) -> np.ndarray:
    """Validate sample lengths: a 1-D array of positive integers."""
    array = np.asarray(lengths)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"lengths must be a 1-D array of integers, got shape {array.shape} dtype {array.dtype}")
    if array.size and array.min() < 1:
        i = int(np.argmin(array))
        raise ValueError(f"sample {i} has length {array[i]}: lengths must be >= 1")
    return array.astype(np.int64, copy=False)


def capacity_of(lengths: np.ndarray, config: BatchingConfig) -> int | None:
    """The DBS token budget in frames (None without dbs); every sample must fit in it alone."""
    if not config.dbs:
        return None
    if config.capacity is None:
        return config.batch_size * int(lengths.max(initial=1))
    too_long = np.flatnonzero(lengths > config.capacity)
    if too_long.size:
        i = int(too_long[0])
        raise ValueError(f"sample {i} has length {lengths[i]} frames, over the batch capacity of "
                         f"{config.capacity} frames ({too_long.size} such samples): raise capacity")
    return config.capacity


def plan_global(lengths, config: BatchingConfig, epoch: int = 0, world_size: int = 1) -> GlobalPlan:
    """Plan an epoch for all ranks from a generator seeded with (seed, epoch): same inputs, same plan."""
    if world_size < 1:
        raise ValueError(f"world_size={world_size} must be >= 1")
    lengths = as_lengths(lengths)
    if config.batching == "stream":  # the blog's streaming length-bucket sampler
        from .stream import plan_stream
        return plan_stream(lengths, config, epoch, world_size)
    if config.batching == "bload":  # BLoad block packing: a BlockPlan
        from .bload import plan_bload
        return plan_bload(lengths, config, epoch, world_size)
    capacity = capacity_of(lengths, config)
    rng = np.random.default_rng([config.seed, epoch])
    order = order_samples(lengths, config, rng)
    if capacity is None:
        cuts = fixed_cuts(order.size, config.batch_size, config.drop_last)
        order = order[: cuts[-1]]
    else:
        cuts = dynamic_cuts(lengths[order], capacity)
    order, cuts, seq = arrange(order, cuts, lengths, world_size, config.drop_last, rng if config.br else None)
    return GlobalPlan(order, cuts, seq, world_size)


def plan_epoch(lengths, config: BatchingConfig, epoch: int = 0, rank: int = 0,
               world_size: int = 1) -> list[np.ndarray]:
    """The batches (int64 sample indices) that `rank` of `world_size` runs in `epoch`, in order.

    Every rank builds the same global plan and takes every world_size-th batch, so all ranks
    get the same number of batches. Every sample appears exactly once per epoch, except:
    with drop_last, fixed-size plans drop the incomplete last batch and multi-rank plans drop
    the count % world_size smallest batches; without it, the largest batches are split in two
    to reach a multiple of world_size, and samples are repeated (cyclically, as single-sample
    batches) only when there are fewer samples than that multiple, e.g. fewer than ranks.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank={rank} must be in [0, world_size={world_size})")
    return plan_global(lengths, config, epoch, world_size).batches(rank)


def plan_digest(batches: list[np.ndarray]) -> str:
    """A SHA-256 of the batches' contents and boundaries, for ranks to check they agree."""
    digest = hashlib.sha256()
    digest.update(np.fromiter(map(len, batches), np.int64, len(batches)).tobytes())
    if batches:
        digest.update(np.concatenate(batches).astype("<i8", copy=False).tobytes())
    return digest.hexdigest()
