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
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = work()
    return result, sum(event.self_cpu_memory_usage for event in prof.events())


def peak_bytes(work: Callable[[], Any]) -> tuple[Any, int]:
    """(work(), the most tensor bytes it held on the CPU at once): the running sum of the profiler's
    raw allocation records (each allocation and free, in time order; read raw, as building the
    profiler's event tree would take longer than a small training step)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = work()
    records = sorted(
        (event.start_ns(), event.nbytes())
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]"
    )
    return result, max(itertools.accumulate((nbytes for _, nbytes in records), initial=0))
