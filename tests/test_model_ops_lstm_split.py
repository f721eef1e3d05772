"""model/ops/lstm_split.py, the split LSTM cell (its product on cuBLAS through deferred.step_linear, its
pointwise part as one Triton kernel each way, run by Triton's interpreter on the CPU: tests/conftest.py),
against the fast loop's unfused cell: outputs, the row written for the deferred weight gradient and
every input's gradient in float64, with and without a dropout mask, with the hidden state's extra
gradient, gradients in any layout; float32 close; bf16 as close as the fused cell's. Then the whole
fast decoder with split_lstm (with and without fused_attention) against the plain loop in float64, the
config's refusals, and the operations a step dispatches."""

import dataclasses

import pytest
import torch

from model import Tacotron2
from model.config import ModelConfigError
from model.fast_decoder import FastDecoder
from model.fast_steps import PlainAttention, SplitCell
from model.ops.deferred import StepProjection
from model.ops.lstm_split import _lstm_pointwise, _lstm_pointwise_backward, split_cell
from tests.kit import relative_error, tiny_config
from tests.test_model_fast_decoder import (
    assert_any_layout_reaches_every_gradient,
    assert_bf16_as_close_as_the_unfused_loop,
    assert_equals_the_reference_in_float64,
    ops_per_step,
)
from tests.test_model_ops_lstm_cell import CASES, cell_inputs, run, unfused


def split(pre, weight, parts, cell, keep, rows):
    return split_cell(StepProjection((pre,), weight, rows, 0), 0, cell, keep, *parts)


def assert_close_in_float64(got, want):
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("case", CASES, ids=["one-block-unmasked", "several-blocks-masked"])
def test_the_split_cell_equals_the_unfused_one_in_float64(case):
    inputs = cell_inputs(*case)
    want, want_row, want_grads = run(unfused, *inputs, torch.float64)
    got, got_row, got_grads = run(split, *inputs, torch.float64)
    assert torch.equal(got_row, want_row)  # every column written, each input where the weights read it
    assert_close_in_float64((*got, *got_grads), (*want, *want_grads))


