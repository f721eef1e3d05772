"""Triton kernels of one decoder step's LSTM cell and their launchers (lstm_cell.py).

Why. In the fast loop (model/fast_decoder.py) each LSTM cell of a decoder step is, on a GPU, a copy
of each input into the step's row (2-3), the product with the cell's weights, CUDA's fused cell
update and the dropout mask forward, and as many backward: about six launches each way whose fixed
cost does not depend on the batch. Here each direction is one kernel:

* forward, a program per (block of rows, block of hidden units): the step's inputs, read from where
  they are, are written into the row that the deferred weight gradient reads after the loop (by the
  programs of the first hidden block only); the four gates' products, the precomputed term, the cell
  update and the dropout mask; it keeps the gates' activations for the backward;
* backward, a program per (block of rows, block of input columns): the gates' gradients from the
  kept activations (recomputed by every column block: cheap pointwise work, where keeping them would
  cost a launch), written once (first column block) as the gradient of the precomputed term, which
  is what the deferred weight gradient collects, and the cell's; and the inputs' gradient, the gates'
  gradients times the weights, one `tl.dot` per gate and hidden block.

Precision: float64 for float64 weights, else float32 accumulation; the products take the weights'
dtype (bf16 under autocast, as the unfused loop's); float32 products run as three TF32 products on
the tensor cores (input_precision="tf32x3", about float32's accuracy), float64 ones as float64.
Both kernels' loops over the weights are pipelined (`tl.range` with STAGES iterations in flight).
Under TRITON_INTERPRET=1 the kernels run on the CPU (the suite's check).
"""

import torch
import triton
import triton.language as tl

from .kernel_math import mma, tanh, tl_dtype
from .support import accumulation_dtype

#: Iterations in flight in each loop (tl.range's num_stages): an iteration's tiles (the inputs and the
#: four gates' weight tiles; in the backward also the kept activations) are loaded STAGES - 1
#: iterations ahead into shared memory (cp.async on sm_80 and later) while the current one computes.
#: Both loops can be pipelined: neither reads what an earlier iteration of it wrote.
STAGES = tl.constexpr(3)


