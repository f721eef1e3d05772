"""The GPU window: what a lent GPU's few minutes must measure, in one command that cannot lose them
(`python -m scripts.release.gpu_check --window --out DIR`, `make gpu-window OUT=DIR`).

Cells, in order of what decides most (CELLS' estimates: seconds on one H100 or H200, docs/gpu.md says
how they were made):
  a  env; the fused kernels' CUDA tests (tests/test_cuda.py -k fused: the kernels, graphed, without a
     host sync, and the whole decoder at the full model's sizes against the plain loop); bench.step at
     B0 16 in fp32 with each variant's kernels per decoder step
  b  bench.step at B0 16 in TF32, B0 64 in TF32 and in bf16, with kernels per decoder step
  c  whether B0 128 fits, with a CUDA memory snapshot of its graphed steps; batch_size=auto's probe
Every bench.step cell times graphed, graphed+fused and graphed+split, eager and fast beside them as
bench.step always does.

One deadline for the whole window (--deadline): each cell starts only if its estimate fits in what is
left, and runs as its own process under a limit of what is left (at most twice its estimate); a cell
that does not fit is skipped with the reason, one that fails or is stopped at its limit costs only
itself. Everything lands under OUT: logs/, kernels/ (the JSON of each variant's kernels),
report.md and report.json (rewritten after every cell), the memory snapshot, and summary.md, the
one-screen summary that is also printed last.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from scripts.common import markdown_table

from .checks import TINY_MODEL, Check, Setup, run_logged, tail, verdict, write_report
from .env import env_part
from .fill import fill_check
from .tests import fused_tests_check

#: The window's own deadline in seconds: with a fresh machine's offline install (about 20 s) and
#: packing OUT, under 8 minutes
DEADLINE = 450
#: Seconds kept back for the report and the summary
RESERVE = 5
#: A cell's limit is at most this many times its estimate
LIMIT_FACTOR = 2
#: What each cell needs where there is no GPU
NEEDS_CUDA = {
    "cuda-tests-fused": "tests/test_cuda.py skips every test without CUDA",
    "memory-b0-128": "a CUDA memory snapshot needs CUDA",
    "batch-size-auto": "batch_size=auto probes on CUDA only (on the CPU a run takes the paper's 16)",
}

#: The answer the window reads from each capacity.py command's output (what capacity.py prints)
CAPACITY_ANSWERS = {"snapshot": r"B0 \d+ (?:fits|does not fit)", "probe": r"batch_size=auto: B0 = \d+"}


@dataclass(frozen=True)
class Cell:
    """One cell of the window: its group (a, b, c), name, estimated seconds on one H100/H200, and what
    it runs, given a Setup whose timeout is the cell's limit."""

    group: str
    name: str
    estimate: int
    run: Callable[[Setup], Check]


def env_check(setup: Setup) -> Check:
    """The env part, in this process; the GPU memory its ceilings took handed back, so that the later
    cells' processes (the memory snapshot, the probe) see the GPU free."""
    check = env_part(setup)[0]
    if setup.cuda:
        import torch

        torch.cuda.empty_cache()
    return check


def window_cells(tiny: bool) -> list[Cell]:
    """The cells in order; --tiny: B0 4 and 8 for 16, 64 and 128 (the micro model on the CPU)."""
    variants = "graphed,graphed+fused,graphed+split"
    small, large, largest = (4, 8, 8) if tiny else (16, 64, 128)
    fill = partial(fill_check, variants=variants, kernel_times=True)
    return [
        Cell("a", "env", 10, env_check),
        Cell("a", "cuda-tests-fused", 90, fused_tests_check),
        Cell("a", f"fill-b0-{small}-fp32", 90, partial(fill, b0=small, precision="fp32")),
        Cell("b", f"fill-b0-{small}-tf32", 75, partial(fill, b0=small, precision="tf32")),
        Cell("b", f"fill-b0-{large}-tf32", 90, partial(fill, b0=large, precision="tf32")),
        Cell("b", f"fill-b0-{large}-bf16", 95, partial(fill, b0=large, precision="bf16")),
        Cell("c", "memory-b0-128", 60, partial(capacity_check, what="snapshot", b0=largest)),
        Cell("c", "batch-size-auto", 150, partial(capacity_check, what="probe", b0=largest)),
    ]


