"""A training epoch's running sums, kept on the device so that no step waits for the host.

Each step adds its loss terms and its skipped flag with a few device ops; the host learns the
sums only when it asks: `start_copy()` queues a copy into pinned host memory behind the step's
kernels and `read()` waits for that copy alone (a CUDA event), not for the steps queued after
it. The loop copies after every step and reads the previous step's copy after queueing the next
one, so `max_bad_steps` is checked one step late without stalling the device, and reads the
sums for logs every `log_every` steps, at checkpoints and at the end of the epoch.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from training.step import StepResult

#: The slots of the device vector: sums over applied steps, counts, and the latest step's values.
SLOTS = ("loss_valid", "loss_padded", "guided", "steps", "skipped", "bad_in_row", "last_loss", "last_grad_norm")
_SUMS = 5  # the first five slots are sums; bad_in_row is a run length; the last two are overwritten


@dataclass
class DeviceSums:
    """The device vector, its pinned host mirror (with a numpy view made once) and the copy's event."""

    values: torch.Tensor  # float64 [len(SLOTS)] on the device
    host: torch.Tensor  # float64 [len(SLOTS)], pinned when the device is CUDA
    host_view: np.ndarray  # numpy view of `host`: reading it is not a tensor read
    event: torch.cuda.Event | None  # recorded after each copy (CUDA only)

    @classmethod
    def for_epoch(cls, start: dict[str, float], device: torch.device) -> "DeviceSums":
        """Sums that continue from `start` (a mid-epoch checkpoint's, or zeros)."""
        cuda = device.type == "cuda"
        host = torch.tensor([float(start.get(name, 0.0)) for name in SLOTS], dtype=torch.float64)
        host = host.pin_memory() if cuda else host
        values = host.to(device, copy=True)
        return cls(values, host, host.numpy(), torch.cuda.Event() if cuda else None)

    def add(self, result: StepResult) -> None:
        """Add one step: loss terms only when it was applied; the run length of bad steps in a row."""
        skipped, bad = result.skipped.to(torch.float64), result.bad.to(torch.float64)
        terms = result.terms
        losses = torch.stack([terms.valid.total.detach(), terms.padded.total.detach(),
                              terms.guided_attention.detach()]).to(torch.float64)
        applied_sums = torch.where(skipped > 0, torch.zeros_like(losses), losses)  # NaN * 0 would be NaN
        self.values[:_SUMS] += torch.cat([applied_sums, (1 - skipped).reshape(1), skipped.reshape(1)])
        self.values[_SUMS] = (self.values[_SUMS] + bad) * bad
        self.values[_SUMS + 1] = terms.loss.detach().to(torch.float64)
        self.values[_SUMS + 2] = result.grad_norm.detach().to(torch.float64)

    def start_copy(self) -> None:
        """Queue the copy of the current sums to the host (no wait)."""
        self.host.copy_(self.values, non_blocking=self.event is not None)
        if self.event is not None:
            self.event.record()

    def read(self) -> dict[str, float]:
        """The sums as of the last start_copy(), waiting for that copy only."""
        if self.event is not None:
            self.event.synchronize()
        return dict(zip(SLOTS, (float(v) for v in self.host_view)))
