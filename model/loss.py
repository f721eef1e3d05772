"""Tacotron2 loss, MSE(mel) + MSE(postnet mel) + BCE(gate), under two normalisations.

`padded` is NVIDIA's (and the paper's) recipe: the mean over the whole padded tensor. Padded
frames hold zeros in both output and target (and a "stop" gate logit against a stop target), so
they add ~0 to the sum but count in the denominator: the more padding a batch has, the smaller its
loss. The value therefore depends on how batches were formed, which is why the paper validated
with random batching only. `valid` divides by the real frames only, so it measures the model
alone and is comparable across batching strategies. Both are always computed; `loss_norm`
chooses which one is backpropagated.

Packed blocks (BLoad): given the batch's Packing, the real frames come from the packing table
(not from zeros, which look like silence), so `valid` ignores every padding frame: the gaps that
round utterances up to multiples of r and the block ends. The gate target holds 1 at each
utterance's last frame (data/collate.py), and guided attention is taken per utterance.
"""

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from .batch import Batch
from .packing import packed_guided_attention
from .shapes import ceil_div
from .tacotron2 import Tacotron2Output

LOSS_NORMS = ("valid", "padded")


@dataclass
class LossParts:
    """One normalisation's total and its parts (detached: for logging)."""

    total: torch.Tensor
    mel: torch.Tensor
    mel_postnet: torch.Tensor
    gate: torch.Tensor


@dataclass
class LossTerms:
    loss: torch.Tensor  # the selected total (+ weighted guided attention), with its graph: backprop this
    padded: LossParts
    valid: LossParts
    guided_attention: torch.Tensor  # detached; 0 unless the term is switched on

    def to_dict(self) -> dict[str, float]:
        """Every term as a float under "<norm>/<part>" keys, read with a single device sync."""
        keys, values = [], []
        for norm in LOSS_NORMS:
            for part, value in vars(getattr(self, norm)).items():
                keys.append(f"{norm}/{part}")
                values.append(value)
        keys.append("guided_attention")
        values.append(self.guided_attention)
        return dict(zip(keys, torch.stack(values).tolist()))


