"""The model's input: one `Batch`, built by the collates (data/collate.py), read whole by the model's
forward and by the loss. The training step and validation pass it on without opening it, so a new
field (a speaker id, say) touches the collate that fills it and the model and loss that read it.

A padded batch (packing None): B utterances, mel [B, n_mels, T] with T a multiple of the decoder's
frames per step. A packed batch (BLoad blocks): mel [R, n_mels, T] holds R blocks, text and the
lengths are per utterance, and `packing` says where each utterance sits (model/packing.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from .packing import Packing

#: Fields that stay on the host when a batch moves to the device: what the host needs to know of
#: a batch (the encoder's packing lengths, the frame count for logs) without reading the device.
HOST_FIELDS = ("text_lengths_host", "frames")


@dataclass(frozen=True)
class Batch:
    """One batch, padded or packed (module doc); extend it by subclassing (a frozen dataclass too)."""

    text: torch.Tensor  # long [N, T_text_max], zero-padded, one row per utterance
    text_lengths: torch.Tensor  # long [N]
    mel: torch.Tensor  # float [B, n_mels, T], zero-padded (B = N, or R blocks when packed)
    gate: torch.Tensor  # float [B, T]: 1.0 from each utterance's last frame on (module doc of data/collate.py)
    mel_lengths: torch.Tensor  # long [N]: real frames of each utterance
    text_lengths_host: torch.Tensor  # long [N], stays on the CPU
    frames: int  # real mel frames in the batch
    packing: Packing | None = None  # BLoad blocks: where each utterance sits; None for a padded batch

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """The batch on `device`, but for HOST_FIELDS (a subclass's tensor fields move too)."""
        return _each_field(self, "to", HOST_FIELDS, device, non_blocking=non_blocking)

    def pin_memory(self) -> Batch:
        """Every tensor in page-locked memory: what DataLoader(pin_memory=True) calls on a batch."""
        return _each_field(self, "pin_memory", ())

    def frame_mask(self) -> torch.Tensor:
        """bool [B, T]: True at real frames (from the lengths, or the packing table for blocks)."""
        if self.packing is None:
            return torch.arange(self.mel.size(2), device=self.mel_lengths.device) < self.mel_lengths.unsqueeze(1)
        return self.packing.frame_mask(self.mel_lengths, self.mel.size(0), self.mel.size(2))


def _each_field(batch: Batch, method: str, keep: tuple[str, ...], *args, **kwargs) -> Batch:
    """A copy of the batch (of its own class) with `method` applied to each field that has it
    (tensors, the packing table) and is not in `keep`."""
    changes = {}
    for field in dataclasses.fields(batch):
        value = getattr(batch, field.name)
        if field.name not in keep and hasattr(value, method):
            changes[field.name] = getattr(value, method)(*args, **kwargs)
    return dataclasses.replace(batch, **changes)
