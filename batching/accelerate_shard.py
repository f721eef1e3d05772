"""Seeing Hugging Face Accelerate's BatchSamplerShard around a batch sampler, without importing it.

accelerator.prepare(loader) wraps the loader's batch sampler in a BatchSamplerShard that keeps
every num_processes-th batch for its process (index % num_processes == process_index). A sampler
that already yields only this rank's batches would then lose all but 1/num_processes of them,
silently. The shard only iterates and measures the sampler, so the sampler can see it only as the
caller of its __iter__ / __len__; this module finds it there (duck-typed: an object whose
`batch_sampler` is the sampler and that has num_processes and process_index).
"""
from __future__ import annotations

import sys


def calling_shard(sampler, depth: int = 2) -> tuple[int, int] | None:
    """(num_processes, process_index) of the shard whose method called `sampler`'s method that
    called this (`depth` frames up), or None when something else called it."""
    caller = sys._getframe(depth).f_locals.get("self")
    if getattr(caller, "batch_sampler", None) is not sampler:
        return None
    processes, index = getattr(caller, "num_processes", None), getattr(caller, "process_index", None)
    return None if processes is None or index is None else (processes, index)
