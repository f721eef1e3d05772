"""A training epoch's running sums, kept on the device so that no step waits for the host.

Each step adds its loss terms and its skipped flag with a few device ops; the host learns the
sums only when it asks: `start_copy()` queues a copy into pinned host memory behind the step's
kernels and `read()` waits for that copy alone (a CUDA event), not for the steps queued after
it. The loop copies after every step and reads the previous step's copy after queueing the next
one, so `max_bad_steps` is checked one step late without stalling the device, and reads the
sums for logs every `log_every` steps, at checkpoints and at the end of the epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np
import torch

from training.checkpoint import from_known_fields
from training.step import StepResult

#: How an EpochSums field is kept on the device (field metadata "device"): summed over the steps,
#: or the run length of bad steps in a row. Fields without it (frames, time) are the host's.
SUM, RUN_LENGTH = "sum", "run length"


@dataclass
class EpochSums:
    """A training epoch's running sums on one rank (kept in mid-epoch checkpoints). The device
    keeps the fields marked with a "device" kind (DeviceSums), the host the rest."""

    loss_valid: float = field(default=0.0, metadata={"device": SUM})
    loss_padded: float = field(default=0.0, metadata={"device": SUM})
    guided: float = field(default=0.0, metadata={"device": SUM})
    steps: int = field(default=0, metadata={"device": SUM})  # optimiser steps applied
    skipped: int = field(default=0, metadata={"device": SUM})  # steps skipped for a non-finite loss or gradient
    bad_in_row: int = field(default=0, metadata={"device": RUN_LENGTH})  # the current run of bad steps
    frames: float = 0.0  # real mel frames trained on
    seconds: float = 0.0  # training time, steps only

    @classmethod
    def from_dict(cls, values: dict[str, float] | None) -> EpochSums:
        return from_known_fields(cls, values)


_SUMMED_FIELDS = tuple(f.name for f in fields(EpochSums) if f.metadata.get("device") == SUM)
#: The EpochSums fields the device keeps, and the slots of the device vector: the summed fields
#: first (one slice), the run length, then the latest step's loss and gradient norm (overwritten
#: every step, for the progress bar and logs).
DEVICE_FIELDS = _SUMMED_FIELDS + tuple(f.name for f in fields(EpochSums) if f.metadata.get("device") == RUN_LENGTH)
SLOTS = DEVICE_FIELDS + ("last_loss", "last_grad_norm")
_SLOT = {name: i for i, name in enumerate(SLOTS)}
_SUMMED = slice(0, len(_SUMMED_FIELDS))


@dataclass
class DeviceSums:
    """The device vector, its pinned host mirror (with a numpy view made once) and the copy's event."""

    values: torch.Tensor  # float64 [len(SLOTS)] on the device
    host: torch.Tensor  # float64 [len(SLOTS)], pinned when the device is CUDA
    host_view: np.ndarray  # numpy view of `host`: reading it is not a tensor read
    event: torch.cuda.Event | None  # recorded after each copy (CUDA only)

    @classmethod
    def for_epoch(cls, start: dict[str, float], device: torch.device) -> DeviceSums:
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
        losses = torch.stack(
            [terms.valid.total.detach(), terms.padded.total.detach(), terms.guided_attention.detach()]
        ).to(torch.float64)
        applied = torch.where(skipped > 0, torch.zeros_like(losses), losses)  # NaN * 0 would be NaN
        step = dict(zip(("loss_valid", "loss_padded", "guided"), applied.unbind(0)), steps=1 - skipped, skipped=skipped)
        self.values[_SUMMED] += torch.stack([step[name] for name in _SUMMED_FIELDS])
        run = _SLOT["bad_in_row"]
        self.values[run] = (self.values[run] + bad) * bad
        self.values[_SLOT["last_loss"]] = terms.loss.detach().to(torch.float64)
        self.values[_SLOT["last_grad_norm"]] = result.grad_norm.detach().to(torch.float64)

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
