"""PyTorch Lightning's DistributedSamplerWrapper around a batching sampler: one error, never a silent loss.

Trainer(use_distributed_sampler=True), Lightning's default, on several devices puts a
DistributedSamplerWrapper in place of a loader's `sampler` (pytorch_lightning/trainer/connectors/
data_connector.py, _resolve_sampler). The wrapper lists the sampler's whole pass and keeps every
world_size-th entry of it: of a sampler that yields this rank's batches (PlanCutSampler as
`sampler=` with batch_size=None), 1/world_size, silently. `refuse_lightning_wrapper`, called when a
sampler starts a pass, stops that with one error. A loader's `batch_sampler` (PlanBatchSampler) is
never wrapped: Lightning cannot put a sampler into a batch sampler that is not torch's BatchSampler
and raises its own TypeError, which names use_distributed_sampler=False.
Nothing here imports Lightning unless the program already has.
"""

from __future__ import annotations

import sys

from .errors import UserError

#: How many callers up the wrapper's frame is looked for (list() calls __iter__ from its __getitem__).
MAX_FRAMES = 4


def refuse_lightning_wrapper(sampler) -> None:
    """One error when Lightning's DistributedSamplerWrapper is listing `sampler`'s pass."""
    wrappers = sys.modules.get("lightning_fabric.utilities.distributed")
    if wrappers is None:  # Lightning not imported: no wrapper can exist
        return
    frame = sys._getframe(1)
    for _ in range(MAX_FRAMES):
        frame = frame.f_back
        if frame is None:
            return
        caller = frame.f_locals.get("self")
        if isinstance(caller, wrappers._DatasetSamplerWrapper) and caller._sampler is sampler:
            raise UserError(
                f"PyTorch Lightning put its DistributedSamplerWrapper around this {type(sampler).__name__}, "
                "which would keep 1/world_size of this rank's batches: build the Trainer with "
                "use_distributed_sampler=False (the sampler deals the ranks itself; docs/engines.md)"
            )
