"""training/op_count.py counts a known computation's ATen operations exactly, forward and backward."""

import torch

from training.op_count import OpCounts, count_ops

aten = torch.ops.aten


def forward(x: torch.Tensor) -> torch.Tensor:
    torch.empty(4)  # an allocation: launches nothing
    return (x * 2 + 1).t().sum()  # mul, add and sum launch work; t is a view


def test_count_ops_counts_compute_ops_and_leaves_views_and_allocations_apart():
    x = torch.ones(2, 3, requires_grad=True)
    y, counts = count_ops(forward, x)
    # moved: mul and add read and write 6 floats each (2 x 24 bytes), sum reads 24 and writes 4
    assert y.item() == 18.0 and counts == OpCounts(compute=3, other=2, moved=48 + 48 + 28)
    # backward: the seed gradient (ones_like) and d(x * 2)/dx (a mul) run work; sum's backward is an
    # expand and t's a t (views), add's passes the gradient on, and storing x.grad is a detach (a view)
    _, counts = count_ops(y.backward)
    assert counts.compute == 2 and torch.equal(x.grad, torch.full((2, 3), 2.0))


def test_composite_ops_count_as_what_they_decompose_into():
    _, counts = count_ops(torch.matmul, torch.ones(3, 4), torch.ones(4, 5))  # matmul of two matrices: one mm
    assert counts == OpCounts(compute=1, other=0, moved=4 * (12 + 20 + 15))


def test_moved_bytes_count_a_written_argument_twice_and_a_broadcast_once():
    x, row = torch.ones(4, 3), torch.ones(3)
    _, counts = count_ops(x.add_, row)  # x read and written (48 + 48), the row read (12), the result is x
    assert counts == OpCounts(compute=1, other=0, moved=108)
    _, counts = count_ops(torch.mul, row.expand(4, 3), 2.0)  # reads the row's 3 floats, writes 12
    assert counts.moved == 12 + 48
