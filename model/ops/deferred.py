"""The fast decoder loop's deferred gradients: autograd nodes that hand every step's gradient on
untouched and compute a parameter's or memory's gradient once, after the loop, in one GEMM.

Why. In the reference loop every step multiplies B rows by the recurrent weights (both LSTM cells'
weight_ih / weight_hh, the attention query layer), and autograd answers every step with a full
weight-sized gradient (a K = B GEMM that mostly writes memory), which it then adds into the
gradient accumulated so far. Over hundreds of steps that traffic dominates the backward pass.

* Deferred weight gradients. Each per-step linear map is a StepProjection: y_i = pre[i] + rows[i]
  @ W^T. A _DeferredWeights node takes the real parameters, and its forward hands the loop a
  detached copy of W (in the compute dtype: cast once per batch under autocast) and `pre` ([steps,
  B, out]: the precomputed term, or the bias, or zeros), which the loop consumes one slice per
  step. The per-step _StepLinear returns pre[i] + row @ W^T; its backward returns the inputs'
  gradient (one GEMM) and passes the output gradient on to pre[i] untouched. So the output
  gradients of all steps arrive, stacked by unbind's backward, as the gradient of `pre` -- no tape
  of gradients is kept -- and, because every step consumes a slice of pre, autograd's topological
  order runs _DeferredWeights' backward only after every step's backward. There it computes dW =
  G^T X (G, X stacked over steps: one GEMM, accumulated in fp32, or fp64 for fp64 parameters), the
  bias gradient as a sum, and the prenet input's gradient, and returns them as its inputs'
  gradients. Each parameter's .grad is therefore written once per backward through its ordinary
  AccumulateGrad: gradient accumulation adds as usual, and DDP's hooks fire as usual.
* A deferred memory gradient. Every step's context is weights_i @ memory, and autograd would
  answer each step with a [B, T_text, memory_dim] gradient and add it to the sum so far: four
  passes over a memory-sized tensor per step, once the largest traffic of the fused step's backward
  (scripts/bench/traffic.py). Instead the loop reads a detached memory (cast to the compute dtype
  once per batch under autocast, not every step) and hands each step's context through _Collect,
  whose backward also passes the context's gradient on, untouched, to a step's slice of
  _DeferredMemory's zero `pre`; there d memory = W^T G per utterance, W the stacked weights (the
  loop's alignments, kept in StepOutputs) and G the stacked context gradients: one batched GEMM
  after the last step's backward, accumulated in fp32 (fp64 for fp64).
* Routed stacks. With the fused kernels (attention_step.py, lstm_cell.py), the per-step outputs
  that the projection after the loop reads (the decoder's hidden states, the contexts, the
  weights) are stacked by _Stacked, whose backward leaves the projection's gradient in StepOutputs
  instead of handing each step a slice that autograd adds to what the next step sends; each
  kernel's backward adds its slice itself.

Under bf16 autocast the per-step GEMMs run in bf16, but the weight gradient is one fp32
accumulation over all steps instead of a bf16 sum of per-step gradients.
"""

from collections.abc import Sequence
from contextlib import nullcontext
from typing import NamedTuple

import torch
from torch.autograd.function import once_differentiable
from torch.nn import functional as F

from .support import accumulation_dtype, unit_columns


class StepProjection(NamedTuple):
    """One per-step linear map of the loop: y_i = pre[i] + rows[i, :, skip:] @ weight^T."""

    pre: tuple[torch.Tensor, ...]  # per step [B, out]: precomputed term; its gradient is G
    weight: torch.Tensor  # [out, width - skip], compute dtype, outside autograd
    rows: torch.Tensor  # [steps, B, width]: every step's input X (the first skip columns precomputed)
    skip: int
    zeros: torch.Tensor | None = None  # [B, out] zeros: the hidden gates of CUDA's fused LSTM cell


def compute_dtype(weight: torch.Tensor) -> torch.dtype:
    """The dtype of the step GEMMs: autocast's for fp32 weights inside autocast, else the weight's."""
    device = weight.device.type
    if weight.dtype == torch.float32 and device != "meta" and torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return weight.dtype


def _precomputed(
    rows: torch.Tensor,
    x_pre: torch.Tensor | None,
    w_pre: torch.Tensor,
    biases: Sequence[torch.Tensor],
    dtype: torch.dtype,
) -> torch.Tensor:
    """pre = x_pre @ w_pre^T + sum(biases) for all steps at once (zeros if there is neither);
    x_pre is also written into the rows, whose first columns it is."""
    steps, batch, _ = rows.shape
    bias = torch.stack(list(biases)).sum(0).to(dtype) if biases else None
    if x_pre is not None:
        rows[:, :, : x_pre.size(2)].copy_(x_pre)
        return F.linear(x_pre.to(dtype), w_pre, bias)
    if bias is not None:
        return bias.expand(steps, batch, -1)
    return rows.new_zeros(()).expand(steps, batch, w_pre.size(0))


