"""torch.distributed set-up for torchrun, and the collective helpers the trainer needs.

Works unchanged in a single process (world size 1): every helper then reduces to a no-op.

No rank waits forever: every collective is bounded by `collective_timeout_s` (data preparation,
which rank 0 alone may spend an hour on, by PREPARE_TIMEOUT), and a collective that fails because
another rank died or stalled becomes a RankFailure, whose message is the one line train.py prints.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import socket
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.distributed as dist

if TYPE_CHECKING:  # annotations only
    from training.checkpoint import RunState

#: How long the other ranks wait for rank 0's one-off data preparation (the demo corpus, the
#: data check, a first run's mel cache: an hour or more on a large corpus). A rank 0 that dies
#: meanwhile is still noticed at once (its sockets close); only a stalled one takes this long.
PREPARE_TIMEOUT = timedelta(hours=4)


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    #: in a process group with DDP even at world size 1 (force_ddp: tests NCCL and DDP on one GPU)
    forced: bool = False
    #: a gloo group with PREPARE_TIMEOUT for main_rank_first's waits (None: the default group)
    prepare_group: Any = field(default=None, compare=False, repr=False)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1 or self.forced


class RankFailure(RuntimeError):
    """A collective failed because another rank died or stalled (or this one lost its network).
    The message is one line that names this rank, says what happened and how to continue."""


#: Phrases of gloo's transport errors, which reach Python as a plain RuntimeError, sometimes
#: without naming gloo ("Application timeout caused pair closure" from DDP's buffer broadcast).
GLOO_FAILURES = ("gloo", "pair closure", "Connection closed by peer", "Connection reset by peer", "Timed out waiting")


def is_backend_failure(err: BaseException) -> bool:
    """True for errors of the communication itself: c10d's DistError family (NCCL, the store,
    the network), gloo's transport errors, and any RuntimeError raised inside torch.distributed
    or DDP (its innermost frame is theirs)."""
    if isinstance(err, RankFailure) or not isinstance(err, RuntimeError):
        return False
    if isinstance(err, dist.DistError) or any(phrase in str(err) for phrase in GLOO_FAILURES):
        return True
    frames = traceback.extract_tb(err.__traceback__)
    innermost = frames[-1].filename.replace("\\", "/") if frames else ""
    return "torch/distributed/" in innermost or innermost.endswith("torch/nn/parallel/distributed.py")


def failure_message(err: BaseException, info: DistInfo, run_dir: Path | str, where: str) -> str:
    """One line: which rank, where, what happened (with the backend's first sentence), what to do."""
    text = " ".join(str(err).split())
    detail = re.sub(r"^\[[^\]]*\]\s*", "", text).split(". ")[0][:200]  # without gloo's "[file.cc:123]"
    if "timed out" in text.lower() or "timeout" in text.lower():
        what = (
            "no answer from another rank within collective_timeout_s: a rank stalled (or its node "
            "is overloaded or unreachable)"
        )
    else:
        what = "lost the connection to another rank: a rank died (its own output, or torchrun's summary, says why)"
    return (
        f"rank {info.rank} of {info.world_size} stopped {where}: {what} [{detail}]; the last checkpoint is "
        f"complete: continue with train.py --resume {run_dir} (under torchrun, on any number of processes)"
    )


@contextmanager
def rank_failures(info: DistInfo, run_dir: Path | str, progress: RunState | None = None):
    """Turn a failed collective into a RankFailure with the one-line message. `progress` (read
    when the error happens) says where; None: during set-up."""
    try:
        yield
    except Exception as err:
        if not (info.enabled and is_backend_failure(err)):
            raise
        raise RankFailure(failure_message(err, info, run_dir, describe_position(progress))) from err


def describe_position(progress: RunState | None) -> str:
    """Where the run was, for the message: the steps done in the epoch (state.step_in_epoch)."""
    if progress is None:
        return "while setting up"
    if progress.step_in_epoch == 0:
        return f"before the first step of epoch {progress.epoch}"
    return f"in epoch {progress.epoch} after step {progress.step_in_epoch}"


def launch_rank() -> int:
    """This process's rank as torchrun set it (0 when not started by torchrun)."""
    return int(os.environ.get("RANK", "0"))


def init_distributed(
    device_kind: str,
    timeout_s: float = 300,
    run_dir: Path | str = "RUN_DIR",
    force: bool = False,
    backend: str = "auto",
) -> DistInfo:
    """Join the process group torchrun describes in the environment (NCCL on GPUs, gloo on CPUs).
    `timeout_s` bounds every collective (and the rendezvous) of the run: collective_timeout_s.
    A single process joins a group of one only when `force`d (force_ddp), on a free local port if
    torchrun did not start it. `backend` auto is NCCL on CUDA, gloo on the CPU (dist_backend)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1 and not force:
        return DistInfo()
    alone = world_size == 1 and "MASTER_PORT" not in os.environ  # not started by torchrun
    info = DistInfo(launch_rank(), world_size, int(os.environ.get("LOCAL_RANK", "0")), forced=world_size == 1)
    if backend == "auto":
        backend = "nccl" if device_kind == "cuda" else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(info.local_rank)
    with rank_failures(info, run_dir):
        where = dict(init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1) if alone else {}
        dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s), **where)
        prepare_group = dist.new_group(backend="gloo", timeout=PREPARE_TIMEOUT)
    return dataclasses.replace(info, prepare_group=prepare_group)


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def main_rank_first(info: DistInfo):
    """Let rank 0 do shared one-off work (generate the demo corpus, fill the mel cache) before the
    other ranks start it, so they find it done instead of racing to write the same files; then
    wait until every rank has loaded it. These waits use PREPARE_TIMEOUT, not collective_timeout_s."""
    if info.enabled and not info.is_main:
        dist.barrier(group=info.prepare_group)
    try:
        yield
    finally:  # also when rank 0 fails (e.g. bad data): the others then meet the same error, not a hang
        if info.enabled and info.is_main:
            dist.barrier(group=info.prepare_group)
    if info.enabled:  # rank 0 must not start the first timed collective while the others still load
        dist.barrier(group=info.prepare_group)


T = TypeVar("T")


def decided_by_main(decide: Callable[[], T], info: DistInfo) -> T:
    """decide() on rank 0 alone, its answer on every rank (batch_size=auto's probe: one GPU's
    answer for all, while the others wait under PREPARE_TIMEOUT). When rank 0 fails, the others
    stop too, pointing at its output."""
    if not info.enabled:
        return decide()
    box: list = [None]
    try:
        if info.is_main:
            box[0] = decide()
    finally:  # rank 0 sends None when decide() raised, so that no rank waits for an answer that never comes
        dist.broadcast_object_list(box, src=0, group=info.prepare_group)
    if box[0] is None:
        raise RankFailure(f"rank {info.rank}: rank 0 found no answer to share (its output says why)")
    return box[0]


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


Sums = TypeVar("Sums")


def sum_over_ranks(sums: Sums, info: DistInfo, device: torch.device) -> Sums:
    """A dataclass of numbers, each field summed over all ranks in one all-reduce (float64, so
    sums of many frames stay exact); the same object in a single process."""
    if not info.enabled:
        return sums
    names = [f.name for f in dataclasses.fields(sums)]
    tensor = torch.tensor([float(getattr(sums, n)) for n in names], dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    kinds = {n: type(getattr(sums, n)) for n in names}
    return dataclasses.replace(sums, **{n: kinds[n](v) for n, v in zip(names, tensor.tolist())})


@dataclass(frozen=True)
class StepVote:
    """What every rank must decide alike between steps: stop (a stop request on any rank) and
    checkpoint (any rank's checkpoint_every_minutes clock ran out). A checkpoint gathers every
    rank's random state, so a rank deciding alone would leave the others waiting in a different
    collective. (Skipping a non-finite step needs no vote: DDP gives every rank the same gradients.)"""

    stop: bool = False
    checkpoint: bool = False


def agree(stop: bool, checkpoint: bool, info: DistInfo, device: torch.device) -> StepVote:
    """The ranks' StepVote, in one all-reduce of two numbers."""
    if not info.enabled:
        return StepVote(stop, checkpoint)
    flags = torch.tensor([float(stop), float(checkpoint)], dtype=torch.float64, device=device)
    dist.all_reduce(flags)
    stops, checkpoints = flags.tolist()
    return StepVote(stop=stops > 0, checkpoint=checkpoints > 0)


def check_same_plan(digest: str, epoch: int, info: DistInfo) -> None:
    """Stop with a clear error, on every rank, if the ranks planned different epochs.

    Different plans would give ranks different step counts and hang DDP's gradient all-reduce.
    """
    if not info.enabled:
        return
    digests: list[str] = [""] * info.world_size
    dist.all_gather_object(digests, digest)
    if len(set(digests)) != 1:
        detail = ", ".join(f"rank {r}: {d[:12]}" for r, d in enumerate(digests))
        raise RuntimeError(
            f"epoch {epoch}: the ranks' batch plans differ ({detail}). Every rank must read the same "
            "filelist and hparams (same seed); check that the data and code are identical on every node."
        )


def gather_objects(value, info: DistInfo) -> list:
    """The value from every rank, in rank order (a one-element list in a single process)."""
    if not info.enabled:
        return [value]
    out = [None] * info.world_size
    dist.all_gather_object(out, value)
    return out


def average_buffers(model: torch.nn.Module, info: DistInfo) -> None:
    """Average the floating-point buffers (BatchNorm running statistics) over the ranks, in one
    all-reduce. DDP runs with broadcast_buffers=False, so no forward pays for a broadcast; each
    rank's statistics follow its own batches until this is called, before validation and before
    a checkpoint, the only places that use them (training normalises with batch statistics)."""
    buffers = [b for b in model.buffers() if b.is_floating_point()]
    if not info.enabled or not buffers:
        return
    flat = torch.cat([b.detach().reshape(-1).to(torch.float64) for b in buffers])
    dist.all_reduce(flat)
    flat /= info.world_size
    for buffer, value in zip(buffers, flat.split([b.numel() for b in buffers])):
        buffer.copy_(value.view_as(buffer))


def check_same_parameters(model: torch.nn.Module, info: DistInfo) -> str:
    """Hash the parameters and buffers on every rank (after the last checkpoint averaged the
    buffers) and fail loudly if DDP let them drift apart."""
    sha = hashlib.sha1()
    for tensor in [*model.parameters(), *model.buffers()]:
        sha.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    digests = gather_objects(sha.hexdigest(), info)
    if len(set(digests)) != 1:
        raise RuntimeError(f"parameters differ across ranks after training: {digests}")
    return digests[0]
