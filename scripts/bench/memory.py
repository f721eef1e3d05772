"""The decoder loop's activation memory, with and without recomputing the attention's energy chain.

The decoder loop holds, for the backward, a few tensors of every decoder step; at LJSpeech's text
lengths the attention's energy chain ([B, T_text, attention_dim] location features and tanh) is most
of them. This bench runs the teacher-forced decoder of a model preset (the plain loop of
model/decoder.py and the fast one of model/fast_decoder.py, each with
Tacotron2Config.recompute_attention off and on) over random memory and mels at two step counts,
and prints the memory each forward leaves held for its backward (training/held_memory.py, measured
on the CPU: the same tensors a GPU would hold). The difference between the two step counts, per
utterance and frame, is what every further frame costs; the rest is the batch's fixed part (weight
copies, the precomputed prenet term, the memory's projection).

    python -m scripts.bench.memory                    # full model, 8 rows, 150 symbols, 16 and 32 steps
    python -m scripts.bench.memory --preset small --text 60
"""

from __future__ import annotations

import argparse
import dataclasses

import torch

from model.config import Tacotron2Config
from model.decoder import Decoder
from model.fast_decoder import FastDecoder
from scripts.common import cpu_name, markdown_table
from training.held_memory import held_bytes
from training.hparams import load_hparams

DECODERS = {"plain": Decoder, "fast": FastDecoder}


def preset_config(preset: str) -> Tacotron2Config:
    """The model preset of hparams.yaml (its n_frames_per_step: 1 for full, as LJSpeech's)."""
    fields = {**load_hparams(f"model_preset={preset}")["model"], "n_symbols": 1}
    return Tacotron2Config.from_dict(fields)


def held_per_step(decoder: torch.nn.Module, rows: int, text: int, steps: tuple[int, int]) -> tuple[int, int]:
    """(bytes held after a forward of steps[0] decoder steps, bytes held per further utterance-frame)."""
    cfg_r = decoder.r
    memory = torch.randn(rows, text, decoder.attention.memory_layer.in_features)
    held = []
    for count in steps:
        mel = torch.randn(rows, decoder.n_mels, count * cfg_r)
        torch.manual_seed(0)
        outputs, size = held_bytes(lambda m=mel: decoder(memory, torch.zeros(rows, text), m))
        held.append(size)
        del outputs
    return held[0], (held[1] - held[0]) // (rows * (steps[1] - steps[0]) * cfg_r)


def measure(cfg: Tacotron2Config, rows: int, text: int, steps: tuple[int, int]) -> list[list[str]]:
    """The table's rows: each decoder with recompute off and on."""
    table = []
    for name, decoder_class in DECODERS.items():
        per_frame = {}
        for recompute in (False, True):
            torch.manual_seed(0)
            decoder = decoder_class(dataclasses.replace(cfg, recompute_attention=recompute)).train()
            fixed, per_frame[recompute] = held_per_step(decoder, rows, text, steps)
            cut = "" if not recompute else f"{100 * (1 - per_frame[True] / per_frame[False]):.1f} %"
            table.append([name, "on" if recompute else "off", f"{fixed / 2**20:.1f}", f"{per_frame[recompute]:,}", cut])
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=("tiny", "small", "full"), default="full", help="model preset (full)")
    parser.add_argument("--rows", type=int, default=8, help="utterances in the batch (default 8)")
    parser.add_argument("--text", type=int, default=150, help="symbols per utterance (default 150)")
    parser.add_argument("--steps", type=int, nargs=2, default=(16, 32), help="the two step counts (16 32)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cfg = preset_config(args.preset)
    print(
        f"{args.preset} model, {args.rows} rows x {args.text} symbols, r={cfg.n_frames_per_step}, "
        f"{args.steps[0]} and {args.steps[1]} decoder steps, float32, {cpu_name()}, torch {torch.__version__}"
    )
    header = [
        "decoder",
        "recompute_attention",
        f"MiB held at {args.steps[0]} steps",
        "bytes per further utterance-frame",
        "cut",
    ]
    print("\n".join(markdown_table(header, measure(cfg, args.rows, args.text, tuple(args.steps)))))


if __name__ == "__main__":
    main()
