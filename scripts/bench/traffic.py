"""The bytes each decoder step moves, counted on the meta device at the full model's size: the step's
floor in memory traffic, fixed and per utterance, without a GPU.

A training step's decoder loop is a chain of small operations, and past the launch costs (the op
count) each is bound by the memory it reads and writes: the loop's weights once a step (fixed), and
per utterance its states, its text-long tensors (memory, processed memory, the attention's energy
chain) and their gradients. training/op_count.py adds up what each compute operation reads and
writes; run on the meta device (no memory, no arithmetic) the full model costs nothing to count.
For each decoder variant this prints the operations and the megabytes of a further decoder step,
forward and backward, at two batch sizes, the line through them (MB fixed per step + MB per
utterance-step) and the time that traffic takes at --bandwidth (H100 SXM's 3.35 TB/s by default)
at B0 16 and 64: a floor, as if no operation's inputs were still in a cache. In float32 (autocast
has no meta device: bf16 halves what the step products read, not the rest).

    python -m scripts.bench.traffic                          # the full model, 192 symbols of text
    python -m scripts.bench.traffic --text 100 --bandwidth 4.8e12
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence

import torch

from model.config import Tacotron2Config
from model.decoder import Decoder
from model.fast_decoder import FastDecoder
from scripts.common import markdown_table
from training.op_count import OpCounts, count_ops

#: The decoder variants (Tacotron2Config fields over the defaults); "plain" is model/decoder.py
VARIANTS = {
    "plain": {},
    "fast": {"fast_decoder": True},
    "fast+recompute": {"fast_decoder": True, "recompute_attention": True},
    "fast+fused": {"fast_decoder": True, "fused_attention": True, "fused_lstm": True},
    "fast+split": {"fast_decoder": True, "fused_attention": True, "split_lstm": True},
}
ROWS = (16, 64)  # the batch sizes the line is drawn through (B0 16 and 64's typical rows)
STEPS = (4, 8)  # decoder steps of the two passes whose difference is per step


@dataclasses.dataclass(frozen=True)
class StepTraffic:
    """One further decoder step: compute operations and bytes moved, forward and backward."""

    ops_forward: float
    ops_backward: float
    bytes_forward: float
    bytes_backward: float

    @property
    def bytes(self) -> float:
        return self.bytes_forward + self.bytes_backward


def decoder_pass(cfg: Tacotron2Config, rows: int, text: int, steps: int) -> tuple[OpCounts, OpCounts]:
    """The counts of one teacher-forced forward and its backward on the meta device (train mode)."""
    torch.manual_seed(0)
    decoder = (FastDecoder if cfg.fast_decoder else Decoder)(cfg).train().to("meta")
    # not a leaf, as the encoder's output is
    memory = torch.empty(rows, text, cfg.encoder_embedding_dim, device="meta", requires_grad=True).clone()
    mel = torch.empty(rows, cfg.n_mel_channels, steps * cfg.n_frames_per_step, device="meta")
    outputs, forward = count_ops(decoder, memory, torch.zeros(rows, text, device="meta"), mel)
    _, backward = count_ops(sum(o.sum() for o in outputs).backward)
    return forward, backward


def step_traffic(cfg: Tacotron2Config, rows: int, text: int, steps: Sequence[int] = STEPS) -> StepTraffic:
    """What one more decoder step adds (the difference of two passes: the per-batch work cancels)."""
    (f0, b0), (f1, b1) = (decoder_pass(cfg, rows, text, n) for n in steps)
    n = steps[1] - steps[0]
    return StepTraffic(
        (f1.compute - f0.compute) / n,
        (b1.compute - b0.compute) / n,
        (f1.moved - f0.moved) / n,
        (b1.moved - b0.moved) / n,
    )


def line(cfg: Tacotron2Config, text: int, rows: Sequence[int] = ROWS) -> tuple[StepTraffic, float, float]:
    """The step at rows[0], and the bytes per step as fixed + per utterance (a line through both rows)."""
    small, large = (step_traffic(cfg, r, text) for r in rows)
    per_row = (large.bytes - small.bytes) / (rows[1] - rows[0])
    return small, small.bytes - per_row * rows[0], per_row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", type=int, default=192, help="symbols of text per utterance (LJSpeech's longest)")
    parser.add_argument("--bandwidth", type=float, default=3.35e12, help="memory bandwidth, bytes/s (H100 SXM)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, of: " + ", ".join(VARIANTS))
    args = parser.parse_args(argv)
    base = Tacotron2Config(n_symbols=148)
    rows = []
    for name in args.variants.split(","):
        cfg = dataclasses.replace(base, **VARIANTS[name])
        step, fixed, per_row = line(cfg, args.text)
        floor = [1e6 * (fixed + per_row * b) / args.bandwidth for b in ROWS]
        rows.append(
            [
                name,
                f"{step.ops_forward:g} + {step.ops_backward:g}",
                f"{step.bytes_forward / 1e6:.1f} + {step.bytes_backward / 1e6:.1f}",
                f"{fixed / 1e6:.1f}",
                f"{per_row / 1e6:.3f}",
                *(f"{us:.0f}" for us in floor),
            ]
        )
    gb = args.bandwidth / 1e12
    print(f"Bytes moved per decoder step, full model, {args.text} symbols of text, float32, train mode")
    print(
        "\n".join(
            markdown_table(
                [
                    "variant",
                    "ops fwd + bwd",
                    f"MB fwd + bwd (B {ROWS[0]})",
                    "MB fixed",
                    "MB per utterance",
                    *(f"us at {gb:g} TB/s, B {b}" for b in ROWS),
                ],
                rows,
            )
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
