"""The fast loop's attention step and LSTM cells, plain or fused, each behind one interface.

FastDecoder.__init__ picks one of each once, from the config's switches (fused_attention,
fused_lstm, split_lstm), as flash-attention's MHA picks FusedDense or nn.Linear in its constructor; the loop
then calls what was picked and never asks a switch again. The classes hold no parameters (the
decoder's layers keep them, so checkpoints do not change) and are handed the layers they read.

An attention step: `begin(attention, tf, rows)` at the start of a loop (the fused one builds its
scoring matrix and gradient sums there) gives the loop's per-step call, (i, ah, state, the query
layer's StepProjection, memory, mask_bias, outputs) -> (context, weights, cumulative weights, the
step's copy of ah); `routed` names the stacked outputs whose gradients its backward adds in itself
(model/ops/deferred.StepOutputs); `context_dtype` is the dtype its context comes in; `held_bytes`
what its autograd nodes hold as attributes (model/graphs.loop_memory). An LSTM cell:
`__call__(projection, i, cell, keep, *parts, d_h_extra=None)` -> (hidden * keep, cell), and
`takes_stack_grad`, whether its backward adds the gradient of its hidden states' stack (d_h_extra)
itself.

SplitCell is such a further design (its gates' product on cuBLAS, a pointwise Triton kernel each
way): one more class with the same interface here and one more clause where FastDecoder.__init__
makes the choice (with its config switch); the loop, the graphs and the tests of the interface
stay as they are.
"""

from collections.abc import Callable
from functools import partial

import torch

from .attention import LocationSensitiveAttention
from .decoder import DecoderState, TeacherForcing
from .ops.attention_step import StepSums, attend, scoring_matrix, step_sums, sums_bytes
from .ops.deferred import StepOutputs, StepProjection, step_linear
from .ops.lstm_cell import fused_cell, plain_cell
from .ops.lstm_split import split_cell

#: An attention step of one loop (an attention step's `begin`):
#: (i, ah, state, query projection, memory, mask_bias, outputs) -> (context, weights, cumulative, ah).
AttendStep = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]


class PlainAttention:
    """model/attention.py's energy chain (the reference decoder's), the query through the query
    layer's StepProjection: an operation at a time, autograd summing each step's gradients."""

    routed: frozenset[str] = frozenset()

    @staticmethod
    def context_dtype(state: torch.dtype, compute: torch.dtype) -> torch.dtype:
        """The context product runs in the compute dtype (autocast's) and gives its context in it."""
        return compute

    @staticmethod
    def held_bytes(attention: LocationSensitiveAttention, rows: int, text: int, dtype: torch.dtype) -> int:
        return 0

    def begin(self, attention: LocationSensitiveAttention, tf: TeacherForcing, rows: int) -> AttendStep:
        return partial(self.step, attention, tf)

    @staticmethod
    def step(
        attention: LocationSensitiveAttention,
        tf: TeacherForcing,
        i: int,
        ah: torch.Tensor,
        s: DecoderState,
        query: StepProjection,
        memory: torch.Tensor,
        mask_bias: torch.Tensor,
        outputs: StepOutputs,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        q = step_linear(query, i, ah)
        weights_cat = torch.stack((s.weights, s.cumulative_weights), 1)
        context, weights = attention.attend(q, memory, tf.processed_memory, weights_cat, tf.location_matrix, mask_bias)
        return context, weights, s.cumulative_weights + weights, ah


class FusedAttention:
    """model/ops/attention_step.py's two kernels, the query layer's product included; the gradients
    every step adds to go into the loop's StepSums, and the contexts' and weights' stacks hand their
    gradients to the kernels (`routed`)."""

    routed: frozenset[str] = frozenset({"contexts", "alignments"})

    @staticmethod
    def context_dtype(state: torch.dtype, compute: torch.dtype) -> torch.dtype:
        """The kernels compute in fp32 and give the context in the state's dtype (memory's own)."""
        return state

    @staticmethod
    def held_bytes(attention: LocationSensitiveAttention, rows: int, text: int, dtype: torch.dtype) -> int:
        """The StepSums' accumulators."""
        return sums_bytes(rows, text, 2 * attention.kernel_size + 1, attention.memory_layer.out_features, dtype)

    def begin(self, attention: LocationSensitiveAttention, tf: TeacherForcing, rows: int) -> AttendStep:
        """The scoring matrix, built once per batch, and the loop's StepSums (None without autograd)."""
        scoring = scoring_matrix(tf.location_matrix, attention.v.weight)
        sums = step_sums(tf.processed_memory, scoring, rows)
        pm, scoring = (tf.processed_memory, scoring) if sums is None else (sums.processed_memory, sums.scoring)
        return partial(self.step, pm, scoring, sums)

    @staticmethod
    def step(
        processed_memory: torch.Tensor,
        scoring: torch.Tensor,
        sums: StepSums | None,
        i: int,
        ah: torch.Tensor,
        s: DecoderState,
        query: StepProjection,
        memory: torch.Tensor,
        mask_bias: torch.Tensor,
        outputs: StepOutputs,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The kernels' copy of ah comes back: the step reads it from here on, so that its gradient is
        summed in the kernel."""
        return attend(
            ah, query.weight, query.pre[i], query.rows[i, :, query.skip :], memory, processed_memory, s.weights,
            s.cumulative_weights, scoring, mask_bias, sums=sums, extra_grads=partial(_attention_grads, outputs, i),
        )  # fmt: skip


def _attention_grads(outputs: StepOutputs, i: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Step i's gradients of the context and the weights from their stacks (the fused attention's extras)."""
    return outputs.step_grad("contexts", i), outputs.step_grad("alignments", i)


class PlainCell:
    """The cell unfused (model/ops/lstm_cell.plain_cell); autograd hands each step its share of the
    hidden states' stack, so d_h_extra is not asked."""

    takes_stack_grad = False

    def __call__(
        self,
        projection: StepProjection,
        i: int,
        cell: torch.Tensor,
        keep: torch.Tensor | None,
        *parts: torch.Tensor,
        d_h_extra: Callable[[], torch.Tensor | None] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return plain_cell(projection, i, cell, keep, *parts)


class KernelCell:
    """A cell whose backward adds d_h_extra's gradient (the hidden states' stack) itself: `step`, a
    model/ops function with PlainCell's call, d_h_extra passed on."""

    takes_stack_grad = True
    step: Callable[..., tuple[torch.Tensor, torch.Tensor]]

    def __call__(
        self,
        projection: StepProjection,
        i: int,
        cell: torch.Tensor,
        keep: torch.Tensor | None,
        *parts: torch.Tensor,
        d_h_extra: Callable[[], torch.Tensor | None] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return type(self).step(projection, i, cell, keep, *parts, d_h_extra=d_h_extra)


class FusedCell(KernelCell):
    """The cell as model/ops/lstm_cell.py's kernels."""

    step = staticmethod(fused_cell)


class SplitCell(KernelCell):
    """The cell as model/ops/lstm_split.py's cuBLAS product and pointwise kernels."""

    step = staticmethod(split_cell)
