"""Tacotron2 loss, MSE(mel) + MSE(postnet mel) + BCE(gate), under two normalisations.

`padded` is NVIDIA's (and the paper's) recipe: the mean over the whole padded tensor. Padded
frames hold zeros in both output and target (and a "stop" gate logit against a stop target), so
they add ~0 to the sum but count in the denominator: the more padding a batch has, the smaller its
loss. The value therefore depends on how batches were formed, which is why the paper validated
with random batching only. `valid` divides by the real frames only, so it measures the model
alone and is comparable across batching strategies. Both are always computed; `loss_norm`
chooses which one is backpropagated.
"""
from dataclasses import dataclass
from typing import Dict

import torch
from torch.nn import functional as F

from .tacotron2 import Tacotron2Output

LOSS_NORMS = ("valid", "padded")


@dataclass
class LossParts:
    """One normalisation's total and its parts (detached: for logging)."""

    total: torch.Tensor
    mel: torch.Tensor
    mel_postnet: torch.Tensor
    gate: torch.Tensor


@dataclass
class LossTerms:
    loss: torch.Tensor  # the selected total, with its graph: call .backward() on this
    padded: LossParts
    valid: LossParts

    def to_dict(self) -> Dict[str, float]:
        """Every term as a float under "<norm>/<part>" keys, read with a single device sync."""
        keys, values = [], []
        for norm in LOSS_NORMS:
            for part, value in vars(getattr(self, norm)).items():
                keys.append(f"{norm}/{part}")
                values.append(value)
        return dict(zip(keys, torch.stack(values).tolist()))


class Tacotron2Loss:
    def __init__(self, n_frames_per_step: int = 1, loss_norm: str = "valid"):
        if loss_norm not in LOSS_NORMS:
            raise ValueError(f"loss_norm={loss_norm!r}; allowed: {', '.join(LOSS_NORMS)}")
        self.r = n_frames_per_step
        self.loss_norm = loss_norm

    def __call__(self, out: Tacotron2Output, mel_target: torch.Tensor, gate_target: torch.Tensor,
                 mel_lengths: torch.Tensor) -> LossTerms:
        """mel_target [B, n_mels, T] and gate_target [B, T] padded; mel_lengths [B] real frames."""
        if mel_target.shape != out.mel.shape or gate_target.shape != out.gate.shape:
            raise ValueError(f"target shapes mel {tuple(mel_target.shape)}, gate {tuple(gate_target.shape)} "
                             f"do not match the output's {tuple(out.mel.shape)}, {tuple(out.gate.shape)}")
        if mel_target.size(2) % self.r:
            raise ValueError(f"{mel_target.size(2)} frames is not a multiple of n_frames_per_step={self.r}")
        real = (torch.arange(gate_target.size(1), device=mel_lengths.device)
                < mel_lengths.unsqueeze(1)).to(mel_target.dtype)  # [B, T]
        n_mels = mel_target.size(1)
        # Each part as a per-frame sum [B, T] and the number of values per frame.
        per_frame = {
            "mel": ((out.mel - mel_target).pow(2).sum(1), n_mels),
            "mel_postnet": ((out.mel_postnet - mel_target).pow(2).sum(1), n_mels),
            "gate": (F.binary_cross_entropy_with_logits(out.gate, gate_target, reduction="none"), 1),
        }
        n_all, n_real = real.numel(), real.sum()
        padded = {k: f.sum() / (n_all * w) for k, (f, w) in per_frame.items()}
        valid = {k: (f * real).sum() / (n_real * w) for k, (f, w) in per_frame.items()}
        totals = {"padded": sum(padded.values()), "valid": sum(valid.values())}
        return LossTerms(loss=totals[self.loss_norm], padded=_parts(totals["padded"], padded),
                         valid=_parts(totals["valid"], valid))


def _parts(total: torch.Tensor, parts: Dict[str, torch.Tensor]) -> LossParts:
    return LossParts(total.detach(), **{k: v.detach() for k, v in parts.items()})