def capacity_check(setup: Setup, what: str, b0: int) -> Check:
    """scripts.release.gpu_check.capacity: B0 = b0's fit and memory snapshot, or batch_size=auto's probe."""
    name = "memory-b0-128" if what == "snapshot" else "batch-size-auto"
    snapshot = setup.out / f"memory-b0-{b0}.pickle"
    cmd = [sys.executable, "-m", "scripts.release.gpu_check.capacity", what, "--device", setup.device]
    cmd += ["--b0", str(b0), "--out", str(snapshot)] if what == "snapshot" else []
    cmd += ["--hparams", f"n_frames_per_step=4,{TINY_MODEL}"] if setup.tiny else []
    code, output, seconds = run_logged(setup, name, cmd)
    found = re.findall(CAPACITY_ANSWERS[what], output)
    detail = f"exit {code}; {found[-1] if found else 'no answer'}"
    figures = {"snapshot": str(snapshot)} if what == "snapshot" and snapshot.is_file() else {}
    return Check("c", name, code == 0 and bool(found), seconds, detail, figures, tail(output))


def run_cell(setup: Setup, cell: Cell, left: float, deadline: int) -> Check:
    """The cell under its limit, or skipped with the reason; an exception or a limit costs only this cell."""
    if not setup.cuda and cell.name in NEEDS_CUDA:
        return Check(cell.group, cell.name, None, 0.0, NEEDS_CUDA[cell.name])
    if left < cell.estimate:
        return Check(
            cell.group,
            cell.name,
            None,
            0.0,
            f"does not fit: needs about {cell.estimate} s, {left:.0f} s left of the {deadline} s window",
        )
    limit = int(min(left, LIMIT_FACTOR * cell.estimate))
    tick = time.perf_counter()
    try:
        check = cell.run(dataclasses.replace(setup, timeout=limit))
    except Exception as err:  # one cell's crash is that cell's failure, not the window's
        return Check(cell.group, cell.name, False, time.perf_counter() - tick, f"{type(err).__name__}: {err}")
    check = dataclasses.replace(check, part=cell.group, name=cell.name)
    if check.ok is False and check.seconds >= limit:
        check = dataclasses.replace(check, detail=f"stopped at its {limit} s limit; {check.detail}")
    return check


def run_window(
    setup: Setup, cells: list[Cell], deadline: int, clock: Callable[[], float] = time.monotonic
) -> list[Check]:
    """Every cell in order against one deadline; the report and the summary rewritten after each, the
    summary printed last."""
    start = clock()
    checks: list[Check] = []
    lines: list[str] = []
    for cell in cells:
        left = deadline - RESERVE - (clock() - start)
        check = run_cell(setup, cell, left, deadline)
        checks.append(check)
        print(f"{cell.group} {cell.name:18s} {verdict(check):8s} {check.seconds:6.1f}s  {check.detail}", flush=True)
        write_report(setup, checks, title="GPU window")
        lines = summary(setup, checks, deadline, clock() - start)
        (setup.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return checks


def summary(setup: Setup, checks: list[Check], deadline: int, spent: float) -> list[str]:
    """One screen: what ran where, each cell's verdict, each bench cell's speed against graphed."""
    env = next((c.figures for c in checks if c.name == "env"), {})
    failed = sum(c.ok is False for c in checks)
    head = (
        f"GPU window on {env.get('device', setup.device)} (torch {env.get('torch', '?')}, Triton "
        f"{env.get('triton', '?')}, CUDA {env.get('cuda', '?')}){' at tiny sizes' if setup.tiny else ''}: "
        f"{sum(c.ok is True for c in checks)} ok, {failed} failed, {sum(c.ok is None for c in checks)} skipped "
        f"in {spent:.0f} s of {deadline} s"
    )
    rows = [[c.part, c.name, verdict(c), f"{c.seconds:.0f}", c.detail[:110]] for c in checks]
    speeds = [speed_line(c) for c in checks if c.figures.get("us_per_decoder_step")]
    return [
        head,
        "",
        *markdown_table(["cell", "name", "result", "s", "detail"], rows),
        "",
        *speeds,
        f"report: {setup.out / 'report.md'}; kernels per decoder step: {setup.out / 'kernels'}",
    ]


def speed_line(check: Check) -> str:
    """A bench cell's us per decoder step per variant, and its speed against graphed."""
    us = check.figures["us_per_decoder_step"]
    base = us.get("graphed")
    parts = [f"{v} {t:.0f}" + (f" ({base / t:.2f}x)" if base and v != "graphed" else "") for v, t in us.items()]
    return f"{check.name}: us / decoder step " + ", ".join(parts)


def window(setup: Setup, deadline: int = DEADLINE) -> int:
    """The window on `setup`'s device; exit 1 if any cell failed."""
    checks = run_window(setup, window_cells(setup.tiny), deadline)
    return 1 if any(c.ok is False for c in checks) else 0
