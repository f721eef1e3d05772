"""A Lhotse sampler over the planner: `CutSet` mini-batches planned by any padded strategy.

Lhotse-based stacks (Lhotse, icefall, NeMo's Lhotse loader) take a sampler that yields `CutSet`s
and a dataset that turns a `CutSet` into tensors (`DataLoader(dataset, sampler=..., batch_size=None)`).
PlanCutSampler is that sampler on top of PlanBatchSampler, so it keeps its contract: one plan of
(seed, epoch) on every rank, the same number of batches on every rank, and state_dict() /
load_state_dict() that continue mid-epoch, also on another world size.

The planner needs every length up front, so the CutSet must be eager (a lazy one is refused with
what to do; the README says what streamed data gets). Lengths are cut durations in frames of
`frame_shift` seconds, rounded up, so a budget given in seconds (`max_duration`, as in Lhotse) holds.
Needs `pip install 'tacotron2-batching[lhotse]'`; nothing else in `batching` imports this module.
"""
from __future__ import annotations

import dataclasses
from typing import Iterator

import numpy as np
import torch.distributed as dist
from lhotse import CutSet
from torch.utils.data import Sampler

from .config import BatchingConfig
from .planner import strategy_of
from .sampler import PlanBatchSampler

#: SSB with dynamic batch sizes (budget B0 x L_max unless max_duration is given) and shuffled batches.
DEFAULT_CONFIG = BatchingConfig("ssb", dbs=True, br=True)


class PlanCutSampler(Sampler[CutSet]):
    """Yields this rank's mini-batches of `cuts` (eager CutSets) for the current epoch.

    config: any strategy whose plan is not a block plan (not bload); its capacity is in frames of
    frame_shift seconds. max_duration: the budget in seconds instead (sets dbs and capacity).
    rank / world_size: as Lhotse's samplers, taken from torch.distributed when it is initialised.
    Call set_epoch(e) before each epoch; save state_dict() with checkpoints.
    """

    def __init__(self, cuts: CutSet, config: BatchingConfig = DEFAULT_CONFIG, *, max_duration: float | None = None,
                 frame_shift: float = 0.01, rank: int | None = None, world_size: int | None = None) -> None:
        if cuts.is_lazy:
            raise ValueError("PlanCutSampler plans from every cut's duration up front and got a lazy CutSet: "
                             "load its manifest with cuts.to_eager() (metadata only, no audio), or stream it "
                             "with batching.StreamBucketer and batching.deal_steps (see the README)")
        if strategy_of(config).block_plan:
            raise ValueError(f"batching={config.batching} plans blocks that pack several cuts each (a block plan); "
                             "PlanCutSampler yields padded CutSet batches: choose a padded strategy (e.g. ssb)")
        if not frame_shift > 0:
            raise ValueError(f"frame_shift={frame_shift} must be a positive number of seconds")
        self.frame_shift = frame_shift
        self._cuts = list(cuts)
        config = _with_budget(config, max_duration, frame_shift)
        rank, world_size = _distributed(rank, world_size)
        self.lengths = cut_frames(self._cuts, frame_shift)
        self._sampler = PlanBatchSampler(self.lengths, config, rank, world_size)

    @property
    def config(self) -> BatchingConfig:
        return self._sampler.config

    @property
    def rank(self) -> int:
        return self._sampler.rank

    @property
    def world_size(self) -> int:
        return self._sampler.world_size

    @property
    def epoch(self) -> int:
        return self._sampler.epoch

    @property
    def plan(self):
        """The epoch's GlobalPlan (its stats(lengths) give the padding and decoder steps)."""
        return self._sampler.plan

    def set_epoch(self, epoch: int) -> None:
        self._sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[CutSet]:
        for batch in self._sampler:
            yield CutSet.from_cuts(self._cuts[i] for i in batch)

    def __len__(self) -> int:
        """Batches the next iteration yields on this rank (the same on every rank)."""
        return len(self._sampler)

    def state_dict(self, consumed: int | None = None) -> dict:
        """PlanBatchSampler's state plus what ties it to these cuts (count, frame_shift)."""
        return self._sampler.state_dict(consumed) | dict(n_cuts=len(self._cuts), frame_shift=self.frame_shift)

    def load_state_dict(self, state: dict) -> None:
        """Continue the saved epoch where it stopped, on this world size: no cut replayed or lost."""
        state = dict(state)
        saved = (state.pop("n_cuts"), state.pop("frame_shift"))
        if saved != (len(self._cuts), self.frame_shift):
            raise ValueError(f"checkpoint was planned over {saved[0]} cuts at frame_shift={saved[1]}, "
                             f"this sampler has {len(self._cuts)} at frame_shift={self.frame_shift}")
        self._sampler.load_state_dict(state)


def cut_frames(cuts, frame_shift: float) -> np.ndarray:
    """Each cut's duration in frames of frame_shift seconds, rounded up (at least 1)."""
    durations = np.fromiter((cut.duration for cut in cuts), np.float64)
    return np.maximum(1, np.ceil(np.round(durations / frame_shift, 6))).astype(np.int64)


def _with_budget(config: BatchingConfig, max_duration: float | None, frame_shift: float) -> BatchingConfig:
    if max_duration is None:
        return config
    if config.capacity is not None:
        raise ValueError(f"the budget is given twice: max_duration={max_duration} s and capacity={config.capacity} "
                         "frames; keep one")
    if not max_duration > 0:
        raise ValueError(f"max_duration={max_duration} must be a positive number of seconds")
    return dataclasses.replace(config, dbs=True, capacity=max(1, int(max_duration / frame_shift + 1e-9)))


def _distributed(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """rank and world_size as given, else from torch.distributed, else a single process."""
    initialised = dist.is_available() and dist.is_initialized()
    if world_size is None:
        world_size = dist.get_world_size() if initialised else 1
    if rank is None:
        rank = dist.get_rank() if initialised else 0
    return rank, world_size
