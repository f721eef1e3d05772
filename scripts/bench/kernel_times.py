"""Where a training step's time goes, kernel by kernel: one step run under torch.profiler, each kernel's
device time (CUDA: the GPU's own clock for every kernel, those replayed from a CUDA graph too) or, on
the CPU, each operation's self time, per decoder step of the batch (scripts/bench/step.py
--kernel-times). A slow step then explains itself: which kernel, how long, how often.

The JSON written for one variant (another report reads exactly these keys):
{"device": str, "b0": int, "precision": str, "variant": str,
 "kernels": {NAME: {"us_per_decoder_step": float, "calls_per_decoder_step": float}}}
model/ops' Triton kernels keep their function names (model.ops.KERNELS); every other kernel keeps the
profiler's name, the TOP longest of them by total time, and the rest are summed as OTHER.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from model.ops import KERNELS
from scripts.common import markdown_table

#: Kernels kept by name besides the fused ones; the others are summed as OTHER
TOP = 15
OTHER = "other"
#: A kernel's name in the printed table is cut to this many characters (the JSON keeps it whole)
NAME_WIDTH = 70


def canonical(name: str) -> str:
    """A model/ops kernel's function name (a compiler may add a suffix: the longest name it starts
    with), else the profiler's name."""
    return max((kernel for kernel in KERNELS if name.startswith(kernel)), key=len, default=name)


def profiled(step: Callable[[], object], device: torch.device) -> list[tuple[str, float]]:
    """(name, microseconds) of every kernel one call of `step` ran on a CUDA device (the kernels' device
    time), or on the CPU of every operation (its self time: nested operations are not counted twice)."""
    cuda = device.type == "cuda"
    with profile(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]) as prof:
        step()
        if cuda:
            torch.cuda.synchronize(device)
    if cuda:
        return [(e.name, e.time_range.elapsed_us()) for e in prof.events() if e.device_type == DeviceType.CUDA]
    return [
        (e.name, e.self_cpu_time_total) for e in prof.events() if e.device_type == DeviceType.CPU and not e.is_async
    ]


def per_decoder_step(records: list[tuple[str, float]], steps: int, top: int = TOP) -> dict[str, dict[str, float]]:
    """Each kernel's microseconds and calls per decoder step, longest first: the fused kernels and the
    `top` longest others by name, the rest summed as OTHER."""
    totals: dict[str, list[float]] = {}
    for name, us in records:
        total = totals.setdefault(canonical(name), [0.0, 0])
        total[0] += us
        total[1] += 1
    ranked = sorted(totals, key=lambda name: -totals[name][0])
    others = [name for name in ranked if name not in KERNELS]
    kept = [name for name in ranked if name in KERNELS or name in others[:top]]
    rest = [totals[name] for name in others[top:]]
    if rest:
        totals[OTHER] = [sum(t[0] for t in rest), sum(t[1] for t in rest)]
        kept.append(OTHER)
    return {
        name: {"us_per_decoder_step": totals[name][0] / steps, "calls_per_decoder_step": totals[name][1] / steps}
        for name in kept
    }


def precision_name(amp: str, matmul_precision: str) -> str:
    """A step's precision as the GPU window names it: the autocast dtype, else fp32 or TF32 products."""
    if amp != "off":
        return amp
    return {"highest": "fp32", "high": "tf32"}.get(matmul_precision, f"matmul_precision={matmul_precision}")


def kernel_report(device: str, b0: int, precision: str, variant: str, kernels: dict) -> dict:
    return {"device": device, "b0": b0, "precision": precision, "variant": variant, "kernels": kernels}


def report_path(folder: Path, report: dict) -> Path:
    """FOLDER/kernels-b0-B0-PRECISION-VARIANT.json, in letters, digits, '.', '-' and '_' only."""
    variant = report["variant"].replace("+", "-")
    return folder / f"kernels-b0-{report['b0']}-{report['precision']}-{variant}.json"


def write_report(folder: Path, report: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = report_path(folder, report)
    path.write_text(json.dumps(report, indent=1) + "\n")
    return path


def markdown(report: dict, cuda: bool) -> list[str]:
    """The caption and table of one variant's kernels (CPU operations on the CPU), with their share of
    the step's time."""
    kernels = report["kernels"]
    total = sum(k["us_per_decoder_step"] for k in kernels.values()) or 1.0
    rows = [
        [
            name if len(name) <= NAME_WIDTH else name[: NAME_WIDTH - 3] + "...",
            f"{k['us_per_decoder_step']:.2f}",
            f"{k['calls_per_decoder_step']:.2f}",
            f"{100 * k['us_per_decoder_step'] / total:.1f} %",
        ]
        for name, k in kernels.items()
    ]
    unit = "kernel" if cuda else "CPU operation"
    return [
        f"kernels of {report['variant']}: {unit} time per decoder step, B0 {report['b0']}, {report['precision']}, "
        f"{report['device']} (total {total:.1f} us)",
        "",
        *markdown_table(["kernel", "us / decoder step", "calls / decoder step", "share"], rows),
    ]
