"""Triton kernels of one decoder step's LSTM cell and their launchers (lstm_cell.py).

Why. In the fast loop (model/fast_decoder.py) each LSTM cell of a decoder step is, on a GPU, a copy
of each input into the step's row (2-3), the product with the cell's weights, CUDA's fused cell
update and the dropout mask forward, and as many backward: about six launches each way whose fixed
cost does not depend on the batch. Here the forward is one kernel and the backward two:

* forward, a program per (block of rows, block of hidden units): the step's inputs, read from where
  they are, are written into the row that the deferred weight gradient reads after the loop (by the
  programs of the first hidden block only); the four gates as ONE product [BB, 4 * BH] (each hidden
  unit's four gate columns side by side, so that the warps share the columns out instead of each
  computing every gate: 16 rows are one tensor-core tile high), the precomputed term, the
  activations, the cell update and the dropout mask; it keeps the gates' activations for the backward;
* backward, first the split cell's pointwise backward (lstm_pointwise_kernels.py, one home for the
  gates' gradients): the gates' gradients from the kept activations, written once as the gradient of
  the precomputed term (which the deferred weight gradient collects), and the previous cell's; then
  a program per (block of rows, block of input columns): the inputs' gradient, that gradient times
  the weights, one product over all 4H. One launch more than a single kernel, whose every column
  program recomputed all the gates' gradients (48-80 times the pointwise work, 822-992 instructions
  an iteration in float32).

Precision: float64 for float64 weights, else float32 accumulation; the products take the weights'
dtype (bf16 under autocast, as the unfused loop's); float32 products at support.input_precision
(torch's matmul precision: "highest", the recipe's default, is three TF32 products, about float32's
accuracy; "high" one), float64 ones as float64. Every loop over the weights is pipelined (`tl.range`
with STAGES iterations in flight). Under TRITON_INTERPRET=1 the kernels run on the CPU (the suite's
check).
"""

import torch
import triton
import triton.language as tl

from .kernel_math import mma, tanh, tl_dtype
from .support import accumulation_dtype, input_precision

#: Iterations in flight in each loop (tl.range's num_stages): an iteration's tiles (the inputs and the
#: weight tile; in the backward the gates' gradients) are loaded STAGES - 1 iterations ahead into
#: shared memory (cp.async on sm_80 and later) while the current one computes. Every loop can be
#: pipelined: none reads what an earlier iteration of it wrote.
STAGES = tl.constexpr(3)


