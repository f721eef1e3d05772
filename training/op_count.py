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

It also adds up the bytes the compute operations read and write (`moved`): each tensor argument
once, twice if the operation writes it (read and written), and each result that is not an
argument, counting distinct elements (a broadcast of one row counts as the row). With nothing
kept in a cache between operations that is their memory traffic, the floor of a bandwidth-bound
step's time (scripts/bench/traffic.py); on the meta device it costs no memory and no arithmetic.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

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
    moved: int = 0  # bytes the compute operations read and write (see the module docstring)


def launches_work(func: torch._ops.OpOverload) -> bool:
    """True for a compute operation (see the module docstring)."""
    return not func.is_view and func.overloadpacket not in NO_KERNEL


def distinct_bytes(t: torch.Tensor) -> int:
    """The bytes of a tensor's distinct elements: a dimension of stride 0 (a broadcast) counts once."""
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        n *= size if stride else min(size, 1)
    return n * t.element_size()


@functools.cache
def _traffic_rule(func: torch._ops.OpOverload) -> tuple[tuple[tuple[str, int], ...], tuple[bool, ...]]:
    """An operation's schema read once: (argument name, times it moves: 2 if written), and whether each
    result is new rather than an argument written in place."""
    schema = func._schema
    passes = tuple((a.name, 2 if a.alias_info is not None and a.alias_info.is_write else 1) for a in schema.arguments)
    return passes, tuple(r.alias_info is None for r in schema.returns)


def _tensors_bytes(value: Any) -> int:
    """distinct_bytes summed over a value's tensors (a tensor, or a list of them and None, as ATen passes)."""
    if isinstance(value, torch.Tensor):
        return distinct_bytes(value)
    if isinstance(value, (list, tuple)):
        return sum(distinct_bytes(t) for t in tree_leaves(value) if isinstance(t, torch.Tensor))
    return 0


def moved_bytes(func: torch._ops.OpOverload, args: tuple, kwargs: dict, result: Any) -> int:
    """The bytes one compute operation reads and writes (the module docstring's rule)."""
    passes, fresh = _traffic_rule(func)
    total = 0
    for i, (name, times) in enumerate(passes):
        total += times * _tensors_bytes(args[i] if i < len(args) else kwargs.get(name))
    results = result if isinstance(result, tuple) else (result,)
    for new, value in zip(fresh, results):
        if new:
            total += _tensors_bytes(value)
    return total


class OpCounter(TorchDispatchMode):
    """Counts the ATen operations dispatched while it is active, per operation (by_op), and the
    bytes the compute ones move (moved_by_op)."""

    def __init__(self):
        super().__init__()
        self.by_op: Counter = Counter()
        self.moved_by_op: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.by_op[func] += 1
        result = func(*args, **(kwargs or {}))
        if launches_work(func):
            self.moved_by_op[func] += moved_bytes(func, args, kwargs or {}, result)
        return result

    def counts(self) -> OpCounts:
        compute = sum(n for func, n in self.by_op.items() if launches_work(func))
        return OpCounts(compute, sum(self.by_op.values()) - compute, sum(self.moved_by_op.values()))


def count_ops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, OpCounts]:
    """fn(*args, **kwargs)'s result and the ATen operations it dispatched."""
    with OpCounter() as counter:
        result = fn(*args, **kwargs)
    return result, counter.counts()
