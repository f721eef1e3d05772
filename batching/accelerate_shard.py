"""Hugging Face Accelerate's BatchSamplerShard around a batching sampler, through Accelerate's public API.

accelerator.prepare(loader) wraps the loader's batch sampler in a BatchSamplerShard that keeps
every num_processes-th batch for its process (index % num_processes == process_index). A sampler
that yields only this rank's batches would then lose all but 1/num_processes of them, silently.
`shard_aware(prepared_loader)` finds the shard in the prepared loader (its `batch_sampler`, a
BatchSamplerShard whose own `batch_sampler` is ours) and tells the sampler
(`adopt_shard(num_processes, process_index)`), which then yields every rank's batches step-major
so that the shard's pick is this rank's. A sampler iterated under a shard it was not told of stops
with one error (`refuse_unannounced_shard`, which asks Accelerate's GradientState for the loader
being iterated). Nothing here imports accelerate unless the program already has.
"""

from __future__ import annotations

import sys

from .errors import UserError

#: How many batch samplers deep a shard is looked for (Accelerate's skip_first_batches adds one around it).
MAX_WRAPPERS = 4


def shard_aware(loader):
    """`loader`, prepared by accelerator.prepare (or accelerate's prepare_data_loader), after telling the
    batching sampler inside it of Accelerate's shard; one process has none, and nothing is told."""
    found = shard_of(loader)
    if found is not None:
        shard, sampler = found
        if not hasattr(sampler, "adopt_shard"):
            raise UserError(
                f"shard_aware: the prepared loader's batch sampler is a {type(sampler).__name__}, not a "
                "sampler of batching (PlanBatchSampler, PlanCutSampler): pass the loader the sampler is in"
            )
        sampler.adopt_shard(shard.num_processes, shard.process_index)
    return loader


def shard_of(loader) -> tuple | None:
    """(Accelerate's BatchSamplerShard, the batch sampler it deals) in a prepared loader; None without one."""
    from accelerate.data_loader import BatchSamplerShard

    node = getattr(loader, "batch_sampler", None)
    for _ in range(MAX_WRAPPERS):
        if isinstance(node, BatchSamplerShard):
            return node, node.batch_sampler
        node = getattr(node, "batch_sampler", None)
    return None


def refuse_unannounced_shard(sampler) -> None:
    """One error when the Accelerate loader being iterated deals `sampler`'s batches through a
    BatchSamplerShard that shard_aware did not announce (the sampler would lose most of its batches)."""
    if "accelerate.data_loader" not in sys.modules:  # no prepared loader can exist
        return
    from accelerate.state import GradientState

    found = shard_of(GradientState().active_dataloader)
    if found is not None and found[1] is sampler:
        raise UserError(
            "accelerator.prepare wrapped this sampler in Accelerate's BatchSamplerShard, which keeps every "
            "num_processes-th batch: pass the prepared loader to batching.accelerate_shard.shard_aware("
            "loader) before iterating it (docs/lhotse.md, 'Hugging Face Accelerate')"
        )
