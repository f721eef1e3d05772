"""The one training step: what `train.py` runs and what `scripts/bench_epoch.py` times.

build_step_parts() makes model, optimizer, criterion and AMP scaler from the config;
train_step() takes one optimisation step on a batch already on the device.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from model import Tacotron2, Tacotron2Loss
from model.loss import LossTerms
from training.hparams import HParamsError

if TYPE_CHECKING:  # annotations only: training/config.py takes AMP_DTYPES from here
    from training.config import RunConfig

#: `amp` hparam -> autocast dtype (None: fp32, the paper's setting).
AMP_DTYPES = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class StepParts:
    """Everything one optimisation step touches. `model` may be DDP-wrapped; `core` never is."""

    model: torch.nn.Module
    core: Tacotron2
    optimizer: torch.optim.Optimizer
    criterion: Tacotron2Loss
    scaler: torch.amp.GradScaler
    amp_dtype: torch.dtype | None
    grad_clip: float


@dataclass(frozen=True)
class StepResult:
    """One step's loss terms, gradient norm, and whether the update was applied (not skipped)."""

    terms: LossTerms
    grad_norm: torch.Tensor
    applied: bool


def build_step_parts(cfg: RunConfig, device: torch.device) -> StepParts:
    """Model (seeded with cfg.train.seed), Adam, the loss and the scaler, as the config says."""
    amp_dtype = AMP_DTYPES[cfg.train.amp]
    if amp_dtype is not None and device.type != "cuda":
        raise HParamsError(f"hparam 'amp': {cfg.train.amp} needs a CUDA device; this run is on {device} (use amp=off)")
    torch.manual_seed(cfg.train.seed)
    model = Tacotron2(cfg.model).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.learning_rate, weight_decay=cfg.train.weight_decay)
    criterion = Tacotron2Loss(cfg.train.n_frames_per_step, loss_norm=cfg.train.loss_norm,
                              guided_attention=cfg.train.guided_attention,
                              guided_attention_sigma=cfg.train.guided_attention_sigma,
                              gate_pos_weight=cfg.train.gate_pos_weight)
    scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)
    return StepParts(model, model, optimizer, criterion, scaler, amp_dtype, cfg.train.grad_clip)


def forward_loss(parts: StepParts, batch) -> LossTerms:
    """Forward pass and loss under the configured autocast; packed batches carry their table."""
    packing = getattr(batch, "packing", None)  # BLoad blocks: where each utterance sits
    autocast = torch.autocast(batch.mel.device.type, dtype=parts.amp_dtype) if parts.amp_dtype else nullcontext()
    with autocast:
        out = parts.model(batch.text, batch.text_lengths, batch.mel, batch.mel_lengths, packing)
        return parts.criterion(out, batch.mel, batch.gate, batch.mel_lengths, batch.text_lengths, packing)


def train_step(parts: StepParts, batch, all_finite=None) -> StepResult:
    """Forward, backward, clip, and an Adam step unless the loss or a gradient is not finite.

    `all_finite(finite) -> bool` decides across ranks (every rank must skip together under DDP);
    None: this rank's own flag. A skipped step leaves the weights and Adam's state untouched.
    """
    terms = forward_loss(parts, batch)
    parts.optimizer.zero_grad(set_to_none=True)
    parts.scaler.scale(terms.loss).backward()
    parts.scaler.unscale_(parts.optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(parts.model.parameters(), parts.grad_clip)
    finite = torch.isfinite(terms.loss.detach()) & torch.isfinite(grad_norm)
    applied = bool(finite) if all_finite is None else all_finite(finite)
    if applied:
        parts.scaler.step(parts.optimizer)
    else:
        parts.optimizer.zero_grad(set_to_none=True)
    parts.scaler.update()
    return StepResult(terms, grad_norm, applied)
