"""What the operations of model/ops/ share on the PyTorch side, without importing Triton: where the
Triton kernels can run, the dtype sums are kept in (attention_step.py, lstm_cell.py, their kernels,
and deferred.py's weight and memory gradients, which follow the same rule), and the layout the
kernels read a gradient in, and the precision of their float32 products."""

import importlib.util
import os
from collections.abc import Callable

import torch


def unavailable(device: torch.device) -> str | None:
    """Why the fused kernels cannot run on `device` (None: they can)."""
    if importlib.util.find_spec("triton") is None:
        return "it needs Triton, which is not installed (pip install triton; CUDA builds of PyTorch ship it)"
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        return (
            f"its Triton kernels run on a CUDA GPU, not on {device.type}; on the CPU only Triton's "
            "interpreter runs them (TRITON_INTERPRET=1: tests, slow)"
        )
    return None


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 for float64 inputs, else float32 (bf16 and fp16 included): what sums are kept in."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def input_precision(dtype: torch.dtype) -> str:
    """How the kernels multiply `dtype` operands (kernel_math.mma's PRECISION), read on the host at
    launch: float64 exactly ("ieee"); float32 as three TF32 products ("tf32x3", about float32's
    accuracy) under torch's matmul precision "highest" (the recipe's default: matmul_precision sets
    it, training/step.set_matmul_precision), else as one ("tf32": "high" and "medium", as cuBLAS's
    float32 products then). bf16 and fp16 run on the tensor cores as they are, whatever it says."""
    if dtype == torch.float64:
        return "ieee"
    return "tf32x3" if torch.get_float32_matmul_precision() == "highest" else "tf32"


def unit_columns(t: torch.Tensor) -> torch.Tensor:
    """t itself if its last dimension is unit-stride, else a contiguous copy: the kernels take a
    gradient's other strides (a column slice of a wider one is read where it lies), not that one."""
    return t if t.stride(-1) == 1 else t.contiguous()


def cell_grads(
    d_h: torch.Tensor | None,
    d_c: torch.Tensor | None,
    new_cell: torch.Tensor,
    extra: Callable[[], torch.Tensor | None] | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """What an LSTM cell's backward kernel reads (lstm_cell.py's and lstm_split.py's): h's and c's
    gradients as autograd hands them (None where unused: zeros), h's with a unit column stride, c's
    contiguous; and the extra gradient of h that autograd does not sum in (extra() asked, or None)."""
    d_h = torch.zeros_like(new_cell) if d_h is None else unit_columns(d_h)
    d_c = torch.zeros_like(new_cell) if d_c is None else d_c.contiguous()
    return d_h, d_c, None if extra is None else extra()
