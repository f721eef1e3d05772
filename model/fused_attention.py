"""One decoder step's attention as two fused kernels (Tacotron2Config.fused_attention).

Why. model/attention.py's energy chain is about ten kernels forward and fifteen backward per
decoder step on a GPU, each a fixed launch cost whatever the batch (issue: the decoder step is a
chain of ~56 small kernels). `attend` computes the same thing, plus the new cumulative weights, as
one Triton kernel forward and one backward (model/attention_kernels.py), wrapped as the PyTorch
operators `tacotron2::attention_step` and `tacotron2::attention_step_backward` so that autograd,
CUDA graphs, the meta device (model/graphs.loop_memory) and the operation counter
(training/op_count.py: one operator is one launch) treat them like any other operation.

Its backward recomputes the chain from the step's inputs, so it keeps what recompute_attention
keeps (only the inputs) without running the chain twice through autograd.

Where it runs: CUDA tensors; on the CPU only under TRITON_INTERPRET=1 (Triton's interpreter, how
the suite checks it against the plain chain in float64); model/kernel_support.unavailable says why
not elsewhere.
Triton is imported on first use, so the rest of the model needs no Triton.
"""

import torch

from .kernel_support import accumulation_dtype

#: Symbols a kernel program walks at once (a power of two >= 16): 16 keeps the forward within the
#: registers at the full model's sizes (scripts/bench/kernels.py); the tests also walk several chunks.
CHUNK = 16


@torch.library.custom_op("tacotron2::attention_step", mutates_args=())
def _attention_step(
    q: torch.Tensor,
    memory: torch.Tensor,
    processed_memory: torch.Tensor,
    prev: torch.Tensor,
    cum: torch.Tensor,
    scoring: torch.Tensor,
    mask_bias: torch.Tensor,
    chunk: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    from .attention_kernels import forward  # Triton on first use (its interpreter switch is read at import)

    return forward(q, memory, processed_memory, prev, cum, scoring, mask_bias, chunk)


@_attention_step.register_fake
def _(q, memory, processed_memory, prev, cum, scoring, mask_bias, chunk):
    b, t_text, m = memory.shape
    return memory.new_empty(b, m), cum.new_empty(b, t_text), cum.new_empty(b, t_text)


@torch.library.custom_op("tacotron2::attention_step_backward", mutates_args=())
def _attention_step_backward(
    q: torch.Tensor,
    memory: torch.Tensor,
    processed_memory: torch.Tensor,
    prev: torch.Tensor,
    cum: torch.Tensor,
    scoring: torch.Tensor,
    weights: torch.Tensor,
    d_context: torch.Tensor,
    d_weights: torch.Tensor,
    d_new_cum: torch.Tensor,
    chunk: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    from .attention_kernels import backward

    inputs = (q, memory, processed_memory, prev, cum, scoring)
    return backward(inputs, weights, d_context, d_weights, d_new_cum, chunk)


@_attention_step_backward.register_fake
def _(q, memory, processed_memory, prev, cum, scoring, weights, d_context, d_weights, d_new_cum, chunk):
    part = q.new_empty(q.size(0), scoring.size(0), scoring.size(1), dtype=accumulation_dtype(q.dtype))
    return tuple(torch.empty_like(x) for x in (q, memory, processed_memory, prev, cum)) + (part,)


def _setup_context(ctx, inputs, output) -> None:
    q, memory, processed_memory, prev, cum, scoring, _mask_bias, chunk = inputs
    ctx.save_for_backward(q, memory, processed_memory, prev, cum, scoring, output[1])
    ctx.chunk = chunk


def _backward(ctx, d_context, d_weights, d_new_cum):
    *inputs, weights = ctx.saved_tensors
    d_context, d_weights, d_new_cum = (
        torch.zeros_like(like) if grad is None else grad.contiguous()
        for grad, like in ((d_context, inputs[1][:, 0]), (d_weights, weights), (d_new_cum, weights))
    )
    *grads, part = _attention_step_backward(*inputs, weights, d_context, d_weights, d_new_cum, ctx.chunk)
    d_scoring = part.sum(0).to(inputs[5].dtype)  # the rows' partial sums: one reduction, no atomics
    return (*grads, d_scoring, None, None)


_attention_step.register_autograd(_backward, setup_context=_setup_context)


def attend(
    processed_query: torch.Tensor,
    memory: torch.Tensor,
    processed_memory: torch.Tensor,
    prev_weights: torch.Tensor,
    cumulative_weights: torch.Tensor,
    scoring: torch.Tensor,
    mask_bias: torch.Tensor,
    chunk: int = CHUNK,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LocationSensitiveAttention.attend fused, plus the cumulative sum: (context [B, memory_dim],
    weights [B, T_text], cumulative_weights + weights). scoring = scoring_matrix(attention): the
    folded location matrix [2K, dim] with v's row under it, built once per batch."""
    tensors = (processed_query, memory, processed_memory, prev_weights, cumulative_weights, scoring, mask_bias)
    return _attention_step(*(t.contiguous() for t in tensors), chunk)


def scoring_matrix(location_matrix: torch.Tensor, v_weight: torch.Tensor) -> torch.Tensor:
    """[2K + 1, dim]: the folded location filter's rows and the energy vector v ([1, dim]) as one input."""
    return torch.cat((location_matrix, v_weight.to(location_matrix.dtype)), 0)
