"""model/ops/attention_step.py's two Triton kernels (run by Triton's interpreter on the CPU: tests/conftest.py)
against model/attention.py's query layer and energy chain: outputs, the query layer's row and every
input's gradient in float64, over texts
walked in one chunk and in several, masked tails, sizes that are not powers of two and a memory wider
than one column block; float32 close to float32; bf16 inputs (autocast's) within 1 % of float32; the
meta device (model/graphs.loop_memory) keeping less than the unfused loop; and where it cannot run."""

import dataclasses

import pytest
import torch

from model import Tacotron2Config
from model.attention import LocationSensitiveAttention
from model.config import FUSED_SWITCHES, ModelConfigError
from model.fast_decoder import FastDecoder
from model.graphs import loop_memory
from model.ops.attention_step import attend, scoring_matrix
from model.ops.support import unavailable
from model.shapes import LoopShape
from tests.kit import record_precisions, relative_error, tiny_config

#: (rows, text, memory_dim, attention_dim, kernel_size, chunk): one chunk; three chunks and two memory
#: column blocks (memory_dim 80 > 64); attention_dim and text not powers of two.
SIZES = [(3, 11, 24, 16, 5, 64), (2, 37, 80, 20, 7, 16)]
#: The attention LSTM's width: two of the kernels' 64-wide blocks of it, the second one masked
QUERY_DIM = 72


def inputs(rows: int, text: int, memory_dim: int, dim: int, kernel_size: int, dtype=torch.float64, seed: int = 0):
    """A random attention layer and one step's inputs; row 1's text ends early (masked tail)."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    layer = LocationSensitiveAttention(QUERY_DIM, memory_dim, dim, 4, kernel_size).to(dtype)

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_()

    mask = torch.zeros(rows, text, dtype=dtype)
    mask[1, text - 4 :] = float("-inf")
    prev = torch.rand(rows, text, generator=g, dtype=dtype).requires_grad_()
    cum = (3 * torch.rand(rows, text, generator=g, dtype=dtype)).requires_grad_()
    # the attention LSTM's hidden state and the query's precomputed term
    ah, pre = rand(rows, QUERY_DIM), rand(rows, dim)
    return layer, (ah, pre, rand(rows, text, memory_dim), rand(rows, text, dim), prev, cum, mask)


def plain(layer, ah, pre, memory, pm, prev, cum, mask):
    q = pre + layer.query_layer(ah)
    context, weights = layer.energy_chain(q, memory, pm, torch.stack((prev, cum), 1), layer.location_matrix(), mask)
    return context, weights, cum + weights


def fused(layer, ah, pre, memory, pm, prev, cum, mask, chunk=64, row=None):
    """attend with the query layer's weight in the precomputed term's dtype (the fast loop's compute dtype)."""
    weight = layer.query_layer.weight.detach().to(pre.dtype)
    row = ah.new_empty(ah.shape, dtype=pre.dtype) if row is None else row
    scoring = scoring_matrix(layer.location_matrix(), layer.v.weight)
    context, weights, cumulative, ah_copy = attend(ah, weight, pre, row, memory, pm, prev, cum, scoring, mask, chunk)
    assert torch.equal(ah_copy, ah)
    return context, weights, cumulative


def outputs_and_grads(run, layer, tensors, chunk=None):
    """The three outputs and the gradients of every differentiable input and parameter."""
    extra = {} if chunk is None else {"chunk": chunk}
    out = run(layer, *tensors, **extra)
    g = torch.Generator().manual_seed(7)
    seeds = [torch.randn(o.shape, generator=g, dtype=torch.float64).to(o) for o in out]  # any dtype: the same draws
    wrt = [t for t in tensors if t.requires_grad] + list(layer.parameters())
    wrt = [t for t in wrt if t is not layer.query_layer.weight and t is not layer.memory_layer.weight]
    return out, torch.autograd.grad(out, wrt, seeds)


@pytest.mark.parametrize("size", SIZES, ids=["one-chunk", "three-chunks"])
def test_the_fused_step_equals_the_energy_chain_in_float64(size):
    *shape, chunk = size
    layer, tensors = inputs(*shape)
    want, want_grads = outputs_and_grads(plain, layer, tensors)
    got, got_grads = outputs_and_grads(fused, layer, tensors, chunk)
    for a, b in (*zip(got, want), *zip(got_grads, want_grads)):
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-13)
    assert torch.equal(got[1][1, -4:], torch.zeros(4, dtype=torch.float64))  # the masked tail gets no weight
    row = torch.full((tensors[0].size(0), QUERY_DIM + 5), float("nan"), dtype=torch.float64)
    fused(layer, *tensors, chunk=chunk, row=row[:, 2 : 2 + QUERY_DIM])  # a row inside a wider buffer
    assert torch.equal(row[:, 2 : 2 + QUERY_DIM], tensors[0].detach()) and row[:, :2].isnan().all()


