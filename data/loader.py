"""The one factory from a batching config to the loader's parts: batch sampler, dataset view and
collate. The sampler is batching.sampler.make_batch_sampler's choice (a BlockBatchSampler for a
strategy whose plan is a block plan, BatchingConfig.plans_blocks); its kind picks the rest: the
block sampler gets PackedView and PackedCollate, every other sampler the padding collate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch.utils.data import Dataset

from batching import BatchingConfig
from batching.sampler import BlockBatchSampler, make_batch_sampler
from data.collate import PackedCollate, TextMelCollate
from data.dataset import PackedView, TextMelDataset


@dataclass(frozen=True)
class LoaderParts:
    sampler: object  # a batching.sampler.PlanBatchSampler (or its BlockBatchSampler subclass)
    dataset: Dataset
    collate: Callable


def loader_parts(
    dataset: TextMelDataset, config: BatchingConfig, n_frames_per_step: int, rank: int = 0, world_size: int = 1
) -> LoaderParts:
    """Sampler, dataset view and collate for DataLoader(parts.dataset, batch_sampler=parts.sampler,
    collate_fn=parts.collate)."""
    sampler = make_batch_sampler(dataset.frames, config, rank, world_size)
    if isinstance(sampler, BlockBatchSampler):
        return LoaderParts(sampler, PackedView(dataset), PackedCollate(n_frames_per_step, sampler.block_length))
    return LoaderParts(sampler, dataset, TextMelCollate(n_frames_per_step))
