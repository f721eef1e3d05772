"""ATen operations dispatched by a piece of work: an eager GPU step's host cost, counted on any device.

On a GPU an eager step costs the host about one kernel launch per ATen compute operation, whatever
the batch size, so the operations a decoder step dispatches are its host cost in launches.
OpCounter, a dispatch mode, sees every operation that reaches the backends (below autograd, so a
backward's operations count too; a composite operation such as matmul, or the LSTM on the CPU,
counts as the operations it decomposes into), and sorts them into two kinds:

* compute: operations that run work on a GPU (arithmetic, reductions, GEMMs, copies, fills,
  random draws, a scalar read);
* other: views and allocations, which change metadata or reserve memory and launch nothing: the
  operations whose schema says their output aliases an input (view, transpose, select, slice,
  detach, unbind, ...) and NO_KERNEL (views that do not say so, and allocations without a fill).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
#: Operations that launch nothing though their schema does not mark them as views (by name: one
#: that this torch lacks is left out rather than failing the import).
NO_KERNEL = frozenset(
    getattr(aten, name)
    for name in (
        "_unsafe_view",
        "_reshape_alias",
        "unsafe_split",
        "unsafe_split_with_sizes",
        "unsafe_chunk",
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "lift_fresh",
        "resize_",
    )
    if hasattr(aten, name)
)


@dataclass(frozen=True)
class OpCounts:
    compute: int  # operations that launch work on a GPU
    other: int  # views and allocations


def launches_work(func: torch._ops.OpOverload) -> bool:
    """True for a compute operation (see the module docstring)."""
    return not func.is_view and func.overloadpacket not in NO_KERNEL


class OpCounter(TorchDispatchMode):
    """Counts the ATen operations dispatched while it is active, per operation (by_op)."""

    def __init__(self):
        super().__init__()
        self.by_op: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.by_op[func] += 1
        return func(*args, **(kwargs or {}))

    def counts(self) -> OpCounts:
        compute = sum(n for func, n in self.by_op.items() if launches_work(func))
        return OpCounts(compute, sum(self.by_op.values()) - compute)


def count_ops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, OpCounts]:
    """fn(*args, **kwargs)'s result and the ATen operations it dispatched."""
    with OpCounter() as counter:
        result = fn(*args, **kwargs)
    return result, counter.counts()
