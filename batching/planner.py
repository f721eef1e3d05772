"""The strategy table and the planner's entry points: one epoch's plan for any strategy.

Every strategy is one row of STRATEGY_TABLE. A row names the function that plans an epoch
(lengths, config, epoch, world_size) -> GlobalPlan, and what the rest of the recipe needs to know
about it, so nothing outside `batching/` compares strategy names or knows a strategy's options:

* block_plan: its plan is a block plan (a BlockPlan: batches of blocks of block_length frames,
  each holding several utterances, as BLoad's); the torch side then uses BlockBatchSampler, the
  block view and the block collate instead of PlanBatchSampler and the padding collate;
* dbs: the value it forces on `dbs` (None: the user's choice);
* options / forbids: the BatchingConfig fields only it may set, and fields it refuses.
  BatchingConfig.with_strategy drops them when a config switches to another strategy.

How to add a strategy that plans the whole epoch itself (as stream and bload do), touching
`batching/` and hparams.yaml only:
1. write `batching/<name>.py` with `plan_<name>(lengths, config, epoch, world_size)` returning a
   GlobalPlan (or a subclass that overrides `stats`, `redeal` and `digest`, as BlockPlan does);
2. import it here and add its row below; an option of its own is a BatchingConfig field
   `<option>: int | None = None` named in the row's `options` (None is unset, any other value
   must be an integer >= 1; an option of another type needs its own check in `__post_init__`);
3. add the option's key to hparams.yaml as `<option>: null` with a comment saying what null means.
Then `train.py` (`--check`, training, `--resume`), the sampler, the data check and
`python -m batching` work unchanged: `stats` shows its plan; `calibrate` tunes only the parameters
named in analysis.py's SWEPT and reports the given strategy's own figures beside them if it has
none there. An ordering strategy needs only an `order_<name>` function in ordering.py and its row.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Callable

import numpy as np

from .bload import plan_bload
from .ordered import plan_ordered
from .ordering import order_alternated, order_bucketed, order_random, order_semi_sorted, order_sorted
from .plan import GlobalPlan, as_lengths
from .stream import plan_stream

if TYPE_CHECKING:  # annotations only: config.py validates against this table
    from .config import BatchingConfig


@dataclass(frozen=True)
class Strategy:
    """One batching strategy: how it plans an epoch and what it implies (module doc)."""

    name: str
    plan: Callable[..., GlobalPlan]
    summary: str
    block_plan: bool = False
    dbs: bool | None = None
    options: tuple[str, ...] = ()
    forbids: tuple[str, ...] = ()


STRATEGY_TABLE: dict[str, Strategy] = {s.name: s for s in (
    Strategy("rand", partial(plan_ordered, order=order_random), "shuffle (the baseline)"),
    Strategy("sb", partial(plan_ordered, order=order_sorted), "sort by length"),
    Strategy("ssb", partial(plan_ordered, order=order_semi_sorted), "sort by a key + uniform noise (lrf, ssb_key)",
             options=("ssb_key", "target_zpr", "target_pair_repeat")),
    Strategy("bkt", partial(plan_ordered, order=order_bucketed), "sort, shuffle inside buckets (bucket_size)"),
    Strategy("ats", partial(plan_ordered, order=order_alternated), "alternately sorted bins (n_bins)"),
    Strategy("stream", plan_stream, "the blog's streaming length buckets (bucket_interval, max_length)",
             dbs=True, options=("max_length",)),
    Strategy("bload", plan_bload, "BLoad block packing (block_length)", block_plan=True, dbs=False,
             options=("block_length",), forbids=("capacity",)),
)}
STRATEGIES = tuple(STRATEGY_TABLE)


def strategy_of(config: BatchingConfig) -> Strategy:
    return STRATEGY_TABLE[config.batching]


def plan_global(lengths, config: BatchingConfig, epoch: int = 0, world_size: int = 1) -> GlobalPlan:
    """Plan an epoch for all ranks from a generator seeded with (seed, epoch): same inputs, same plan."""
    if world_size < 1:
        raise ValueError(f"world_size={world_size} must be >= 1")
    return strategy_of(config).plan(as_lengths(lengths), config, epoch, world_size)


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
