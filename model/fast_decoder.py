"""A leaner teacher-forced decoder: the same results as model/decoder.py, less backward traffic.

Why. In the reference loop every step multiplies B rows by the recurrent weights (both LSTMCells'
weight_ih / weight_hh, the attention query layer), and autograd answers every step with a
full weight-sized gradient (a K = B GEMM that mostly writes memory) which it then adds into the
gradient accumulated so far. Over hundreds of steps that traffic dominates the backward pass.

What FastDecoder (Tacotron2Config.fast_decoder) does instead, with the same parameters:

* Fewer, bigger GEMMs. The prenet's share of the attention LSTM's input projection and both LSTM
  biases are one GEMM over all steps before the loop; each LSTM then needs one GEMM per step,
  [inputs, h] @ [W_ih; W_hh]^T, on its inputs written into one row of a buffer.
* Deferred gradients (model/ops/deferred.py). Each per-step linear map (attention LSTM, query
  layer, decoder LSTM) is a StepProjection, whose weights' gradient is one GEMM over all steps
  after the loop; memory's gradient likewise (DeferredMemory); each parameter's .grad is written
  once per backward through its ordinary AccumulateGrad, so gradient accumulation and DDP's hooks
  work as usual.
* The attention step and the LSTM cells are objects chosen once in __init__, plain or as fused
  Triton kernels, or the cells split between cuBLAS and Triton (model/fast_steps.py; the kernels in
  model/ops/); with the fused and split ones, the stacks of the outputs the kernels' backwards
  read route their gradients to them (StepOutputs).
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
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import NamedTuple

import torch
from torch.nn import functional as F

from .config import Tacotron2Config
from .decoder import Decoder, DecoderState, TeacherForcing
from .fast_steps import AttendStep, FusedAttention, FusedCell, PlainAttention, PlainCell, SplitCell
from .ops.deferred import (
    DeferredMemory,
    StepOutputs,
    StepProjection,
    collect,
    compute_dtype,
    deferred_memory,
    step_projection,
)
from .packing import StepLayout
from .shapes import LoopShape

#: Runs the loop of a batch already padded to a shape: (memory, mask_bias, tf) -> (mel, gate, alignments).
LoopRunner = Callable[[torch.Tensor, torch.Tensor, TeacherForcing], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
#: The loop hook: a shape's runner (e.g. model/graphs.py's static buffers), or None to run the loop eagerly.
RunnerFor = Callable[[LoopShape], LoopRunner | None]


class StepProjections(NamedTuple):
    """The loop's three per-step linear maps, each with its own _DeferredWeights node."""

    attention: StepProjection  # attention LSTM: rows [prenet_out | context | attention_hidden]
    query: StepProjection  # attention query layer: rows [attention_hidden]
    decoder: StepProjection  # decoder LSTM: rows [attention_hidden | context | decoder_hidden]


class FastDecoder(Decoder):
    """Decoder with the fast teacher-forced forward; parameters and checkpoints are the Decoder's."""

    runner_for: RunnerFor | None = None  # the loop hook (loop_hook); None: every shape runs eagerly

    def __init__(self, cfg: Tacotron2Config):
        super().__init__(cfg)
        # Plain, fused or split, chosen here once (model/fast_steps.py): the loop calls what was picked.
        self.attention_step = FusedAttention() if cfg.fused_attention else PlainAttention()
        cell = FusedCell if cfg.fused_lstm else SplitCell if cfg.split_lstm else PlainCell
        self.attention_rnn_step = cell()
        self.decoder_rnn_step = cell()

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
        attend: AttendStep,
        outputs: StepOutputs,
    ) -> DecoderState:
        """Decoder.step through the StepProjections (step i's prenet output is in p.attention.pre),
        the DeferredMemory, the loop's attention step (`attend`, the attention step's begin) and both
        LSTM cells; a cell or attention step that takes its outputs' stacks' gradients itself finds
        them in `outputs`. The attention step hands back the hidden state the step reads on (the
        fused kernels' copy of it)."""
        ah, ac = self.attention_rnn_step(
            p.attention, i, s.attention_cell, tf.attention_keep[i], s.context, s.attention_hidden
        )
        context, weights, cumulative, ah = attend(i, ah, s, p.query, memory.memory, mask_bias, outputs)
        context = collect(context, memory, i)
        hidden_grad = partial(outputs.step_grad, "hidden", i)
        dh, dc = self.decoder_rnn_step(
            p.decoder, i, s.decoder_cell, tf.decoder_keep[i], ah, context, s.decoder_hidden, d_h_extra=hidden_grad
        )
        return DecoderState(ah, ac, dh, dc, weights, cumulative, context)

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
        attend = self.attention_step.begin(self.attention, tf, memory.size(0))
        steps = tf.prenet_out.size(0)
        p = self.step_projections(tf.prenet_out)
        # Under autocast memory is cast to the compute dtype once here, not every step; the context
        # comes in the attention step's dtype, which its consumers' gradients keep.
        dtype = compute_dtype(memory)
        outputs = StepOutputs(self.routed_outputs())
        context_dtype = self.attention_step.context_dtype(memory.dtype, dtype)
        deferred = deferred_memory(memory, steps, dtype, context_dtype, outputs)
        advance = partial(self.fast_step, p=p, memory=deferred, tf=tf, attend=attend, outputs=outputs)
        return self.run_steps(memory, mask_bias, layout, steps, advance, outputs.stack)

    def routed_outputs(self) -> frozenset[str]:
        """The stacked outputs whose gradients the steps' backwards add in themselves: the decoder's
        hidden states (if its LSTM cell takes them), and the attention step's (the contexts and the
        weights, for the fused one)."""
        hidden = frozenset({"hidden"}) if self.decoder_rnn_step.takes_stack_grad else frozenset()
        return hidden | self.attention_step.routed

    def held_bytes(self, steps: int, rows: int, text: int, dtype: torch.dtype) -> int:
        """The bytes the loop's autograd nodes keep as attributes, not saved tensors (so a saved-tensors
        hook misses them: model/graphs.loop_memory adds them), for `steps` steps of `rows` utterances of
        `text` symbols in `dtype`: the StepProjections' input rows and the attention step's own."""
        layers = (self.attention_rnn, self.decoder_rnn, self.attention.query_layer)
        widths = sum(w.size(1) for layer in layers for w in layer.parameters() if w.dim() == 2)
        rows_bytes = steps * rows * widths * torch.finfo(dtype).bits // 8
        return rows_bytes + self.attention_step.held_bytes(self.attention, rows, text, dtype)

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
