"""Lhotse's sampler constructor arguments, checked and mapped onto a BatchingConfig for PlanCutSampler
(plan_sampler.py), its windowed twin for streams (stream_sampler.py) and SharCutSampler
(shar_sampler.py): the positional forms, zipped and lazy CutSets, max_duration / max_cuts / shuffle /
drop_last / seed / quadratic_duration / constraint / too_long, and the bucketing knobs that have no
effect here.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

from lhotse import CutSet
from lhotse.dataset.dataloading import resolve_seed
from lhotse.shar.readers.lazy import LazySharIterator

from ..config import PAPER_TARGET, BatchingConfig
from ..errors import UserError
from .base import log
from .measure import Measure, measure_from

#: SSB with dynamic batch sizes (budget B0 x L_max unless max_duration is given) and shuffled batches,
#: on the cost key calibrated to the paper's SSB's ZPR on the cuts (docs/batching/ssb_key.md), as the recipe's.
DEFAULT_CONFIG = BatchingConfig("ssb", dbs=True, br=True, ssb_key="cost", target_zpr=PAPER_TARGET)
#: Lhotse's bucketing and buffering knobs: accepted so that a datamodule runs unchanged, without effect
#: here (the whole epoch is planned at once: no buckets, no buffers), each logged once.
NO_EFFECT_KNOBS = (
    "num_buckets",
    "duration_bins",
    "buffer_size",
    "shuffle_buffer_size",
    "concurrent",
    "sync_buckets",
    "num_cuts_for_bins_estimate",
    "consistent_ids",
    "strict",
)
_logged_knobs: set[str] = set()
TOO_LONG = ("error", "skip", "alone")


@dataclass(frozen=True)
class Settings:
    """A sampler's Lhotse arguments, checked: the example sources as given (CutSets, lists or
    iterators), how examples are measured, the config planning them (budget, max_cuts, shuffle,
    drop_last and seed applied; the seed left unset while `deferred_seed` waits to be drawn)."""

    sources: list
    measure: Measure
    config: BatchingConfig
    deferred_seed: str | None
    too_long: str
    frame_shift: float
    max_duration: float | None
    constraint: object
    shuffle: bool


def sampler_settings(
    cuts: tuple,
    world_size: int,
    defer_seed: bool,
    config: BatchingConfig | None = None,
    max_duration: float | None = None,
    max_cuts: int | None = None,
    shuffle: bool | None = None,
    drop_last: bool | None = None,
    seed: int | str | None = None,
    quadratic_duration: float | None = None,
    constraint=None,
    frame_shift: float = 0.01,
    too_long: str = "error",
    **bucketing,
) -> Settings:
    """PlanCutSampler's arguments (see its docstring) checked and mapped. defer_seed: a "randomized" /
    "trng" seed on one rank is drawn later, where the sampler first iterates (as Lhotse does)."""
    check_knobs(bucketing)
    sources, config, max_duration = split_positional(cuts, config, max_duration)
    if too_long not in TOO_LONG:
        raise UserError(f"too_long={too_long!r} must be one of {', '.join(map(repr, TOO_LONG))}")
    if not frame_shift > 0:
        raise UserError(f"frame_shift={frame_shift} must be a positive number of seconds")
    measure = measure_from(constraint, max_duration, max_cuts, quadratic_duration, frame_shift)
    config = with_budget(config, measure.capacity)
    # "randomized" / "trng" on one rank: drawn where the sampler first iterates, as Lhotse does, so
    # each DataLoader worker of an IterableDatasetWrapper draws its own; on several ranks: now, shared
    deferred = seed if defer_seed and seed in ("randomized", "trng") and world_size == 1 else None
    config = with_lhotse_options(
        config, measure.max_cuts, shuffle, drop_last, None if deferred else resolved_seed(seed, world_size)
    )
    return Settings(
        sources, measure, config, deferred, too_long, frame_shift, max_duration, constraint, shuffle is not False
    )


def check_padded(config: BatchingConfig) -> None:
    """The samplers yield padded batches of examples: a strategy that packs them into blocks is refused."""
    if config.plans_blocks:
        raise UserError(
            f"batching={config.batching} plans blocks that pack several cuts each (a block plan); "
            "PlanCutSampler yields padded CutSet batches: choose a padded strategy (e.g. ssb)"
        )


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
        raise UserError(
            f"PlanCutSampler takes one or more CutSets (or lists of examples), then optionally "
            f"max_duration or a BatchingConfig; got {got}"
        )
    return cut_sets, config or DEFAULT_CONFIG, max_duration


def as_cut_sets(sources: list) -> list[CutSet]:
    """Finite, re-iterable sources (CutSets, lists or tuples of examples) as CutSets to plan whole; a
    CutSet read from Shar shards, which can only be read in order, refused."""
    cut_sets = [s if isinstance(s, CutSet) else CutSet(list(s)) for s in sources]
    if any(isinstance(s, LazySharIterator) for c in cut_sets if c.is_lazy for s in lazy_chain(c.data)):
        raise UserError(
            "PlanCutSampler got a lazy CutSet read from Shar shards, which can only be read in order: use "
            "batching.lhotse.SharCutSampler (the streaming strategy over the shards), or plan from a "
            "JSONL manifest of the same cuts (docs/lhotse.md, 'Shar')"
        )
    return cut_sets


def lazy_chain(source, depth: int = 8) -> Iterator:
    """A lazy CutSet's chain of lhotse iterators (filters, maps, muxes...) down to its readers, and any
    other iterator they read (e.g. a generator muxed in), not looked into."""
    yield source
    inner = [v for v in getattr(source, "__dict__", {}).values() for v in (v if isinstance(v, (list, tuple)) else [v])]
    for value in inner:
        if depth > 0 and type(value).__module__.startswith("lhotse"):
            yield from lazy_chain(value, depth - 1)
        elif hasattr(value, "__next__"):
            yield value


def check_zipped(cut_lists: list[list]) -> None:
    first = cut_lists[0]
    for other in cut_lists[1:]:
        if len(other) != len(first):
            raise UserError(
                f"zipped CutSets differ in size ({len(first)} and {len(other)} cuts): zip CutSets of "
                "the same cuts in the same order"
            )


def with_budget(config: BatchingConfig, capacity: int | None) -> BatchingConfig:
    """The config planning under `capacity` (the Measure's, in planning lengths), if there is one."""
    if capacity is None:
        return config
    if config.capacity is not None:
        raise UserError(
            f"the budget is given twice: by max_duration or constraint and by capacity={config.capacity} "
            "frames; keep one"
        )
    return dataclasses.replace(config, dbs=True, capacity=capacity)


def with_lhotse_options(
    config: BatchingConfig, max_cuts: int | None, shuffle: bool | None, drop_last: bool | None, seed: int | None
) -> BatchingConfig:
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
    value = secrets.randbelow(2**31) if seed == "trng" else resolve_seed(seed) % 2**31
    if world_size > 1:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise UserError(
                f"seed={seed!r} on {world_size} ranks needs torch.distributed initialised, so that every "
                "rank plans with rank 0's seed: initialise it first, or pass an integer seed"
            )
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
        log.warning(
            "PlanCutSampler: %s=%r has no effect (the whole epoch is planned at once: no buckets or buffers)",
            name,
            bucketing[name],
        )
