"""The fused kernels' PyTorch operators are registered as they behave (torch.library.opcheck, under
Triton's interpreter): each schema declares exactly the arguments the operator writes (the rows, the
gradient sums kept in place), which CUDA graphs, torch.compile and functionalisation rely on; and
each fake kernel gives the real outputs' shapes, dtypes and strides, which model/graphs.loop_memory's
meta-device estimate is built on."""

import pytest
import torch

from model.ops import attention_step, lstm_cell
from tests.test_model_ops_attention_step import SIZES, inputs
from tests.test_model_ops_lstm_cell import CASES, cell_inputs

CHECKS = ("test_schema", "test_faketensor")


def attention_args():
    layer, (ah, pre, memory, pm, prev, cum, mask) = inputs(*SIZES[0][:5])
    scoring = attention_step.scoring_matrix(layer.location_matrix(), layer.v.weight)
    weight = layer.query_layer.weight
    tensors = [t.detach() for t in (ah, weight, pre, torch.empty_like(ah), memory, pm, prev, cum, scoring, mask)]
    return tensors + [SIZES[0][5]]


def test_the_attention_forward_operator():
    assert set(torch.library.opcheck(attention_step._attention_step, attention_args(), test_utils=CHECKS).values()) == {
        "SUCCESS"
    }


@pytest.mark.parametrize("in_place", [False, True], ids=["fresh-gradients", "sums-and-extras-in-place"])
def test_the_attention_backward_operator(in_place):
    args = attention_args()
    _, weight, _, _, memory, pm, prev, cum, scoring, _, chunk = args
    query, ah_copy, context, weights, _ = attention_step._attention_step(*args)
    grads = [torch.randn_like(t) for t in (context, weights, weights, ah_copy)]
    sums = (torch.zeros_like(pm), pm.new_zeros(pm.size(0), *scoring.shape)) if in_place else (None, None)
    # a loop's extras: one step's slices of the stacked outputs' gradients [B, steps, .]
    stacked = [torch.randn(t.size(0), 3, t.size(1), dtype=t.dtype) for t in (context, weights)]
    extras = [g[:, 1] for g in stacked] if in_place else [None, None]
    backward_args = [query, weight, memory, pm, prev, cum, scoring, weights, context, *grads, chunk]
    backward_args += [torch.float64, torch.float64, not in_place, *sums, *extras]
    result = torch.library.opcheck(attention_step._attention_step_backward, backward_args, test_utils=CHECKS)
    assert set(result.values()) == {"SUCCESS"}


def test_the_lstm_operators():
    pre, weight, parts, cell, keep = cell_inputs(*CASES[0])
    pre, cell, parts = pre.detach(), cell.detach(), [p.detach() for p in parts]
    row = pre.new_empty(pre.size(0), weight.size(1))
    args = [pre, parts, weight, row, cell, keep]
    assert set(torch.library.opcheck(lstm_cell._lstm_step, args, test_utils=CHECKS).values()) == {"SUCCESS"}
    _, new_cell, act = lstm_cell._lstm_step(*args)
    d_h, d_c = torch.randn_like(new_cell), torch.randn_like(new_cell)
    extra = torch.randn(d_h.size(0), 3, d_h.size(1), dtype=d_h.dtype)[:, 2]  # a slice of a stack's gradient
    for d_h_extra in (None, extra):
        backward_args = [act, cell, new_cell, keep, d_h, d_c, weight, pre.dtype, d_h_extra]
        result = torch.library.opcheck(lstm_cell._lstm_step_backward, backward_args, test_utils=CHECKS)
        assert set(result.values()) == {"SUCCESS"}
