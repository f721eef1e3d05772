"""A leaner teacher-forced decoder: the same results as model/decoder.py, less backward traffic.

Why. In the reference loop every step multiplies B rows by the recurrent weights (both LSTMCells'
weight_ih / weight_hh, the attention query layer), and autograd answers every step with a
full weight-sized gradient (a K = B GEMM that mostly writes memory) which it then adds into the
gradient accumulated so far. Over hundreds of steps that traffic dominates the backward pass.

What FastDecoder (Tacotron2Config.fast_decoder) does instead, with the same parameters:

* Fewer, bigger GEMMs. The prenet's share of the attention LSTM's input projection and both LSTM
  biases are one GEMM over all steps before the loop; each LSTM then needs one GEMM per step,
  [inputs, h] @ [W_ih; W_hh]^T, on its inputs written into one row of a buffer.
* Deferred weight gradients. Each per-step linear map (attention LSTM, query layer, decoder
  LSTM) is a StepProjection: y_i = pre[i] + rows[i] @ W^T. A _DeferredWeights node takes the real
  parameters, and its forward hands the loop a detached copy of W (in the compute dtype: cast once
  per batch under autocast) and `pre` ([steps, B, out]: the precomputed term, or the bias, or
  zeros), which the loop consumes one slice per step. The per-step _StepLinear returns pre[i] +
  row @ W^T; its backward returns the inputs' gradient (one GEMM) and passes the output gradient
  on to pre[i] untouched. So the output gradients of all steps arrive, stacked by unbind's
  backward, as the gradient of `pre` -- no tape of gradients is kept -- and, because every step
  consumes a slice of pre, autograd's topological order runs _DeferredWeights' backward only after
  every step's backward. There it computes dW = G^T X (G, X stacked over steps: one GEMM,
  accumulated in fp32, or fp64 for fp64 parameters), the bias gradient as a sum, and the prenet
  input's gradient, and returns them as its inputs' gradients. Each parameter's .grad is therefore
  written once per backward through its ordinary AccumulateGrad: gradient accumulation adds as
  usual, and DDP's hooks fire as usual.
* A deferred memory gradient. Every step's context is weights_i @ memory, and autograd would
  answer each step with a [B, T_text, memory_dim] gradient and add it to the sum so far: four
  passes over a memory-sized tensor per step, once the largest traffic of the fused step's backward
  (scripts/bench/traffic.py). Instead the loop reads a detached memory (cast to the compute dtype
  once per batch under autocast, not every step) and hands each step's context through _Collect,
  whose backward also passes the context's gradient on, untouched, to a step's slice of
  _DeferredMemory's zero `pre`; there d memory = W^T G per utterance, W the stacked weights (the
  loop's alignments, kept in StepOutputs) and G the stacked context gradients: one batched GEMM
  after the last step's backward, accumulated in fp32 (fp64 for fp64).
* With the fused kernels, the per-step outputs that the projection after the loop reads (the
  decoder's hidden states, the contexts, the weights) are stacked by _Stacked, whose backward
  leaves the projection's gradient in StepOutputs instead of handing each step a slice that
  autograd adds to what the next step sends; each kernel's backward adds its slice itself.
* Packed (BLoad) blocks are branch-free, as in the reference loop: the state is multiplied by the
  reset keep-mask at every step (multiplying by 1 is exact).

Dropout masks come from Decoder.teacher_forcing in the same order, so with the same seed both
decoders draw the same masks. Only the teacher-forced forward differs; inference is inherited.

Graph-ready shapes (model/shapes.py): given a LoopShape, the loop runs that bigger shape: the
teacher-forced inputs and the dropout masks are drawn at the batch's own shape (the same random
draws as without a shape) and then zero-padded (masks with ones) to the shape's rows, steps and
text; dummy rows get zero memory and an all-zero (finite) mask, padded text columns of real rows
-inf; the results are sliced back. Real rows and steps never see the padding (attention gives it
weight 0, later steps cannot reach earlier ones, dummy rows only reach themselves), and the
sliced-off outputs send back zero gradients, so outputs and gradients equal the unpadded loop's.
Under bf16 autocast the per-step GEMMs run in bf16, but the weight gradient is one fp32
accumulation over all steps instead of a bf16 sum of per-step gradients.
"""

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from functools import partial
from typing import NamedTuple

