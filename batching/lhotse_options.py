"""Lhotse's sampler constructor arguments, checked and mapped onto a BatchingConfig for PlanCutSampler
(batching/lhotse.py): the positional forms, zipped and lazy CutSets, max_duration / max_cuts /
shuffle / drop_last / seed / quadratic_duration, and the bucketing knobs that have no effect here.
"""
from __future__ import annotations

import dataclasses
import logging
import secrets
from typing import Iterator

from lhotse import CutSet
from lhotse.dataset.dataloading import resolve_seed
from lhotse.lazy import LazyInfiniteApproximateMultiplexer, LazyRepeater
from lhotse.shar.readers.lazy import LazySharIterator

from .config import PAPER_TARGET, BatchingConfig
from .errors import UserError

#: SSB with dynamic batch sizes (budget B0 x L_max unless max_duration is given) and shuffled batches,
#: on the cost key calibrated to the paper's SSB's ZPR on the cuts (docs/batching/ssb_key.md), as the recipe's.
DEFAULT_CONFIG = BatchingConfig("ssb", dbs=True, br=True, ssb_key="cost", target_zpr=PAPER_TARGET)
#: Lhotse's bucketing and buffering knobs: accepted so that a datamodule runs unchanged, without effect
#: here (the whole epoch is planned at once: no buckets, no buffers), each logged once.
NO_EFFECT_KNOBS = ("num_buckets", "duration_bins", "buffer_size", "shuffle_buffer_size", "concurrent", "sync_buckets",
                   "num_cuts_for_bins_estimate", "consistent_ids", "strict")
_logged_knobs: set[str] = set()
log = logging.getLogger("batching.lhotse")


def split_positional(cuts: tuple, config: BatchingConfig | None, max_duration: float | None):
    """Lhotse's positional forms: (cuts, ...), then a budget in seconds or a BatchingConfig."""
    *cut_sets, last = cuts if cuts else (None,)
    if isinstance(last, BatchingConfig) and config is None:
        config = last
    elif isinstance(last, (int, float)) and not isinstance(last, bool) and max_duration is None:
        max_duration = last
    else:
        cut_sets.append(last)
    if not cut_sets or not all(isinstance(c, (CutSet, list, tuple)) or hasattr(c, "__next__") for c in cut_sets):
        got = ", ".join(type(c).__name__ for c in cuts) or "nothing"
        raise UserError(f"PlanCutSampler takes one or more CutSets (or lists of examples), then optionally "
                        f"max_duration or a BatchingConfig; got {got}")
    cut_sets = [_as_cut_set(c) for c in cut_sets]
    for lazy in (c for c in cut_sets if c.is_lazy):
        _refuse_unplannable(lazy)
    return cut_sets, config or DEFAULT_CONFIG, max_duration


def _as_cut_set(source) -> CutSet:
    """A list or tuple of examples (cuts, TextExamples...) as an eager CutSet; a one-pass iterator refused."""
    if isinstance(source, CutSet):
        return source
    if isinstance(source, (list, tuple)):
        return CutSet(list(source))
    raise UserError(f"PlanCutSampler got a one-pass iterator ({type(source).__name__}), which it cannot plan: every "
                    "epoch is planned whole and reads the examples again; pass a finite list or CutSet of them")


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


def with_budget(config: BatchingConfig, capacity: int | None) -> BatchingConfig:
    """The config planning under `capacity` (the Measure's, in planning lengths), if there is one."""
    if capacity is None:
        return config
    if config.capacity is not None:
        raise UserError(f"the budget is given twice: by max_duration or constraint and by capacity={config.capacity} "
                        "frames; keep one")
    return dataclasses.replace(config, dbs=True, capacity=capacity)


def with_lhotse_options(config: BatchingConfig, max_cuts: int | None, shuffle: bool | None,
                         drop_last: bool | None, seed: int | None) -> BatchingConfig:
    """max_cuts alone: fixed batches of max_cuts; shuffle=False: sorted, the same every epoch."""
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
    unknown = sorted(set(bucketing) - set(NO_EFFECT_KNOBS))
    if unknown:
        raise TypeError(f"PlanCutSampler got unexpected keyword arguments: {', '.join(unknown)}")
    for name in sorted(set(bucketing) - _logged_knobs):
        _logged_knobs.add(name)
        log.warning("PlanCutSampler: %s=%r has no effect (the whole epoch is planned at once: no buckets or buffers)",
                    name, bucketing[name])
