"""The whole GPU measurement in one command: every check a first run on a GPU needs, one report.

    make gpu-check                                   # every part on CUDA (longer than one 10-minute call)
    make gpu-check ARGS="--parts env,tests,train"    # some parts: each fits in 10 minutes
    make gpu-check ARGS="--device cpu --tiny"        # every part at toy sizes on the CPU (the test suite runs it)
    make gpu-window OUT=runs/window                  # the GPU window: what decides, in at most 8 minutes (--window)

Parts, in order:
  env      torch, CUDA, the GPU and its memory, and measured ceilings: a large device-to-device copy
           (GB/s) and large bf16, TF32 and fp32 matrix products (TFLOP/s)
  tests    tests/test_cuda.py (the CUDA tests; they skip without CUDA)
  train    the demo on the device in fp32, bf16 and fp16 (losses fall, none is NaN); a run stopped
           mid-epoch and resumed; synthesis from its checkpoint; DDP in one process (force_ddp: NCCL
           on CUDA); two DDP ranks on the one device over gloo with the loop graphed (CUDA tensors on a GPU)
  bench    scripts/bench/step.py (eager, fast, bucketed, graphed, bf16, graphed+bf16) and
           scripts/bench/epoch.py on the paper's Table 3 strategies, eager and graphed, time-boxed
           (--max-batches timed batches per strategy spread over the epoch's cost)
  graphed  a short demo training run on the graphed decoder loop beside the same run eager: the
           per-epoch losses must track each other
  fill     scripts/bench/step.py at B0 16 (fp32), 32 and 64 (TF32), 64 (bf16) and 128 (TF32) on the
           recipe's default SSB: us per decoder step, real mel frames/s, peak memory and operations per
           step, graphed, and graphed with the attention recomputed or fused (FILL_CELLS; about 6 minutes)

Each check runs as its own process with a time limit, its output kept in OUT/logs/. The report,
OUT/report.md and OUT/report.json, is rewritten after every check (a part cut short by a time
limit keeps what it measured), and a short summary is printed last. Exit 0 when no check failed.

--window runs the GPU window instead (window.py): the cells that decide the fused step's defaults,
under one deadline, with a one-screen summary (OUT/summary.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from .bench import bench_part
from .checks import REPO, Check, Setup, verdict, write_report
from .env import env_part
from .fill import fill_part
from .graphed import graphed_part
from .tests import tests_part
from .train import train_part
from .window import DEADLINE, window

PARTS = ("env", "tests", "train", "bench", "graphed", "fill")
PART_RUNNERS: dict[str, Callable[[Setup], list[Check]]] = {
    "env": env_part,
    "tests": tests_part,
    "train": train_part,
    "bench": bench_part,
    "graphed": graphed_part,
    "fill": fill_part,
}


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.release.gpu_check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument("--tiny", action="store_true", help="toy sizes: every part in about a minute on a CPU")
    parser.add_argument("--parts", help=f"comma-separated, of {', '.join(PARTS)} (default all)")
    parser.add_argument(
        "--window",
        action="store_true",
        help="the GPU window instead of the parts (window.py): the cells that decide, under one --deadline",
    )
    parser.add_argument(
        "--deadline", type=int, default=DEADLINE, help=f"--window: seconds for all its cells (default {DEADLINE})"
    )
    parser.add_argument(
        "--out", type=Path, default=REPO / "runs" / "gpu-check", help="report folder (default runs/gpu-check)"
    )
    parser.add_argument("--timeout", type=int, default=540, help="seconds one check may run (default 540)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    parts = [p.strip() for p in (args.parts or ",".join(PARTS)).split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        print(f"error: --parts: unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}", file=sys.stderr)
        return 2
    if args.window and args.parts:
        print(f"error: --window --parts {args.parts}: the window runs its own cells; drop one", file=sys.stderr)
        return 2
    if args.device.startswith("cuda") and not cuda_available():
        print(
            f"error: --device {args.device}: this PyTorch sees no CUDA GPU; use --device cpu --tiny to try the "
            "script on the CPU",
            file=sys.stderr,
        )
        return 2
    setup = Setup(args.device, args.tiny, args.out.resolve(), args.timeout)
    if args.window:
        return window(setup, args.deadline)
    checks: list[Check] = []
    for part in parts:
        for check in PART_RUNNERS[part](setup):
            checks.append(check)
            write_report(setup, checks)
            print(f"{part:8s} {check.name:22s} {verdict(check):8s} {check.seconds:7.1f}s  {check.detail}", flush=True)
    failed = [c.name for c in checks if c.ok is False]
    print(
        f"gpu-check: {sum(c.ok is True for c in checks)} ok, {len(failed)} failed, "
        f"{sum(c.ok is None for c in checks)} skipped; report in {setup.out / 'report.md'}"
    )
    return 1 if failed else 0


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
