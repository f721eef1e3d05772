"""One decoder step's LSTM cell through the fast loop's StepProjection: the plain reference and the
same cell as fused Triton kernels (Tacotron2Config.fused_lstm).

Plain. `plain_cell`: the step's inputs written into the projection's row and multiplied by its
weights (deferred.step_linear), then `lstm_update`, nn.LSTMCell's pointwise part (on CUDA the
fused cell kernel nn.LSTMCell itself runs), then the dropout mask.

Fused. In the fast loop each LSTM cell of a step is, on a GPU, about six launches forward (the
inputs copied into the step's row, the product, the cell update, the dropout mask) and as many
backward, each a fixed cost whatever the batch. `cell_step` is one Triton kernel forward and two
backward (lstm_kernels.py), wrapped as the PyTorch operators `tacotron2::lstm_step` and
`tacotron2::lstm_step_backward`, so autograd, the CUDA graphs, the meta device and the operation
counter treat each as one operation. It keeps the StepProjection's contract: it writes the step's
inputs into the projection's row (the operator says it mutates it), and the gates' gradient is
returned as the gradient of the precomputed term pre[i], which the deferred weight gradient
collects. Where it runs is support.unavailable's rule (CUDA, or Triton's interpreter).
"""

from collections.abc import Callable

import torch
from torch.autograd.function import once_differentiable

from .deferred import StepProjection, step_linear
from .support import accumulation_dtype, cell_grads


@torch.library.custom_op("tacotron2::lstm_step", mutates_args=("row",))
def _lstm_step(
    pre: torch.Tensor,
    parts: list[torch.Tensor],
    weight: torch.Tensor,
    row: torch.Tensor,
    cell: torch.Tensor,
    keep: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    from .lstm_kernels import forward  # Triton on first use (its interpreter switch is read at import)

    return forward(pre, parts, weight, row, cell, keep)


@_lstm_step.register_fake
def _(pre, parts, weight, row, cell, keep):
    b, hidden = cell.shape
    acc = accumulation_dtype(weight.dtype)
    return cell.new_empty(b, hidden), cell.new_empty(b, hidden), cell.new_empty(b, 4 * hidden, dtype=acc)


@torch.library.custom_op("tacotron2::lstm_step_backward", mutates_args=())
def _lstm_step_backward(
    act: torch.Tensor,
    cell: torch.Tensor,
    new_cell: torch.Tensor,
    keep: torch.Tensor | None,
    d_h: torch.Tensor,
    d_c: torch.Tensor,
    weight: torch.Tensor,
    gates_dtype: torch.dtype,
    d_h_extra: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    from .lstm_kernels import backward

    return backward(act, cell, new_cell, keep, d_h, d_c, weight, gates_dtype, d_h_extra)


@_lstm_step_backward.register_fake
def _(act, cell, new_cell, keep, d_h, d_c, weight, gates_dtype, d_h_extra):
    b, h4 = act.shape
    acc = accumulation_dtype(weight.dtype)
    return act.new_empty(b, h4, dtype=gates_dtype), torch.empty_like(cell), act.new_empty(b, weight.size(1), dtype=acc)


class _CellStep(torch.autograd.Function):
    """The two operators as one autograd node (an operator that writes into an input, the row, cannot
    carry its own autograd formula)."""

    @staticmethod
    def forward(ctx, pre, weight, row, cell, keep, extra, *parts):
        h, c, act = _lstm_step(pre, list(parts), weight, row, cell, keep)
        ctx.save_for_backward(act, cell, c, keep, weight)
        ctx.extra = extra
        ctx.parts = [(p.size(1), p.dtype) for p in parts]
        ctx.pre_dtype = pre.dtype
        ctx.mark_non_differentiable(act)
        ctx.set_materialize_grads(False)  # no zeros for act's gradient (nor for an unused h or c: below)
        return h, c, act

    @staticmethod
    @once_differentiable
    def backward(ctx, d_h, d_c, _d_act):
        act, cell, new_cell, keep, weight = ctx.saved_tensors
        d_h, d_c, d_h_extra = cell_grads(d_h, d_c, new_cell, ctx.extra)
        d_gates, d_cell, d_row = _lstm_step_backward(
            act, cell, new_cell, keep, d_h, d_c, weight, ctx.pre_dtype, d_h_extra
        )
        d_parts = d_row.split([size for size, _ in ctx.parts], 1)
        d_parts = tuple(d.to(dtype) for d, (_, dtype) in zip(d_parts, ctx.parts))
        return d_gates, None, None, d_cell, None, None, *d_parts


def cell_step(
    pre: torch.Tensor,
    weight: torch.Tensor,
    row: torch.Tensor,
    cell: torch.Tensor,
    keep: torch.Tensor | None,
    *parts: torch.Tensor,
    d_h_extra: Callable[[], torch.Tensor | None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """An LSTM cell's step: (h * keep, c) from gates = pre + [parts side by side] @ weight^T, the parts
    written into `row` (a view whose columns are the parts'). weight [4H, K] is outside autograd (the
    fast loop's detached compute-dtype copy); keep is the step's dropout mask or None. d_h_extra, if
    given, is called in the backward for a gradient of h [B, H] that autograd does not sum in (or
    None), which the backward's kernel adds to h's."""
    keep = None if keep is None else keep.contiguous()
    parts = tuple(p.contiguous() for p in parts)
    h, c, _ = _CellStep.apply(pre, weight, row, cell.contiguous(), keep, d_h_extra, *parts)
    return h, c


def fused_cell(
    projection: StepProjection,
    i: int,
    cell: torch.Tensor,
    keep: torch.Tensor | None,
    *parts: torch.Tensor,
    d_h_extra: Callable[[], torch.Tensor | None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cell_step at step i of a StepProjection: (hidden * keep, cell), the parts written into its row."""
    row = projection.rows[i, :, projection.skip :]
    return cell_step(projection.pre[i], projection.weight, row, cell, keep, *parts, d_h_extra=d_h_extra)


def plain_cell(
    projection: StepProjection, i: int, cell: torch.Tensor, keep: torch.Tensor | None, *parts: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same step unfused (the fused kernels' reference): step_linear, lstm_update, the dropout mask."""
    hidden, cell = lstm_update(step_linear(projection, i, *parts), cell, projection.zeros)
    return (hidden if keep is None else hidden * keep), cell


def lstm_update(
    gates: torch.Tensor, cell: torch.Tensor, zeros: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """LSTMCell's pointwise part on precomputed gates (order i, f, g, o, as nn.LSTMCell). Given
    `zeros` (CUDA) and one dtype, it is CUDA's fused LSTM-cell kernel (nn.LSTMCell's own): one
    kernel forward and one backward instead of about ten each."""
    if zeros is not None and gates.dtype == cell.dtype:
        hidden, cell, _ = torch.ops.aten._thnn_fused_lstm_cell(gates, zeros, cell)
        return hidden, cell
    i, f, g, o = gates.chunk(4, 1)
    c = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c
