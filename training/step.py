"""The one training step: what `train.py` runs and what `scripts/bench/epoch.py` times.

build_step_parts() makes model, optimizer, criterion and AMP scaler from the configs;
train_step() takes one optimisation step on a batch already on the device, its decoder loop on
the run's CUDA graphs when with_graphs() built them (the step sets the model's loop hook).

The step never reads a device value on the host, so the host can queue the next step while the
device computes this one: the update is skipped on the device (fused Adam's `found_inf`) when the
gradient norm is not finite, and the caller learns of it from `StepResult.skipped`, a device
tensor it reads when it chooses (training/device_sums.py).
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
from tqdm import tqdm

from model import Batch, Tacotron2, Tacotron2Config, Tacotron2Loss
from model.config import FUSED_SWITCHES
from model.graphs import LoopGraphs, build_loop_graphs
from model.loss import LossTerms
from model.ops.support import unavailable as kernels_unavailable
from model.shapes import LoopShape, ShapeTable
from training.config import LR_BATCH_SCALINGS, TrainConfig
from training.hparams import HParamsError

#: `amp` hparam (one of training/config.py's AMP_MODES) -> autocast dtype (None: fp32, the paper's setting).
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
    graphs: LoopGraphs | None = None  # the decoder loop's static shapes (CUDA graphs), see with_graphs()


@dataclass(frozen=True)
class StepResult:
    """One step's loss terms, gradient norm, 1.0 where the update was skipped, and 1.0 where that
    counts toward max_bad_steps (all on the device). Under fp16 the gradient scaler skips a step
    whose scaled gradients overflowed and lowers its scale: that is its normal start-up, not a bad
    step, so there only a non-finite loss is bad."""

    terms: LossTerms
    grad_norm: torch.Tensor
    skipped: torch.Tensor
    bad: torch.Tensor


def build_step_parts(train: TrainConfig, model_cfg: Tacotron2Config, device: torch.device) -> StepParts:
    """Model (seeded with train.seed), Adam, the loss and the scaler, as the configs say."""
    amp_dtype = AMP_DTYPES[train.amp]
    if amp_dtype is not None and device.type != "cuda":
        raise HParamsError(f"hparam 'amp': {train.amp} needs a CUDA device; this run is on {device} (use amp=off)")
    for fused in FUSED_SWITCHES:
        missing = getattr(model_cfg, fused) and kernels_unavailable(device)
        if missing:
            raise HParamsError(f"hparam 'model.{fused}': {missing} (or use model.{fused}=false)")
    set_matmul_precision(train.matmul_precision)
    torch.manual_seed(train.seed)
    model = Tacotron2(model_cfg).to(device)
    # fused: one kernel for the whole update, and it honours `found_inf` without a host read
    optimizer = torch.optim.Adam(
        model.parameters(), lr=train.learning_rate, weight_decay=train.weight_decay, fused=True
    )
    criterion = Tacotron2Loss(
        loss_norm=train.loss_norm,
        guided_attention=train.guided_attention,
        guided_attention_sigma=train.guided_attention_sigma,
        gate_pos_weight=train.gate_pos_weight,
    )
    scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)
    return StepParts(model, model, optimizer, criterion, scaler, amp_dtype, train.grad_clip)


def set_matmul_precision(precision: str) -> None:
    """float32 matrix products and convolutions at `precision`: `highest` is true fp32 everywhere,
    which on CUDA also needs cuDNN's own TF32 switch (convolutions, the cuDNN LSTM) turned off."""
    torch.set_float32_matmul_precision(precision)
    torch.backends.cudnn.allow_tf32 = precision != "highest"


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Adam's moments and step counts from a checkpoint, keeping this run's fused update: a
    checkpoint written before the step was fused stores fused=None, which would switch it off
    (and the unfused Adam cannot skip a step on the device)."""
    fused = [group["fused"] for group in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, was in zip(optimizer.param_groups, fused):
        group["fused"] = was
        for param in group["params"]:
            if "step" in optimizer.state.get(param, {}):
                optimizer.state[param]["step"] = optimizer.state[param]["step"].to(param.device, torch.float32)


def with_graphs(
    parts: StepParts, cuda_graphs: str, table: ShapeTable | None, device: torch.device, progress: bool = False
) -> StepParts:
    """The parts with every shape of the run's table on static buffers, captured as CUDA graphs on
    CUDA (cuda_graphs: auto does this for CUDA runs with graph_bucket > 0; true also on the CPU,
    where the buffers run eagerly). Call it before DDP wraps the model and before the loaders start.
    `progress`: a bar over the shapes (the full model's take seconds each to capture)."""
    if table is None or not graphs_wanted(cuda_graphs, device):
        return parts
    shapes = table.shapes()
    with tqdm(total=len(shapes), desc="decoder graphs", unit="shape", disable=not progress, leave=False) as bar:
        graphs = build_loop_graphs(parts.core.decoder, shapes, device, parts.amp_dtype, on_shape=lambda _: bar.update())
    return dataclasses.replace(parts, graphs=graphs)


def graphs_wanted(cuda_graphs: str, device: torch.device) -> bool:
    """Whether the run puts its shapes on static buffers (hparam cuda_graphs; auto: on CUDA)."""
    return cuda_graphs == "true" or (cuda_graphs == "auto" and device.type == "cuda")


def loop_shape(table: ShapeTable | None, batch: Batch) -> LoopShape | None:
    """The padded shape of a batch's decoder loop (model/shapes.py), from host-side sizes; None
    without a table (graph_bucket=0)."""
    if table is None:
        return None
    return table.shape_of(batch.mel.size(0), batch.mel.size(2), batch.text.size(1))


def forward_loss(parts: StepParts, batch: Batch, shape: LoopShape | None = None) -> LossTerms:
    """Forward pass and loss under the configured autocast; the batch crosses into both whole."""
    # no cast cache: a weight the plain decoder reuses every step is cast per use, so its per-step
    # gradients are summed in fp32 (one cached cast would sum them in the autocast dtype)
    autocast = (
        torch.autocast(batch.mel.device.type, dtype=parts.amp_dtype, cache_enabled=False)
        if parts.amp_dtype
        else nullcontext()
    )
    with autocast, graphed_loops(parts):
        return parts.criterion(parts.model(batch, shape=shape), batch)


def graphed_loops(parts: StepParts) -> AbstractContextManager:
    """The step's choice of decoder loop runner: the run's static shapes (CUDA graphs) through the
    fast decoder's loop hook when with_graphs() built them, else the model's own eager loop."""
    if parts.graphs is None:
        return nullcontext()
    return parts.core.decoder.loop_hook(parts.graphs.runner)


def learning_rate(train: TrainConfig, base_batch_size: int, global_step: int, batch_size: int) -> float:
    """The learning rate of step `global_step` (0-based) on a batch of `batch_size` utterances:
    learning_rate, ramped up linearly over the first warmup_steps steps, times (B / B0) ** k with
    k from lr_batch_scaling (0: the paper's constant rate; DBS batches are larger than B0 where
    utterances are short, so a rule per batch keeps the step size per utterance alike); B0 is
    `base_batch_size`, the batching's batch_size."""
    warm = min(1.0, (global_step + 1) / train.warmup_steps) if train.warmup_steps else 1.0
    scale = (batch_size / base_batch_size) ** LR_BATCH_SCALINGS[train.lr_batch_scaling]
    return train.learning_rate * warm * scale


def train_step(parts: StepParts, batch: Batch, lr: float | None = None, shape: LoopShape | None = None) -> StepResult:
    """Forward, backward, clip, and an Adam step that the device skips when the gradient norm is
    not finite (a non-finite loss makes its gradients non-finite too). Under DDP every rank holds
    the same all-reduced gradients, so every rank skips together without another collective. A
    skipped step leaves the weights, Adam's moments and its step count untouched. `lr` (a host
    number, see learning_rate()) replaces the optimiser's rate from this step on; None keeps it.
    `shape`: the decoder loop's padded shape (loop_shape()); the results are the same."""
    terms = forward_loss(parts, batch, shape)
    parts.optimizer.zero_grad(set_to_none=True)
    parts.scaler.scale(terms.loss).backward()
    parts.scaler.unscale_(parts.optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(parts.model.parameters(), parts.grad_clip, foreach=True)
    skipped = (~torch.isfinite(grad_norm)).float()
    bad = (~torch.isfinite(terms.loss.detach())).float() if parts.scaler.is_enabled() else skipped
    if lr is not None:
        for group in parts.optimizer.param_groups:
            group["lr"] = lr
    if parts.scaler.is_enabled():  # fp16: the scaler hands fused Adam its own found_inf
        parts.scaler.step(parts.optimizer)
        parts.scaler.update()
    else:  # the attributes GradScaler sets for optimizers that support them (fused Adam)
        parts.optimizer.grad_scale, parts.optimizer.found_inf = None, skipped
        parts.optimizer.step()
        del parts.optimizer.grad_scale, parts.optimizer.found_inf
    return StepResult(terms, grad_norm, skipped, bad)
