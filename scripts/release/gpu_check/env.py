"""The env part: versions, the GPU and its memory, and the measured ceilings (copy bandwidth, matrix
products in bf16, TF32 and fp32), in this process."""

from __future__ import annotations

import importlib.metadata
import platform
import time

from .checks import Check, Setup


def env_part(setup: Setup) -> list[Check]:
    """Versions and the measured ceilings, in this process."""
    import torch

    from scripts.bench.steps import device_name

    tick = time.perf_counter()
    device = torch.device(setup.device)
    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": triton_version(),
        "python": platform.python_version(),
        "device": device_name(device),
    }
    if setup.cuda:
        info["memory_gib"] = round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1)
    size = 256 if setup.tiny else 8192
    info["copy_gb_per_s"] = copy_bandwidth(device, 2**22 if setup.tiny else 2**30)
    for label, dtype, precision in (
        ("bf16", torch.bfloat16, "highest"),
        ("tf32", torch.float32, "high"),
        ("fp32", torch.float32, "highest"),
    ):
        info[f"matmul_{label}_tflops"] = matmul_tflops(device, size, dtype, precision)
    detail = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in info.items())
    return [Check("env", "env", True, time.perf_counter() - tick, detail, info)]


def copy_bandwidth(device, nbytes: int, repeats: int = 10) -> float:
    """GB/s of a device-to-device copy of nbytes, counting the read and the write."""
    import torch

    from training.loop import synchronize

    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    synchronize(device)
    tick = time.perf_counter()
    for _ in range(repeats):
        dst.copy_(src)
    synchronize(device)
    return 2 * nbytes * repeats / (time.perf_counter() - tick) / 1e9


def matmul_tflops(device, n: int, dtype, precision: str, repeats: int = 10) -> float:
    """TFLOP/s of an n x n by n x n product at a float32 matmul precision (high: TF32 on CUDA)."""
    import torch

    from training.loop import synchronize

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        a @ b
        synchronize(device)
        tick = time.perf_counter()
        for _ in range(repeats):
            a @ b
        synchronize(device)
        return 2 * n**3 * repeats / (time.perf_counter() - tick) / 1e12
    finally:
        torch.set_float32_matmul_precision(before)


def triton_version() -> str:
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
