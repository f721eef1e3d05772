"""Triton kernel of one decoder step's attention backward and its launcher (attention_step.py);
the helpers it shares with the forward (the windows, the energy chain, the block sizes) are
attention_kernels.py's.

The chain is recomputed from its inputs (nothing of [B, T_text, dim] is kept between the passes, as
with Tacotron2Config.recompute_attention), then every input's gradient, the hidden state's last (the
query's gradient times the query layer's weight). One program per row (utterance) walks the row's
text in three walks (attention_kernels.py's docstring: chunks, memory tiles, scratch and barriers):
1, the weights' whole gradient over memory tiles; 2, the chain and its softmax and tanh backward;
3, the location filter's gradients and the unfold's. The location matrix's and v's gradients are
per-row partial sums [B, 2K + 1, dim], which the caller adds over rows (one reduction), so no
atomics: the result is deterministic. In a loop the partials and the processed memory's gradient
are added in place into sums over the steps (PM_ACC, PART_ACC), and memory's is left out
(MEMORY_GRAD: the loop sums it over steps in one product).
"""

import torch
import triton
import triton.language as tl

from .attention_kernels import NUM_WARPS, STAGES, blocks, hidden_tile, location_matrix, windows
from .kernel_math import mma, tl_dtype
from .support import input_precision

#: The backward's chain walk loads one chunk ahead: its iterations are long (a product, tanh), so
#: one chunk in flight covers a memory round trip; a third stage costs instructions and registers
#: (scripts/bench/kernels.py: 1010 against 940 an iteration, 255 registers against 250, in float32).
CHAIN_STAGES = tl.constexpr(2)


@triton.jit
def _store_or_add(ptr, value, mask, ADD: tl.constexpr):
    """value stored at ptr, or with ADD added to what is there (a sum over steps kept in place)."""
    if ADD:
        value += tl.load(ptr, mask=mask, other=0.0)
    tl.store(ptr, value, mask=mask)


@triton.jit
def _query_backward(dq, wq_ptr, dah_b, dahin_b, H, D, BD: tl.constexpr, BH: tl.constexpr, ACC: tl.constexpr):
    """The attention LSTM hidden state's gradient: its copy's (dahin_b) plus the query's, dq @ Wq, BH
    columns at a time."""
    d = tl.arange(0, BD)
    for h0 in tl.range(0, H, BH, num_stages=STAGES):
        k = h0 + tl.arange(0, BH)
        w = tl.load(wq_ptr + d[None, :] * H + k[:, None], mask=(k < H)[:, None] & (d < D)[None, :], other=0.0)
        d_copy = tl.load(dahin_b + k, mask=k < H, other=0.0).to(ACC)
        tl.store(dah_b + k, d_copy + tl.sum(w.to(ACC) * dq[None, :], 1), mask=k < H)


@triton.jit
def _weights_grad(
    w_b, dw_b, dwx_b, dnewcum_b, dctx_b, dctxx_b, mem_b, dmem_b, dws_b, T, M,
    BTM: tl.constexpr, BMW: tl.constexpr, ACC, MEMORY_GRAD: tl.constexpr, W_EXTRA: tl.constexpr,
    CTX_EXTRA: tl.constexpr,
):  # fmt: skip
    """Walk 1: the weights' whole gradient (their own, the new cumulative's, the context's) into the
    scratch dws_b, and, if MEMORY_GRAD, memory's gradient w[t] * d_context, over [BTM, BMW] memory
    tiles (every column at once). With W_EXTRA / CTX_EXTRA the weights' / the context's gradient has
    a second term (dwx_b / dctxx_b) to add."""
    m = tl.arange(0, BMW)
    dc = tl.load(dctx_b + m, mask=m < M, other=0.0).to(ACC)
    if CTX_EXTRA:
        dc += tl.load(dctxx_b + m, mask=m < M, other=0.0).to(ACC)
    for t0 in tl.range(0, T, BTM, num_stages=STAGES):
        t = t0 + tl.arange(0, BTM)
        tile = (t < T)[:, None] & (m < M)[None, :]
        dw = tl.load(dw_b + t, mask=t < T, other=0.0).to(ACC)
        dw += tl.load(dnewcum_b + t, mask=t < T, other=0.0).to(ACC)
        if W_EXTRA:
            dw += tl.load(dwx_b + t, mask=t < T, other=0.0).to(ACC)
        mem = tl.load(mem_b + t[:, None] * M + m[None, :], mask=tile, other=0.0)
        dw += tl.sum(mem.to(ACC) * dc[None, :], 1)
        if MEMORY_GRAD:
            w = tl.load(w_b + t, mask=t < T, other=0.0).to(ACC)
            tl.store(dmem_b + t[:, None] * M + m[None, :], w[:, None] * dc[None, :], mask=tile)
        tl.store(dws_b + t, dw, mask=t < T)


