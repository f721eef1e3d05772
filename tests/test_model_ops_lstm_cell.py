"""model/ops/lstm_cell.py's two Triton kernels (run by Triton's interpreter on the CPU: tests/conftest.py)
against the fast loop's unfused cell (its plain_cell: the row, step_linear, lstm_update, the dropout
mask): outputs, the row written for the deferred weight gradient, and every input's gradient
in float64, over two and three inputs, sizes that are not multiples of the blocks, with and without a
mask; float32 close; bf16 weights (autocast's compute dtype) within 2 % of float32 products of the
same rounded weights (the inputs rounded to bf16 too: by Triton's interpreter here); float32
products at torch's matmul precision (one TF32 product or three), float64 ones exact."""

import pytest
import torch

from model.ops.deferred import StepProjection
from model.ops.lstm_cell import cell_step, plain_cell
from model.ops.support import input_precision
from tests.kit import record_precisions, relative_error

#: (rows, hidden, input widths, dropout mask): one block each way; several blocks of rows, hidden units,
#: input columns and gate columns, with tails (model/ops/lstm_kernels: 16 rows; the forward 8 hidden
#: units and 64 input columns an iteration, the gates' gradients 16 hidden units, the inputs' gradient
#: 16 input columns and 128 gate columns an iteration).
CASES = [(3, 8, (5, 8), False), (21, 36, (24, 80, 41), True)]


def cell_inputs(rows, hidden, widths, masked, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)

    def rand(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=g, dtype=torch.float64)).to(dtype)

    pre = rand(rows, 4 * hidden).requires_grad_()
    weight = rand(4 * hidden, sum(widths), scale=0.3)
    parts = [rand(rows, w).requires_grad_() for w in widths]
    cell = rand(rows, hidden).requires_grad_()
    keep = (torch.rand(rows, hidden, generator=g) > 0.2).to(dtype) / 0.8 if masked else None
    return pre, weight, parts, cell, keep


def unfused(pre, weight, parts, cell, keep, rows):
    return plain_cell(StepProjection((pre,), weight, rows, 0), 0, cell, keep, *parts)


def fused(pre, weight, parts, cell, keep, rows):
    return cell_step(pre, weight, rows[0], cell, keep, *parts)


def run(step, pre, weight, parts, cell, keep, rows_dtype):
    """Outputs, the row written, and the gradients of pre, cell and the parts."""
    rows = torch.full((1, pre.size(0), weight.size(1)), float("nan"), dtype=rows_dtype, device=pre.device)
    out = step(pre, weight, parts, cell, keep, rows)
    g = torch.Generator().manual_seed(5)
    seeds = [torch.randn(o.shape, generator=g, dtype=torch.float64).to(o) for o in out]
    return out, rows[0], torch.autograd.grad(out, [pre, cell, *parts], seeds)


@pytest.mark.parametrize("case", CASES, ids=["one-block", "several-blocks"])
def test_the_fused_cell_equals_the_unfused_one_in_float64(case):
    inputs = cell_inputs(*case)
    want, want_row, want_grads = run(unfused, *inputs, torch.float64)
    got, got_row, got_grads = run(fused, *inputs, torch.float64)
    assert torch.equal(got_row, want_row)  # every column written, each input where the weights read it
    for a, b in (*zip(got, want), *zip(got_grads, want_grads)):
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-13)


def test_float32_is_close_and_bf16_weights_are_within_one_percent():
    inputs = cell_inputs(*CASES[1], dtype=torch.float32, seed=2)
    want, _, want_grads = run(unfused, *inputs, torch.float32)
    got, _, got_grads = run(fused, *inputs, torch.float32)
    for a, b in (*zip(got, want), *zip(got_grads, want_grads)):
        assert relative_error(a, b) < 1e-5
    # autocast's compute dtype: bf16 weights (and inputs rounded to bf16), against float32 products of
    # the same rounded weights
    pre, weight, parts, cell, keep = inputs
    rounded = weight.bfloat16()
    want, _, want_grads = run(unfused, pre, rounded.float(), parts, cell, keep, torch.float32)
    low, row, low_grads = run(fused, pre, rounded, parts, cell, keep, torch.bfloat16)
    assert row.dtype == torch.bfloat16 and low[0].dtype == torch.float32
    for a, b in (*zip(low, want), *zip(low_grads, want_grads)):  # measured here: 0.4-1.1 %
        assert relative_error(a.float(), b) < 2e-2


@pytest.mark.parametrize(("matmul", "want"), [("highest", "tf32x3"), ("high", "tf32"), ("medium", "tf32")])
def test_float32_products_take_torchs_matmul_precision(matmul, want, monkeypatch):
    """The interpreter multiplies float32 exactly at any input precision, so the choice is checked
    where it is made: the constexpr both product kernels are launched with (and the result at it)."""
    kernels = ("lstm_forward_kernel", "lstm_backward_inputs_kernel")
    with record_precisions(monkeypatch, "model.ops.lstm_kernels", kernels, matmul) as launched:
        inputs = cell_inputs(*CASES[0], dtype=torch.float32, seed=3)
        got, _, got_grads = run(fused, *inputs, torch.float32)
        want_out, _, want_grads = run(unfused, *inputs, torch.float32)
    assert launched == [want, want]
    for a, b in (*zip(got, want_out), *zip(got_grads, want_grads)):
        assert relative_error(a, b) < 1e-5
    assert input_precision(torch.float64) == "ieee"
