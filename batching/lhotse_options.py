"""Lhotse's sampler constructor arguments, checked and mapped onto a BatchingConfig for PlanCutSampler
(batching/lhotse.py): the positional forms, zipped and lazy CutSets, max_duration / max_cuts /
shuffle / drop_last / seed / quadratic_duration, and the bucketing knobs that have no effect here.
"""
from __future__ import annotations

import dataclasses
import logging
import secrets
from typing import Iterator

import numpy as np
from lhotse import CutSet
from lhotse.dataset.dataloading import resolve_seed
from lhotse.lazy import LazyInfiniteApproximateMultiplexer, LazyRepeater
from lhotse.shar.readers.lazy import LazySharIterator

from .config import BatchingConfig
from .errors import UserError

#: SSB with dynamic batch sizes (budget B0 x L_max unless max_duration is given) and shuffled batches.
DEFAULT_CONFIG = BatchingConfig("ssb", dbs=True, br=True)
#: Lhotse's bucketing and buffering knobs: accepted so that a datamodule runs unchanged, without effect
#: here (the whole epoch is planned at once: no buckets, no buffers), each logged once.
NO_EFFECT_KNOBS = ("num_buckets", "duration_bins", "buffer_size", "shuffle_buffer_size", "concurrent", "sync_buckets",
                   "num_cuts_for_bins_estimate", "consistent_ids", "strict")
_logged_knobs: set[str] = set()
log = logging.getLogger("batching.lhotse")


def effective_durations(durations: np.ndarray, quadratic_duration: float | None) -> np.ndarray:
    """Lhotse's quadratic_duration: a cut costs duration + duration**2 / quadratic_duration."""
    if quadratic_duration is None:
        return durations
    if not quadratic_duration > 0:
        raise UserError(f"quadratic_duration={quadratic_duration} must be a positive number of seconds")
    return durations + durations ** 2 / quadratic_duration


def split_positional(cuts: tuple, config: BatchingConfig | None, max_duration: float | None):
    """Lhotse's positional forms: (cuts, ...), then a budget in seconds or a BatchingConfig."""
    *cut_sets, last = cuts if cuts else (None,)
    if isinstance(last, BatchingConfig) and config is None:
        config = last
    elif isinstance(last, (int, float)) and not isinstance(last, bool) and max_duration is None:
        max_duration = last
    else:
        cut_sets.append(last)
    if not cut_sets or not all(isinstance(c, CutSet) for c in cut_sets):
        raise UserError(f"PlanCutSampler takes one or more CutSets, then optionally max_duration or a BatchingConfig; "
                        f"got {', '.join(type(c).__name__ for c in cuts) or 'nothing'}")
    for lazy in (c for c in cut_sets if c.is_lazy):
        _refuse_unplannable(lazy)
    return cut_sets, config or DEFAULT_CONFIG, max_duration


def _chain(source, depth: int = 8) -> Iterator:
    """A lazy CutSet's chain of lhotse iterators (filters, maps, muxes...) down to its readers."""
    yield source
    inner = [v for v in getattr(source, "__dict__", {}).values() for v in (v if isinstance(v, (list, tuple)) else [v])]
    for value in inner:
        if depth > 0 and type(value).__module__.startswith("lhotse"):
            yield from _chain(value, depth - 1)


def _refuse_unplannable(cuts: CutSet) -> None:
    """A lazy CutSet must be finite and not read from Shar shards to be read in for planning."""
    chain = list(_chain(cuts.data))
    if any(isinstance(s, LazySharIterator) for s in chain):
        raise UserError("PlanCutSampler got a lazy CutSet read from Shar shards, which can only be read in order: use "
                        "batching.lhotse_shar.SharCutSampler (the streaming strategy over the shards), or plan from a "
                        "JSONL manifest of the same cuts (docs/lhotse.md, 'Shar')")
    if any(isinstance(s, LazyRepeater) and s.times is None or isinstance(s, LazyInfiniteApproximateMultiplexer)
           for s in chain):
        raise UserError("PlanCutSampler plans whole epochs and got an infinite lazy CutSet (.repeat() or an infinite "
                        "mux): pass the finite CutSet and let set_epoch run the epochs")


def check_zipped(cut_lists: list[list]) -> None:
    first = cut_lists[0]
    for other in cut_lists[1:]:
        if len(other) != len(first):
            raise UserError(f"zipped CutSets differ in size ({len(first)} and {len(other)} cuts): zip CutSets of "
                            "the same cuts in the same order")


def with_budget(config: BatchingConfig, max_duration: float | None, frame_shift: float) -> BatchingConfig:
    if max_duration is None:
        return config
    if config.capacity is not None:
        raise UserError(f"the budget is given twice: max_duration={max_duration} s and capacity={config.capacity} "
                        "frames; keep one")
    if not max_duration > 0:
        raise UserError(f"max_duration={max_duration} must be a positive number of seconds")
    return dataclasses.replace(config, dbs=True, capacity=max(1, int(max_duration / frame_shift + 1e-9)))


def with_lhotse_options(config: BatchingConfig, max_cuts: int | None, shuffle: bool | None,
                         drop_last: bool | None, seed: int | None) -> BatchingConfig:
    """max_cuts alone: fixed batches of max_cuts; shuffle=False: sorted, the same every epoch."""
    if max_cuts is not None and (isinstance(max_cuts, bool) or not isinstance(max_cuts, int) or max_cuts < 1):
        raise UserError(f"max_cuts={max_cuts!r} must be a positive integer")
    if max_cuts is not None and config.capacity is None:
        config = dataclasses.replace(config, dbs=False, batch_size=max_cuts)
    if shuffle is False:
        config = config.with_strategy("sb", br=False)
    changes = {k: v for k, v in (("drop_last", drop_last), ("seed", seed)) if v is not None}
    return dataclasses.replace(config, **changes)


def resolved_seed(seed: int | str | None, world_size: int) -> int | None:
    """Lhotse's seeds: an int as is; "randomized" from Python's random state (or the worker's),
    "trng" from the OS. Every rank must plan alike, so under torch.distributed rank 0's is used."""
    if seed is None or isinstance(seed, int):
        return seed
    if seed not in ("randomized", "trng"):
        raise UserError(f"seed={seed!r} must be an integer, 'randomized' or 'trng'")
    value = secrets.randbelow(2 ** 31) if seed == "trng" else resolve_seed(seed) % 2 ** 31
    if world_size > 1:
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            raise UserError(f"seed={seed!r} on {world_size} ranks needs torch.distributed initialised, so that every "
                            "rank plans with rank 0's seed: initialise it first, or pass an integer seed")
        shared = [value]
        dist.broadcast_object_list(shared, src=0)
        value = shared[0]
    return value


def check_knobs(bucketing: dict) -> None:
    if bucketing.get("constraint") is not None:
        raise UserError("constraint= (a Lhotse SamplingConstraint) is not supported by PlanCutSampler: give the budget "
                        "as max_duration (seconds, padding included) and/or max_cuts")
    bucketing.pop("constraint", None)
    unknown = sorted(set(bucketing) - set(NO_EFFECT_KNOBS))
    if unknown:
        raise TypeError(f"PlanCutSampler got unexpected keyword arguments: {', '.join(unknown)}")
    for name in sorted(set(bucketing) - _logged_knobs):
        _logged_knobs.add(name)
        log.warning("PlanCutSampler: %s=%r has no effect (the whole epoch is planned at once: no buckets or buffers)",
                    name, bucketing[name])