class _DeferredWeights(torch.autograd.Function):
    """The parameters' single autograd node for one StepProjection (see the module docstring)."""

    @staticmethod
    def forward(
        ctx,
        rows: torch.Tensor,
        x_pre: torch.Tensor | None,
        dtype: torch.dtype,
        n_weights: int,
        *params: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        weights, biases = params[:n_weights], params[n_weights:]
        full = torch.cat(weights, 1) if n_weights > 1 else weights[0]
        skip = 0 if x_pre is None else x_pre.size(2)
        w_pre = full[:, :skip].to(dtype)
        pre = _precomputed(rows, x_pre, w_pre, biases, dtype)
        weight = full[:, skip:].to(dtype=dtype, memory_format=torch.contiguous_format, copy=True)
        ctx.mark_non_differentiable(weight)
        ctx.set_materialize_grads(False)  # no weight-sized zeros for the weight output's gradient
        # Attributes, not save_for_backward: the loop writes the rows after this forward returns.
        ctx.rows, ctx.w_pre, ctx.x_pre_dtype = rows, w_pre, None if x_pre is None else x_pre.dtype
        ctx.widths = [w.size(1) for w in weights]
        ctx.param_dtypes = [p.dtype for p in params]
        return pre, weight

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_pre: torch.Tensor | None, _grad_weight: torch.Tensor | None):
        if grad_pre is None:  # no step's output reached the loss
            return (None,) * (4 + len(ctx.param_dtypes))
        # Explicit dtypes below; an enclosing autocast must not turn the fp32 GEMM into bf16.
        device = grad_pre.device.type
        with torch.autocast(device, enabled=False) if device != "meta" else nullcontext():
            d_x_pre, d_params = _parameter_grads(ctx, grad_pre)
        return (None, d_x_pre, None, None, *d_params)


def _parameter_grads(ctx, grad_pre: torch.Tensor) -> tuple[torch.Tensor | None, list[torch.Tensor | None]]:
    """d x_pre and [*d weights, *d biases] from G = grad_pre and X = rows, stacked over all steps."""
    rows = ctx.rows
    steps, batch, width = rows.shape
    needs = ctx.needs_input_grad
    g = grad_pre.reshape(steps * batch, -1)
    d_x_pre = None
    if needs[1]:
        d_x_pre = (g @ ctx.w_pre).view(steps, batch, -1).to(ctx.x_pre_dtype)
    n_weights = len(ctx.widths)
    acc = accumulation_dtype(ctx.param_dtypes[0])
    d_params: list[torch.Tensor | None] = [None] * len(ctx.param_dtypes)
    if any(needs[4 : 4 + n_weights]):
        d_full = g.t().to(acc) @ rows.view(steps * batch, width).to(acc)  # dW = G^T X: one GEMM
        d_params[:n_weights] = d_full.split(ctx.widths, 1)
    if any(needs[4 + n_weights :]):
        d_bias = g.to(acc).sum(0)
        d_params[n_weights:] = [d_bias.clone() for _ in d_params[n_weights:]]  # no shared .grad
    return d_x_pre, [None if d is None else d.to(dtype) for d, dtype in zip(d_params, ctx.param_dtypes)]


class _StepLinear(torch.autograd.Function):
    """One step of a StepProjection: writes the step's inputs into its row and returns
    pre[i] + row @ W^T. Backward: the inputs' gradient only; the output gradient goes on to
    pre[i] unchanged (it is G_i, collected for _DeferredWeights)."""

    @staticmethod
    def forward(ctx, pre: torch.Tensor, projection: StepProjection, i: int, *parts: torch.Tensor) -> torch.Tensor:
        row = projection.rows[i, :, projection.skip :]
        col = 0
        for part in parts:
            row[:, col : col + part.size(1)].copy_(part)
            col += part.size(1)
        ctx.weight = projection.weight
        ctx.parts = [(part.size(1), part.dtype) for part in parts]
        return torch.addmm(pre, row, projection.weight.t())

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        n = len(ctx.parts)
        if not any(ctx.needs_input_grad[3:]):
            return (grad, None, None) + (None,) * n
        d_row = grad.mm(ctx.weight)
        d_parts = d_row.split([size for size, _ in ctx.parts], 1)
        return (grad, None, None) + tuple(d.to(dtype) for d, (_, dtype) in zip(d_parts, ctx.parts))


def step_linear(projection: StepProjection, i: int, *parts: torch.Tensor) -> torch.Tensor:
    """Step i of a StepProjection: pre[i] + [parts side by side] @ W^T, the parts written into row i."""
    return _StepLinear.apply(projection.pre[i], projection, i, *parts)


class StepOutputs:
    """The loop's per-step outputs stacked after the loop (Decoder.project's `stack`), kept by name;
    for the names in `routed`, whose gradients the fused kernels' backwards add in themselves, the
    stack is _Stacked, which leaves its gradient here (`grads`) instead of handing autograd a slice
    per step to add to what the next step sends (an addition per step and value)."""

    def __init__(self, routed: frozenset[str] = frozenset()) -> None:
        self.routed = routed
        self.stacked: dict[str, torch.Tensor] = {}
        self.grads: dict[str, torch.Tensor] = {}

    def stack(self, name: str, tensors: list[torch.Tensor]) -> torch.Tensor:
        stacked = _Stacked.apply(self, name, *tensors) if name in self.routed else torch.stack(tensors, 1)
        self.stacked[name] = stacked
        return stacked

    def step_grad(self, name: str, i: int) -> torch.Tensor | None:
        """Step i's slice [B, ...] of a routed stack's gradient (None if it got none)."""
        grad = self.grads.get(name)
        return None if grad is None else grad[:, i]


