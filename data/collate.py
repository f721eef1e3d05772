"""Pad a list of (text ids, mel) pairs into a batch, keeping the sampler's order.

The order is kept on purpose: the batch planner decides what goes together and in what order,
and a model that needs sorted lengths (packed RNNs) sorts for itself.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import torch


class TextMelBatch(NamedTuple):
    text: torch.Tensor  # long [B, T_text_max], zero-padded
    text_lengths: torch.Tensor  # long [B]
    mel: torch.Tensor  # float [B, n_mels, T_max], zero-padded
    gate: torch.Tensor  # float [B, T_max], 1.0 from the last real frame on
    mel_lengths: torch.Tensor  # long [B]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "TextMelBatch":
        return TextMelBatch(*(t.to(device, non_blocking=non_blocking) for t in self))


class TextMelCollate:
    """Zero-pad texts and mels; T_max is rounded up to a multiple of n_frames_per_step."""

    def __init__(self, n_frames_per_step: int = 1):
        if n_frames_per_step < 1:
            raise ValueError(f"n_frames_per_step must be >= 1, got {n_frames_per_step}")
        self.n_frames_per_step = n_frames_per_step

    def __call__(self, pairs: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> TextMelBatch:
        texts, mels = zip(*pairs)
        text_lengths = torch.tensor([len(t) for t in texts], dtype=torch.long)
        mel_lengths = torch.tensor([m.shape[-1] for m in mels], dtype=torch.long)
        step = self.n_frames_per_step
        t_max = math.ceil(int(mel_lengths.max()) / step) * step

        text = torch.zeros(len(texts), int(text_lengths.max()), dtype=torch.long)
        mel = torch.zeros(len(mels), mels[0].shape[0], t_max, dtype=torch.float32)
        gate = torch.zeros(len(mels), t_max, dtype=torch.float32)
        for i, (ids, spec) in enumerate(pairs):
            text[i, : len(ids)] = ids
            mel[i, :, : spec.shape[-1]] = spec
            gate[i, spec.shape[-1] - 1:] = 1.0
        return TextMelBatch(text, text_lengths, mel, gate, mel_lengths)
