"""PlanBatchSampler under Hugging Face Accelerate: accelerator.prepare(loader) wraps it in a
BatchSamplerShard, and once the prepared loader is passed to batching.accelerate_shard.shard_aware
every item is trained once an epoch, on equal steps, with a new plan every epoch through the prepared
loader's set_epoch; a prepared loader not passed to it stops at its first batch with one error. The
docs' recipe on 2 CPU processes, resumed, runs in tests/test_batching_lhotse.py beside the
PlanCutSampler one (one torchrun start for both)."""

import numpy as np
import pytest

from batching import BatchingConfig
from batching.errors import UserError

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate", reason="pip install accelerate (requirements-dev.txt)")
from accelerate.data_loader import prepare_data_loader  # noqa: E402

from batching.accelerate_shard import shard_aware  # noqa: E402
from batching.sampler import PlanBatchSampler  # noqa: E402

LENGTHS = np.random.default_rng(0).integers(20, 800, 300)
CONFIG = BatchingConfig("ssb", dbs=True, br=True, seed=1)


def prepared(sampler, process: int):
    """What accelerator.prepare does to the loader on process `process` of 2, without shard_aware."""
    loader = torch.utils.data.DataLoader(torch.arange(LENGTHS.size), batch_sampler=sampler)
    return prepare_data_loader(loader, num_processes=2, process_index=process, put_on_device=False)


@pytest.mark.parametrize("built_as", ["the process's rank", "rank 0 of 1"])
def test_a_prepared_loader_trains_each_item_once_on_equal_steps_with_a_new_plan_each_epoch(built_as):
    epochs = []
    for epoch in (0, 1):
        ranks = []
        for process in (0, 1):
            sampler = PlanBatchSampler(LENGTHS, CONFIG, *((process, 2) if built_as == "the process's rank" else (0, 1)))
            loader = shard_aware(prepared(sampler, process))
            loader.set_epoch(epoch)
            ranks.append([batch.tolist() for batch in loader])
            assert len(loader) == len(ranks[-1]) and sampler.epoch == epoch
        items = [i for batches in ranks for batch in batches for i in batch]
        assert sorted(items) == list(range(LENGTHS.size)) and len(ranks[0]) == len(ranks[1])
        epochs.append(ranks)
    assert epochs[0] != epochs[1]


def test_a_sampler_built_for_another_world_is_refused_under_the_shard():
    with pytest.raises(UserError, match="rank=accelerator.process_index, world_size=accelerator.num_processes"):
        shard_aware(prepared(PlanBatchSampler(LENGTHS, CONFIG, 1, 3), 1))


def test_a_shard_not_announced_is_refused_and_one_process_or_a_plain_loader_needs_nothing():
    """Without shard_aware the sampler would lose all but half its batches: its first iteration under
    the shard stops with one error; a loader prepared for one process has no shard, and a plain
    loader beside a prepared one is not wrapped."""
    sampler = PlanBatchSampler(LENGTHS, CONFIG, 0, 2)
    with pytest.raises(UserError, match="shard_aware"):
        list(prepared(sampler, 0))
    alone = PlanBatchSampler(LENGTHS, CONFIG)
    loader = torch.utils.data.DataLoader(torch.arange(LENGTHS.size), batch_sampler=alone)
    one = shard_aware(prepare_data_loader(loader, num_processes=1, process_index=0, put_on_device=False))
    assert sum(len(b) for b in one) == LENGTHS.size and not alone.yields_all_ranks
    plain = torch.utils.data.DataLoader(
        torch.arange(LENGTHS.size), batch_sampler=PlanBatchSampler(LENGTHS, CONFIG, 0, 2)
    )
    outer = shard_aware(prepared(PlanBatchSampler(LENGTHS, CONFIG, 0, 2), 0))
    for _ in outer:  # a prepared loader being iterated: the plain one inside its loop is still plain
        assert sum(len(b) for b in plain) < LENGTHS.size
        break
    with pytest.raises(UserError, match="not a sampler of batching"):
        shard_aware(
            prepare_data_loader(
                torch.utils.data.DataLoader(torch.arange(8), batch_size=2),
                num_processes=2,
                process_index=0,
                put_on_device=False,
            )
        )
