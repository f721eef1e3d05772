"""What the fused decoder step's Triton kernels share on the PyTorch side, without importing Triton:
where they can run, and the dtype they accumulate in (model/fused_attention.py, model/fused_lstm.py,
their kernels, and the fast loop's deferred weight gradient, which follows the same rule)."""

import importlib.util
import os

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


def unit_columns(t: torch.Tensor) -> torch.Tensor:
    """t itself if its last dimension is unit-stride, else a contiguous copy: the kernels take a
    gradient's other strides (a column slice of a wider one is read where it lies), not that one."""
    return t if t.stride(-1) == 1 else t.contiguous()
