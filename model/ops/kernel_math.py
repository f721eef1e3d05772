"""Triton helpers both fused kernels use (attention_kernels.py, lstm_kernels.py); imported by them alone."""

import torch
import triton
import triton.language as tl
from triton import knobs

INTERPRET = tl.constexpr(knobs.runtime.interpret)


def tl_dtype(dtype: torch.dtype):
    """The Triton dtype of a float PyTorch dtype the kernels accumulate in (float32 or float64)."""
    return tl.float64 if dtype == torch.float64 else tl.float32


@triton.jit
def tanh(x):
    return 2.0 * tl.sigmoid(2.0 * x) - 1.0


@triton.jit
def mma(a, b, ACC: tl.constexpr):
    """a @ b accumulated in ACC: float64 exactly, float32 as three TF32 products on the tensor cores
    (input_precision="tf32x3", about float32's accuracy; an exact float32 `tl.dot` does not use them
    and holds its operands in registers: scripts/bench/kernels.py), bf16 on them directly. Triton's
    interpreter multiplies bf16 tiles wrongly, so there they are multiplied in float32 (exact for bf16
    products, as a GPU's bf16 units with float32 accumulation)."""
    if INTERPRET and a.dtype == tl.bfloat16:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee", out_dtype=ACC)
    if ACC == tl.float64:
        return tl.dot(a, b, input_precision="ieee", out_dtype=ACC)
    return tl.dot(a, b, input_precision="tf32x3", out_dtype=ACC)
