"""Triton kernels of one decoder step's attention backward and their launcher (attention_step.py);
the helpers they share with the forward (the windows, the energy chain, the block sizes, the text
slices) are attention_kernels.py's.

The chain is recomputed from its inputs (nothing of [B, T_text, dim] is kept between the passes, as
with Tacotron2Config.recompute_attention), then every input's gradient. Two launches inside the one
operator, each splitting a row (utterance) over the programs of the forward's energies launch
(attention_kernels.text_slice: one wave on the GPU):

* launch 1, attention_chain_backward_kernel, programs (row, text slice): the weights' whole gradient
  over the slice's memory tiles (and memory's, w[t] * d_context), then the chain and its softmax
  and tanh backward over the slice's chunks: dx (the gradient of the tanh's input) into a scratch
  and the processed memory's gradient, and the slice's partial sums of the query's and v's
  gradients. The softmax's term s = sum_t w[t] * dws[t] needs the whole row's weights' gradient, of
  which the memory's share sum_t w[t] * memory[t] . d_context is the context times d_context: so s
  comes from the row's [T] gradients and the forward's context, without walking the row's memory.
* launch 2, attention_filter_backward_kernel, programs (row, slice), each taking three shares of
  the rest: the hidden state's gradient for a slice of its units (the query's gradient, the sum of
  launch 1's partials, times the query layer's weight: the weight read once a row), the location
  matrix's and v's gradients for a slice of the attention's columns (the windows' transpose times
  dx over the row's text), and the windows' gradient (dx times the location matrix's transpose)
  over a text slice and its halo of (K - 1) / 2 symbols each side, unfolded into the previous and
  cumulative weights' gradients of the slice.

Each program writes only its own rows or columns, so no atomics: the result is deterministic. The
location matrix's and v's gradients are per-row partial sums [B, 2K + 1, dim], which the caller adds
over rows (one reduction). In a loop the partials and the processed memory's gradient are added in
place into sums over the steps (PM_ACC, PART_ACC), and memory's is left out (MEMORY_GRAD: the loop
sums it over steps in one product).
"""

import torch
import triton
import triton.language as tl

from .attention_kernels import NUM_WARPS, STAGES, blocks, hidden_tile, location_matrix, text_grid, text_slice, windows
from .kernel_math import mma, tl_dtype
from .support import input_precision

#: The chain walk loads one chunk ahead: its iterations are long (a product, tanh), so one chunk in
#: flight covers a memory round trip; a third stage costs instructions and registers.
CHAIN_STAGES = tl.constexpr(2)


@triton.jit
def _store_or_add(ptr, value, mask, ADD: tl.constexpr):
    """value stored at ptr, or with ADD added to what is there (a sum over steps kept in place)."""
    if ADD:
        value += tl.load(ptr, mask=mask, other=0.0)
    tl.store(ptr, value, mask=mask)


@triton.jit
def _own_weights_grad(dw_b, dnewcum_b, dwx_b, t, ok, ACC: tl.constexpr, W_EXTRA: tl.constexpr):
    """The weights' gradient at t but the context's share: their own, the new cumulative's (and with
    W_EXTRA a second term of their own, dwx_b)."""
    dw = tl.load(dw_b + t, mask=ok, other=0.0).to(ACC) + tl.load(dnewcum_b + t, mask=ok, other=0.0).to(ACC)
    if W_EXTRA:
        dw += tl.load(dwx_b + t, mask=ok, other=0.0).to(ACC)
    return dw


@triton.jit
def _weights_grad(
    dw_b, dwx_b, dnewcum_b, dc, w_b, mem_b, dmem_b, dws_b, start, stop, M,
    BTM: tl.constexpr, BMW: tl.constexpr, ACC: tl.constexpr, MEMORY_GRAD: tl.constexpr, W_EXTRA: tl.constexpr,
):  # fmt: skip
    """Walk 1, symbols [start, stop): the weights' whole gradient (the context's share, memory times
    dc, added) into the scratch dws_b, and, if MEMORY_GRAD, memory's gradient w[t] * dc, over
    [BTM, BMW] memory tiles (every column at once)."""
    m = tl.arange(0, BMW)
    for t0 in tl.range(start, stop, BTM, num_stages=STAGES):
        t = t0 + tl.arange(0, BTM)
        tile = (t < stop)[:, None] & (m < M)[None, :]
        dw = _own_weights_grad(dw_b, dnewcum_b, dwx_b, t, t < stop, ACC, W_EXTRA)
        mem = tl.load(mem_b + t[:, None] * M + m[None, :], mask=tile, other=0.0)
        dw += tl.sum(mem.to(ACC) * dc[None, :], 1)
        if MEMORY_GRAD:
            w = tl.load(w_b + t, mask=t < stop, other=0.0).to(ACC)
            tl.store(dmem_b + t[:, None] * M + m[None, :], w[:, None] * dc[None, :], mask=tile)
        tl.store(dws_b + t, dw, mask=t < stop)