class _Stacked(torch.autograd.Function):
    """torch.stack(tensors, 1), whose gradient goes to its StepOutputs, not to the tensors: autograd
    runs it before any step's backward (each step's output is its input), so the kernels find it,
    its last dimension unit-stride, as they read it (a loss may send it in any layout)."""

    @staticmethod
    def forward(ctx, outputs: StepOutputs, name: str, *tensors: torch.Tensor) -> torch.Tensor:
        ctx.outputs, ctx.name, ctx.n = outputs, name, len(tensors)
        ctx.set_materialize_grads(False)
        return torch.stack(tensors, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor | None):
        if grad is not None:
            ctx.outputs.grads[ctx.name] = unit_columns(grad)
        return (None, None) + (None,) * ctx.n


class DeferredMemory(NamedTuple):
    """What the loop reads instead of memory (see the module docstring)."""

    memory: torch.Tensor  # detached, in the dtype the step's context product reads
    pre: tuple[torch.Tensor, ...]  # per step [B, memory_dim] zeros: their gradients are the contexts'


class _DeferredMemory(torch.autograd.Function):
    """memory's single autograd node for the loop's contexts (see the module docstring); `pre` is in
    the contexts' dtype, so their gradients pass on to it without a cast. W is the loop's stacked
    alignments; G also takes the contexts' gradient from the projection if StepOutputs holds it."""

    @staticmethod
    def forward(ctx, memory: torch.Tensor, steps: int, dtype: torch.dtype, outputs: StepOutputs) -> torch.Tensor:
        ctx.set_materialize_grads(False)
        ctx.outputs, ctx.memory_dtype = outputs, memory.dtype
        b, _, width = memory.shape
        return memory.new_zeros((), dtype=dtype).expand(steps, b, width)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_pre: torch.Tensor | None):
        acc = accumulation_dtype(ctx.memory_dtype)
        g = None if grad_pre is None else grad_pre.transpose(0, 1).to(acc)  # [B, steps, memory_dim]
        projected = ctx.outputs.grads.get("contexts")  # the projection's share, where the kernels took it
        if projected is not None:
            g = projected.to(acc) if g is None else g + projected
        if g is None:  # no step's context reached the loss
            return None, None, None, None
        weights = ctx.outputs.stacked["alignments"].to(acc)  # [B, steps, T_text]
        d_memory = torch.bmm(weights.transpose(1, 2), g)  # W^T G: one GEMM
        return d_memory.to(ctx.memory_dtype), None, None, None


class _Collect(torch.autograd.Function):
    """A step's context, unchanged; backward passes its gradient on both to the context's own inputs
    and, untouched, to pre_i (the step's slice of _DeferredMemory's `pre`)."""

    @staticmethod
    def forward(ctx, context: torch.Tensor, pre_i: torch.Tensor) -> torch.Tensor:
        return context.view_as(context)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        return grad, grad


def collect(context: torch.Tensor, memory: DeferredMemory, i: int) -> torch.Tensor:
    """Step i's context, unchanged, its gradient also handed to memory's deferred node (_Collect)."""
    return _Collect.apply(context, memory.pre[i])


def deferred_memory(
    memory: torch.Tensor, steps: int, dtype: torch.dtype, context_dtype: torch.dtype, outputs: StepOutputs
) -> DeferredMemory:
    """The loop's view of memory for `steps` steps: a detached copy in `dtype`, and the
    _DeferredMemory node that will sum memory's gradient over all steps at once from the gradients
    of the contexts (in `context_dtype`) and the weights the loop stacks into `outputs`."""
    pre = _DeferredMemory.apply(memory, steps, context_dtype, outputs)
    return DeferredMemory(memory.detach().to(dtype), pre.unbind(0))


def step_projection(
    x_pre: torch.Tensor | None,
    weights: Sequence[torch.Tensor],
    biases: Sequence[torch.Tensor],
    steps: int,
    batch: int,
    lstm: bool = False,
) -> StepProjection:
    """A StepProjection over `weights` (same output size, their inputs side by side); x_pre
    [steps, B, n], if given, is the input of the first n columns, for every step at once. For an
    LSTM's gates on CUDA it also holds the zeros that lstm_update's fused kernel adds."""
    dtype = compute_dtype(weights[0])
    width = sum(w.size(1) for w in weights)
    rows = weights[0].new_empty((steps, batch, width), dtype=dtype)
    pre, weight = _DeferredWeights.apply(rows, x_pre, dtype, len(weights), *weights, *biases)
    zeros = rows.new_zeros(batch, weight.size(0)) if lstm and rows.is_cuda else None
    return StepProjection(pre.unbind(0), weight, rows, 0 if x_pre is None else x_pre.size(2), zeros)
