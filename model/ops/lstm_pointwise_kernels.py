"""Triton kernels of the split LSTM cell's pointwise part and their launchers (lstm_split.py).

Why. The split cell leaves its product to cuBLAS (gates = pre + row @ W^T, one GEMM a step) and
does everything between two products in one kernel each way, where the fast loop's cell update,
dropout mask and their backwards are several launches:

* forward, a program per BLOCK elements of the [B, H] state: the four gates' activations from the
  gates' pre-activations (the GEMM's output), the new cell, the hidden state with the dropout mask
  applied; it keeps the activations for the backward;
* backward, the same programs: the four gates' gradients (pre-activation, what both the GEMM's
  inputs' gradient and the deferred weight gradient read) and the previous cell's, from the kept
  activations, h's gradient (rows dh_stride apart: a column slice of a wider gradient is read where
  it lies) and, if given, an extra gradient of h that autograd does not sum in.

Precision: sums and activations in float64 for float64 gates, else in float32 (bf16 gates under
autocast are read as they are and widened); the outputs are written in the dtypes they go on in.
No loop, no product: each element is read and written once.
"""

import torch
import triton
import triton.language as tl

from .kernel_math import tanh, tl_dtype
from .support import accumulation_dtype

#: Elements of the [B, H] state per program: at B0 16 and 1024 hidden units, 64 programs (untuned:
#: to be timed against others on a GPU).
BLOCK = 256
#: Warps per program.
NUM_WARPS = 4


@triton.jit
def lstm_pointwise_forward_kernel(
    gates_ptr, gates_stride, cell_ptr, keep_ptr,
    h_ptr, c_ptr, act_ptr,  # outputs: h (dropout applied), the new cell, the gates' activations [B, 4H]
    B, H,
    HAS_KEEP: tl.constexpr, BLOCK: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = at < B * H
    row, unit = at // H, at % H
    gates = gates_ptr + row * gates_stride + unit
    i = tl.sigmoid(tl.load(gates, mask=ok, other=0.0).to(ACC))
    f = tl.sigmoid(tl.load(gates + H, mask=ok, other=0.0).to(ACC))
    g = tanh(tl.load(gates + 2 * H, mask=ok, other=0.0).to(ACC))
    o = tl.sigmoid(tl.load(gates + 3 * H, mask=ok, other=0.0).to(ACC))
    c = f * tl.load(cell_ptr + at, mask=ok, other=0.0).to(ACC) + i * g
    h = o * tanh(c)
    if HAS_KEEP:
        h = h * tl.load(keep_ptr + at, mask=ok, other=0.0).to(ACC)
    tl.store(h_ptr + at, h, mask=ok)
    tl.store(c_ptr + at, c, mask=ok)
    act = act_ptr + row * 4 * H + unit
    tl.store(act, i, mask=ok)
    tl.store(act + H, f, mask=ok)
    tl.store(act + 2 * H, g, mask=ok)
    tl.store(act + 3 * H, o, mask=ok)


@triton.jit
def lstm_pointwise_backward_kernel(
    act_ptr, cell_ptr, c_ptr, keep_ptr, dh_ptr, dh_stride, dhx_ptr, dhx_stride, dc_ptr,
    dgates_ptr, dcell_ptr,  # outputs: the gates' gradients [B, 4H], the previous cell's [B, H]
    B, H,
    HAS_KEEP: tl.constexpr, HAS_EXTRA: tl.constexpr, BLOCK: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = at < B * H
    row, unit = at // H, at % H
    act = act_ptr + row * 4 * H + unit
    i = tl.load(act, mask=ok, other=0.0).to(ACC)
    f = tl.load(act + H, mask=ok, other=0.0).to(ACC)
    g = tl.load(act + 2 * H, mask=ok, other=0.0).to(ACC)
    o = tl.load(act + 3 * H, mask=ok, other=0.0).to(ACC)
    dh = tl.load(dh_ptr + row * dh_stride + unit, mask=ok, other=0.0).to(ACC)
    if HAS_EXTRA:
        dh += tl.load(dhx_ptr + row * dhx_stride + unit, mask=ok, other=0.0).to(ACC)
    if HAS_KEEP:
        dh = dh * tl.load(keep_ptr + at, mask=ok, other=0.0).to(ACC)
    tc = tanh(tl.load(c_ptr + at, mask=ok, other=0.0).to(ACC))
    dc = tl.load(dc_ptr + at, mask=ok, other=0.0).to(ACC) + dh * o * (1.0 - tc * tc)
    dgates = dgates_ptr + row * 4 * H + unit
    tl.store(dgates, dc * g * i * (1.0 - i), mask=ok)
    tl.store(dgates + H, dc * tl.load(cell_ptr + at, mask=ok, other=0.0).to(ACC) * f * (1.0 - f), mask=ok)
    tl.store(dgates + 2 * H, dc * i * (1.0 - g * g), mask=ok)
    tl.store(dgates + 3 * H, dh * tc * o * (1.0 - o), mask=ok)
    tl.store(dcell_ptr + at, dc * f, mask=ok)


def grid(rows: int, hidden: int) -> tuple[int]:
    """Both kernels' programs: blocks of BLOCK elements of the [rows, hidden] state."""
    return (triton.cdiv(rows * hidden, BLOCK),)


def forward(
    gates: torch.Tensor, cell: torch.Tensor, keep: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One launch: (h with the dropout mask applied, the new cell [B, H] in cell's dtype, the gates'
    activations [B, 4H] in the accumulation dtype) from the gates [B, 4H] (unit column stride)."""
    b, hidden = cell.shape
    acc = accumulation_dtype(gates.dtype)
    out_h, out_c = torch.empty_like(cell), torch.empty_like(cell)
    act = cell.new_empty(b, 4 * hidden, dtype=acc)
    lstm_pointwise_forward_kernel[grid(b, hidden)](
        gates, gates.stride(0), cell, cell if keep is None else keep, out_h, out_c, act, b, hidden,
        HAS_KEEP=keep is not None, BLOCK=BLOCK, ACC=tl_dtype(acc), num_warps=NUM_WARPS,
    )  # fmt: skip
    return out_h, out_c, act


def backward(
    act: torch.Tensor,
    cell: torch.Tensor,
    new_cell: torch.Tensor,
    keep: torch.Tensor | None,
    d_h: torch.Tensor,
    d_c: torch.Tensor,
    gates_dtype: torch.dtype,
    d_h_extra: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One launch: the gates' gradients [B, 4H] in gates_dtype and the previous cell's [B, H] in its
    dtype. d_h and d_h_extra (if given: a gradient of h that autograd did not sum in, added here)
    are [B, H] with unit column stride; d_c is contiguous."""
    b, hidden = cell.shape
    grads = (act.new_empty(b, 4 * hidden, dtype=gates_dtype), torch.empty_like(cell))
    lstm_pointwise_backward_kernel[grid(b, hidden)](
        act, cell, new_cell, cell if keep is None else keep, d_h, d_h.stride(0),
        d_h if d_h_extra is None else d_h_extra, 0 if d_h_extra is None else d_h_extra.stride(0), d_c,
        *grads, b, hidden,
        HAS_KEEP=keep is not None, HAS_EXTRA=d_h_extra is not None, BLOCK=BLOCK, ACC=tl_dtype(act.dtype),
        num_warps=NUM_WARPS,
    )  # fmt: skip
    return grads