@triton.jit
def attention_chain_backward_kernel(
    q_ptr, mem_ptr, pm_ptr, prev_ptr, cum_ptr, vl_ptr, w_ptr, ctx_ptr,  # inputs (q, w, ctx: the forward's)
    dctx_ptr, dw_ptr, dnewcum_ptr, dctxx_ptr, dwx_ptr,  # the outputs' gradients (x: the extra terms)
    dmem_ptr, dpm_ptr,  # the inputs' gradients
    dws_ptr, dx_ptr, dqv_ptr,  # scratch: d weights [B, T], dx [B, T, D], the slices' dq and dv [B, S, 2, BD]
    dctxx_sb, dwx_sb, T, M, D, SLICE,
    K: tl.constexpr, BJ: tl.constexpr, BD: tl.constexpr, BT: tl.constexpr, BTC: tl.constexpr, BTM: tl.constexpr,
    BMW: tl.constexpr, ACC: tl.constexpr, MEMORY_GRAD: tl.constexpr, PM_ACC: tl.constexpr, CTX_EXTRA: tl.constexpr,
    W_EXTRA: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """Launch 1, program (row, text slice of SLICE symbols): walks 1 and 2 (the module's docstring)."""
    b = tl.program_id(0).to(tl.int64)
    start = tl.program_id(1) * SLICE
    stop = tl.minimum(start + SLICE, T)
    m = tl.arange(0, BMW)
    dc = tl.load(dctx_ptr + b * M + m, mask=m < M, other=0.0).to(ACC)
    if CTX_EXTRA:
        dc += tl.load(dctxx_ptr + b * dctxx_sb + m, mask=m < M, other=0.0).to(ACC)
    w_b, dws_b, dx_b = w_ptr + b * T, dws_ptr + b * T, dx_ptr + b * T * D
    dw_b, dwx_b, dnewcum_b = dw_ptr + b * T, dwx_ptr + b * dwx_sb, dnewcum_ptr + b * T
    _weights_grad(
        dw_b, dwx_b, dnewcum_b, dc, w_b, mem_ptr + b * T * M, dmem_ptr + b * T * M, dws_b, start, stop, M, BTM, BMW,
        ACC, MEMORY_GRAD, W_EXTRA,
    )  # fmt: skip
    tt = tl.arange(0, BT)
    own = _own_weights_grad(dw_b, dnewcum_b, dwx_b, tt, tt < T, ACC, W_EXTRA)
    context = tl.load(ctx_ptr + b * M + m, mask=m < M, other=0.0).to(ACC)
    s = tl.sum(tl.load(w_b + tt, mask=tt < T, other=0.0).to(ACC) * own, 0) + tl.sum(dc * context, 0)
    tl.debug_barrier()  # the walk below reads back dws, which other threads of the program wrote
    d = tl.arange(0, BD)
    v = tl.load(vl_ptr + 2 * K * D + d, mask=d < D, other=0.0).to(ACC)
    q = tl.load(q_ptr + b * D + d, mask=d < D, other=0.0).to(ACC)
    pm_b, prev_b, cum_b = pm_ptr + b * T * D, prev_ptr + b * T, cum_ptr + b * T
    dq = tl.zeros((BD,), dtype=ACC)
    dv = tl.zeros((BD,), dtype=ACC)
    loc_matrix = location_matrix(vl_ptr, D, K, BJ, BD, ACC)
    for t0 in tl.range(start, stop, BTC, num_stages=CHAIN_STAGES):
        t = t0 + tl.arange(0, BTC)
        hidden = hidden_tile(q, loc_matrix, pm_b, prev_b, cum_b, t, T, D, K, BJ, BD, ACC, PRECISION)
        w = tl.load(w_b + t, mask=t < stop, other=0.0).to(ACC)
        de = w * (tl.load(dws_b + t, mask=t < stop, other=0.0) - s)  # 0 at masked symbols and past the slice
        dx = de[:, None] * v[None, :] * (1.0 - hidden * hidden)
        tile = (t < stop)[:, None] & (d < D)[None, :]
        _store_or_add(dpm_ptr + b * T * D + t[:, None] * D + d[None, :], dx, tile, PM_ACC)
        tl.store(dx_b + t[:, None] * D + d[None, :], dx, mask=tile)
        dq += tl.sum(dx, 0)
        dv += tl.sum(de[:, None] * hidden, 0)
    dqv_b = dqv_ptr + (b * tl.num_programs(1) + tl.program_id(1)) * 2 * BD
    tl.store(dqv_b + d, dq)
    tl.store(dqv_b + BD + d, dv)


@triton.jit
def _query_backward(
    dq, wq_ptr, dah_b, dahin_b, h_start, h_stop, H, D, BD: tl.constexpr, BH: tl.constexpr, ACC: tl.constexpr
):
    """The attention LSTM hidden state's gradient at units [h_start, h_stop): its copy's (dahin_b)
    plus the query's, dq @ Wq, BH units at a time."""
    d = tl.arange(0, BD)
    for h0 in tl.range(h_start, h_stop, BH, num_stages=STAGES):
        k = h0 + tl.arange(0, BH)
        w = tl.load(wq_ptr + d[None, :] * H + k[:, None], mask=(k < h_stop)[:, None] & (d < D)[None, :], other=0.0)
        d_copy = tl.load(dahin_b + k, mask=k < h_stop, other=0.0).to(ACC)
        tl.store(dah_b + k, d_copy + tl.sum(w.to(ACC) * dq[None, :], 1), mask=k < h_stop)


@triton.jit
def _location_grad(
    prev_b, cum_b, dx_b, part_b, col0, stop, T, D, K: tl.constexpr, BJ: tl.constexpr, BTC: tl.constexpr,
    DC: tl.constexpr, ACC: tl.constexpr, PART_ACC: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """The location matrix's gradient at columns [col0, col0 + DC): the windows' transpose times dx
    over the symbols [0, stop) (the row's text, or none), summed in registers and written (or with
    PART_ACC added) once into the row's partial part_b."""
    cols = col0 + tl.arange(0, DC)
    d_loc_matrix = tl.zeros((BJ, DC), dtype=ACC)
    for t0 in tl.range(0, stop, BTC, num_stages=STAGES):
        t = t0 + tl.arange(0, BTC)
        unfolded = windows(prev_b, cum_b, t, T, K, BJ, ACC)
        dx = tl.load(dx_b + t[:, None] * D + cols[None, :], mask=(t < T)[:, None] & (cols < D)[None, :], other=0.0)
        d_loc_matrix += mma(tl.trans(unfolded), dx, ACC, PRECISION)
    part_tile = tl.make_block_ptr(part_b, (2 * K, D), (D, 1), (0, col0), (BJ, DC), (1, 0))  # not [BJ, DC] pointers
    if PART_ACC:  # added to what the later steps' backwards left there
        d_loc_matrix += tl.load(part_tile, boundary_check=(0, 1), padding_option="zero")
    tl.store(part_tile, d_loc_matrix, boundary_check=(0, 1))


@triton.jit
def _unfold_backward(
    vl_ptr, dx_b, g_s, dnewcum_b, dprev_b, dcum_b, start, stop, T, D, K: tl.constexpr, BJ: tl.constexpr,
    BD: tl.constexpr, BTC: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """The previous and cumulative weights' gradients at [start, stop): the windows' gradient, dx
    times the location matrix's transpose, over the slice and (K - 1) / 2 symbols each side into the
    program's scratch g_s (row 0: symbol start - (K - 1) / 2), then d weights_c[s] =
    sum_k d_windows[s - k + (K - 1) / 2, c * K + k], the cumulative weights' own gradient added."""
    d = tl.arange(0, BD)
    j = tl.arange(0, BJ)
    first = start - (K - 1) // 2
    loc_matrix_t = tl.trans(location_matrix(vl_ptr, D, K, BJ, BD, ACC))
    for r0 in tl.range(first, stop + (K - 1) // 2, BTC, num_stages=STAGES):
        r = r0 + tl.arange(0, BTC)
        ok = (r >= 0) & (r < T)
        dx = tl.load(dx_b + r[:, None] * D + d[None, :], mask=ok[:, None] & (d < D)[None, :], other=0.0)
        tl.store(g_s + (r - first)[:, None] * BJ + j[None, :], mma(dx, loc_matrix_t, ACC, PRECISION), mask=ok[:, None])
    tl.debug_barrier()  # the walk below reads what other threads of the program wrote
    c = j // K
    for s0 in tl.range(start, stop, BTC, num_stages=STAGES):
        t = s0 + tl.arange(0, BTC)
        row = t[:, None] - (j % K)[None, :] + (K - 1) // 2
        ok = (row >= 0) & (row < T) & (j < 2 * K)[None, :] & (t < stop)[:, None]
        g = tl.load(g_s + (row - first) * BJ + j[None, :], mask=ok, other=0.0)
        d_cum = tl.sum(tl.where((c == 1)[None, :], g, 0.0), 1)
        d_cum += tl.load(dnewcum_b + t, mask=t < stop, other=0.0).to(ACC)
        tl.store(dprev_b + t, tl.sum(tl.where((c == 0)[None, :], g, 0.0), 1), mask=t < stop)
        tl.store(dcum_b + t, d_cum, mask=t < stop)


@triton.jit
def attention_filter_backward_kernel(
    wq_ptr, prev_ptr, cum_ptr, vl_ptr, dx_ptr, dqv_ptr, dnewcum_ptr, dahin_ptr,  # inputs (dx, dqv: launch 1's)
    dah_ptr, dq_ptr, dprev_ptr, dcum_ptr, part_ptr,  # the inputs' gradients (part: [B, 2K + 1, D])
    g_ptr,  # scratch: each program's windows' gradient [B, S, G_ROWS, BJ]
    dahin_sb, T, D, H, SLICE, HIDDEN_SLICE, G_ROWS,
    K: tl.constexpr, BJ: tl.constexpr, BD: tl.constexpr, BTC: tl.constexpr, BH: tl.constexpr, DC: tl.constexpr,
    ACC: tl.constexpr, PART_ACC: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """Launch 2, program (row, slice): the hidden state's gradient at units of HIDDEN_SLICE, the
    location matrix's and v's at DC columns, the weights' at SLICE symbols (the module's docstring)."""
    b = tl.program_id(0).to(tl.int64)
    p, slices = tl.program_id(1), tl.num_programs(1)
    d = tl.arange(0, BD)
    cols = p * DC + tl.arange(0, DC)
    dqv_b = dqv_ptr + b * slices * 2 * BD
    dq = tl.zeros((BD,), dtype=ACC)
    dv = tl.zeros((DC,), dtype=ACC)
    for i in tl.range(0, slices, num_stages=STAGES):  # launch 1's partial sums, in a fixed order
        dq += tl.load(dqv_b + i * 2 * BD + d)
        dv += tl.load(dqv_b + i * 2 * BD + BD + cols, mask=cols < BD, other=0.0)
    tl.store(dq_ptr + b * D + d, dq, mask=(d < D) & (p == 0))  # the precomputed term's gradient
    h_start = p * HIDDEN_SLICE
    h_stop = tl.minimum(h_start + HIDDEN_SLICE, H)
    _query_backward(dq, wq_ptr, dah_ptr + b * H, dahin_ptr + b * dahin_sb, h_start, h_stop, H, D, BD, BH, ACC)
    part_b = part_ptr + b * (2 * K + 1) * D
    _store_or_add(part_b + 2 * K * D + cols, dv, cols < D, PART_ACC)
    prev_b, cum_b, dx_b = prev_ptr + b * T, cum_ptr + b * T, dx_ptr + b * T * D
    stop = tl.where(p * DC < D, T, 0)  # the programs past the columns walk no text
    _location_grad(prev_b, cum_b, dx_b, part_b, p * DC, stop, T, D, K, BJ, BTC, DC, ACC, PART_ACC, PRECISION)
    start, g_s = p * SLICE, g_ptr + (b * slices + p) * G_ROWS * BJ
    _unfold_backward(
        vl_ptr, dx_b, g_s, dnewcum_ptr + b * T, dprev_ptr + b * T, dcum_ptr + b * T, start,
        tl.minimum(start + SLICE, T), T, D, K, BJ, BD, BTC, ACC, PRECISION,
    )  # fmt: skip


def filter_shares(slices: int, dim_block: int, hidden: int, hidden_block: int) -> tuple[int, int]:
    """Launch 2's shares of a program: (DC, the attention columns, a power of two >= 16 as tl.dot
    wants; HIDDEN_SLICE, the hidden units, a multiple of hidden_block) for `slices` programs a row."""
    columns = max(16, dim_block // (1 << (slices.bit_length() - 1)))
    return min(columns, dim_block), triton.cdiv(triton.cdiv(hidden, slices), hidden_block) * hidden_block


def halo_rows(slice_symbols: int, kernel_size: int, chunk_block: int) -> int:
    """Rows of a launch-2 program's windows' gradient: its slice and (K - 1) / 2 each side, in chunks."""
    return triton.cdiv(slice_symbols + 2 * ((kernel_size - 1) // 2), chunk_block) * chunk_block


def backward(
    inputs: tuple[torch.Tensor, ...],
    outputs: tuple[torch.Tensor, torch.Tensor],
    d_context: torch.Tensor,
    d_weights: torch.Tensor,
    d_new_cum: torch.Tensor,
    d_ah_copy: torch.Tensor,
    chunk: int,
    dtypes: tuple[torch.dtype, torch.dtype],
    memory_grad: bool = True,
    pm_acc: torch.Tensor | None = None,
    part_acc: torch.Tensor | None = None,
    extras: tuple[torch.Tensor | None, torch.Tensor | None] = (None, None),
) -> tuple[torch.Tensor, ...]:
    """Two launches: the gradients of (ah, query_pre, memory, processed_memory, prev, cum), in `dtypes`
    for the first two and their inputs' for the rest (ah's includes its copy's, d_ah_copy [B, H] with
    unit column stride), and the per-row partials [B, 2K + 1, dim] of the scoring matrix's gradient.
    inputs: (the forward's query, query_weight, memory, processed_memory, prev, cum, scoring);
    outputs: the forward's (weights, context). Without memory_grad, memory's is not computed (an
    empty tensor): the caller sums it over steps itself. Given pm_acc [B, T_text, dim] / part_acc
    [B, 2K + 1, dim] (the accumulation dtype), the processed memory's gradient / the partials are
    added into them in place (their places in the result are empty tensors): the sums over steps
    without an addition per step. extras: second terms of the context's [B, M] and the weights'
    [B, T] gradients (unit column stride), added in the kernel, or None."""
    query, query_weight, memory, processed_memory, prev, cum, scoring = inputs
    b, t_text, m = memory.shape
    dim, hidden = query_weight.shape
    kernel_size = (scoring.size(0) - 1) // 2
    acc, sizes = query.dtype, blocks(t_text, m, dim, kernel_size, chunk)
    grads = (
        query.new_empty(b, hidden, dtype=dtypes[0]),
        query.new_empty(b, dim, dtype=dtypes[1]),
        torch.empty_like(memory) if memory_grad else memory.new_empty(0),
        torch.empty_like(processed_memory) if pm_acc is None else processed_memory.new_empty(0),
        torch.empty_like(prev),
        torch.empty_like(cum),
        query.new_empty(b, 2 * kernel_size + 1, dim) if part_acc is None else query.new_empty(0),
    )
    d_pm = pm_acc if pm_acc is not None else grads[3]
    part = part_acc if part_acc is not None else grads[6]
    slice_symbols = text_slice(b, t_text, sizes["BTC"])
    grid = text_grid(b, t_text, slice_symbols)
    columns, hidden_slice = filter_shares(grid[1], sizes["BD"], hidden, sizes["BH"])
    g_rows = halo_rows(slice_symbols, kernel_size, sizes["BTC"])
    dws, dx = query.new_empty(b, t_text), query.new_empty(b, t_text, dim)
    dqv, g = query.new_empty(*grid, 2, sizes["BD"]), query.new_empty(*grid, g_rows, sizes["BJ"])
    ctx_extra, w_extra = extras
    common = {"K": kernel_size, "BJ": sizes["BJ"], "BD": sizes["BD"], "BTC": sizes["BTC"], "ACC": tl_dtype(acc)}
    common.update(PRECISION=input_precision(acc), num_warps=NUM_WARPS)
    attention_chain_backward_kernel[grid](
        query, memory, processed_memory, prev, cum, scoring, *outputs, d_context, d_weights, d_new_cum,
        d_context if ctx_extra is None else ctx_extra, d_weights if w_extra is None else w_extra, grads[2], d_pm,
        dws, dx, dqv, 0 if ctx_extra is None else ctx_extra.stride(0), 0 if w_extra is None else w_extra.stride(0),
        t_text, m, dim, slice_symbols, BT=sizes["BT"], BTM=sizes["BTM"], BMW=sizes["BMW"], MEMORY_GRAD=memory_grad,
        PM_ACC=pm_acc is not None, CTX_EXTRA=ctx_extra is not None, W_EXTRA=w_extra is not None, **common,
    )  # fmt: skip
    attention_filter_backward_kernel[grid](
        query_weight, prev, cum, scoring, dx, dqv, d_new_cum, d_ah_copy, grads[0], grads[1], grads[4], grads[5], part,
        g, d_ah_copy.stride(0), t_text, dim, hidden, slice_symbols, hidden_slice, g_rows, BH=sizes["BH"], DC=columns,
        PART_ACC=part_acc is not None, **common,
    )  # fmt: skip
    return grads
