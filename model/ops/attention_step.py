"""One decoder step's attention as two fused operators (Tacotron2Config.fused_attention).

Why. model/attention.py's energy chain (this operation's plain reference, which the fast loop runs
without the switch), with the query layer before it, is about twelve kernels forward and seventeen
backward per decoder step on a GPU, each a fixed launch cost whatever the batch. `attend` computes
the same thing from the attention LSTM's hidden state (the query layer's product, written into the
query layer's row as deferred.py's StepProjection wants, the energy chain, the context and the new
cumulative weights) as two Triton kernels forward (attention_kernels.py: the energies, then softmax
and the context) and two backward (attention_backward_kernels.py: the chain, then the location
filter's and the query's gradients), each split over several programs a row: the PyTorch operators
`tacotron2::attention_step` and `tacotron2::attention_step_backward`, so that CUDA graphs, the meta
device (model/graphs.loop_memory) and the operation counter (training/op_count.py: one operator is
one operation, whatever its launches) treat them like any other operation, joined into one autograd
node (_AttentionStep: an operator that writes into an input, the row, cannot carry its own formula).

Its backward recomputes the chain from the step's inputs, so it keeps what recompute_attention
keeps (the inputs, and the forward's weights and context, [B, T] and [B, memory_dim]) without running
the chain twice through autograd. In a loop, the gradients
that every step adds to (the processed memory's, the scoring matrix's) go into StepSums' buffers in
place, and the query layer's weight gradient is the fast loop's deferred one (its rows and the
precomputed term's gradient, which is the query's).

Where it runs: CUDA tensors; on the CPU only under TRITON_INTERPRET=1 (Triton's interpreter, how
the suite checks it against the plain chain in float64); support.unavailable says why not
elsewhere. Triton is imported on first use, so the rest of the model needs no Triton.
"""

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch.autograd.function import once_differentiable

from .support import accumulation_dtype, unit_columns

#: Symbols a kernel program walks at once (a power of two >= 16): 16 keeps the forward within the
#: registers at the full model's sizes (scripts/bench/kernels.py); the tests also walk several chunks.
CHUNK = 16


