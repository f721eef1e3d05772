"""Triton helpers both fused kernels use (attention_kernels.py, lstm_kernels.py); imported by them alone."""

import functools

import torch
import triton
import triton.language as tl
from triton import knobs

INTERPRET = tl.constexpr(knobs.runtime.interpret)


def _scalar_index(tensor) -> int:
    """A scalar as a loop bound under the interpreter: it holds scalars as one-element arrays and
    Triton 3.6 takes int() of the array, which numpy 2.4 refuses; so `tl.range` failed there."""
    return int(tensor.handle.data.item())


def _patch_lang_tensor(tensor, scope, original):
    """The interpreter's own patches of tl.tensor, with `__index__` read as `_scalar_index` does."""
    original(tensor, scope)
    scope.set_attr(tensor, "__index__", _scalar_index)


if INTERPRET:  # the kernels' `tl.range` loops run unchanged on the CPU (the suite's check)
    from triton.runtime import interpreter

    if not isinstance(interpreter._patch_lang_tensor, functools.partial):
        interpreter._patch_lang_tensor = functools.partial(_patch_lang_tensor, original=interpreter._patch_lang_tensor)


def tl_dtype(dtype: torch.dtype):
    """The Triton dtype of a float PyTorch dtype the kernels accumulate in (float32 or float64)."""
    return tl.float64 if dtype == torch.float64 else tl.float32


@triton.jit
def tanh(x):
    return 2.0 * tl.sigmoid(2.0 * x) - 1.0


#: mma's precision where a caller names none: about float32's accuracy (support.input_precision's rule).
TF32X3 = tl.constexpr("tf32x3")


@triton.jit
def mma(a, b, ACC: tl.constexpr, PRECISION: tl.constexpr = TF32X3):
    """a @ b accumulated in ACC: float64 exactly; float32 at PRECISION (support.input_precision):
    "tf32x3", three TF32 products on the tensor cores (about float32's accuracy; an exact float32
    `tl.dot` does not use them and holds its operands in registers: scripts/bench/kernels.py), or
    "tf32", one (10-bit mantissas, 3x fewer instructions); bf16 on them directly. Triton's interpreter
    multiplies bf16 tiles wrongly, so there they are multiplied in float32 (exact for bf16 products,
    as a GPU's bf16 units with float32 accumulation); it multiplies float32 exactly at any PRECISION."""
    if INTERPRET and a.dtype == tl.bfloat16:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee", out_dtype=ACC)
    if ACC == tl.float64:
        return tl.dot(a, b, input_precision="ieee", out_dtype=ACC)
    return tl.dot(a, b, input_precision=PRECISION, out_dtype=ACC)
