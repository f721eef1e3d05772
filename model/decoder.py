"""The autoregressive Tacotron2 decoder: prenet, attention LSTM, attention, decoder LSTM, projections.

With a reduction factor r (n_frames_per_step) each decoder step emits r frames; the prenet sees the
last frame of the previous group. The gate is predicted per frame (r logits a step), so the gate
target needs no subsampling and inference can stop at the exact frame inside the last group.
The Python loop over decoder steps dominates training time, so everything that does not depend
on the previous step is done once, outside the loop: the prenet over the teacher-forced frames,
the memory projection, the folded location filter, the dropout masks of all steps, and the mel
and gate projections of all steps.

Packed blocks (BLoad, model/packing.py): given a StepLayout, the decoder runs whole blocks of
several utterances and, at each step where an utterance starts, resets its recurrent state (both
LSTMs, the attention context, the attention weights and cumulative weights) to the zeros it starts
from alone, and feeds the prenet the zero "go" frame; mask_bias is then per step, so each step
attends only to its own utterance's symbols. Without a layout nothing of this runs.

This is the reference implementation; model/fast_decoder.py (Tacotron2Config.fast_decoder) computes
the same teacher-forced pass with fewer, bigger GEMMs and the recurrent weights' gradients
deferred to one GEMM after the loop, and shares teacher_forcing/project with it.
"""

import warnings
from collections.abc import Callable, Sequence
from functools import partial
from typing import NamedTuple

import torch
from torch import nn

from .attention import LocationSensitiveAttention
from .config import Tacotron2Config
from .layers import Prenet, linear
from .packing import StepLayout


class DecoderState(NamedTuple):
    attention_hidden: torch.Tensor
    attention_cell: torch.Tensor
    decoder_hidden: torch.Tensor
    decoder_cell: torch.Tensor
    weights: torch.Tensor
    cumulative_weights: torch.Tensor
    context: torch.Tensor


class TeacherForcing(NamedTuple):
    """The step-independent inputs of a teacher-forced pass (Decoder.teacher_forcing)."""

    prenet_out: torch.Tensor  # [steps, B, prenet_dim]
    processed_memory: torch.Tensor  # [B, T_text, attention_dim]
    location_matrix: torch.Tensor  # [2 * kernel_size, attention_dim]
    attention_keep: list[torch.Tensor | None]  # per step [B, attention_rnn_dim] or None
    decoder_keep: list[torch.Tensor | None]  # per step [B, decoder_rnn_dim] or None


def reset_keep(layout: StepLayout, dtype: torch.dtype) -> torch.Tensor:
    """[steps, B, 1]: 0 where a row restarts at that step (its state goes back to zeros), else 1."""
    return (~layout.resets).t().unsqueeze(2).to(dtype)


#: Stacks a named list of per-step tensors [B, ...] into [B, steps, ...] (Decoder.project's names:
#: "hidden", "contexts", "alignments").
Stack = Callable[[str, list[torch.Tensor]], torch.Tensor]