@triton.jit
def _gate_products(
    acc, x_ptr, width, col, w_ptr, row_ptr, row_stride, rows, weight_rows, columns_ok, B, K, write_row,
    BK: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """acc [BB, 4 * BH] plus one input's share of the four gates: x [B, width] times the weight
    columns col..col + width of `weight_rows` (the tile's columns' rows of W); the first hidden
    block's programs write x into the step's row."""
    for k0 in tl.range(0, width, BK, num_stages=STAGES):
        k = k0 + tl.arange(0, BK)
        x_ok = (rows < B)[:, None] & (k < width)[None, :]
        x = tl.load(x_ptr + rows[:, None] * width + k[None, :], mask=x_ok, other=0.0)
        if write_row:
            tl.store(row_ptr + rows[:, None] * row_stride + (col + k)[None, :], x, mask=x_ok)
        w_ok = (k < width)[:, None] & columns_ok[None, :]
        w = tl.load(w_ptr + weight_rows[None, :] * K + (col + k)[:, None], mask=w_ok, other=0.0)  # [BK, 4BH]
        acc += mma(x.to(w_ptr.dtype.element_ty), w, ACC, PRECISION)
    return acc


@triton.jit
def _split_gates(t, BB: tl.constexpr, BH: tl.constexpr):
    """A [BB, 4 * BH] tile whose column 4j + q is gate q of hidden unit j as four [BB, BH] tiles."""
    even, odd = tl.split(tl.reshape(t, (BB, BH, 2, 2)))  # q = 2a + b: b = 0 (i, g) and b = 1 (f, o)
    i, g = tl.split(even)
    f, o = tl.split(odd)
    return i, f, g, o


@triton.jit
def lstm_forward_kernel(
    pre_ptr, pre_stride, p0_ptr, k0, p1_ptr, k1, p2_ptr, k2, w_ptr, row_ptr, row_stride, cell_ptr, keep_ptr,
    h_ptr, c_ptr, act_ptr,  # outputs: h (dropout applied), the new cell, the gates' activations [B, 4H]
    B, H, K,
    NPARTS: tl.constexpr, HAS_KEEP: tl.constexpr, BB: tl.constexpr, BH: tl.constexpr, BK: tl.constexpr,
    ACC: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BB + tl.arange(0, BB)
    j = tl.arange(0, 4 * BH)
    gate = j % 4  # column 4j + q: gate q (i, f, g, o) of hidden unit j
    units = tl.program_id(1) * BH + j // 4
    weight_rows, columns_ok = gate * H + units, units < H
    write_row = tl.program_id(1) == 0
    z = tl.zeros((BB, 4 * BH), dtype=ACC)
    z = _gate_products(
        z, p0_ptr, k0, 0, w_ptr, row_ptr, row_stride, rows, weight_rows, columns_ok, B, K, write_row,
        BK, ACC, PRECISION,
    )  # fmt: skip
    z = _gate_products(
        z, p1_ptr, k1, k0, w_ptr, row_ptr, row_stride, rows, weight_rows, columns_ok, B, K, write_row,
        BK, ACC, PRECISION,
    )  # fmt: skip
    if NPARTS == 3:
        z = _gate_products(
            z, p2_ptr, k2, k0 + k1, w_ptr, row_ptr, row_stride, rows, weight_rows, columns_ok, B, K, write_row,
            BK, ACC, PRECISION,
        )  # fmt: skip
    tile_ok = (rows < B)[:, None] & columns_ok[None, :]
    z += tl.load(pre_ptr + rows[:, None] * pre_stride + weight_rows[None, :], mask=tile_ok, other=0.0).to(ACC)
    s = tl.where(gate == 2, 2.0, 1.0).to(ACC)[None, :]  # g's tanh(z) = 2 sigmoid(2z) - 1 (kernel_math.tanh)
    act = s * tl.sigmoid(s * z) - (s - 1.0)
    tl.store(act_ptr + rows[:, None] * 4 * H + weight_rows[None, :], act, mask=tile_ok)
    i, f, g, o = _split_gates(act, BB, BH)
    hidden = tl.program_id(1) * BH + tl.arange(0, BH)
    ok = (rows < B)[:, None] & (hidden < H)[None, :]
    at = rows[:, None] * H + hidden[None, :]
    c = f * tl.load(cell_ptr + at, mask=ok, other=0.0).to(ACC) + i * g
    h = o * tanh(c)
    if HAS_KEEP:
        h = h * tl.load(keep_ptr + at, mask=ok, other=0.0).to(ACC)
    tl.store(h_ptr + at, h, mask=ok)
    tl.store(c_ptr + at, c, mask=ok)


@triton.jit
def lstm_backward_inputs_kernel(
    dgates_ptr, w_ptr, dx_ptr,  # dx [B, K] (output) = dgates [B, 4H] @ W [4H, K]
    B, H4, K,
    BB: tl.constexpr, BJ: tl.constexpr, BK: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BB + tl.arange(0, BB)
    k = tl.program_id(1) * BK + tl.arange(0, BK)
    dx = tl.zeros((BB, BK), dtype=ACC)
    for j0 in tl.range(0, H4, BJ, num_stages=STAGES):
        j = j0 + tl.arange(0, BJ)
        d_ok = (rows < B)[:, None] & (j < H4)[None, :]
        d = tl.load(dgates_ptr + rows[:, None] * H4 + j[None, :], mask=d_ok, other=0.0)
        w = tl.load(w_ptr + j[:, None] * K + k[None, :], mask=(j < H4)[:, None] & (k < K)[None, :], other=0.0)
        dx += mma(d.to(w_ptr.dtype.element_ty), w, ACC, PRECISION)
    tl.store(dx_ptr + rows[:, None] * K + k[None, :], dx, mask=(rows < B)[:, None] & (k < K)[None, :])


#: Blocks and warps per program (untuned: to be timed against others on a GPU; scripts/bench/kernels.py
#: prints their registers and loop bodies). 16 rows are one tensor-core tile high, so a program's warps
#: share out the product's columns: 8 columns each (one tile wide), and no warp computes another's.
#: The forward: rows, hidden units (4 * BH = 32 gate columns: 4 warps) and input columns an iteration;
#: 128 programs at 16 rows and 1024 hidden units.
FORWARD_BLOCKS = {"BB": 16, "BH": 8, "BK": 64}
#: The backward's inputs' gradient: rows, input columns (16: 2 warps) per program, and gate columns an
#: iteration; 96-160 programs at 16 rows (the attention cell's 1536 input columns, the decoder cell's 2560).
#: 128 gate columns an iteration, not 64: half the iterations over the 4096 gate columns, so half the
#: memory round trips, which bound it at B0 16 (the compiler's report: 25 us predicted at 64, 14-20 at
#: 128); in tf32x3 that takes 255 registers a thread, none spilled.
INPUTS_BLOCKS = {"BB": 16, "BK": 16, "BJ": 128}
#: Warps per program: the forward and the gates' gradients, and the backward's product.
NUM_WARPS = 4
INPUTS_WARPS = 2


def forward_grid(rows: int, hidden: int) -> tuple[int, int]:
    """The forward's programs: (blocks of rows, blocks of hidden units)."""
    return triton.cdiv(rows, FORWARD_BLOCKS["BB"]), triton.cdiv(hidden, FORWARD_BLOCKS["BH"])


def backward_grid(rows: int, width: int) -> tuple[int, int]:
    """The backward's product's programs (the inputs' gradient): (blocks of rows, blocks of input columns)."""
    return triton.cdiv(rows, INPUTS_BLOCKS["BB"]), triton.cdiv(width, INPUTS_BLOCKS["BK"])


def forward(
    pre: torch.Tensor,
    parts: list[torch.Tensor],
    weight: torch.Tensor,
    row: torch.Tensor,
    cell: torch.Tensor,
    keep: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One launch: (h with the dropout mask applied, the new cell [B, H] in cell's dtype, the gates'
    activations [B, 4H] in the accumulation dtype); writes the inputs side by side into `row`."""
    b, h4 = pre.size(0), weight.size(0)
    hidden, width = h4 // 4, weight.size(1)
    acc = accumulation_dtype(weight.dtype)
    out_h, out_c = cell.new_empty(b, hidden), cell.new_empty(b, hidden)
    act = cell.new_empty(b, h4, dtype=acc)
    sizes = [(p, p.size(1)) for p in parts] + [(parts[0], 0)] * (3 - len(parts))
    lstm_forward_kernel[forward_grid(b, hidden)](
        pre, pre.stride(0), *(x for pair in sizes for x in pair), weight, row, row.stride(0), cell,
        cell if keep is None else keep, out_h, out_c, act, b, hidden, width,
        NPARTS=len(parts), HAS_KEEP=keep is not None, ACC=tl_dtype(acc), PRECISION=input_precision(weight.dtype),
        num_warps=NUM_WARPS, **FORWARD_BLOCKS,
    )  # fmt: skip
    return out_h, out_c, act


def backward(
    act: torch.Tensor,
    cell: torch.Tensor,
    new_cell: torch.Tensor,
    keep: torch.Tensor | None,
    d_h: torch.Tensor,
    d_c: torch.Tensor,
    weight: torch.Tensor,
    gates_dtype: torch.dtype,
    d_h_extra: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two launches: the gates' gradients [B, 4H] in gates_dtype (the precomputed term's) and the
    previous cell's [B, H] in its dtype; then the inputs' side by side [B, K] in the accumulation
    dtype (written in the dtypes they go on in: no cast after the kernels). d_h and d_h_extra (if
    given: a gradient of h that autograd did not sum in, added in the kernel) are [B, H] with unit
    column stride."""
    b, h4 = act.shape
    width = weight.size(1)
    acc = accumulation_dtype(weight.dtype)
    from .lstm_pointwise_kernels import backward as pointwise_backward  # a kernel module: imported where used

    d_gates, d_cell = pointwise_backward(act, cell, new_cell, keep, d_h, d_c, gates_dtype, d_h_extra)
    d_row = act.new_empty(b, width, dtype=acc)
    lstm_backward_inputs_kernel[backward_grid(b, width)](
        d_gates, weight, d_row, b, h4, width,
        ACC=tl_dtype(acc), PRECISION=input_precision(weight.dtype), num_warps=INPUTS_WARPS, **INPUTS_BLOCKS,
    )  # fmt: skip
    return d_gates, d_cell, d_row
