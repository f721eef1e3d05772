"""The planner's entry points: one epoch's plan for any strategy, dispatched on the strategy table.

The rows of STRATEGY_TABLE (strategies.py) say what each strategy is and implies; PLANNERS names
the function that plans its epoch, (lengths, config, epoch, world_size) -> GlobalPlan. The rows
sit below BatchingConfig (which validates against them) and this dispatch above the strategies'
modules (which take the config), so no import runs back up.

How to add a strategy that plans the whole epoch itself (as stream and bload do), touching
`batching/` and hparams.yaml only:
1. write `batching/<name>.py` with `plan_<name>(lengths, config, epoch, world_size)` returning a
   GlobalPlan (or a subclass that overrides `stats`, `redeal` and `digest`, as BlockPlan does);
2. add its row to strategies.py's STRATEGY_TABLE, and import its function here and add it to
   PLANNERS; an option of its own is a BatchingConfig field `<option>: int | None = None` named in
   the row's `options` (None is unset, any other value must be an integer >= 1; an option of
   another type needs its own check in `__post_init__`);
3. add the option's key to hparams.yaml as `<option>: null` with a comment saying what null means.
Then `train.py` (`--check`, training, `--resume`), the sampler, the data check and
`python -m batching` work unchanged: `stats` shows its plan; `calibrate` tunes only the parameters
named in analysis.py's SWEPT and reports the given strategy's own figures beside them if it has
none there. An ordering strategy needs only an `order_<name>` function in ordering.py, its row
and its PLANNERS entry.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from .bload import plan_bload
from .config import BatchingConfig
from .errors import UserError
from .ordered import plan_ordered
from .ordering import order_alternated, order_bucketed, order_random, order_semi_sorted, order_sorted
from .plan import GlobalPlan, as_lengths
from .strategies import STRATEGY_TABLE, Strategy
from .stream import plan_stream

#: Each strategy's epoch planner, by the name of its STRATEGY_TABLE row.
PLANNERS: dict[str, Callable[..., GlobalPlan]] = {
    "rand": partial(plan_ordered, order=order_random),
    "sb": partial(plan_ordered, order=order_sorted),
    "ssb": partial(plan_ordered, order=order_semi_sorted),
    "bkt": partial(plan_ordered, order=order_bucketed),
    "ats": partial(plan_ordered, order=order_alternated),
    "stream": plan_stream,
    "bload": plan_bload,
}


def strategy_of(config: BatchingConfig) -> Strategy:
    """The row of the config's strategy: what it implies (strategies.py)."""
    return STRATEGY_TABLE[config.batching]


def plan_global(lengths, config: BatchingConfig, epoch: int = 0, world_size: int = 1) -> GlobalPlan:
    """Plan an epoch for all ranks from a generator seeded with (seed, epoch): same inputs, same plan.
    Every planning entry point passes here (plan_epoch, the samplers, python -m batching, train.py):
    a calibration target still waiting for its width is refused here, the one home of that rule."""
    if world_size < 1:
        raise ValueError(f"world_size={world_size} must be >= 1")
    if config.pending_target:
        raise UserError(
            f"{config.pending_target} asks for SSB's width lrf to be calibrated on the lengths planned: "
            "resolve it first, config, _ = batching.analysis.resolve_width(lengths, config), and plan "
            "the config it returns (PlanBatchSampler, the Lhotse samplers and python -m batching do so "
            "themselves), or give lrf instead of the target"
        )
    return PLANNERS[config.batching](as_lengths(lengths), config, epoch, world_size)


def plan_epoch(lengths, config: BatchingConfig, epoch: int = 0, rank: int = 0, world_size: int = 1) -> list[np.ndarray]:
    """The batches (int64 sample indices) that `rank` of `world_size` runs in `epoch`, in order.

    Every rank builds the same global plan and takes every world_size-th batch, so all ranks
    get the same number of batches. Every sample appears exactly once per epoch, except:
    with drop_last, the incomplete last batch is dropped (fixed sizes: short of batch_size; dbs:
    one that could still take another sample as long as its longest, as Lhotse's drop_last) and
    multi-rank plans drop the count % world_size smallest batches; without it, the largest batches are split in two
    to reach a multiple of world_size, and samples are repeated (cyclically, as single-sample
    batches) only when there are fewer samples than that multiple, e.g. fewer than ranks.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank={rank} must be in [0, world_size={world_size})")
    return plan_global(lengths, config, epoch, world_size).batches(rank)
