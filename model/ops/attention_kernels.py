"""Triton kernels of one decoder step's attention forward, the helpers the backward shares
(attention_backward_kernels.py), and the forward's launcher (attention_step.py).

Why. Unfused, one decoder step's attention is about twelve small kernels forward and seventeen
backward on a GPU, each a fixed launch cost whatever the batch. Here each direction is two launches
inside one operator, each splitting a row's (utterance's) work over several programs, so that a
batch of 16 rows still gives almost every SM of an H100 or H200 a program (PROGRAMS, text_slice):

* launch 1, attention_energies_kernel, programs (row, text slice): the query (the precomputed term
  plus the attention LSTM's hidden state times the query layer's weight, a product along the row,
  computed by each of the row's programs; the first writes the hidden state into the query layer's
  row, the query, kept for the backward, and a copy of the hidden state, which the step's other
  readers take, so that their gradients arrive in the backward and are added there), then for its
  slice: location features (the unfolded previous and cumulative weights times the folded location
  matrix, one `tl.dot`), tanh, energies and the mask, into a [B, T] scratch;
* launch 2, attention_context_kernel, programs (row, memory column slice): the softmax of the row's
  energies (each program; the first writes the weights and the new cumulative weights), then the
  context's columns of its slice.

A slice's text is walked in chunks of `chunk` symbols and the memory in tiles of about CONTEXT_TILE
elements (MEMORY_TILE in the backward), so long texts need not fit the registers. Every walk is a
pipelined loop (`tl.range` with stages): none reads back what an earlier iteration of it stored,
and the location matrix, read once before a walk, stays in shared memory for its products. No
program reads what another writes in the same launch: no atomics, and the result is deterministic.

Precision: float64 for float64 inputs, else float32 whatever the inputs' dtype (bf16 under autocast
is read and upcast); float32 products at support.input_precision (torch's matmul precision: tf32x3 at
highest, tf32 below). Under TRITON_INTERPRET=1 the kernels run on the CPU: the suite's check.
"""

import torch
import triton
import triton.language as tl

from .kernel_math import mma, tanh, tl_dtype
from .support import accumulation_dtype, input_precision

#: Iterations in flight in a pipelined loop (tl.range's num_stages): each iteration's tiles are
#: loaded STAGES - 1 iterations ahead into shared memory (cp.async), while the current one computes.
STAGES = tl.constexpr(3)
#: Elements of one memory tile of the backward's walk of the weights' gradient (32 KB in float32):
#: at the full model's 512 memory columns, 16 symbols an iteration, 12 iterations for 192 symbols.
MEMORY_TILE = 8192
#: Elements of one memory tile of the forward's context walk (16 KB in float32): at 8192 its
#: [32, 256] tiles (B0 64) left 8 stack bytes a thread (scripts/bench/kernels.py); at B0 16, [64, 64]
#: tiles, 3 iterations for 192 symbols.
CONTEXT_TILE = 4096


@triton.jit
def windows(prev_b, cum_b, t, T, K: tl.constexpr, BJ: tl.constexpr, ACC: tl.constexpr):
    """[chunk, BJ]: column j = c * K + k holds weights_c[t + k - (K - 1) / 2] (c 0: previous, 1:
    cumulative), zero outside the text: the unfolded input of the location filter."""
    j = tl.arange(0, BJ)
    c = j // K
    src = t[:, None] + (j % K)[None, :] - (K - 1) // 2
    ok = (src >= 0) & (src < T) & (j < 2 * K)[None, :] & (t < T)[:, None]
    return tl.load(tl.where((c == 0)[None, :], prev_b + src, cum_b + src), mask=ok, other=0.0).to(ACC)


@triton.jit
def hidden_tile(
    q, loc_matrix, pm_b, prev_b, cum_b, t, T, D, K: tl.constexpr, BJ: tl.constexpr, BD: tl.constexpr, ACC, PRECISION
):
    """tanh(query + location features + processed memory) of the rows t: the unfolded windows times
    the location matrix, plus the processed memory's tile."""
    d = tl.arange(0, BD)
    location = mma(windows(prev_b, cum_b, t, T, K, BJ, ACC), loc_matrix, ACC, PRECISION)
    memory = tl.load(pm_b + t[:, None] * D + d[None, :], mask=(t < T)[:, None] & (d < D)[None, :], other=0.0)
    return tanh(q[None, :] + location + memory.to(ACC))


