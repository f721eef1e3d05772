"""Memory a piece of work leaves allocated on the CPU: what a forward keeps for its backward.

A GPU run's peak memory is mostly the activations the forward saves for the backward. On the CPU
torch keeps no allocator statistics, but its profiler records every allocation and free with
`profile_memory=True`; their sum over a forward is the memory still held when it returns (saved
activations, the outputs, per-batch copies), the same tensors a GPU would hold, so a saving of
activation memory can be measured and tested without a GPU. Only tensor memory counts, not the
Python objects around it. peak_bytes() reads the same record as a running sum: the most a piece
of work held at once (what batch_size=auto's CPU tests hold against a simulated memory limit).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from torch.profiler import ProfilerActivity, profile


def held_bytes(work: Callable[[], Any]) -> tuple[Any, int]:
    """(work(), bytes that work allocated on the CPU and had not freed when it returned)."""
    result, records = memory_records(work)
    return result, sum(records)


def peak_bytes(work: Callable[[], Any]) -> tuple[Any, int]:
    """(work(), the most tensor bytes it held on the CPU at once): the running sum of its allocations
    and frees in time order."""
    result, records = memory_records(work)
    return result, max(itertools.accumulate(records, initial=0))


def memory_records(work: Callable[[], Any]) -> tuple[Any, list[int]]:
    """(work(), each allocation's bytes and each free's negative bytes, in time order): the profiler's
    raw records, read raw, as building its event tree would take longer than a small training step."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = work()
    records = sorted(
        (event.start_ns(), event.nbytes())
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]"
    )
    return result, [nbytes for _, nbytes in records]