@triton.jit
def _gate_products(
    x_ptr, width, col, w_ptr, row_ptr, row_stride, rows, hidden, B, H, K, write_row,
    BB: tl.constexpr, BH: tl.constexpr, BK: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    """One input's share of the four gates, [BB, BH] each: x [B, width] times the weight columns
    col..col + width; the first hidden block's programs write x into the step's row."""
    acc_i = tl.zeros((BB, BH), dtype=ACC)
    acc_f = tl.zeros((BB, BH), dtype=ACC)
    acc_g = tl.zeros((BB, BH), dtype=ACC)
    acc_o = tl.zeros((BB, BH), dtype=ACC)
    for k0 in tl.range(0, width, BK, num_stages=STAGES):
        k = k0 + tl.arange(0, BK)
        x_ok = (rows < B)[:, None] & (k < width)[None, :]
        x = tl.load(x_ptr + rows[:, None] * width + k[None, :], mask=x_ok, other=0.0)
        if write_row:
            tl.store(row_ptr + rows[:, None] * row_stride + (col + k)[None, :], x, mask=x_ok)
        x = x.to(w_ptr.dtype.element_ty)
        w_ok = (k < width)[:, None] & (hidden < H)[None, :]
        w = w_ptr + hidden[None, :] * K + (col + k)[:, None]  # [BK, BH]: gate i's tile of W^T
        acc_i += mma(x, tl.load(w, mask=w_ok, other=0.0), ACC)
        acc_f += mma(x, tl.load(w + H * K, mask=w_ok, other=0.0), ACC)
        acc_g += mma(x, tl.load(w + 2 * H * K, mask=w_ok, other=0.0), ACC)
        acc_o += mma(x, tl.load(w + 3 * H * K, mask=w_ok, other=0.0), ACC)
    return acc_i, acc_f, acc_g, acc_o


@triton.jit
def lstm_forward_kernel(
    pre_ptr, pre_stride, p0_ptr, k0, p1_ptr, k1, p2_ptr, k2, w_ptr, row_ptr, row_stride, cell_ptr, keep_ptr,
    h_ptr, c_ptr, act_ptr,  # outputs: h (dropout applied), the new cell, the gates' activations [B, 4H]
    B, H, K,
    NPARTS: tl.constexpr, HAS_KEEP: tl.constexpr, BB: tl.constexpr, BH: tl.constexpr, BK: tl.constexpr,
    ACC: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BB + tl.arange(0, BB)
    hidden = tl.program_id(1) * BH + tl.arange(0, BH)
    write_row = tl.program_id(1) == 0
    gi, gf, gg, go = _gate_products(
        p0_ptr, k0, 0, w_ptr, row_ptr, row_stride, rows, hidden, B, H, K, write_row, BB, BH, BK, ACC
    )
    ai, af, ag, ao = _gate_products(
        p1_ptr, k1, k0, w_ptr, row_ptr, row_stride, rows, hidden, B, H, K, write_row, BB, BH, BK, ACC
    )
    gi, gf, gg, go = gi + ai, gf + af, gg + ag, go + ao
    if NPARTS == 3:
        ai, af, ag, ao = _gate_products(
            p2_ptr, k2, k0 + k1, w_ptr, row_ptr, row_stride, rows, hidden, B, H, K, write_row, BB, BH, BK, ACC
        )
        gi, gf, gg, go = gi + ai, gf + af, gg + ag, go + ao
    ok = (rows < B)[:, None] & (hidden < H)[None, :]
    pre = pre_ptr + rows[:, None] * pre_stride + hidden[None, :]
    i = tl.sigmoid(tl.load(pre, mask=ok, other=0.0).to(ACC) + gi)
    f = tl.sigmoid(tl.load(pre + H, mask=ok, other=0.0).to(ACC) + gf)
    g = tanh(tl.load(pre + 2 * H, mask=ok, other=0.0).to(ACC) + gg)
    o = tl.sigmoid(tl.load(pre + 3 * H, mask=ok, other=0.0).to(ACC) + go)
    at = rows[:, None] * H + hidden[None, :]
    c = f * tl.load(cell_ptr + at, mask=ok, other=0.0).to(ACC) + i * g
    h = o * tanh(c)
    if HAS_KEEP:
        h = h * tl.load(keep_ptr + at, mask=ok, other=0.0).to(ACC)
    tl.store(h_ptr + at, h, mask=ok)
    tl.store(c_ptr + at, c, mask=ok)
    act = act_ptr + rows[:, None] * 4 * H + hidden[None, :]
    tl.store(act, i, mask=ok)
    tl.store(act + H, f, mask=ok)
    tl.store(act + 2 * H, g, mask=ok)
    tl.store(act + 3 * H, o, mask=ok)


@triton.jit
def _gate_grads(
    act_ptr, cell_ptr, c_ptr, keep_ptr, dh_ptr, dh_stride, dhx_ptr, dhx_stride, dc_ptr, rows, hidden, B, H,
    HAS_KEEP: tl.constexpr, HAS_EXTRA: tl.constexpr, ACC,
):  # fmt: skip
    """The four gates' gradients (pre-activation) and the previous cell's, [BB, BH] each; h's
    gradient is dh (rows dh_stride apart: a column slice of the next step's input gradient is read
    where it is), with HAS_EXTRA plus the extra one (rows dhx_stride apart)."""
    ok = (rows < B)[:, None] & (hidden < H)[None, :]
    at = rows[:, None] * H + hidden[None, :]
    act = act_ptr + rows[:, None] * 4 * H + hidden[None, :]
    i = tl.load(act, mask=ok, other=0.0).to(ACC)
    f = tl.load(act + H, mask=ok, other=0.0).to(ACC)
    g = tl.load(act + 2 * H, mask=ok, other=0.0).to(ACC)
    o = tl.load(act + 3 * H, mask=ok, other=0.0).to(ACC)
    dh = tl.load(dh_ptr + rows[:, None] * dh_stride + hidden[None, :], mask=ok, other=0.0).to(ACC)
    if HAS_EXTRA:
        dh += tl.load(dhx_ptr + rows[:, None] * dhx_stride + hidden[None, :], mask=ok, other=0.0).to(ACC)
    if HAS_KEEP:
        dh = dh * tl.load(keep_ptr + at, mask=ok, other=0.0).to(ACC)
    tc = tanh(tl.load(c_ptr + at, mask=ok, other=0.0).to(ACC))
    dc = tl.load(dc_ptr + at, mask=ok, other=0.0).to(ACC) + dh * o * (1.0 - tc * tc)
    di = dc * g * i * (1.0 - i)
    df = dc * tl.load(cell_ptr + at, mask=ok, other=0.0).to(ACC) * f * (1.0 - f)
    dg = dc * i * (1.0 - g * g)
    do = dh * tc * o * (1.0 - o)
    return di, df, dg, do, dc * f


@triton.jit
def lstm_backward_kernel(
    act_ptr, cell_ptr, c_ptr, keep_ptr, dh_ptr, dhx_ptr, dc_ptr, w_ptr,
    dgates_ptr, dcell_ptr, dx_ptr,  # outputs: the gates' gradients [B, 4H], the previous cell's, the inputs' [B, K]
    dh_stride, dhx_stride, B, H, K,
    HAS_KEEP: tl.constexpr, HAS_EXTRA: tl.constexpr, BB: tl.constexpr, BH: tl.constexpr, BK: tl.constexpr,
    ACC: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BB + tl.arange(0, BB)
    k = tl.program_id(1) * BK + tl.arange(0, BK)
    first = tl.program_id(1) == 0
    dx = tl.zeros((BB, BK), dtype=ACC)
    for h0 in tl.range(0, H, BH, num_stages=STAGES):
        hidden = h0 + tl.arange(0, BH)
        di, df, dg, do, dcell = _gate_grads(
            act_ptr, cell_ptr, c_ptr, keep_ptr, dh_ptr, dh_stride, dhx_ptr, dhx_stride, dc_ptr, rows, hidden, B, H,
            HAS_KEEP, HAS_EXTRA, ACC,
        )  # fmt: skip
        ok = (rows < B)[:, None] & (hidden < H)[None, :]
        if first:
            dgates = dgates_ptr + rows[:, None] * 4 * H + hidden[None, :]
            tl.store(dgates, di, mask=ok)
            tl.store(dgates + H, df, mask=ok)
            tl.store(dgates + 2 * H, dg, mask=ok)
            tl.store(dgates + 3 * H, do, mask=ok)
            tl.store(dcell_ptr + rows[:, None] * H + hidden[None, :], dcell, mask=ok)
        w_ok = (hidden < H)[:, None] & (k < K)[None, :]
        w = w_ptr + hidden[:, None] * K + k[None, :]  # [BH, BK]: gate i's tile of W
        wt = w_ptr.dtype.element_ty
        dx += mma(di.to(wt), tl.load(w, mask=w_ok, other=0.0), ACC)
        dx += mma(df.to(wt), tl.load(w + H * K, mask=w_ok, other=0.0), ACC)
        dx += mma(dg.to(wt), tl.load(w + 2 * H * K, mask=w_ok, other=0.0), ACC)
        dx += mma(do.to(wt), tl.load(w + 3 * H * K, mask=w_ok, other=0.0), ACC)
    tl.store(dx_ptr + rows[:, None] * K + k[None, :], dx, mask=(rows < B)[:, None] & (k < K)[None, :])


#: Rows, hidden units and input columns per program: small hidden and column blocks, so that a batch of
#: 16 rows still spreads over 64 or more programs (untuned: to be timed against others on a GPU).
BLOCKS = {"BB": 16, "BH": 16, "BK": 32}
#: The forward walks its inputs BK columns an iteration: 16, not the backward's block of 32 columns, so
#: that its pipelined loop fits the registers in float32 (32 spills: scripts/bench/kernels.py).
FORWARD_BLOCKS = {**BLOCKS, "BK": 16}
#: Warps per program (scripts/bench/kernels.py: the registers and spills of each choice).
NUM_WARPS = 4


def forward_grid(rows: int, hidden: int) -> tuple[int, int]:
    """The forward's programs: (blocks of rows, blocks of hidden units)."""
    return triton.cdiv(rows, BLOCKS["BB"]), triton.cdiv(hidden, BLOCKS["BH"])


def backward_grid(rows: int, width: int) -> tuple[int, int]:
    """The backward's programs: (blocks of rows, blocks of input columns)."""
    return triton.cdiv(rows, BLOCKS["BB"]), triton.cdiv(width, BLOCKS["BK"])


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
        NPARTS=len(parts), HAS_KEEP=keep is not None, ACC=tl_dtype(acc), num_warps=NUM_WARPS, **FORWARD_BLOCKS,
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
    """One launch: the gates' gradients [B, 4H] in gates_dtype (the precomputed term's), the previous
    cell's [B, H] in its dtype and the inputs' side by side [B, K] in the accumulation dtype (written in
    the dtypes they go on in: no cast after the kernel). d_h and d_h_extra (if given: a gradient of h
    that autograd did not sum in, added in the kernel) are [B, H] with unit column stride."""
    b, h4 = act.shape
    width = weight.size(1)
    acc = accumulation_dtype(weight.dtype)
    grads = (act.new_empty(b, h4, dtype=gates_dtype), torch.empty_like(cell), act.new_empty(b, width, dtype=acc))
    lstm_backward_kernel[backward_grid(b, width)](
        act, cell, new_cell, cell if keep is None else keep, d_h, d_h if d_h_extra is None else d_h_extra, d_c,
        weight, *grads, d_h.stride(0), 0 if d_h_extra is None else d_h_extra.stride(0), b, h4 // 4, width,
        HAS_KEEP=keep is not None, HAS_EXTRA=d_h_extra is not None, ACC=tl_dtype(acc), num_warps=NUM_WARPS,
        **BLOCKS,
    )  # fmt: skip
    return grads