class Tacotron2Loss:
    """MSE(mel) + MSE(postnet) + BCE(gate), plus an optional guided-attention term.

    `guided_attention` > 0 adds that weight times the diagonal-guide penalty of Tachibana et al.
    (2018): attention far from the text/time diagonal is penalised, which makes a small model on
    little data learn to align in hundreds rather than thousands of steps. Off (0) by default,
    as in the paper's recipe; the CPU demo switches it on.
    """

    def __init__(
        self,
        loss_norm: str = "valid",
        guided_attention: float = 0.0,
        guided_attention_sigma: float = 0.2,
        gate_pos_weight: float = 1.0,
    ):
        if loss_norm not in LOSS_NORMS:
            raise ValueError(f"loss_norm={loss_norm!r}; allowed: {', '.join(LOSS_NORMS)}")
        if guided_attention < 0 or guided_attention_sigma <= 0 or gate_pos_weight <= 0:
            raise ValueError(
                f"guided_attention={guided_attention} must be >= 0, guided_attention_sigma="
                f"{guided_attention_sigma} > 0 and gate_pos_weight={gate_pos_weight} > 0"
            )
        self.loss_norm = loss_norm
        self.ga_weight, self.ga_sigma = guided_attention, guided_attention_sigma
        # Weight of the "stop" frames in the gate BCE: an utterance has one real stop frame against
        # hundreds of "go on" frames, so a short training run may never learn to stop (1 = NVIDIA's).
        self.gate_pos_weight = gate_pos_weight

    def __call__(self, out: Tacotron2Output, batch: Batch) -> LossTerms:
        """The model's output against its Batch (model/batch.py): the targets batch.mel and
        batch.gate, the real frames from its lengths (or its packing table, for blocks); the
        decoder's frames per step from the output (Tacotron2Output.n_frames_per_step)."""
        mel_target, gate_target = batch.mel, batch.gate
        if mel_target.shape != out.mel.shape or gate_target.shape != out.gate.shape:
            raise ValueError(
                f"target shapes mel {tuple(mel_target.shape)}, gate {tuple(gate_target.shape)} "
                f"do not match the output's {tuple(out.mel.shape)}, {tuple(out.gate.shape)}"
            )
        real = batch.frame_mask().to(mel_target.dtype)  # [B, T]
        n_mels = mel_target.size(1)
        # Each part as a per-frame sum [B, T] and the number of values per frame.
        per_frame = {
            "mel": ((out.mel - mel_target).pow(2).sum(1), n_mels),
            "mel_postnet": ((out.mel_postnet - mel_target).pow(2).sum(1), n_mels),
            # pos_weight as a per-frame weight (the same for 0/1 targets), computed on the device:
            # a pos_weight tensor made from the Python number would be a host-to-device copy per call
            "gate": (
                F.binary_cross_entropy_with_logits(
                    out.gate,
                    gate_target,
                    reduction="none",
                    weight=gate_target * (self.gate_pos_weight - 1) + 1 if self.gate_pos_weight != 1 else None,
                ),
                1,
            ),
        }
        n_all, n_real = real.numel(), real.sum()
        padded = {k: f.sum() / (n_all * w) for k, (f, w) in per_frame.items()}
        valid = {k: (f * real).sum() / (n_real * w) for k, (f, w) in per_frame.items()}
        totals = {"padded": sum(padded.values()), "valid": sum(valid.values())}
        loss = totals[self.loss_norm]
        guided = torch.zeros((), device=loss.device)
        if self.ga_weight > 0:
            guided = self._guided_attention(out, batch)
            loss = loss + self.ga_weight * guided
        return LossTerms(
            loss=loss,
            padded=_parts(totals["padded"], padded),
            valid=_parts(totals["valid"], valid),
            guided_attention=guided.detach(),
        )

    def _guided_attention(self, out: Tacotron2Output, batch: Batch) -> torch.Tensor:
        """The diagonal-guide penalty, per utterance (packed blocks: from the packing table)."""
        r = out.n_frames_per_step
        if batch.packing is None:
            return guided_attention_penalty(
                out.alignments, batch.text_lengths, ceil_div(batch.mel_lengths, r), self.ga_sigma
            )
        return packed_guided_attention(
            out.alignments, batch.packing, batch.text_lengths, batch.mel_lengths, r, self.ga_sigma
        )


def guided_attention_penalty(
    alignments: torch.Tensor, text_lengths: torch.Tensor, step_lengths: torch.Tensor, sigma: float
) -> torch.Tensor:
    """Attention mass off the diagonal per real decoder step: sum of A * (1 - exp(-(n/N - t/T)^2 /
    (2 sigma^2))) over real cells, divided by the real steps, so it lies in [0, 1) whatever the
    text length. alignments [B, steps, T_text]; padded cells (beyond either length) do not count.
    """
    steps, symbols = alignments.shape[1:]
    t = torch.arange(steps, device=alignments.device).unsqueeze(0) / step_lengths.unsqueeze(1)  # [B, steps]
    n = torch.arange(symbols, device=alignments.device).unsqueeze(0) / text_lengths.unsqueeze(1)  # [B, T_text]
    guide = 1.0 - torch.exp(-(n.unsqueeze(1) - t.unsqueeze(2)).pow(2) / (2 * sigma**2))
    real = (torch.arange(steps, device=alignments.device) < step_lengths.unsqueeze(1)).unsqueeze(2) & (
        torch.arange(symbols, device=alignments.device) < text_lengths.unsqueeze(1)
    ).unsqueeze(1)
    return (alignments * guide * real).sum() / step_lengths.sum()


def _parts(total: torch.Tensor, parts: dict[str, torch.Tensor]) -> LossParts:
    return LossParts(total.detach(), **{k: v.detach() for k, v in parts.items()})
