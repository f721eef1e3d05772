"""Multi-process training with torchrun on the CPU (gloo): equal steps, identical parameters, no hang.
(`force_ddp=true` in one process, DDP over a group of one, runs in tests/test_scripts_gpu_check.py: the GPU
check's ddp-one-process.)"""

from datetime import timedelta

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

import train
from tests.kit import tiny, torchrun
from training.checkpoint import load_checkpoint
from training.distributed import DistInfo, RankFailure, check_same_plan, decided_by_main
from training.rundir import LAST, read_metrics


@pytest.mark.slow
def test_two_ranks_take_equal_steps_and_end_with_identical_parameters(tmp_path, demo_corpus):
    result = torchrun(2, tiny(tmp_path, "epochs=2,batching=ssb,dbs=true,br=true", demo_corpus))
    assert "parameters identical on all 2 ranks" in result.stdout
    records = read_metrics(tmp_path / "run")
    assert [r["epoch"] for r in records] == [0, 1]
    for record in records:
        steps = record["steps_per_rank"]
        assert len(steps) == 2 and steps[0] == steps[1] > 0
        assert 2 * steps[0] == record["n_batches"]
        assert 0 <= record["straggler_fraction"] < 1
    assert load_checkpoint(tmp_path / "run" / LAST)["world_size"] == 2


@pytest.mark.slow
def test_a_two_rank_run_resumes_in_one_process(tmp_path, demo_corpus):
    """Stopped inside an epoch on 2 ranks, finished on 1: the rest of the epoch is re-dealt."""
    torchrun(2, tiny(tmp_path, "epochs=2,stop_after_steps=5", demo_corpus))
    ckpt = load_checkpoint(tmp_path / "run" / LAST)
    assert ckpt["progress"]["global_step"] == 5 and ckpt["sampler"]["world_size"] == 2
    assert train.main(["--resume", str(tmp_path / "run"), "--hparams", "stop_after_steps=0"]) == 0  # here: no start-up
    records = read_metrics(tmp_path / "run")
    assert [r["epoch"] for r in records] == [0, 1] and records[1]["steps_per_rank"] == [records[1]["steps"]]


def _two_ranks(rank: int, init_file: str, digests: list, results) -> None:
    """check_same_plan on differing digests; then decided_by_main twice: rank 0 answers 48 (as
    batch_size=auto's B0), then fails. One group serves both (a spawn costs seconds)."""
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=2, timeout=timedelta(seconds=60)
    )
    info = DistInfo(rank, 2, rank)
    try:
        try:
            check_same_plan(digests[rank], epoch=3, info=info)
        except RuntimeError as err:
            results.put(str(err))
        results.put((rank, decided_by_main(lambda: 48 if rank == 0 else 1, info)))
        try:
            decided_by_main(lambda: 1 / 0, info)
        except (ZeroDivisionError, RankFailure) as err:
            results.put((rank, type(err).__name__))
    finally:
        dist.destroy_process_group()


def test_ranks_with_different_plans_stop_with_a_clear_error_and_rank_zero_decides_for_all(tmp_path):
    results = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(
        _two_ranks, args=(str(tmp_path / "init"), ["aaaa", "bbbb"], results), nprocs=2, start_method="spawn", join=True
    )
    got = [results.get() for _ in range(6)]
    messages = [m for m in got if isinstance(m, str)]
    assert len(messages) == 2
    assert all("epoch 3: the ranks' batch plans differ (rank 0: aaaa, rank 1: bbbb)" in m for m in messages)
    assert {m for m in got if not isinstance(m, str)} == {
        (0, 48),
        (0, "ZeroDivisionError"),
        (1, 48),
        (1, "RankFailure"),
    }
    assert decided_by_main(lambda: 7, DistInfo(0, 1, 0)) == 7  # one process: no group needed
