"""PlanBatchSampler under Hugging Face Accelerate: accelerator.prepare(loader) wraps it in a
BatchSamplerShard, and still every item is trained once an epoch, on equal steps, with a new plan
every epoch through the prepared loader's set_epoch; the docs' recipe on 2 CPU processes resumes."""
import json
import os
import sys

import numpy as np
import pytest

from batching import BatchingConfig
from batching.errors import UserError

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate", reason="pip install accelerate (requirements-dev.txt)")
from accelerate.data_loader import prepare_data_loader  # noqa: E402

from batching.sampler import PlanBatchSampler  # noqa: E402
from tests.kit import REPO, run_command  # noqa: E402

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


def docs_recipe() -> str:
    section = (REPO / "docs" / "lhotse.md").read_text().split("## Hugging Face Accelerate", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.slow
def test_the_docs_recipe_on_two_processes_resumes_mid_epoch(tmp_path):
    """torchrun, 2 gloo CPU processes: an uninterrupted run (sampler built Accelerate's way, rank 0
    of 1), then one built with the process's rank stopped after 3 steps and restarted."""
    recipe = docs_recipe()
    own_way = recipe.replace(",\n                           rank=accelerator.process_index, world_size=accelerator.num_processes", "")
    assert own_way != recipe
    (tmp_path / "recipe.py").write_text(recipe)
    (tmp_path / "own_way.py").write_text(own_way)

    def run(script, *args):
        done = run_command(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           script, tmp_path / "state.json", *args, cwd=tmp_path, timeout=240,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        return {epoch: sorted((r["rank"], r["items"]) for r in rows if r["epoch"] == epoch) for epoch in (0, 1)}

    whole = run("own_way.py")
    before = run("recipe.py", "3")
    after = run("recipe.py")
    for epoch in (0, 1):
        steps = [sum(rank == r for rank, _ in whole[epoch]) for r in (0, 1)]
        assert steps[0] == steps[1] and sorted(i for _, b in whole[epoch] for i in b) == list(range(400))
    assert whole[0] != whole[1] and len(before[0]) == 6 and not before[1]
    assert sorted(before[0] + after[0]) == whole[0] and after[1] == whole[1]
