"""The decoder loop on static per-shape buffers (model/graphs.py), on the CPU: the same buffers,
copies, autograd node and slicing that CUDA graphs replay, run eagerly. Against the plain reference
decoder in float64, outputs and every parameter gradient, r = 1 and 2 (and the attention fused, at
r = 2, Triton's interpreter running its kernels), several shapes reused in
random order (dummy rows, padded steps and padded text in play); the random state is untouched
by building the loops; a training run with cuda_graphs=true on the CPU trains like one without,
and that one (graph_bucket) like a plain one; and the capture plan's memory estimate for the full
model. The capture needs a GPU (tests/test_cuda.py)."""

import dataclasses
import random
import re

import pytest
import torch

from model import Tacotron2
from model.graphs import build_loop_graphs, loop_memory
from model.shapes import LoopShape
from tests.kit import float64_pass, make_batch, relative_error, tiny_config

SHAPES = [
    LoopShape(rows=5, frames=24, text=16),
    LoopShape(rows=7, frames=32, text=16),
    LoopShape(rows=4, frames=48, text=32),
]
BATCHES = {  # shape -> text lengths, mel lengths of a batch that fits it
    SHAPES[0]: ([4, 7, 2], [9, 13, 20]),
    SHAPES[1]: ([4, 7, 2, 5], [9, 13, 6, 27]),
    SHAPES[2]: ([20, 3], [40, 11]),
}


@pytest.mark.parametrize("r, fused", [(1, False), (2, False), (2, True)], ids=["r1", "r2", "r2-fused"])
def test_the_static_loop_equals_the_plain_decoder_in_float64_over_shapes_in_random_order(r, fused):
    plain = tiny_config(n_frames_per_step=r)
    fast = dataclasses.replace(plain, fast_decoder=True, fused_attention=fused)
    state = Tacotron2(plain).double().state_dict()
    model = Tacotron2(fast).double().train()
    model.load_state_dict(state)
    graphs = build_loop_graphs(model.decoder, SHAPES, torch.device("cpu"))
    assert not graphs.captured and sorted(graphs.loops) == sorted(SHAPES)
    order = [shape for shape in SHAPES for _ in range(2)]
    random.Random(r).shuffle(order)
    if fused:  # Triton's interpreter is slow: the shortest shape, reused
        order = [SHAPES[0], SHAPES[0]]
    for k, shape in enumerate(order):
        batch = make_batch(*BATCHES[shape], r, seed=k)
        want, want_grads = float64_pass(plain, state, batch, None, seed=k)
        got, got_grads = float64_pass(fast, state, batch, shape, seed=k, graphs=graphs, model=model)
        for name, a, b in zip(want._fields, got, want):
            assert a.shape == b.shape and relative_error(a, b) < 1e-12, (shape, name)
        for name, grad in want_grads.items():
            assert relative_error(got_grads[name], grad) < 1e-12, (shape, name)


def test_building_the_loops_leaves_the_random_state_alone():
    model = Tacotron2(tiny_config(n_frames_per_step=2, fast_decoder=True)).train()
    torch.manual_seed(5)
    before = torch.get_rng_state()
    build_loop_graphs(model.decoder, SHAPES, torch.device("cpu"))
    assert torch.equal(torch.get_rng_state(), before)


def test_bucketed_and_static_loop_runs_train_like_a_plain_one(tmp_path, demo_corpus, capsys):
    """The same tiny run three times: plain, with graph_bucket=16 (the bucketed decoder loop), and
    with cuda_graphs=true too (on the CPU every batch runs on its shape's static buffers, eagerly).
    The bucketed run's per-epoch losses agree with the plain one's to float32 rounding, and the
    static-buffer run's with the bucketed one's, tighter. (One test, so the bucketed run serves both
    comparisons.) The static run shows a bar over the shapes while it builds them (seconds each for
    the full model on a GPU) and logs how long that took."""
    import train
    from tests.kit import tiny
    from training.rundir import read_metrics

    losses = {}
    for name, extra in (
        ("plain", "graph_bucket=0"),
        ("bucketed", "graph_bucket=16,cuda_graphs=false"),
        ("static", "graph_bucket=16,cuda_graphs=true,progress=true"),
    ):
        out = tmp_path / name
        assert (
            train.main(["--hparams", tiny(out, f"epochs=2,validate_every=2,n_frames_per_step=4,{extra}", demo_corpus)])
            == 0
        )
        losses[name] = [(r["train_loss"], r.get("val_loss")) for r in read_metrics(out / "run")]
        logged = capsys.readouterr()
        if name == "static":
            line = re.search(
                r"decoder loop: (\d+) padded shapes \(graph_bucket=16\), static buffers, eager, built "
                r"in \d+\.\d s",
                logged.out,
            )
            assert line, logged.out
            assert re.search(rf"decoder graphs: +0%\|.*\| 0/{line[1]} ", logged.err), logged.err[-2000:]
        elif name == "bucketed":
            assert "padded shapes (graph_bucket=16), eager" in logged.out
    for reference, other, rel in (("plain", "bucketed", 1e-4), ("bucketed", "static", 1e-5)):
        for (a, va), (b, vb) in zip(losses[reference], losses[other]):
            assert a == pytest.approx(b, rel=rel) and (va is None) == (vb is None)
            assert va is None or va == pytest.approx(vb, rel=rel)


def test_the_memory_estimate_of_the_full_model_at_the_papers_capacity():
    """LJSpeech's longest shape at B0 = 16 (832 frames, 192 symbols), the full model in fp32,
    measured on the meta device: the static buffers hold the shape's inputs, outputs and
    gradients; the activations are what autograd keeps for backward, at least the attention's
    tanh [16, 192, 128] of every step, and the encoder memory that every step's attention saves
    counted once (2.9 GiB; it was 9.6 GiB when counted per step)."""
    model = Tacotron2(
        dataclasses.replace(
            tiny_config(),
            n_symbols=148,
            symbols_embedding_dim=512,
            encoder_embedding_dim=512,
            attention_rnn_dim=1024,
            decoder_rnn_dim=1024,
            prenet_dim=256,
            attention_dim=128,
            attention_location_n_filters=32,
            attention_location_kernel_size=31,
            postnet_embedding_dim=512,
            fast_decoder=True,
        )
    )
    shape = LoopShape(rows=16, frames=832, text=192)
    memory = loop_memory(model.decoder, shape)
    outputs = 4 * 16 * 832 * (80 + 1 + 192)  # mel, gate, alignments in fp32
    assert memory["static"] > 2 * outputs
    assert memory["activations"] > 832 * 16 * 192 * 128 * 4
    assert memory["activations"] < 4 * 2**30
