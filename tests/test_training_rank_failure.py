"""A rank that dies or stalls never hangs the others: within collective_timeout_s they stop with
one `error: rank N ...` line (no traceback) and exit 1, and `--resume` finishes the run.

The two ranks are forked processes that join through the environment, as torchrun's workers do,
but without torchrun's agent, which would SIGTERM the survivor as soon as the other rank exits.
"""

import multiprocessing
import os
import re
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import train
from tests.kit import DemoCorpus, tiny
from training.distributed import DistInfo, agree, failure_message, free_port, is_backend_failure
from training.rundir import LAST, read_metrics

FORK = multiprocessing.get_context("fork")


def rank_main(argv: list[str], rank: int, port: int, log: Path) -> None:
    """One forked rank: torchrun's environment variables, stdout and stderr into `log`, train.main."""
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE="2",
        LOCAL_WORLD_SIZE="2",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    out = open(log, "w", buffering=1)
    os.dup2(out.fileno(), 1)
    os.dup2(out.fileno(), 2)
    sys.stdout = sys.stderr = out
    sys.exit(train.main(argv))


def start_ranks(tmp_path: Path, hparams: str) -> list:
    port = free_port()
    procs = [
        FORK.Process(target=rank_main, args=(["--hparams", hparams], rank, port, tmp_path / f"rank{rank}.log"))
        for rank in range(2)
    ]
    for proc in procs:
        proc.start()
    return procs


def wait_for(path: Path, procs: list, timeout: float = 180) -> None:
    """Until rank 0 wrote `path` (a checkpoint: both ranks are training)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert all(p.is_alive() for p in procs), [p.exitcode for p in procs]
        assert time.monotonic() < deadline, f"no {path.name} within {timeout} s"
        time.sleep(0.02)


def check_survivor(proc, rank: int, log: Path, run: Path, within: float, what: str) -> None:
    """The survivor exits 1 within `within` seconds, printing exactly one error line and no traceback."""
    start = time.monotonic()
    proc.join(within)
    text = log.read_text()
    assert proc.exitcode == 1, (
        f"rank {rank}: exit {proc.exitcode} after {time.monotonic() - start:.0f} s\n{text[-3000:]}"
    )
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in text, text[-3000:]
    assert re.match(rf"error: rank {rank} of 2 stopped (in|before the first step of) epoch \d", errors[0]), errors[0]
    assert what in errors[0] and f"continue with train.py --resume {run} " in errors[0], errors[0]


def signal_a_rank(
    tmp_path: Path, corpus: DemoCorpus, timeout_s: int, victim: int, sig: signal.Signals, within: float, what: str
) -> Path:
    """Two ranks with timed checkpoints after every step, agreed by vote (log_every=1: a vote
    every step); after the first checkpoint `sig` goes to rank `victim`, and the other rank must
    stop as check_survivor says. Returns the run directory."""
    run = tmp_path / "run"
    hparams = f"epochs=2,checkpoint_every_minutes=0.000001,log_every=1,collective_timeout_s={timeout_s}"
    procs = start_ranks(tmp_path, tiny(tmp_path, hparams, corpus))
    survivor = 1 - victim
    try:
        wait_for(run / LAST, procs)
        os.kill(procs[victim].pid, sig)
        check_survivor(procs[survivor], survivor, tmp_path / f"rank{survivor}.log", run, within, what)
    finally:
        for proc in procs:
            proc.kill()
            proc.join()
    return run


@pytest.mark.slow
def test_a_killed_rank_stops_the_other_with_one_line_and_the_run_resumes(tmp_path, demo_corpus):
    """Rank 1 is SIGKILLed after the first checkpoint; rank 0 notices at its next collective (gloo
    sees the closed socket), well before the timeout; the run is then finished on one process."""
    run = signal_a_rank(
        tmp_path,
        demo_corpus,
        timeout_s=60,
        victim=1,
        sig=signal.SIGKILL,
        within=30,
        what="lost the connection to another rank",
    )
    assert train.main(["--resume", str(run), "--hparams", "checkpoint_every_minutes=0"]) == 0
    assert [r["epoch"] for r in read_metrics(run)] == [0, 1]


@pytest.mark.slow
def test_a_stalled_rank_times_the_other_out_with_one_line(tmp_path, demo_corpus):
    """Rank 0 (which also hosts the rendezvous store) is frozen with SIGSTOP; rank 1 gives up
    after collective_timeout_s."""
    signal_a_rank(
        tmp_path,
        demo_corpus,
        timeout_s=10,
        victim=0,
        sig=signal.SIGSTOP,
        within=10 + 25,
        what="no answer from another rank",
    )


def vote(rank: int, init_file: str, results) -> None:
    """One forked rank: a StepVote from different local flags on each rank."""
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=2, timeout=timedelta(seconds=30)
    )
    try:
        agreed = agree(stop=rank == 1, checkpoint=rank == 0, info=DistInfo(rank, 2, rank), device=torch.device("cpu"))
        results.put((rank, agreed))
    finally:
        dist.destroy_process_group()


def test_the_ranks_agree_on_stopping_and_checkpointing(tmp_path):
    """Stop and checkpoint when any rank asks."""
    results = FORK.SimpleQueue()
    procs = [FORK.Process(target=vote, args=(rank, str(tmp_path / "init"), results)) for rank in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    agreed = dict(results.get() for _ in range(2))
    assert agreed[0] == agreed[1] and (agreed[0].stop, agreed[0].checkpoint) == (True, True)


def test_failed_collectives_are_told_from_other_errors():
    """gloo's errors are plain RuntimeErrors: known by their words (some do not name gloo)."""
    assert is_backend_failure(RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error"))
    assert is_backend_failure(RuntimeError("Application timeout caused pair closure"))
    assert is_backend_failure(dist.DistBackendError("NCCL communicator was aborted on rank 3"))
    assert not is_backend_failure(RuntimeError("CUDA out of memory"))
    assert not is_backend_failure(ValueError("Connection closed by peer"))
    line = failure_message(
        RuntimeError("[pair.cc:1] Timed out waiting 5000ms for recv operation to complete. Bye"),
        DistInfo(3, 8),
        "runs/x",
        "in epoch 2 after step 7",
    )
    assert line == (
        "rank 3 of 8 stopped in epoch 2 after step 7: no answer from another rank within "
        "collective_timeout_s: a rank stalled (or its node is overloaded or unreachable) [Timed out "
        "waiting 5000ms for recv operation to complete]; the last checkpoint is complete: continue "
        "with train.py --resume runs/x (under torchrun, on any number of processes)"
    )
