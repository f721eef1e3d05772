"""The strategy table's rows: what each batching strategy is and implies, declared below the config.

Every strategy is one row of STRATEGY_TABLE, so nothing outside `batching/` compares strategy
names or knows a strategy's options:

* block_plan: its plan is a block plan (a BlockPlan: batches of blocks of block_length frames,
  each holding several utterances, as BLoad's); the torch side then uses BlockBatchSampler, the
  block view and the block collate instead of PlanBatchSampler and the padding collate (everyone
  asks BatchingConfig.plans_blocks, the one reader of this field);
* dbs: the value it forces on `dbs` (None: the user's choice);
* options / forbids: the BatchingConfig fields only it may set, and fields it refuses.
  BatchingConfig.with_strategy drops them when a config switches to another strategy.

BatchingConfig (config.py) validates itself against these rows; the function that plans each
strategy's epoch is named in planner.py's PLANNERS, above the config and the strategies, so no
module imports one above it (how to add a strategy: planner.py's docstring).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Strategy:
    """One batching strategy: what it implies for the config and the torch side (module doc)."""

    name: str
    summary: str
    block_plan: bool = False
    dbs: bool | None = None
    options: tuple[str, ...] = ()
    forbids: tuple[str, ...] = ()


STRATEGY_TABLE: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy("rand", "shuffle (the baseline)"),
        Strategy("sb", "sort by length"),
        Strategy(
            "ssb",
            "sort by a key + uniform noise (lrf, ssb_key)",
            options=("ssb_key", "target_zpr", "target_pair_repeat"),
        ),
        Strategy("bkt", "sort, shuffle inside buckets (bucket_size)"),
        Strategy("ats", "alternately sorted bins (n_bins)"),
        Strategy(
            "stream",
            "the blog's streaming length buckets (bucket_interval, max_length, stream_key)",
            dbs=True,
            options=("max_length", "stream_key"),
        ),
        Strategy(
            "bload",
            "BLoad block packing (block_length)",
            block_plan=True,
            dbs=False,
            options=("block_length",),
            forbids=("capacity",),
        ),
    )
}
STRATEGIES = tuple(STRATEGY_TABLE)

#: What SSB adds its noise to (ssb_key) and stream's buckets are equally wide in (stream_key): the
#: length (the paper's equation 3, the blog's buckets) or the cost key (cost_key.py).
KEYS = ("length", "cost")