@triton.jit
def location_matrix(vl_ptr, D, K: tl.constexpr, BJ: tl.constexpr, BD: tl.constexpr, ACC: tl.constexpr):
    """The folded location matrix [BJ, BD], rows 0..2K-1 of the scoring matrix (row 2K is v), read
    once before a walk (read per chunk, its pointers, hoisted, held 64 registers a thread)."""
    j = tl.arange(0, BJ)
    d = tl.arange(0, BD)
    loc_matrix = tl.load(vl_ptr + j[:, None] * D + d[None, :], mask=(j < 2 * K)[:, None] & (d < D)[None, :], other=0.0)
    return loc_matrix.to(ACC)


@triton.jit
def _query(
    ah_b, wq_ptr, preq_b, preq_sd, row_b, ahout_b, first, H, D, BD: tl.constexpr, BH: tl.constexpr, ACC: tl.constexpr
):
    """The row's query, pre + ah @ Wq^T ([BD]; Wq is [D, H]), walking ah in BH-wide blocks, which the
    row's first program (`first`) also writes into the query layer's row (what the deferred weight
    gradient reads after the loop) and into ahout (the copy that the step's other readers of ah take,
    so that its gradient arrives here)."""
    d = tl.arange(0, BD)
    q = tl.zeros((BH, BD), dtype=ACC)  # summed over its first axis once, after the walk
    for h0 in tl.range(0, H, BH, num_stages=STAGES):
        k = h0 + tl.arange(0, BH)
        a = tl.load(ah_b + k, mask=k < H, other=0.0)
        tl.store(row_b + k, a, mask=(k < H) & first)
        tl.store(ahout_b + k, a, mask=(k < H) & first)
        w = tl.load(wq_ptr + d[None, :] * H + k[:, None], mask=(k < H)[:, None] & (d < D)[None, :], other=0.0)
        q += a.to(ACC)[:, None] * w.to(ACC)
    return tl.load(preq_b + d * preq_sd, mask=d < D, other=0.0).to(ACC) + tl.sum(q, 0)


@triton.jit
def attention_energies_kernel(
    ah_ptr, wq_ptr, preq_ptr, pm_ptr, prev_ptr, cum_ptr, vl_ptr, mask_ptr,  # inputs
    row_ptr, q_ptr, ahout_ptr, energy_ptr,  # the row written, outputs (the query, the copy of ah), energies [B, T]
    preq_sb, preq_sd, row_stride, T, D, H, SLICE,
    K: tl.constexpr, BJ: tl.constexpr, BD: tl.constexpr, BTC: tl.constexpr, BH: tl.constexpr, ACC: tl.constexpr,
    PRECISION: tl.constexpr,
):  # fmt: skip
    """Launch 1, program (row, slice): the row's query (every slice's program computes it, the first
    writes it), then the energies of the slice's SLICE symbols, a chunk of BTC an iteration."""
    b = tl.program_id(0).to(tl.int64)
    start = tl.program_id(1) * SLICE
    first = tl.program_id(1) == 0
    d = tl.arange(0, BD)
    v = tl.load(vl_ptr + 2 * K * D + d, mask=d < D, other=0.0).to(ACC)
    q = _query(
        ah_ptr + b * H, wq_ptr, preq_ptr + b * preq_sb, preq_sd, row_ptr + b * row_stride, ahout_ptr + b * H, first,
        H, D, BD, BH, ACC,
    )  # fmt: skip
    tl.store(q_ptr + b * D + d, q, mask=(d < D) & first)  # for the backward
    pm_b, prev_b, cum_b = pm_ptr + b * T * D, prev_ptr + b * T, cum_ptr + b * T
    loc_matrix = location_matrix(vl_ptr, D, K, BJ, BD, ACC)
    stop = tl.minimum(start + SLICE, T)
    for t0 in tl.range(start, stop, BTC, num_stages=STAGES):
        t = t0 + tl.arange(0, BTC)  # the last chunk may reach into the next slice: not stored
        hidden = hidden_tile(q, loc_matrix, pm_b, prev_b, cum_b, t, T, D, K, BJ, BD, ACC, PRECISION)
        bias = tl.load(mask_ptr + b * T + t, mask=t < stop, other=0.0).to(ACC)
        tl.store(energy_ptr + b * T + t, tl.sum(hidden * v[None, :], 1) + bias, mask=t < stop)


