"""The fill part: scripts/bench/step.py at each (B0, precision) cell on the recipe's default SSB."""

from __future__ import annotations

import sys

from data.shared import LJSPEECH_LENGTHS  # torch-free
from scripts.common import OPS_HEADING, markdown_tables

from .checks import TINY_MODEL, Check, Setup, run_logged, tail

#: The fill part's cells, (B0, precision): what decides the recipe's fill targets (B0 16 in fp32,
#: 64 in TF32, 128 fitting) and their neighbours; each is one scripts.bench.step run on the recipe's default SSB
FILL_CELLS = ((16, "fp32"), (32, "tf32"), (64, "tf32"), (64, "bf16"), (128, "tf32"))
#: The hparams of each precision: fp32 (the paper's), TF32 matrix products, bf16 autocast
PRECISIONS = {"fp32": "matmul_precision=highest", "tf32": "matmul_precision=high", "bf16": "amp=bf16"}
#: The variants a fill cell times (bench.step adds eager and fast, the reference and the ratio)
FILL_VARIANTS = "graphed,graphed+recompute,graphed+fused"


def fill_part(setup: Setup) -> list[Check]:
    """scripts.bench.step at each of FILL_CELLS (--tiny: B0 4 in fp32, and TF32, which needs CUDA)."""
    cells = ((4, "fp32"), (4, "tf32")) if setup.tiny else FILL_CELLS
    return [fill_check(setup, b0, precision) for b0, precision in cells]


def fill_check(
    setup: Setup, b0: int, precision: str, variants: str = FILL_VARIANTS, kernel_times: bool = False
) -> Check:
    """One cell: `variants` (by default graphed, and graphed with the attention recomputed or fused, those
    CUDA only) at B0 = b0 in `precision`, two timed batches of the recipe's default SSB, only their shapes
    captured; with kernel_times each variant's kernels per decoder step too (a table each, and a JSON
    in OUT/kernels/). A cell that runs out of memory fails with the bench's own words in its log."""
    name = f"fill-b0-{b0}-{precision}"
    if precision != "fp32" and not setup.cuda:
        return Check("fill", name, None, 0.0, f"{precision} needs CUDA")
    if not LJSPEECH_LENGTHS.is_file():
        return Check("fill", name, None, 0.0, f"{LJSPEECH_LENGTHS} is absent (it ships in ../shared)")
    code, output, seconds = run_logged(setup, name, bench_step_command(setup, b0, precision, variants, kernel_times))
    tables = markdown_tables(output)
    rows = {row.split("|")[1].strip(): row.split("|")[2:5] for row in (tables[0][2:] if tables else [])}
    headings = [f"fill: B0 {b0}, {precision}", f"fill: B0 {b0}, {precision}, {OPS_HEADING}"]
    profiled = [v for v in rows if v in variants.split(",")] if kernel_times else []  # bench.step profiles these
    headings += [f"fill: B0 {b0}, {precision}, kernels of {v}" for v in profiled]
    figures = {"tables": dict(zip(headings, tables)), "us_per_decoder_step": us_per_step(rows)}
    detail = "; ".join(
        f"{v} {cells[0].strip()} us/step, {cells[1].strip()} frames/s, {cells[2].strip()}"
        for v, cells in rows.items()
        if v.startswith("graphed")
    )
    return Check(
        "fill",
        name,
        code == 0 and len(tables) == len(headings) and bool(rows),
        seconds,
        f"exit {code}; {detail or 'no table'}",
        figures,
        tail(output),
    )


def us_per_step(rows: dict[str, list[str]]) -> dict[str, float]:
    """The graphed variants' microseconds per decoder step from bench.step's timing table."""
    return {v: float(cells[0]) for v, cells in rows.items() if v.startswith("graphed")}


def bench_step_command(setup: Setup, b0: int, precision: str, variants: str, kernel_times: bool) -> list[str]:
    """scripts.bench.step on the recipe's default SSB at B0 = b0: two timed batches of the full model
    (one of the micro model with --tiny), only their shapes captured."""
    size = (
        [
            "--preset",
            "small",
            "--batches",
            "1",
            "--hparams",
            f"n_frames_per_step=4,{TINY_MODEL},{PRECISIONS[precision]}",
        ]
        if setup.tiny
        else ["--preset", "full", "--batches", "2", "--hparams", PRECISIONS[precision]]
    )
    return [
        sys.executable,
        "-m",
        "scripts.bench.step",
        "--device",
        setup.device,
        "--strategy",
        "SSB-DBS-BR-cost",
        "--batch-size",
        str(b0),
        "--capture",
        "timed",
        "--variants",
        variants,
        *(["--kernel-times", str(setup.out / "kernels")] if kernel_times else []),
        *size,
    ]
