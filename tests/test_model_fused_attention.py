"""model/fused_attention.py's two Triton kernels (run by Triton's interpreter on the CPU: tests/conftest.py)
against model/attention.py's energy chain: outputs and every input's gradient in float64, over texts
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
from model.fused_attention import attend, scoring_matrix
from model.graphs import loop_memory
from model.kernel_support import unavailable
from model.shapes import LoopShape
from tests.kit import relative_error, tiny_config

#: (rows, text, memory_dim, attention_dim, kernel_size, chunk): one chunk; three chunks and two memory
#: column blocks (memory_dim 80 > 64); attention_dim and text not powers of two.
SIZES = [(3, 11, 24, 16, 5, 64), (2, 37, 80, 20, 7, 16)]


def inputs(rows: int, text: int, memory_dim: int, dim: int, kernel_size: int, dtype=torch.float64, seed: int = 0):
    """A random attention layer and one step's inputs; row 1's text ends early (masked tail)."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    layer = LocationSensitiveAttention(8, memory_dim, dim, 4, kernel_size).to(dtype)

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_()

    mask = torch.zeros(rows, text, dtype=dtype)
    mask[1, text - 4 :] = float("-inf")
    prev = torch.rand(rows, text, generator=g, dtype=dtype).requires_grad_()
    cum = (3 * torch.rand(rows, text, generator=g, dtype=dtype)).requires_grad_()
    return layer, (rand(rows, dim), rand(rows, text, memory_dim), rand(rows, text, dim), prev, cum, mask)


def plain(layer, q, memory, pm, prev, cum, mask):
    context, weights = layer.energy_chain(q, memory, pm, torch.stack((prev, cum), 1), layer.location_matrix(), mask)
    return context, weights, cum + weights


def fused(layer, q, memory, pm, prev, cum, mask, chunk=64):
    return attend(q, memory, pm, prev, cum, scoring_matrix(layer.location_matrix(), layer.v.weight), mask, chunk)


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


def test_float32_is_close_and_bf16_inputs_are_within_one_percent():
    layer, tensors = inputs(*SIZES[1][:5], dtype=torch.float32, seed=3)
    want, want_grads = outputs_and_grads(plain, layer, tensors)
    got, got_grads = outputs_and_grads(fused, layer, tensors, 16)
    for a, b in (*zip(got, want), *zip(got_grads, want_grads)):
        assert relative_error(a, b) < 1e-5
    # autocast hands the step a bf16 query and processed memory; the kernels compute in float32
    q, memory, pm, prev, cum, mask = tensors
    half = [q.detach().bfloat16().requires_grad_(), memory, pm.detach().bfloat16().requires_grad_(), prev, cum, mask]
    low, low_grads = outputs_and_grads(fused, layer, half, 16)
    assert low[0].dtype == torch.float32 and low_grads[0].dtype == torch.bfloat16
    for a, b in (*zip(low, want), *zip(low_grads, want_grads)):
        assert relative_error(a.float(), b) < 1e-2


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