@torch.library.custom_op("tacotron2::attention_step", mutates_args=("row",))
def _attention_step(
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
    from .attention_kernels import forward  # Triton on first use (its interpreter switch is read at import)

    return forward(ah, query_weight, query_pre, row, memory, processed_memory, prev, cum, scoring, mask_bias, chunk)


@_attention_step.register_fake
def _(ah, query_weight, query_pre, row, memory, processed_memory, prev, cum, scoring, mask_bias, chunk):
    b, t_text, m = memory.shape
    query = cum.new_empty(b, query_weight.size(0), dtype=accumulation_dtype(cum.dtype))
    return query, torch.empty_like(ah), cum.new_empty(b, m), cum.new_empty(b, t_text), cum.new_empty(b, t_text)


@torch.library.custom_op("tacotron2::attention_step_backward", mutates_args=("pm_acc", "part_acc"))
def _attention_step_backward(
    query: torch.Tensor,
    query_weight: torch.Tensor,
    memory: torch.Tensor,
    processed_memory: torch.Tensor,
    prev: torch.Tensor,
    cum: torch.Tensor,
    scoring: torch.Tensor,
    weights: torch.Tensor,
    context: torch.Tensor,
    d_context: torch.Tensor,
    d_weights: torch.Tensor,
    d_new_cum: torch.Tensor,
    d_ah_copy: torch.Tensor,
    chunk: int,
    ah_dtype: torch.dtype,
    pre_dtype: torch.dtype,
    memory_grad: bool,
    pm_acc: torch.Tensor | None,
    part_acc: torch.Tensor | None,
    d_context_extra: torch.Tensor | None,
    d_weights_extra: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    from .attention_backward_kernels import backward

    inputs = (query, query_weight, memory, processed_memory, prev, cum, scoring)
    dtypes, extras = (ah_dtype, pre_dtype), (d_context_extra, d_weights_extra)
    grads = (d_context, d_weights, d_new_cum, d_ah_copy)
    return backward(inputs, (weights, context), *grads, chunk, dtypes, memory_grad, pm_acc, part_acc, extras)


@_attention_step_backward.register_fake
def _(
    query, query_weight, memory, processed_memory, prev, cum, scoring, weights, context, d_context, d_weights,
    d_new_cum, d_ah_copy, chunk, ah_dtype, pre_dtype, memory_grad, pm_acc, part_acc, d_context_extra, d_weights_extra,
):  # fmt: skip
    b, (dim, hidden) = query.size(0), query_weight.shape
    part = query.new_empty(b, scoring.size(0), dim) if part_acc is None else query.new_empty(0)
    d_memory = torch.empty_like(memory) if memory_grad else memory.new_empty(0)
    d_pm = torch.empty_like(processed_memory) if pm_acc is None else processed_memory.new_empty(0)
    d_ah, d_pre = query.new_empty(b, hidden, dtype=ah_dtype), query.new_empty(b, dim, dtype=pre_dtype)
    return d_ah, d_pre, d_memory, d_pm, torch.empty_like(prev), torch.empty_like(cum), part


class StepSums(NamedTuple):
    """The processed memory and the scoring matrix as a loop's steps read them, and the buffers into
    which each step's backward kernel adds their gradients: instead of a [B, T_text, dim] gradient per
    step that autograd adds to the sum so far (three passes more over it), and a reduction and an
    addition per step for the scoring matrix, one node (_Summed) hands each its sum once."""

    processed_memory: torch.Tensor  # an alias of the input, its autograd node _Summed's
    scoring: torch.Tensor
    pm_acc: torch.Tensor  # [B, T_text, dim], float32 (float64 for float64)
    part_acc: torch.Tensor  # [B, 2K + 1, dim]: per-row partials, summed over rows in backward


class _AttentionStep(torch.autograd.Function):
    """The two operators as one autograd node, which also holds the loop's StepSums (if any): they
    are attributes, not saved tensors, as the later steps' backwards write them first."""

    @staticmethod
    def forward(ctx, ah, query_weight, query_pre, row, memory, processed_memory, prev, cum, scoring, mask_bias, *rest):
        chunk, sums, ctx.extras = rest
        query, ah_copy, context, weights, new_cum = _attention_step(
            ah, query_weight, query_pre, row, memory, processed_memory, prev, cum, scoring, mask_bias, chunk
        )
        ctx.save_for_backward(query, query_weight, memory, processed_memory, prev, cum, scoring, weights, context)
        ctx.chunk, ctx.sums, ctx.dtypes = chunk, sums, (ah.dtype, query_pre.dtype)
        ctx.set_materialize_grads(False)
        return context, weights, new_cum, ah_copy

    @staticmethod
    @once_differentiable
    def backward(ctx, d_context, d_weights, d_new_cum, d_ah_copy):
        *inputs, weights, context = ctx.saved_tensors
        query_weight, memory, cum = inputs[1], inputs[2], inputs[5]
        rows = weights.size(0)
        d_context, d_weights, d_new_cum = (
            cum.new_zeros(shape) if grad is None else grad.contiguous()
            for grad, shape in (
                (d_context, (rows, memory.size(2))),
                (d_weights, weights.shape),
                (d_new_cum, weights.shape),
            )
        )
        # the copy's gradient is read where it lies (rows apart by its stride: a column slice of a cell's)
        if d_ah_copy is None:
            d_ah_copy = query_weight.new_zeros(rows, query_weight.size(1), dtype=ctx.dtypes[0])
        d_ah_copy = unit_columns(d_ah_copy)
        memory_grad = ctx.needs_input_grad[4]  # not for the fast loop's detached memory: it sums it over steps
        pm_acc, part_acc = (None, None) if ctx.sums is None else (ctx.sums.pm_acc, ctx.sums.part_acc)
        extras = (None, None) if ctx.extras is None else ctx.extras()
        d_ah, d_pre, d_memory, d_pm, d_prev, d_cum, part = _attention_step_backward(
            *inputs, weights, context, d_context, d_weights, d_new_cum, d_ah_copy, ctx.chunk, *ctx.dtypes, memory_grad,
            pm_acc, part_acc, *extras,
        )  # fmt: skip
        d_memory = d_memory if memory_grad else None
        d_pm = d_pm if pm_acc is None else None  # added into pm_acc: StepSums' node returns it
        # The rows' partial sums: one reduction, no atomics (or added into part_acc, reduced once per batch)
        d_scoring = part.sum(0).to(inputs[-1].dtype) if part_acc is None else None
        return d_ah, None, d_pre, None, d_memory, d_pm, d_prev, d_cum, d_scoring, None, None, None, None


class _Summed(torch.autograd.Function):
    """x unchanged (an alias), whose gradient is what the steps' backwards added into acc in place
    (summed over its first dimension when acc has one more than x). Autograd runs it after every
    step's backward: each step reads the alias."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
        ctx.set_materialize_grads(False)
        ctx.acc, ctx.dtype, ctx.rows = acc, x.dtype, acc.dim() > x.dim()
        return x.view_as(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, _grad: torch.Tensor | None):  # None: the steps' gradients are in ctx.acc
        grad = ctx.acc.sum(0) if ctx.rows else ctx.acc
        return grad.to(ctx.dtype), None


def accumulator_shapes(rows: int, text: int, scoring_rows: int, dim: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """StepSums' accumulators for `rows` utterances of `text` symbols: the processed memory's gradient
    [rows, text, dim] and the scoring matrix's ([scoring_rows = 2K + 1, dim]) per-row partials
    [rows, scoring_rows, dim]. Also what model/graphs.loop_memory counts: node attributes, not saved tensors."""
    return (rows, text, dim), (rows, scoring_rows, dim)


def sums_bytes(rows: int, text: int, scoring_rows: int, dim: int, dtype: torch.dtype) -> int:
    """The bytes of a loop's StepSums accumulators (accumulator_shapes) for a loop in `dtype`."""
    shapes = accumulator_shapes(rows, text, scoring_rows, dim)
    return sum(math.prod(s) for s in shapes) * (torch.finfo(accumulation_dtype(dtype)).bits // 8)


def step_sums(processed_memory: torch.Tensor, scoring: torch.Tensor, rows: int) -> StepSums | None:
    """StepSums for a loop over `rows` utterances, or None where no gradient will be taken."""
    if not torch.is_grad_enabled():
        return None
    acc = accumulation_dtype(processed_memory.dtype)
    pm_shape, part_shape = accumulator_shapes(rows, processed_memory.size(1), *scoring.shape)
    pm_acc = processed_memory.new_zeros(pm_shape, dtype=acc)
    part_acc = scoring.new_zeros(part_shape, dtype=acc)
    return StepSums(_Summed.apply(processed_memory, pm_acc), _Summed.apply(scoring, part_acc), pm_acc, part_acc)


def attend(
    ah: torch.Tensor,
    query_weight: torch.Tensor,
    query_pre: torch.Tensor,
    row: torch.Tensor,
    memory: torch.Tensor,
    processed_memory: torch.Tensor,
    prev_weights: torch.Tensor,
    cumulative_weights: torch.Tensor,
    scoring: torch.Tensor,
    mask_bias: torch.Tensor,
    chunk: int = CHUNK,
    sums: StepSums | None = None,
    extra_grads: Callable[[], tuple[torch.Tensor | None, torch.Tensor | None]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """LocationSensitiveAttention.forward fused, plus the cumulative sum: (context [B, memory_dim],
    weights [B, T_text], cumulative_weights + weights, all three in the state's dtype, the cumulative
    weights', and a copy of ah) for the query query_pre + ah @ query_weight^T. The step's other
    readers of ah should take the copy: its gradient then arrives here summed and is added to the
    query's in the kernel, and ah's own has no other term to add.

    ah [B, H] is the attention LSTM's hidden state, written into `row` ([B, H], unit column stride:
    the query layer's StepProjection row); query_weight [dim, H] is outside autograd (its gradient is
    the caller's, from the rows and query_pre's gradient); query_pre [B, dim] (a broadcast is fine)
    is the precomputed term, whose gradient is the query's. scoring = scoring_matrix(attention): the
    folded location matrix [2K, dim] with v's row under it, built once per batch. With `sums` (a
    loop's), processed_memory and scoring must be its aliases, whose gradients it sums in place.
    extra_grads, if given, is called in the backward for second terms of the context's and the
    weights' gradients that autograd does not sum in (each [B, .] or None), added in the kernel."""
    tensors = (memory, processed_memory, prev_weights, cumulative_weights, scoring, mask_bias)
    inputs = (ah.contiguous(), query_weight.contiguous(), query_pre, row, *(t.contiguous() for t in tensors))
    return _AttentionStep.apply(*inputs, chunk, sums, extra_grads)


def scoring_matrix(location_matrix: torch.Tensor, v_weight: torch.Tensor) -> torch.Tensor:
    """[2K + 1, dim]: the folded location filter's rows and the energy vector v ([1, dim]) as one input."""
    return torch.cat((location_matrix, v_weight.to(location_matrix.dtype)), 0)
