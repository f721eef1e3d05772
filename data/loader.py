"""The one factory from a batching config to the loader's parts: batch sampler, dataset view and
collate. A strategy whose plan is a block plan (BLoad's blocks) gets the block sampler, PackedView
and PackedCollate; every other strategy the plan sampler and the padding collate. The choice comes
from the strategy table (batching.strategy_of(config).block_plan), never from the strategy's name."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torch.utils.data import Dataset

from batching import BatchingConfig, strategy_of
from batching.sampler import make_batch_sampler
from data.collate import PackedCollate, TextMelCollate
from data.dataset import PackedView, TextMelDataset


@dataclass(frozen=True)
class LoaderParts:
    sampler: object  # a batching.sampler.PlanBatchSampler (or its BlockBatchSampler subclass)
    dataset: Dataset
    collate: Callable


def loader_parts(dataset: TextMelDataset, config: BatchingConfig, n_frames_per_step: int, rank: int = 0,
                 world_size: int = 1) -> LoaderParts:
    """Sampler, dataset view and collate for DataLoader(parts.dataset, batch_sampler=parts.sampler,
    collate_fn=parts.collate)."""
    sampler = make_batch_sampler(dataset.frames, config, rank, world_size)
    if strategy_of(config).block_plan:
        return LoaderParts(sampler, PackedView(dataset), PackedCollate(n_frames_per_step, sampler.block_length))
    return LoaderParts(sampler, dataset, TextMelCollate(n_frames_per_step))
