"""A DataLoader that hands a Lhotse dataset whole CutSets from PlanCutSampler as its batch sampler,
which is what Hugging Face Accelerate can shard.

Lhotse's loaders are `DataLoader(dataset, sampler=cut_sampler, batch_size=None)`: they have no
batch sampler, and `accelerator.prepare` rebuilds a loader around its batch sampler, dropping the
sampler (the prepared loader fails at its first batch: 'NoneType' object is not iterable). Here
the sampler is the batch sampler, and the dataset is asked for the whole CutSet at once
(DataLoader's `__getitems__`), so the Lhotse dataset runs unchanged, prepared or not.
"""

from __future__ import annotations

from torch.utils.data import DataLoader, Dataset

from .plan_sampler import PlanCutSampler


class CutSetBatches(Dataset):
    """A Lhotse dataset (CutSet -> batch) behind a batch sampler: DataLoader passes each batch of
    cuts to __getitems__ whole, and the dataset's output passes the collate untouched."""

    def __init__(self, dataset) -> None:
        self.dataset = dataset

    def __getitems__(self, cuts):
        return self.dataset[cuts]

    def __getitem__(self, cuts):
        return self.dataset[cuts]


def _as_is(batch):
    return batch


def cut_batch_loader(dataset, sampler: PlanCutSampler, **loader_kwargs) -> DataLoader:
    """DataLoader(dataset, sampler=sampler, batch_size=None)'s batches, with `sampler` as the batch
    sampler so that accelerator.prepare shards it (passed to batching.accelerate_shard.shard_aware,
    PlanCutSampler then yields every rank's batches to the shard, step-major, and the prepared
    loader's set_epoch reaches it).

    :param dataset: a Lhotse dataset (CutSet -> batch), e.g. K2SpeechRecognitionDataset.
    :param sampler: the PlanCutSampler whose CutSets the dataset is given.
    :param loader_kwargs: DataLoader's other arguments (num_workers, pin_memory...); default none.
    """
    return DataLoader(CutSetBatches(dataset), batch_sampler=sampler, collate_fn=_as_is, **loader_kwargs)
