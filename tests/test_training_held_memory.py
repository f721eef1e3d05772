"""training/held_memory.py: the memory a forward leaves held for its backward, measured on the CPU;
with it, the cut that Tacotron2Config.recompute_attention makes in the decoder loop's activations
(scripts/bench/memory.py), which model/graphs.py's meta-device estimate must agree with."""

import dataclasses

import torch

from model.decoder import Decoder
from model.fast_decoder import FastDecoder
from model.graphs import loop_memory
from model.shapes import LoopShape
from scripts.bench.memory import held_per_step, preset_config
from training.held_memory import held_bytes, peak_bytes


def test_held_bytes_counts_what_is_kept_and_not_what_is_freed():
    kept, size = held_bytes(lambda: torch.ones(1000, dtype=torch.float64))
    assert size == 8000 and kept.numel() == 1000
    assert held_bytes(lambda: torch.ones(1000).mul(2).sum().item())[1] == 0
    x = torch.ones(1000, requires_grad=True)
    _, size = held_bytes(lambda: x.mul(2).tanh())  # the output, which tanh's backward also saves
    assert 4000 <= size < 4100


def test_peak_bytes_counts_what_was_held_at_once_freed_or_not():
    x = torch.ones(1000)
    assert 8000 <= peak_bytes(lambda: x.mul(2).mul(3).sum())[1] < 8100  # both products (4000 bytes each) at once
    assert peak_bytes(lambda: [torch.ones(1000) for _ in range(3)])[1] == 12000


def test_recompute_attention_cuts_the_decoder_loops_activation_memory_by_half():
    """The small preset at 60 symbols, both loops: every further utterance-frame holds under half the
    bytes with the energy chain recomputed (measured: 55 % less here, 55-62 % for the full model at
    LJSpeech's 150-192 symbols, docs/results.md)."""
    cfg = preset_config("small")
    for decoder_class in (Decoder, FastDecoder):
        per_frame = {}
        for recompute in (False, True):
            torch.manual_seed(0)
            decoder = decoder_class(dataclasses.replace(cfg, recompute_attention=recompute)).train()
            per_frame[recompute] = held_per_step(decoder, rows=4, text=60, steps=(4, 8))[1]
        assert per_frame[True] < 0.5 * per_frame[False], (decoder_class.__name__, per_frame)


def test_the_meta_estimate_agrees_with_the_measured_memory():
    """model/graphs.py's loop_memory (the meta device, each saved storage once) against the bytes a
    real forward holds, per further utterance-frame of the fast loop, with and without recompute."""
    cfg = dataclasses.replace(preset_config("small"), fast_decoder=True)
    for recompute in (False, True):
        torch.manual_seed(0)
        decoder = FastDecoder(dataclasses.replace(cfg, recompute_attention=recompute)).train()
        measured = held_per_step(decoder, rows=4, text=60, steps=(4, 8))[1]
        short, long = (loop_memory(decoder, LoopShape(rows=4, frames=f, text=60))["activations"] for f in (16, 32))
        estimated = (long - short) / (4 * 16)
        assert abs(estimated - measured) < 0.15 * measured, (recompute, estimated, measured)
