"""PlanBatchSampler under Hugging Face Accelerate: accelerator.prepare(loader) wraps it in a
BatchSamplerShard, and still every item is trained once an epoch, on equal steps, with a new plan
every epoch through the prepared loader's set_epoch. The docs' recipe on 2 CPU processes, resumed,
runs in tests/test_batching_lhotse.py beside the PlanCutSampler one (one torchrun start for both)."""
import numpy as np
import pytest

from batching import BatchingConfig
from batching.errors import UserError

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate", reason="pip install accelerate (requirements-dev.txt)")
from accelerate.data_loader import prepare_data_loader  # noqa: E402

from batching.sampler import PlanBatchSampler  # noqa: E402

LENGTHS = np.random.default_rng(0).integers(20, 800, 300)
CONFIG = BatchingConfig("ssb", dbs=True, br=True, seed=1)


def prepared(sampler, process: int):
    """What accelerator.prepare does to the loader on process `process` of 2."""
    loader = torch.utils.data.DataLoader(torch.arange(LENGTHS.size), batch_sampler=sampler)
    return prepare_data_loader(loader, num_processes=2, process_index=process, put_on_device=False)


@pytest.mark.parametrize("built_as", ["the process's rank", "rank 0 of 1"])
def test_a_prepared_loader_trains_each_item_once_on_equal_steps_with_a_new_plan_each_epoch(built_as):
    epochs = []
    for epoch in (0, 1):
        ranks = []
        for process in (0, 1):
            sampler = PlanBatchSampler(LENGTHS, CONFIG, *((process, 2) if built_as == "the process's rank" else (0, 1)))
            loader = prepared(sampler, process)
            loader.set_epoch(epoch)
            ranks.append([batch.tolist() for batch in loader])
            assert len(loader) == len(ranks[-1]) and sampler.epoch == epoch
        items = [i for batches in ranks for batch in batches for i in batch]
        assert sorted(items) == list(range(LENGTHS.size)) and len(ranks[0]) == len(ranks[1])
        epochs.append(ranks)
    assert epochs[0] != epochs[1]


def test_a_sampler_built_for_another_world_is_refused_under_the_shard():
    with pytest.raises(UserError, match="rank=accelerator.process_index, world_size=accelerator.num_processes"):
        list(prepared(PlanBatchSampler(LENGTHS, CONFIG, 1, 3), 1))
