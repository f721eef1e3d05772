"""One decoder step's LSTM cell split between cuBLAS and Triton (Tacotron2Config.split_lstm): the
rival of lstm_cell.py's fused cell, to be chosen between them by timing on a GPU.

Why. The fused cell does its gates' product inside its Triton kernels, where the tensor cores do
the same work several times over and its loops wait on memory (scripts/bench/kernels.py); cuBLAS
runs a [B, K] x [K, 4H] product near the GPU's peak. `split_cell` leaves the product to cuBLAS and
fuses only what lies between two products:

* forward: the step's inputs written into the StepProjection's row and one GEMM, pre[i] + row @ W^T
  (deferred.step_linear, as the plain cell), then ONE Triton kernel for the cell update, the hidden
  state and the dropout mask (lstm_pointwise_kernels.py), which keeps the gates' activations;
* backward: ONE Triton kernel for the gates' gradients and the previous cell's (with the hidden
  state's gradient from the projection after the loop added in, `d_h_extra`), then step_linear's
  own backward: the inputs' gradient as one cuBLAS product, the gates' gradient passed on to pre[i]
  for the deferred weight gradient.

The two kernels are the PyTorch operators `tacotron2::lstm_pointwise` and
`tacotron2::lstm_pointwise_backward` (one operation each for autograd, the CUDA graphs, the meta
device and the operation counter) under one autograd node. Precision is the plain cell's for the
product (the compute dtype: bf16 under autocast, float64 for float64) and the fused cell's for the
pointwise part (float32 sums and activations, float64 for float64). Where it runs is
support.unavailable's rule (CUDA, or Triton's interpreter).
"""

from collections.abc import Callable

import torch
from torch.autograd.function import once_differentiable

from .deferred import StepProjection, step_linear
from .support import accumulation_dtype, cell_grads, unit_columns


@torch.library.custom_op("tacotron2::lstm_pointwise", mutates_args=())
def _lstm_pointwise(
    gates: torch.Tensor, cell: torch.Tensor, keep: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    from .lstm_pointwise_kernels import forward  # Triton on first use (its interpreter switch is read at import)

    return forward(gates, cell, keep)


@_lstm_pointwise.register_fake
def _(gates, cell, keep):
    acc = accumulation_dtype(gates.dtype)
    return torch.empty_like(cell), torch.empty_like(cell), gates.new_empty(gates.shape, dtype=acc)


@torch.library.custom_op("tacotron2::lstm_pointwise_backward", mutates_args=())
def _lstm_pointwise_backward(
    act: torch.Tensor,
    cell: torch.Tensor,
    new_cell: torch.Tensor,
    keep: torch.Tensor | None,
    d_h: torch.Tensor,
    d_c: torch.Tensor,
    gates_dtype: torch.dtype,
    d_h_extra: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    from .lstm_pointwise_kernels import backward

    return backward(act, cell, new_cell, keep, d_h, d_c, gates_dtype, d_h_extra)


@_lstm_pointwise_backward.register_fake
def _(act, cell, new_cell, keep, d_h, d_c, gates_dtype, d_h_extra):
    return act.new_empty(act.shape, dtype=gates_dtype), torch.empty_like(cell)


class _PointwiseStep(torch.autograd.Function):
    """The two operators as one autograd node; d_h_extra, a callable, is asked in the backward."""

    @staticmethod
    def forward(ctx, gates, cell, keep, extra):
        h, c, act = _lstm_pointwise(gates, cell, keep)
        ctx.save_for_backward(act, cell, c, keep)
        ctx.extra = extra
        ctx.gates_dtype = gates.dtype
        ctx.mark_non_differentiable(act)
        ctx.set_materialize_grads(False)  # no zeros for act's gradient (nor for an unused h or c: below)
        return h, c, act

    @staticmethod
    @once_differentiable
    def backward(ctx, d_h, d_c, _d_act):
        act, cell, new_cell, keep = ctx.saved_tensors
        d_h, d_c, d_h_extra = cell_grads(d_h, d_c, new_cell, ctx.extra)
        d_gates, d_cell = _lstm_pointwise_backward(act, cell, new_cell, keep, d_h, d_c, ctx.gates_dtype, d_h_extra)
        return d_gates, d_cell, None, None


def pointwise_step(
    gates: torch.Tensor,
    cell: torch.Tensor,
    keep: torch.Tensor | None,
    d_h_extra: Callable[[], torch.Tensor | None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(h * keep, c) from the gates' pre-activations [B, 4H] (order i, f, g, o, as nn.LSTMCell) and
    the cell [B, H]; d_h_extra, if given, is called in the backward for a gradient of h [B, H] that
    autograd does not sum in (or None), which the kernel adds to h's."""
    keep = None if keep is None else keep.contiguous()
    h, c, _ = _PointwiseStep.apply(unit_columns(gates), cell.contiguous(), keep, d_h_extra)
    return h, c


def split_cell(
    projection: StepProjection,
    i: int,
    cell: torch.Tensor,
    keep: torch.Tensor | None,
    *parts: torch.Tensor,
    d_h_extra: Callable[[], torch.Tensor | None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step i of a StepProjection's LSTM cell: the parts written into its row, the gates as one
    cuBLAS product (step_linear), then pointwise_step: (hidden * keep, cell)."""
    return pointwise_step(step_linear(projection, i, *parts), cell, keep, d_h_extra=d_h_extra)