def layouts(rows: int, hidden: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of h and c and an extra one of h, none of them contiguous: h's with its columns
    strided (a transpose), c's a column slice of a wider one, the extra one a step's slice of a
    [B, steps, H] stack's (as StepOutputs.step_grad hands it)."""
    g = torch.Generator().manual_seed(9)
    d_h = torch.randn(hidden, rows, generator=g, dtype=torch.float64).t()
    d_c = torch.randn(rows, 2 * hidden, generator=g, dtype=torch.float64)[:, 1 : hidden + 1]
    extra = torch.randn(rows, 3, hidden, generator=g, dtype=torch.float64)[:, 1]
    return d_h, d_c, extra


@pytest.mark.parametrize("masked", [False, True], ids=["unmasked", "masked"])
def test_the_extra_hidden_gradient_and_any_layout_in_float64(masked):
    """d_h_extra is added to h's gradient by the kernel: the same gradients as the unfused cell's
    given the sum; the kernel reads each gradient in whatever layout it comes."""
    rows, hidden, widths, _ = CASES[1]
    pre, weight, parts, cell, keep = cell_inputs(rows, hidden, widths, masked, seed=3)
    d_h, d_c, extra = layouts(rows, hidden)
    projection = StepProjection((pre,), weight, torch.empty(1, rows, weight.size(1), dtype=torch.float64), 0)
    got = split_cell(projection, 0, cell, keep, *parts, d_h_extra=lambda: extra)
    want = unfused(pre, weight, parts, cell, keep, projection.rows)
    assert_close_in_float64(got, want)
    leaves = [pre, cell, *parts]
    got_grads = torch.autograd.grad(got, leaves, [d_h, d_c])
    want_grads = torch.autograd.grad(want, leaves, [d_h + extra, d_c])
    assert_close_in_float64(got_grads, want_grads)


def test_the_operators_are_registered_as_they_behave():
    """torch.library.opcheck (as tests/test_model_ops_operators.py checks the fused ones): the schemas
    write nothing, and the fake kernels (the meta-device estimate's) give the real shapes and dtypes."""
    rows, hidden, _, _ = CASES[1]
    g = torch.Generator().manual_seed(4)
    gates, cell = (torch.randn(rows, n * hidden, generator=g, dtype=torch.float64) for n in (4, 1))
    keep = (torch.rand(rows, hidden, generator=g, dtype=torch.float64) > 0.2).double()
    checks = ("test_schema", "test_faketensor")
    assert set(torch.library.opcheck(_lstm_pointwise, [gates, cell, keep], test_utils=checks).values()) == {"SUCCESS"}
    _, new_cell, act = _lstm_pointwise(gates, cell, keep)
    d_h, d_c = torch.randn_like(new_cell), torch.randn_like(new_cell)
    for d_h_extra in (None, torch.randn(rows, 3, hidden, dtype=torch.float64)[:, 2]):
        args = [act, cell, new_cell, keep, d_h, d_c, torch.float32, d_h_extra]
        assert set(torch.library.opcheck(_lstm_pointwise_backward, args, test_utils=checks).values()) == {"SUCCESS"}


def test_float32_is_close_and_bf16_is_within_the_fused_cells_tolerance():
    inputs = cell_inputs(*CASES[1], dtype=torch.float32, seed=2)
    want, _, want_grads = run(unfused, *inputs, torch.float32)
    got, _, got_grads = run(split, *inputs, torch.float32)
    for a, b in (*zip(got, want), *zip(got_grads, want_grads)):
        assert relative_error(a, b) < 1e-5
    # autocast's compute dtype: bf16 weights, rows and precomputed term (the GEMM's output is bf16, as
    # the fast loop's), against float32 products of the same rounded values
    pre, weight, parts, cell, keep = inputs
    low_pre = pre.detach().bfloat16().requires_grad_()
    want, _, want_grads = run(unfused, low_pre.float(), weight.bfloat16().float(), parts, cell, keep, torch.float32)
    low, row, low_grads = run(split, low_pre, weight.bfloat16(), parts, cell, keep, torch.bfloat16)
    assert row.dtype == torch.bfloat16 and low[0].dtype == torch.float32 and low_grads[0].dtype == torch.bfloat16
    for a, b in (*zip(low, want), *zip(low_grads, want_grads)):  # the fused cell's bound (its test: 2 %)
        assert relative_error(a.float(), b) < 2e-2


#: The fast decoder with split cells, beside plain or fused attention.
VARIANTS = {
    "fast+split": {"fast_decoder": True, "split_lstm": True},
    "fast+fused_attention+split": {"fast_decoder": True, "fused_attention": True, "split_lstm": True},
}


@pytest.mark.parametrize(
    "variant, packed",
    [
        pytest.param("fast+split", False, id="split-padded"),
        pytest.param("fast+split", True, id="split-packed"),
        pytest.param("fast+fused_attention+split", True, id="fused_attention+split-packed", marks=pytest.mark.slow),
    ],
)
def test_the_fast_decoder_with_split_cells_equals_the_plain_loop_in_float64(variant, packed):
    assert_equals_the_reference_in_float64(VARIANTS[variant], 2, packed, variant)


@pytest.mark.slow
def test_the_split_step_under_bf16_autocast_is_as_close_to_float32_as_the_unfused_one():
    """With the fused attention, as tests/test_model_fast_decoder.py holds the fused step (measured
    here: median 0.45 % and worst 0.98 %, against the unfused fast loop's 0.61 % and 1.45 %)."""
    assert_bf16_as_close_as_the_unfused_loop(VARIANTS["fast+fused_attention+split"])


def test_the_split_cells_take_output_gradients_in_any_layout_in_float64():
    assert_any_layout_reaches_every_gradient(VARIANTS["fast+split"])


def test_the_switch_picks_the_split_cells_and_leaves_the_checkpoint_names_alone():
    names = sorted(Tacotron2(tiny_config()).state_dict())
    model = Tacotron2(tiny_config(**VARIANTS["fast+split"]))
    assert sorted(model.state_dict()) == names
    steps = (model.decoder.attention_step, model.decoder.attention_rnn_step, model.decoder.decoder_rnn_step)
    assert tuple(map(type, steps)) == (PlainAttention, SplitCell, SplitCell)
    assert model.decoder.routed_outputs() == {"hidden"}  # the kernel adds the stack's gradient of h


def test_the_config_refuses_both_cells_and_split_without_the_fast_loop():
    with pytest.raises(ModelConfigError, match="split_lstm=True and model.fused_lstm=true are two designs"):
        tiny_config(fast_decoder=True, fused_lstm=True, split_lstm=True)
    with pytest.raises(ModelConfigError, match="split_lstm=True needs fast_decoder=true"):
        tiny_config(split_lstm=True)


#: Compute operations per decoder step (forward, backward) on the CPU, as
#: tests/test_model_fast_decoder.OPS_PER_STEP counts them (an eager GPU step's launches). Each split cell
#: is forward the copies of its inputs into the row (2 and 3), the GEMM and the pointwise kernel, and
#: backward the kernel and the inputs' GEMM: with the fused attention 1 + 4 + 5 forward and 1 + 2 + 2
#: backward, with the 2 additions the fused step has too; under CPU bf16 autocast 5 more backward, the
#: casts of the inputs' gradients from the bf16 GEMM back to float32 (step_linear's). A change that
#: moves these must update them here, on purpose.
OPS_PER_STEP = {
    "fast+split": (23, 26),
    "fast+fused_attention+split": (10, 7),
    "fast+fused_attention+split+bf16": (10, 12),
}


@pytest.mark.parametrize("variant", list(OPS_PER_STEP))
def test_the_operations_per_decoder_step_are_counted(variant):
    torch.manual_seed(0)
    overrides = VARIANTS[variant.removesuffix("+bf16")]
    decoder = FastDecoder(dataclasses.replace(tiny_config(), **overrides)).train()
    assert ops_per_step(decoder, bf16=variant.endswith("+bf16")) == OPS_PER_STEP[variant]