@pytest.mark.parametrize(
    ("programs", "kernel_size"),
    [(132, 7), (132, 31), (4, 7), (1, 7)],
    ids=["split", "split-halos-over-slices", "two-chunks-a-slice", "one-program-a-row"],
)
def test_memory_walked_in_many_narrow_tiles_and_any_split_is_the_same_in_float64(programs, kernel_size, monkeypatch):
    """At the full model's sizes a row's memory is walked in tiles of 16 symbols by every column; here
    in tiles of 256 // 128 = 2 symbols (19 of them for 37 symbols), with masked columns (80 in a
    128-wide tile). The forward's launches split each row into text slices (3 of 13 symbols, each
    walked as one chunk of 16 whose tail is the next slice's) and column slices (32 columns, 8 symbols
    a tile; the third half masked) as far as the aim (PROGRAMS) allows; with an aim of 4, 2 slices of
    19 symbols (chunks of 16 and 3) and 2 column slices of 64; with an aim of 1, one program a row
    walks its chunks (16, 16, 5) and every column. The backward's launches split the same text slices
    (the location filter's gradient over halos of (K - 1) / 2 symbols each side: 15 with K 31, wider
    than a slice), the attention's columns (16 each) and the hidden units (64 each). (The
    kernel module is named, not imported: model/ops/ imports it on first use.)"""
    for tile in ("MEMORY_TILE", "CONTEXT_TILE"):
        monkeypatch.setattr(f"model.ops.attention_kernels.{tile}", 256)
    monkeypatch.setattr("model.ops.attention_kernels.PROGRAMS", programs)
    *shape, _, chunk = SIZES[1]
    layer, tensors = inputs(*shape, kernel_size, seed=5)
    want, want_grads = outputs_and_grads(plain, layer, tensors)
    got, got_grads = outputs_and_grads(fused, layer, tensors, chunk)
    for a, b in (*zip(got, want), *zip(got_grads, want_grads)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-13)


def test_a_broadcast_precomputed_term_is_read_as_it_is():
    """The fast loop's query layer has no bias: its precomputed term is zeros broadcast over rows."""
    layer, tensors = inputs(*SIZES[0][:5])
    ah, pre, *rest = tensors
    zeros = torch.zeros((), dtype=torch.float64).expand(pre.shape)
    for a, b in zip(fused(layer, ah, zeros, *rest), fused(layer, ah, torch.zeros_like(pre), *rest)):
        assert torch.equal(a, b)


def test_float32_is_close_and_bf16_inputs_are_within_one_percent():
    layer, tensors = inputs(*SIZES[1][:5], dtype=torch.float32, seed=3)
    want, want_grads = outputs_and_grads(plain, layer, tensors)
    got, got_grads = outputs_and_grads(fused, layer, tensors, 16)
    for a, b in (*zip(got, want), *zip(got_grads, want_grads)):
        assert relative_error(a, b) < 1e-5
    # autocast hands the step a bf16 query layer (its weight, precomputed term and row), memory and
    # processed memory; the kernels compute in float32 and give the context in the state's dtype
    ah, pre, memory, pm, prev, cum, mask = tensors
    half = [ah, *(t.detach().bfloat16().requires_grad_() for t in (pre, memory, pm)), prev, cum, mask]
    low, low_grads = outputs_and_grads(fused, layer, half, 16)
    assert low[0].dtype == torch.float32
    assert [g.dtype for g in low_grads[:4]] == [torch.float32] + [torch.bfloat16] * 3
    for a, b in (*zip(low, want), *zip(low_grads, want_grads)):
        assert relative_error(a.float(), b) < 1e-2


@pytest.mark.parametrize(("matmul", "want"), [("highest", "tf32x3"), ("high", "tf32")])
def test_float32_products_take_torchs_matmul_precision(matmul, want, monkeypatch):
    """The kernels with products (the forward's energies, both backward launches) are launched at
    support.input_precision's choice, and the result is the same."""
    forward, backward = "model.ops.attention_kernels", "model.ops.attention_backward_kernels"
    backward_kernels = ["attention_chain_backward_kernel", "attention_filter_backward_kernel"]
    layer, tensors = inputs(*SIZES[0][:5], dtype=torch.float32, seed=5)
    with (
        record_precisions(monkeypatch, forward, ["attention_energies_kernel"], matmul) as launched_forward,
        record_precisions(monkeypatch, backward, backward_kernels, matmul) as launched_backward,
    ):
        got, got_grads = outputs_and_grads(fused, layer, tensors)
    assert launched_forward == [want] and launched_backward == [want, want]
    want_out, want_grads = outputs_and_grads(plain, layer, tensors)
    for a, b in (*zip(got, want_out), *zip(got_grads, want_grads)):
        assert relative_error(a, b) < 1e-5


def test_on_the_meta_device_the_fused_loop_keeps_less():
    """The fake kernels give model/graphs.py's estimate its shapes: the fused loop keeps only the step's
    inputs, so its activations per shape are below the plain fast loop's."""
    cfg = tiny_config(fast_decoder=True)
    shape = LoopShape(rows=4, frames=32, text=16)
    kept = {}
    for flag in (False, True):
        torch.manual_seed(0)
        kept[flag] = loop_memory(FastDecoder(dataclasses.replace(cfg, fused_attention=flag)).train(), shape)
    assert 0 < kept[True]["activations"] < kept[False]["activations"], kept


def test_where_the_kernels_cannot_run(monkeypatch):
    assert unavailable(torch.device("cpu")) is None  # the interpreter (tests/conftest.py)
    monkeypatch.delenv("TRITON_INTERPRET")
    assert "CUDA GPU" in unavailable(torch.device("cpu"))
    for name in FUSED_SWITCHES:
        with pytest.raises(ModelConfigError, match=f"{name}.*needs fast_decoder=true"):
            Tacotron2Config(n_symbols=10, **{name: True})