import torch
from torch.autograd.function import once_differentiable
from torch.nn import functional as F

from .config import Tacotron2Config
from .decoder import Decoder, DecoderState, TeacherForcing
from .fused_attention import StepSums, scoring_matrix, step_sums
from .fused_attention import attend as attend_fused
from .fused_lstm import cell_step
from .kernel_support import accumulation_dtype, unit_columns
from .packing import StepLayout
from .shapes import LoopShape

#: Runs the loop of a batch already padded to a shape: (memory, mask_bias, tf) -> (mel, gate, alignments).
LoopRunner = Callable[[torch.Tensor, torch.Tensor, TeacherForcing], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
#: The loop hook: a shape's runner (e.g. model/graphs.py's static buffers), or None to run the loop eagerly.
RunnerFor = Callable[[LoopShape], LoopRunner | None]


class StepProjection(NamedTuple):
    """One per-step linear map of the loop: y_i = pre[i] + rows[i, :, skip:] @ weight^T."""

    pre: tuple[torch.Tensor, ...]  # per step [B, out]: precomputed term; its gradient is G
    weight: torch.Tensor  # [out, width - skip], compute dtype, outside autograd
    rows: torch.Tensor  # [steps, B, width]: every step's input X (the first skip columns precomputed)
    skip: int
    zeros: torch.Tensor | None = None  # [B, out] zeros: the hidden gates of CUDA's fused LSTM cell


class StepProjections(NamedTuple):
    """The loop's three per-step linear maps, each with its own _DeferredWeights node."""

    attention: StepProjection  # attention LSTM: rows [prenet_out | context | attention_hidden]
    query: StepProjection  # attention query layer: rows [attention_hidden]
    decoder: StepProjection  # decoder LSTM: rows [attention_hidden | context | decoder_hidden]


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


def _attention_grads(outputs: StepOutputs, i: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Step i's gradients of the context and the weights from their stacks (the fused attention's extras)."""
    return outputs.step_grad("contexts", i), outputs.step_grad("alignments", i)


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


class FastDecoder(Decoder):
    """Decoder with the fast teacher-forced forward; parameters and checkpoints are the Decoder's."""

    runner_for: RunnerFor | None = None  # the loop hook (loop_hook); None: every shape runs eagerly

    def __init__(self, cfg: Tacotron2Config):
        super().__init__(cfg)
        self.fused_attention = cfg.fused_attention
        self.fused_lstm = cfg.fused_lstm

    @contextmanager
    def loop_hook(self, runner_for: RunnerFor) -> Iterator[None]:
        """Inside it, a padded shape's loop runs through runner_for(shape) when that gives a runner:
        the caller (the training step) chooses, e.g., model/graphs.py's CUDA graphs; the model
        itself knows nothing of them."""
        previous, self.runner_for = self.runner_for, runner_for
        try:
            yield
        finally:
            self.runner_for = previous

    def step_projections(self, prenet_out: torch.Tensor) -> StepProjections:
        """The per-batch part: weights cast and concatenated once, the prenet GEMM for all steps."""
        steps, batch, _ = prenet_out.shape
        att, dec, query = self.attention_rnn, self.decoder_rnn, self.attention.query_layer
        return StepProjections(
            step_projection(
                prenet_out, [att.weight_ih, att.weight_hh], [att.bias_ih, att.bias_hh], steps, batch, lstm=True
            ),
            step_projection(None, [query.weight], [], steps, batch),
            step_projection(None, [dec.weight_ih, dec.weight_hh], [dec.bias_ih, dec.bias_hh], steps, batch, lstm=True),
        )

    def fast_step(
        self,
        i: int,
        s: DecoderState,
        mask_bias: torch.Tensor,
        *,
        p: StepProjections,
        memory: DeferredMemory,
        tf: TeacherForcing,
        scoring: torch.Tensor | None,
        sums: StepSums | None,
        outputs: StepOutputs,
    ) -> DecoderState:
        """Decoder.step through the StepProjections (step i's prenet output is in p.attention.pre)
        and the DeferredMemory; with `scoring` (model/fused_attention.scoring_matrix), the attention
        runs as the fused kernels, which add their gradients into `sums` when given. The fused
        kernels' backwards take the gradients of their outputs' stacks from `outputs` themselves."""
        ah, ac = self.cell(p.attention, i, s.attention_cell, tf.attention_keep[i], s.context, s.attention_hidden)
        if scoring is None:
            query = _StepLinear.apply(p.query.pre[i], p.query, i, ah)
            weights_cat = torch.stack((s.weights, s.cumulative_weights), 1)
            context, weights = self.attention.attend(
                query, memory.memory, tf.processed_memory, weights_cat, tf.location_matrix, mask_bias
            )
            cumulative = s.cumulative_weights + weights
        else:  # the query layer's product is the kernel's too; the step reads its copy of ah from here on
            pm, scoring = (tf.processed_memory, scoring) if sums is None else (sums.processed_memory, sums.scoring)
            q = p.query
            context, weights, cumulative, ah = attend_fused(
                ah, q.weight, q.pre[i], q.rows[i, :, q.skip :], memory.memory, pm, s.weights, s.cumulative_weights,
                scoring, mask_bias, sums=sums, extra_grads=partial(_attention_grads, outputs, i),
            )  # fmt: skip
        context = _Collect.apply(context, memory.pre[i])
        hidden_grad = partial(outputs.step_grad, "hidden", i)
        dh, dc = self.cell(
            p.decoder, i, s.decoder_cell, tf.decoder_keep[i], ah, context, s.decoder_hidden, d_h_extra=hidden_grad
        )
        return DecoderState(ah, ac, dh, dc, weights, cumulative, context)

    def cell(
        self,
        projection: StepProjection,
        i: int,
        cell: torch.Tensor,
        keep: torch.Tensor | None,
        *parts: torch.Tensor,
        d_h_extra: Callable[[], torch.Tensor | None] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """An LSTM cell's step i through its StepProjection: (hidden * keep, cell); with fused_lstm,
        model/fused_lstm.py's two kernels (d_h_extra: a gradient of the hidden state they add in)."""
        if self.fused_lstm:
            row = projection.rows[i, :, projection.skip :]
            return cell_step(projection.pre[i], projection.weight, row, cell, keep, *parts, d_h_extra=d_h_extra)
        hidden, cell = lstm_update(_StepLinear.apply(projection.pre[i], projection, i, *parts), cell, projection.zeros)
        return (hidden if keep is None else hidden * keep), cell

    def forward(
        self,
        memory: torch.Tensor,
        mask_bias: torch.Tensor,
        mel: torch.Tensor,
        layout: StepLayout | None = None,
        shape: LoopShape | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Decoder.forward, computed as the module docstring says; with a shape (unpacked batches
        only), the loop runs that padded shape and the results are sliced back; and if the loop
        hook gives a runner for that shape, it runs the loop (e.g. a CUDA graph replay)."""
        tf = self.teacher_forcing(memory, mel, layout)
        if shape is None:
            return self.loop(memory, mask_bias, tf, layout)
        b, t_text = memory.shape[:2]
        steps = tf.prenet_out.size(0)
        memory, mask_bias, tf = pad_to_shape(memory, mask_bias, tf, shape, self.r)
        runner = None if self.runner_for is None else self.runner_for(shape)
        mel_out, gate, alignment = (runner or self.loop)(memory, mask_bias, tf)
        return mel_out[:b, :, : steps * self.r], gate[:b, : steps * self.r], alignment[:b, :steps, :t_text]

    def loop(
        self, memory: torch.Tensor, mask_bias: torch.Tensor, tf: TeacherForcing, layout: StepLayout | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The teacher-forced loop over every step of tf and the projections of all steps: mel
        [B, n_mels, T], gate [B, T], alignments [B, steps, T_text]. Its shapes are its inputs'."""
        scoring = sums = None
        if self.fused_attention:
            scoring = scoring_matrix(tf.location_matrix, self.attention.v.weight)
            sums = step_sums(tf.processed_memory, scoring, memory.size(0))
        steps = tf.prenet_out.size(0)
        p = self.step_projections(tf.prenet_out)
        # Under autocast memory is cast to the compute dtype once here, not every step. The plain
        # chain's context product gives a context in that dtype too; the fused kernels compute in
        # fp32 and give it in the state's (memory's own), which its consumers' gradients keep.
        dtype = compute_dtype(memory)
        outputs = StepOutputs(self.routed_outputs())
        deferred = deferred_memory(memory, steps, dtype, memory.dtype if self.fused_attention else dtype, outputs)
        advance = partial(self.fast_step, p=p, memory=deferred, tf=tf, scoring=scoring, sums=sums, outputs=outputs)
        return self.run_steps(memory, mask_bias, layout, steps, advance, outputs.stack)

    def routed_outputs(self) -> frozenset[str]:
        """The stacked outputs whose gradients the fused kernels add in themselves: the decoder's
        hidden states (its LSTM cell's), the contexts and the weights (the attention's)."""
        names = ("hidden",) if self.fused_lstm else ()
        return frozenset(names + (("contexts", "alignments") if self.fused_attention else ()))

    def loop_parameters(self) -> list[torch.nn.Parameter]:
        """The parameters `loop` reads itself (the rest reach it through the teacher-forced inputs:
        the prenet, the memory layer and the location filter)."""
        layers = (
            self.attention_rnn,
            self.decoder_rnn,
            self.attention.query_layer,
            self.attention.v,
            self.projection,
            self.gate_layer,
        )
        return [p for layer in layers for p in layer.parameters()]


def pad_to_shape(
    memory: torch.Tensor, mask_bias: torch.Tensor, tf: TeacherForcing, shape: LoopShape, r: int
) -> tuple[torch.Tensor, torch.Tensor, TeacherForcing]:
    """memory, mask_bias and the teacher-forced inputs zero-padded to the shape's rows, steps and
    text (dropout masks with ones); dummy rows attend with an all-zero mask, padded text is -inf."""
    b, t_text = mask_bias.shape
    steps = tf.prenet_out.size(0)
    rows, text, loop_steps = shape.rows, shape.text, shape.frames // r
    if rows < b or text < t_text or loop_steps < steps or shape.frames % r:
        raise ValueError(
            f"loop shape {shape} is smaller than the batch ({b} rows, {steps * r} frames, "
            f"{t_text} symbols) or not a multiple of n_frames_per_step={r}"
        )
    bias = mask_bias.new_full((rows, text), float("-inf"))
    bias[:b, :t_text] = mask_bias
    bias[b:] = 0.0
    padded = TeacherForcing(
        F.pad(tf.prenet_out, (0, 0, 0, rows - b, 0, loop_steps - steps)),
        F.pad(tf.processed_memory, (0, 0, 0, text - t_text, 0, rows - b)),
        tf.location_matrix,
        _pad_keep(tf.attention_keep, rows, loop_steps),
        _pad_keep(tf.decoder_keep, rows, loop_steps),
    )
    return F.pad(memory, (0, 0, 0, text - t_text, 0, rows - b)), bias, padded


def _pad_keep(masks: list[torch.Tensor | None], rows: int, steps: int) -> list[torch.Tensor | None]:
    """Per-step dropout masks [B, H] padded with ones to `rows` rows and `steps` steps (None stays None)."""
    if masks[0] is None:
        return [None] * steps
    stacked = torch.stack(masks)  # [steps, B, H]
    return list(F.pad(stacked, (0, 0, 0, rows - stacked.size(1), 0, steps - stacked.size(0)), value=1.0).unbind(0))
