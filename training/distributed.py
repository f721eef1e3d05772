"""torch.distributed set-up for torchrun, and the collective helpers the trainer needs.

Works unchanged in a single process (world size 1): every helper then reduces to a no-op.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device_kind: str, timeout_s: int = 600) -> DistInfo:
    """Join the process group torchrun describes in the environment (NCCL on GPUs, gloo on CPUs)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return DistInfo()
    info = DistInfo(int(os.environ["RANK"]), world_size, int(os.environ.get("LOCAL_RANK", "0")))
    backend = "nccl" if device_kind == "cuda" else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(info.local_rank)
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    return info


@contextmanager
def main_rank_first(info: DistInfo):
    """Let rank 0 do shared one-off work (generate the demo corpus, fill the mel cache) before the
    other ranks start it, so they find it done instead of racing to write the same files."""
    if info.enabled and not info.is_main:
        dist.barrier()
    try:
        yield
    finally:  # also when rank 0 fails (e.g. bad data): the others then meet the same error, not a hang
        if info.enabled and info.is_main:
            dist.barrier()


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


def all_finite(finite: torch.Tensor, info: DistInfo, device: torch.device) -> bool:
    """True when the step's loss and gradients are finite on every rank (all must skip together)."""
    if not info.enabled:
        return bool(finite)
    bad = (~finite).to(device=device, dtype=torch.float64).reshape(1)
    dist.all_reduce(bad)
    return bool(bad.item() == 0)


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


def check_same_parameters(model: torch.nn.Module, info: DistInfo) -> str:
    """Hash the parameters on every rank and fail loudly if DDP let them drift apart.

    Buffers (BatchNorm running statistics) are left out: DDP re-broadcasts them from rank 0 at
    every forward, so after the last step they legitimately differ.
    """
    sha = hashlib.sha1()
    for tensor in model.parameters():
        sha.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    digests = gather_objects(sha.hexdigest(), info)
    if len(set(digests)) != 1:
        raise RuntimeError(f"parameters differ across ranks after training: {digests}")
    return digests[0]