@triton.jit
def _unfold_backward(g_b, dnewcum_b, dprev_b, dcum_b, T, K: tl.constexpr, BJ: tl.constexpr, BTC: tl.constexpr, ACC):
    """Walk 3: d weights_c[s] = sum_k d_windows[s - k + (K - 1) / 2, c * K + k] (g_b: d_windows), the
    cumulative weights' own gradient added."""
    j = tl.arange(0, BJ)
    c = j // K
    for s0 in tl.range(0, T, BTC, num_stages=STAGES):
        t = s0 + tl.arange(0, BTC)
        row = t[:, None] - (j % K)[None, :] + (K - 1) // 2
        ok = (row >= 0) & (row < T) & (j < 2 * K)[None, :] & (t < T)[:, None]
        g = tl.load(g_b + row * BJ + j[None, :], mask=ok, other=0.0)
        d_cum = tl.sum(tl.where((c == 1)[None, :], g, 0.0), 1)
        d_cum += tl.load(dnewcum_b + t, mask=t < T, other=0.0).to(ACC)
        tl.store(dprev_b + t, tl.sum(tl.where((c == 0)[None, :], g, 0.0), 1), mask=t < T)
        tl.store(dcum_b + t, d_cum, mask=t < T)


@triton.jit
def _location_grad(
    vl_ptr, prev_b, cum_b, dx_b, g_b, part_b, T, D, K: tl.constexpr, BJ: tl.constexpr, BD: tl.constexpr,
    BTC: tl.constexpr, ACC: tl.constexpr, PART_ACC: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """Walk 3, over the chain walk's dx (dx_b): the unfolded windows' gradient, dx times the location
    matrix's transpose, into g_b, and the location matrix's gradient, the windows' transpose times
    dx, summed in registers and written (or with PART_ACC added) once into the row's slice part_b."""
    d = tl.arange(0, BD)
    j = tl.arange(0, BJ)
    loc_matrix_t = tl.trans(location_matrix(vl_ptr, D, K, BJ, BD, ACC))
    d_loc_matrix = tl.zeros((BJ, BD), dtype=ACC)
    for t0 in tl.range(0, T, BTC, num_stages=STAGES):
        t = t0 + tl.arange(0, BTC)
        unfolded = windows(prev_b, cum_b, t, T, K, BJ, ACC)
        dx = tl.load(dx_b + t[:, None] * D + d[None, :], mask=(t < T)[:, None] & (d < D)[None, :], other=0.0)
        tl.store(g_b + t[:, None] * BJ + j[None, :], mma(dx, loc_matrix_t, ACC, PRECISION), mask=(t < T)[:, None])
        d_loc_matrix += mma(tl.trans(unfolded), dx, ACC, PRECISION)
    part_tile = tl.make_block_ptr(part_b, (2 * K, D), (D, 1), (0, 0), (BJ, BD), (1, 0))  # not [BJ, BD] pointers
    if PART_ACC:  # added to what the later steps' backwards left there
        d_loc_matrix += tl.load(part_tile, boundary_check=(0, 1), padding_option="zero")
    tl.store(part_tile, d_loc_matrix, boundary_check=(0, 1))


@triton.jit
def attention_backward_kernel(
    q_ptr, wq_ptr, mem_ptr, pm_ptr, prev_ptr, cum_ptr, vl_ptr, w_ptr,  # inputs (q, w: the forward's)
    dctx_ptr, dw_ptr, dnewcum_ptr, dahin_ptr, dctxx_ptr, dwx_ptr,  # the outputs' gradients (x: the extra terms)
    dah_ptr, dq_ptr, dmem_ptr, dpm_ptr, dprev_ptr, dcum_ptr, part_ptr,  # the inputs' gradients (part: [B, 2K + 1, D])
    dws_ptr, g_ptr, dx_ptr,  # scratch: d weights [B, T], the windows' and the chain's gradients [B, T, BJ], [B, T, D]
    dahin_sb, dctxx_sb, dwx_sb, T, M, D, H,
    K: tl.constexpr, BJ: tl.constexpr, BD: tl.constexpr, BT: tl.constexpr, BTC: tl.constexpr, BTM: tl.constexpr,
    BMW: tl.constexpr, BH: tl.constexpr, ACC: tl.constexpr, MEMORY_GRAD: tl.constexpr, PM_ACC: tl.constexpr,
    PART_ACC: tl.constexpr, CTX_EXTRA: tl.constexpr, W_EXTRA: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0).to(tl.int64)
    d = tl.arange(0, BD)
    w_b, dws_b, g_b, dx_b = w_ptr + b * T, dws_ptr + b * T, g_ptr + b * T * BJ, dx_ptr + b * T * D
    _weights_grad(
        w_b, dw_ptr + b * T, dwx_ptr + b * dwx_sb, dnewcum_ptr + b * T, dctx_ptr + b * M, dctxx_ptr + b * dctxx_sb,
        mem_ptr + b * T * M, dmem_ptr + b * T * M, dws_b, T, M, BTM, BMW, ACC, MEMORY_GRAD, W_EXTRA, CTX_EXTRA,
    )  # fmt: skip
    tl.debug_barrier()
    tt = tl.arange(0, BT)
    s = tl.sum(tl.load(w_b + tt, mask=tt < T, other=0.0).to(ACC) * tl.load(dws_b + tt, mask=tt < T, other=0.0), 0)
    # Walk 2: the chain recomputed; softmax and tanh backward: dx, the processed memory's gradient,
    # kept for walk 3. It reads only what walk 1 wrote before the barrier (and its own chunk of the
    # processed memory's sum): pipelined.
    v = tl.load(vl_ptr + 2 * K * D + d, mask=d < D, other=0.0).to(ACC)
    q = tl.load(q_ptr + b * D + d, mask=d < D, other=0.0).to(ACC)
    pm_b, prev_b, cum_b = pm_ptr + b * T * D, prev_ptr + b * T, cum_ptr + b * T
    dq = tl.zeros((BD,), dtype=ACC)
    dv = tl.zeros((BD,), dtype=ACC)
    loc_matrix = location_matrix(vl_ptr, D, K, BJ, BD, ACC)
    for t0 in tl.range(0, T, BTC, num_stages=CHAIN_STAGES):
        t = t0 + tl.arange(0, BTC)
        hidden = hidden_tile(q, loc_matrix, pm_b, prev_b, cum_b, t, T, D, K, BJ, BD, ACC, PRECISION)
        w = tl.load(w_b + t, mask=t < T, other=0.0).to(ACC)
        de = w * (tl.load(dws_b + t, mask=t < T, other=0.0) - s)  # 0 at masked and padded symbols
        dx = de[:, None] * v[None, :] * (1.0 - hidden * hidden)
        tile = (t < T)[:, None] & (d < D)[None, :]
        _store_or_add(dpm_ptr + b * T * D + t[:, None] * D + d[None, :], dx, tile, PM_ACC)
        tl.store(dx_b + t[:, None] * D + d[None, :], dx, mask=tile)
        dq += tl.sum(dx, 0)
        dv += tl.sum(de[:, None] * hidden, 0)
    tl.store(dq_ptr + b * D + d, dq, mask=d < D)  # the precomputed term's gradient: G of the query layer
    _query_backward(dq, wq_ptr, dah_ptr + b * H, dahin_ptr + b * dahin_sb, H, D, BD, BH, ACC)
    part_b = part_ptr + b * (2 * K + 1) * D
    _store_or_add(part_b + 2 * K * D + d, dv, d < D, PART_ACC)
    tl.debug_barrier()
    _location_grad(vl_ptr, prev_b, cum_b, dx_b, g_b, part_b, T, D, K, BJ, BD, BTC, ACC, PART_ACC, PRECISION)
    tl.debug_barrier()
    _unfold_backward(g_b, dnewcum_ptr + b * T, dprev_ptr + b * T, dcum_ptr + b * T, T, K, BJ, BTC, ACC)


def grid(rows: int) -> tuple[int]:
    """The backward's programs: one per row (utterance)."""
    return (rows,)


def backward(
    inputs: tuple[torch.Tensor, ...],
    weights: torch.Tensor,
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
    """One launch: the gradients of (ah, query_pre, memory, processed_memory, prev, cum), in `dtypes`
    for the first two and their inputs' for the rest (ah's includes its copy's, d_ah_copy [B, H] with
    unit column stride), and the per-row partials [B, 2K + 1, dim] of the scoring matrix's gradient.
    inputs: (the forward's query, query_weight, memory, processed_memory, prev, cum, scoring). Without
    memory_grad, memory's is not computed (an empty tensor): the caller sums it over steps itself.
    Given pm_acc [B, T_text, dim] / part_acc [B, 2K + 1, dim] (the accumulation dtype), the processed
    memory's gradient / the partials are added into them in place (their places in the result are
    empty tensors): the sums over steps without an addition per step. extras: second terms of the
    context's [B, M] and the weights' [B, T] gradients (unit column stride), added in the kernel, or None."""
    query, query_weight, memory, processed_memory, prev, cum, scoring = inputs
    b, t_text, m = memory.shape
    dim, hidden = query_weight.shape
    kernel_size = (scoring.size(0) - 1) // 2
    acc = query.dtype
    grid_blocks = blocks(t_text, m, dim, kernel_size, chunk)
    grads = (
        query.new_empty(b, hidden, dtype=dtypes[0]),
        query.new_empty(b, dim, dtype=dtypes[1]),
        torch.empty_like(memory) if memory_grad else memory.new_empty(0),
        torch.empty_like(processed_memory) if pm_acc is None else processed_memory.new_empty(0),
        torch.empty_like(prev),
        torch.empty_like(cum),
        query.new_empty(b, 2 * kernel_size + 1, dim) if part_acc is None else query.new_empty(0),
    )
    pointers = (*grads[:3], pm_acc if pm_acc is not None else grads[3], *grads[4:6])
    pointers += (part_acc if part_acc is not None else grads[6],)
    scratch = tuple(query.new_empty(b, t_text, *more) for more in ((), (grid_blocks["BJ"],), (dim,)))
    ctx_extra, w_extra = extras
    attention_backward_kernel[grid(b)](
        query, query_weight, memory, processed_memory, prev, cum, scoring, weights, d_context, d_weights, d_new_cum,
        d_ah_copy, d_context if ctx_extra is None else ctx_extra, d_weights if w_extra is None else w_extra,
        *pointers, *scratch, d_ah_copy.stride(0), 0 if ctx_extra is None else ctx_extra.stride(0),
        0 if w_extra is None else w_extra.stride(0), t_text, m, dim, hidden, ACC=tl_dtype(acc),
        PRECISION=input_precision(acc), MEMORY_GRAD=memory_grad, PM_ACC=pm_acc is not None,
        PART_ACC=part_acc is not None, CTX_EXTRA=ctx_extra is not None, W_EXTRA=w_extra is not None,
        num_warps=NUM_WARPS, **grid_blocks,
    )  # fmt: skip
    return grads