def _stack(_name: str, tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack(tensors, 1)


class Decoder(nn.Module):
    def __init__(self, cfg: Tacotron2Config):
        super().__init__()
        self.n_mels = cfg.n_mel_channels
        self.r = cfg.n_frames_per_step
        self.p_attention_dropout = cfg.p_attention_dropout
        self.p_decoder_dropout = cfg.p_decoder_dropout
        memory_dim = cfg.encoder_embedding_dim
        self.prenet = Prenet(cfg.n_mel_channels, [cfg.prenet_dim, cfg.prenet_dim], cfg.prenet_dropout)
        self.attention_rnn = nn.LSTMCell(cfg.prenet_dim + memory_dim, cfg.attention_rnn_dim)
        self.attention = LocationSensitiveAttention(
            cfg.attention_rnn_dim,
            memory_dim,
            cfg.attention_dim,
            cfg.attention_location_n_filters,
            cfg.attention_location_kernel_size,
            cfg.recompute_attention,
        )
        self.decoder_rnn = nn.LSTMCell(cfg.attention_rnn_dim + memory_dim, cfg.decoder_rnn_dim)
        self.projection = linear(cfg.decoder_rnn_dim + memory_dim, cfg.n_mel_channels * self.r)
        self.gate_layer = linear(cfg.decoder_rnn_dim + memory_dim, self.r, gain="sigmoid")

    def initial_state(self, memory: torch.Tensor) -> DecoderState:
        b, t_text, memory_dim = memory.shape
        zeros = memory.new_zeros
        return DecoderState(
            zeros(b, self.attention_rnn.hidden_size),
            zeros(b, self.attention_rnn.hidden_size),
            zeros(b, self.decoder_rnn.hidden_size),
            zeros(b, self.decoder_rnn.hidden_size),
            zeros(b, t_text),
            zeros(b, t_text),
            zeros(b, memory_dim),
        )

    def step(
        self,
        prenet_out: torch.Tensor,
        s: DecoderState,
        memory: torch.Tensor,
        processed_memory: torch.Tensor,
        location_matrix: torch.Tensor,
        mask_bias: torch.Tensor,
        attention_keep: torch.Tensor | None = None,
        decoder_keep: torch.Tensor | None = None,
    ) -> DecoderState:
        """Advance one decoder step; its output features are cat(decoder_hidden, context).

        attention_keep / decoder_keep are this step's dropout masks for the LSTM hidden states
        (None: no dropout), drawn for all steps at once by `_dropout_masks`.
        """
        ah, ac = self.attention_rnn(torch.cat((prenet_out, s.context), 1), (s.attention_hidden, s.attention_cell))
        if attention_keep is not None:
            ah = ah * attention_keep
        weights_cat = torch.stack((s.weights, s.cumulative_weights), 1)
        context, weights = self.attention(ah, memory, processed_memory, weights_cat, location_matrix, mask_bias)
        dh, dc = self.decoder_rnn(torch.cat((ah, context), 1), (s.decoder_hidden, s.decoder_cell))
        if decoder_keep is not None:
            dh = dh * decoder_keep
        return DecoderState(ah, ac, dh, dc, weights, s.cumulative_weights + weights, context)

    def _dropout_masks(self, steps: int, like: torch.Tensor, size: int, p: float) -> list[torch.Tensor | None]:
        """Inverted-dropout masks for every step, drawn in one RNG call (per-step calls cost more)."""
        if not self.training or p == 0.0:
            return [None] * steps
        keep = like.new_empty(steps, like.size(0), size).bernoulli_(1.0 - p).div_(1.0 - p)
        return list(keep.unbind(0))

    def teacher_forcing(
        self, memory: torch.Tensor, mel: torch.Tensor, layout: StepLayout | None = None
    ) -> TeacherForcing:
        """Everything of a teacher-forced pass that does not depend on the previous step, in the
        order the random draws are made (prenet dropout, then the LSTM dropout masks)."""
        b, n_mels, t = mel.shape
        steps = t // self.r
        # Input of step s is the last frame of group s - 1; step 0 gets an all-zero "go" frame.
        last_frames = mel.transpose(1, 2).reshape(b, steps, self.r * n_mels)[:, :-1, -n_mels:]
        inputs = torch.cat((mel.new_zeros(b, 1, n_mels), last_frames), 1)
        if layout is not None:  # every utterance of a block starts from the zero "go" frame
            inputs = inputs.masked_fill(layout.resets.unsqueeze(2), 0.0)
        prenet_out = self.prenet(inputs.transpose(0, 1))  # [steps, B, prenet_dim]
        processed_memory = self.attention.memory_layer(memory)
        location_matrix = self.attention.location_matrix()
        attention_keep = self._dropout_masks(steps, memory, self.attention_rnn.hidden_size, self.p_attention_dropout)
        decoder_keep = self._dropout_masks(steps, memory, self.decoder_rnn.hidden_size, self.p_decoder_dropout)
        return TeacherForcing(prenet_out, processed_memory, location_matrix, attention_keep, decoder_keep)

    def project(
        self,
        hidden: list[torch.Tensor],
        contexts: list[torch.Tensor],
        alignments: list[torch.Tensor],
        stack: Stack | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-step decoder_hidden, context and weights -> mel [B, n_mels, T], gate [B, T] and
        alignments [B, steps, T_text], projected for all steps at once; `stack` (name, tensors) stacks
        each list along dimension 1 (torch.stack unless the caller's, e.g. the fast loop's)."""
        stack = stack or _stack
        feats = torch.cat((stack("hidden", hidden), stack("contexts", contexts)), 2)
        b, steps = feats.shape[:2]
        mel_out = self.projection(feats).view(b, steps * self.r, self.n_mels).transpose(1, 2)
        gate = self.gate_layer(feats).view(b, steps * self.r)
        return mel_out, gate, stack("alignments", alignments)

    def forward(
        self, memory: torch.Tensor, mask_bias: torch.Tensor, mel: torch.Tensor, layout: StepLayout | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Teacher forcing. mel [B, n_mels, T] with T a multiple of r.

        Packed blocks: layout says where utterances start, and mask_bias is per step,
        [T / r, B, T_text] (model/packing.step_mask_bias).

        Returns mel [B, n_mels, T], gate logits [B, T], alignments [B, T / r, T_text].
        """
        tf = self.teacher_forcing(memory, mel, layout)
        advance = partial(self.teacher_step, memory=memory, tf=tf, inputs=tf.prenet_out.unbind(0))
        return self.run_steps(memory, mask_bias, layout, tf.prenet_out.size(0), advance)

    def teacher_step(
        self,
        i: int,
        s: DecoderState,
        mask_bias: torch.Tensor,
        *,
        memory: torch.Tensor,
        tf: TeacherForcing,
        inputs: Sequence[torch.Tensor],
    ) -> DecoderState:
        """Step i of a teacher-forced pass (inputs: tf.prenet_out's steps)."""
        return self.step(
            inputs[i],
            s,
            memory,
            tf.processed_memory,
            tf.location_matrix,
            mask_bias,
            tf.attention_keep[i],
            tf.decoder_keep[i],
        )

    def run_steps(
        self,
        memory: torch.Tensor,
        mask_bias: torch.Tensor,
        layout: StepLayout | None,
        steps: int,
        advance: Callable[..., DecoderState],
        stack: Stack | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The teacher-forced loop of both decoders: `steps` calls of advance(i, state, mask_bias)
        from the zero state, packed blocks reset branch-free at every step (x * 1 is exact; no host
        read), then the projections of all steps (`stack`: project's)."""
        keep = None if layout is None else reset_keep(layout, memory.dtype)
        step_bias = [mask_bias] * steps if layout is None else mask_bias.unbind(0)
        s = self.initial_state(memory)
        hidden: list[torch.Tensor] = []
        contexts: list[torch.Tensor] = []
        alignments: list[torch.Tensor] = []
        for i in range(steps):
            if keep is not None:
                s = DecoderState(*(v * keep[i] for v in s))
            s = advance(i, s, step_bias[i])
            hidden.append(s.decoder_hidden)
            contexts.append(s.context)
            alignments.append(s.weights)
        return self.project(hidden, contexts, alignments, stack)

    @torch.no_grad()
    def inference(
        self, memory: torch.Tensor, mask_bias: torch.Tensor, max_steps: int, gate_threshold: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Free-running decoding until every item's gate fires (or max_steps).

        Only the prenet applies dropout here (as at synthesis in eval mode), whatever the mode.

        Returns mel [B, n_mels, T], gate logits [B, T], alignments [B, steps, T_text] and the
        lengths [B]: one past each item's first frame with sigmoid(gate) > gate_threshold.
        """
        b = memory.size(0)
        logit_threshold = torch.logit(torch.tensor(gate_threshold)).item()
        processed_memory = self.attention.memory_layer(memory)
        location_matrix = self.attention.location_matrix()
        s = self.initial_state(memory)
        frame = memory.new_zeros(b, self.n_mels)
        lengths = torch.full((b,), -1, dtype=torch.long, device=memory.device)
        frames_in_step = torch.arange(1, self.r + 1, device=memory.device)
        mels, gates, alignments = [], [], []
        for step in range(max_steps):
            s = self.step(self.prenet(frame), s, memory, processed_memory, location_matrix, mask_bias)
            feats = torch.cat((s.decoder_hidden, s.context), 1)
            out, gate = self.projection(feats), self.gate_layer(feats)
            mels.append(out)
            gates.append(gate)
            alignments.append(s.weights)
            stop = gate > logit_threshold  # [B, r]
            first = torch.where(stop, frames_in_step, self.r + 1).min(1).values  # 1-based
            lengths = torch.where((lengths < 0) & (first <= self.r), step * self.r + first, lengths)
            if bool((lengths >= 0).all()):
                break
            frame = out[:, -self.n_mels :]
        else:
            warnings.warn(
                f"Tacotron2 inference reached max_decoder_steps={max_steps} "
                f"({max_steps * self.r} frames) before the gate said stop; the output is "
                "truncated (raise max_decoder_steps or check the alignment)",
                RuntimeWarning,
            )
            lengths = torch.where(lengths < 0, max_steps * self.r, lengths)
        mel = torch.stack(mels, 1).view(b, -1, self.n_mels).transpose(1, 2)
        return mel, torch.stack(gates, 1).view(b, -1), torch.stack(alignments, 1), lengths
