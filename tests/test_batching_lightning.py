"""The samplers under PyTorch Lightning (docs/engines.md, "PyTorch Lightning"): the docs' recipe on
2 gloo processes (PlanBatchSampler in torchdata's StatefulDataLoader, a job stopped after step 5 and
resumed from step 3's checkpoint), its Lhotse variant in this process, and Lightning's wrappers
refused when use_distributed_sampler=False is forgotten. Lightning's import alone takes seconds
(imported by the tests, not at collection): the file is in the slow lane."""

import importlib.util
import json
import os
import re
import sys

import numpy as np
import pytest

from batching import BatchingConfig

torch = pytest.importorskip("torch")
pytest.importorskip("lhotse", reason="lhotse is not installed: pip install 'tacotron2-batching[lhotse]'")
for module, package in (("pytorch_lightning", "pytorch-lightning"), ("torchdata", "torchdata")):
    if importlib.util.find_spec(module) is None:  # found, not imported: pytest's workers each collect this file
        pytest.skip(f"pip install {package} (requirements-dev.txt)", allow_module_level=True)
from lhotse import CutSet  # noqa: E402
from lhotse.testing.dummies import dummy_cut  # noqa: E402

from batching.errors import UserError  # noqa: E402
from batching.lhotse import PlanCutSampler  # noqa: E402
from batching.sampler import PlanBatchSampler  # noqa: E402
from tests.kit import REPO, docs_recipe, run_command  # noqa: E402

pytestmark = pytest.mark.slow

RECIPE = docs_recipe("engines.md", "## PyTorch Lightning")
CUT_RECIPE = docs_recipe("engines.md", "### PlanCutSampler (a Lhotse dataset) under Lightning")
STOPPED_AFTER, CHECKPOINT = 5, 3  # the recipe's max_steps and the checkpoint it resumes from
CONFIG_SB = BatchingConfig("sb", batch_size=4)


def recipe_namespace() -> dict:
    """The two recipes' definitions, run in this process (not as __main__: no fit)."""
    namespace = {"__name__": "engines_recipe"}
    exec(compile(RECIPE + CUT_RECIPE, "docs/engines.md", "exec"), namespace)
    return namespace


def recipe_constants() -> dict:
    """The recipe's LENGTHS and CONFIG, without importing Lightning here (the recipe's processes do)."""
    lines = [line for line in RECIPE.splitlines() if line.startswith(("LENGTHS =", "CONFIG ="))]
    namespace = {"np": np, "BatchingConfig": BatchingConfig}
    exec("\n".join(lines), namespace)
    return namespace


def trained_rows(stdout: str) -> list[dict]:
    """The recipe's printed steps, in order (the processes' lines may interleave)."""
    return [json.loads(row) for row in re.findall(r"\{[^{}]*\}", stdout)]


def expected(make, ranks: int, epoch: int) -> list[list]:
    """Each rank's batches of `epoch`, as sorted id lists, from samplers built as the DataModule builds them."""
    out = []
    for rank in range(ranks):
        sampler = make(rank, ranks)
        sampler.set_epoch(epoch)
        out.append([sorted(b) if isinstance(b, list) else sorted(b.ids) for b in sampler])
    return out


def check_stop_and_resume(rows: list[dict], whole: dict, ranks: int) -> None:
    """The stopped job trained the plan's first steps; the resumed one the steps after the checkpoint,
    then the next epoch's plan (a new one): every item once an epoch, equal steps on every rank."""
    for rank in range(ranks):
        mine = [(r["epoch"], sorted(r["ids"])) for r in rows if r["rank"] == rank]
        stopped, rest = mine[:STOPPED_AFTER], mine[STOPPED_AFTER:]
        assert [b for _, b in stopped] == whole[0][rank][:STOPPED_AFTER]
        assert [b for e, b in rest if e == 0] == whole[0][rank][CHECKPOINT:]
        assert [b for e, b in rest if e == 1] == whole[1][rank]
    for epoch in (0, 1):
        assert len({len(r) for r in whole[epoch]}) == 1
    assert whole[0] != whole[1]


def test_the_docs_lightning_recipe_on_two_processes_resumes_mid_epoch_exactly(tmp_path):
    (tmp_path / "recipe.py").write_text(RECIPE)
    done = run_command(
        sys.executable,
        "recipe.py",
        tmp_path / "checkpoints",
        cwd=tmp_path,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    constants = recipe_constants()

    def make(rank, ranks):
        return PlanBatchSampler(constants["LENGTHS"], constants["CONFIG"], rank, ranks)

    whole = {epoch: expected(make, 2, epoch) for epoch in (0, 1)}
    check_stop_and_resume(trained_rows(done.stdout), whole, 2)
    for epoch in (0, 1):
        assert sorted(i for rank in whole[epoch] for b in rank for i in b) == list(range(constants["LENGTHS"].size))


def test_the_docs_lhotse_variant_resumes_mid_epoch_and_deals_the_ranks(tmp_path, capsys):
    """One device in this process: stopped after step 5, resumed from step 3's checkpoint. The ranks:
    the DataModule's loaders under a trainer of 2 deal every cut once, on equal steps."""
    namespace = recipe_namespace()
    cuts = CutSet.from_cuts(dummy_cut(i, duration=float(d)) for i, d in enumerate(np.linspace(0.5, 4.0, 48)))
    trainer, model, data = namespace["trainer"], namespace["TinyModel"], namespace["CutData"]
    folder = tmp_path / "checkpoints"
    trainer(folder, devices=1, max_steps=STOPPED_AFTER).fit(model(), data(cuts))
    trainer(folder, devices=1).fit(model(), data(cuts), ckpt_path=folder / f"step={CHECKPOINT}.ckpt")

    def make(rank, ranks):
        return PlanCutSampler(cuts, max_duration=8.0, seed=1, rank=rank, world_size=ranks)

    whole = {epoch: expected(make, 1, epoch) for epoch in (0, 1)}
    check_stop_and_resume(trained_rows(capsys.readouterr().out), whole, 1)

    two = []
    for rank in (0, 1):
        module = data(cuts)
        module.trainer = type("Ranks", (), {"global_rank": rank, "world_size": 2})()
        two.append([sorted(batch["ids"]) for batch in module.train_dataloader()])
    assert len(two[0]) == len(two[1]) and two == expected(make, 2, 0)
    assert sorted(i for rank in two for b in rank for i in b) == sorted(cuts.ids)


def test_a_forgotten_use_distributed_sampler_is_one_error():
    """What Lightning does on several devices without use_distributed_sampler=False
    (data_connector.py's _prepare_dataloader: a DistributedSampler into _update_dataloader): a
    batch_sampler it cannot rebuild is Lightning's own TypeError naming the flag; a sampler= it wraps
    in its DistributedSamplerWrapper stops at its first pass with ours."""
    from lightning_fabric.utilities.distributed import DistributedSamplerWrapper
    from pytorch_lightning.utilities.data import _update_dataloader
    from torch.utils.data import DistributedSampler

    items = torch.arange(40)
    loader = torch.utils.data.DataLoader(items, batch_sampler=PlanBatchSampler(np.arange(1, 41), CONFIG_SB))
    with pytest.raises(TypeError, match="use_distributed_sampler=False"):
        _update_dataloader(loader, DistributedSampler(items, num_replicas=2, rank=0))
    cuts = CutSet.from_cuts(dummy_cut(i, duration=1.0) for i in range(8))
    wrapped = DistributedSamplerWrapper(PlanCutSampler(cuts, max_duration=2.0), num_replicas=2, rank=0)
    with pytest.raises(UserError, match="use_distributed_sampler=False"):
        list(wrapped)