@triton.jit
def attention_context_kernel(
    mem_ptr, cum_ptr, energy_ptr,  # inputs (energy: launch 1's [B, T])
    ctx_ptr, w_ptr, newcum_ptr,  # outputs
    T, M, BT: tl.constexpr, BTM: tl.constexpr, BMC: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    """Launch 2, program (row, column slice): the row's softmax (each program, from the row's energies;
    the first writes the weights and the new cumulative weights), then the context's BMC columns of
    the slice, over [BTM, BMC] memory tiles, whose weights come from their energies and the softmax's
    maximum and sum (no weights written and read back between programs)."""
    b = tl.program_id(0).to(tl.int64)
    first = tl.program_id(1) == 0
    energy_b = energy_ptr + b * T
    tt = tl.arange(0, BT)
    energies = tl.load(energy_b + tt, mask=tt < T, other=float("-inf"))
    top = tl.max(energies, 0)
    p = tl.exp(energies - top)
    total = tl.sum(p, 0)
    weights = p / total
    tl.store(w_ptr + b * T + tt, weights, mask=(tt < T) & first)
    cum = tl.load(cum_ptr + b * T + tt, mask=(tt < T) & first, other=0.0).to(ACC)
    tl.store(newcum_ptr + b * T + tt, cum + weights, mask=(tt < T) & first)
    context = tl.zeros((BMC,), dtype=ACC)
    m = tl.program_id(1) * BMC + tl.arange(0, BMC)
    for t0 in tl.range(0, T, BTM, num_stages=STAGES):
        t = t0 + tl.arange(0, BTM)
        w = tl.exp(tl.load(energy_b + t, mask=t < T, other=float("-inf")) - top) / total
        mem = tl.load(
            mem_ptr + b * T * M + t[:, None] * M + m[None, :], mask=(t < T)[:, None] & (m < M)[None, :], other=0.0
        )
        context += tl.sum(w[:, None] * mem.to(ACC), 0)
    tl.store(ctx_ptr + b * M + m, context, mask=m < M)


#: Warps per program (scripts/bench/kernels.py: the registers and spills of each choice).
NUM_WARPS = 8
#: The programs a split launch aims at: the SMs of an H100 SXM or an H200 (132). A launch splits each
#: row into at most PROGRAMS // rows programs, so that its programs fit one wave (one per SM at its
#: registers): a second wave would cost a whole program's time for a few programs, and each energies
#: program reads the query layer's whole weight.
PROGRAMS = 132
#: The narrowest column slice of the context's launch: 32 float32 columns, 128 bytes a memory row.
MIN_COLUMNS = 32


def text_slice(rows: int, t_text: int, chunk_block: int) -> int:
    """Symbols of one text slice (the energies' programs, and both backward launches'): the text over
    at most PROGRAMS // rows programs a row (at least one), none with less than a chunk (chunk_block,
    BTC)."""
    chunks = triton.cdiv(t_text, chunk_block)
    return triton.cdiv(t_text, max(1, min(chunks, PROGRAMS // rows)))


def text_grid(rows: int, t_text: int, slice_symbols: int) -> tuple[int, int]:
    """The programs of the energies launch and of both backward launches: (row, text slice of
    slice_symbols)."""
    return rows, triton.cdiv(t_text, slice_symbols)


def context_columns(rows: int, memory_dim: int) -> int:
    """Columns of one context program's slice (BMC, a power of two): the memory's over at most
    PROGRAMS // rows programs a row (at least one), none narrower than MIN_COLUMNS (or every column)."""
    columns = triton.next_power_of_2(memory_dim)
    slices = max(1, PROGRAMS // rows)
    slices = 1 << (slices.bit_length() - 1)  # a power of two at most PROGRAMS // rows
    return max(min(MIN_COLUMNS, columns), columns // slices)


def context_grid(rows: int, memory_dim: int, columns: int) -> tuple[int, int]:
    """Launch 2's programs: (row, column slice of `columns`)."""
    return rows, triton.cdiv(memory_dim, columns)


def memory_tile_rows(t_text: int, columns: int, elements: int) -> int:
    """Symbols of a [symbols, columns] memory tile of about `elements` (BTM)."""
    return min(max(16, triton.next_power_of_2(t_text)), max(1, elements // columns))


def blocks(t_text: int, memory_dim: int, dim: int, kernel_size: int, chunk: int) -> dict:
    """The block sizes (powers of two, >= 16 where tl.dot needs it) of a row's tiles; the backward's
    memory walks' tiles [BTM, BMW] hold every memory column and about MEMORY_TILE elements."""
    memory_columns = triton.next_power_of_2(memory_dim)
    return {
        "K": kernel_size,
        "BJ": max(16, triton.next_power_of_2(2 * kernel_size)),
        "BD": max(16, triton.next_power_of_2(dim)),
        "BT": max(16, triton.next_power_of_2(t_text)),
        "BTC": max(16, min(chunk, triton.next_power_of_2(t_text))),
        "BTM": memory_tile_rows(t_text, memory_columns, MEMORY_TILE),
        "BMW": memory_columns,
        "BH": 64,
    }


def forward(
    ah: torch.Tensor,
    query_weight: torch.Tensor,
    query_pre: torch.Tensor,
    row: torch.Tensor,
    memory: torch.Tensor,
    processed_memory: torch.Tensor,
    prev: torch.Tensor,
    cum: torch.Tensor,
    scoring: torch.Tensor,
    mask_bias: torch.Tensor,
    chunk: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two launches: (the query [B, dim] in the accumulation dtype, for the backward; a copy of ah;
    the context [B, M], the weights and the new cumulative weights [B, T] in cum's dtype, the
    state's, whatever memory's); ah written into row.
    query_pre [B, dim] may be a broadcast (stride 0); row [B, H] has unit column stride."""
    b, t_text, m = memory.shape
    dim, hidden = query_weight.shape
    acc = accumulation_dtype(cum.dtype)
    query, ah_copy = cum.new_empty(b, dim, dtype=acc), torch.empty_like(ah)
    context = cum.new_empty(b, m)
    weights, new_cum = cum.new_empty(b, t_text), cum.new_empty(b, t_text)
    energies = memory.new_empty(b, t_text, dtype=acc)
    sizes = blocks(t_text, m, dim, (scoring.size(0) - 1) // 2, chunk)
    slice_symbols = text_slice(b, t_text, sizes["BTC"])
    attention_energies_kernel[text_grid(b, t_text, slice_symbols)](
        ah, query_weight, query_pre, processed_memory, prev, cum, scoring, mask_bias, row, query, ah_copy, energies,
        query_pre.stride(0), query_pre.stride(1), row.stride(0), t_text, dim, hidden, slice_symbols,
        ACC=tl_dtype(acc), PRECISION=input_precision(acc), num_warps=NUM_WARPS,
        **{name: sizes[name] for name in ("K", "BJ", "BD", "BTC", "BH")},
    )  # fmt: skip
    columns = context_columns(b, m)
    attention_context_kernel[context_grid(b, m, columns)](
        memory, cum, energies, context, weights, new_cum, t_text, m, BT=sizes["BT"],
        BTM=memory_tile_rows(t_text, columns, CONTEXT_TILE), BMC=columns, ACC=tl_dtype(acc), num_warps=NUM_WARPS,
    )  # fmt: skip
    return query, ah_copy, context, weights, new_cum
