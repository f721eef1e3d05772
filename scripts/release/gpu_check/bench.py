"""The bench part: scripts/bench/step.py's variants and scripts/bench/epoch.py on the paper's Table 3
strategies, eager and graphed, time-boxed."""

from __future__ import annotations

import json
import re
import sys

from data.shared import LJSPEECH_LENGTHS  # torch-free
from scripts.common import OPS_HEADING, markdown_tables

from .checks import TINY_MODEL, Check, Setup, run_logged, tail

TABLE3 = "RAND,SB-BR,SSB-BR,SSB-DBS-BR,SSB-DBS-BR-cost"  # and the recipe's default SSB (scripts/bench/epoch.py)
TABLE3_TINY = "RAND,SSB-DBS-BR-cost"  # --tiny: the reference and the recipe's default, a check of the path
#: bench.step's variants that the bench part times (graphed+recompute is left to a run of its own: one more
#: capture of every shape would not fit the part's 10-minute call)
BENCH_STEP_VARIANTS = "eager,fast,bucketed,graphed,bf16,graphed+bf16"


def bench_part(setup: Setup) -> list[Check]:
    if not LJSPEECH_LENGTHS.is_file():
        return [
            Check(
                "bench",
                "bench",
                None,
                0.0,
                f"{LJSPEECH_LENGTHS} is absent (it ships in ../shared; SHARED_DIR names another folder)",
            )
        ]
    size = (
        ["--preset", "small", "--batches", "1", "--hparams", f"n_frames_per_step=4,{TINY_MODEL}"]
        if setup.tiny
        else ["--preset", "full", "--batches", "4"]
    )
    code, output, seconds = run_logged(
        setup,
        "bench-step",
        [
            sys.executable,
            "-m",
            "scripts.bench.step",
            "--device",
            setup.device,
            "--variants",
            BENCH_STEP_VARIANTS,
            *size,
        ],
    )
    tables = dict(zip(("bench-step", OPS_HEADING), markdown_tables(output)))
    ratio = re.search(r"fast/eager speed ratio: ([\d.]+)", output)
    checks = [
        Check(
            "bench",
            "bench-step",
            code == 0 and ratio is not None,
            seconds,
            f"exit {code}; fast/eager {ratio[1] if ratio else 'n/a'}",
            {"tables": tables},
            tail(output),
        )
    ]
    # sized on an H100 and an H200 (docs/results.md#on-a-gpu) so that the part fits one 10-minute call:
    # bench-step about 3 min (half of it capturing 2 x 11 shapes), eager epochs about 1.5 min, graphed
    # about 2 min (1.5 min of it capturing the timed batches' shapes, hence fewer timed batches)
    for label, timed, extra in (
        ("eager", 8, []),
        ("graphed", 5, ["--graph-bucket", "32" if setup.tiny else "64", "--cuda-graphs"]),
    ):
        checks.append(epoch_bench_check(setup, label, timed, extra))
    return checks


def epoch_bench_check(setup: Setup, label: str, timed: int, extra: list[str]) -> Check:
    """scripts.bench.epoch on Table 3's strategies, `timed` batches each (one for --tiny): the time
    reduction against RAND, and each strategy's seconds and frames per second."""
    name = f"bench-epoch-{label}"
    tiny_epoch = ["--subset", "96", "--warmup", "0", "--hparams", f"n_frames_per_step=4,{TINY_MODEL}"]
    size = [*tiny_epoch, "--max-batches", "1"] if setup.tiny else ["--max-batches", str(timed)]
    code, output, seconds = run_logged(
        setup,
        name,
        [
            sys.executable,
            "-m",
            "scripts.bench.epoch",
            "--device",
            setup.device,
            "--strategies",
            TABLE3_TINY if setup.tiny else TABLE3,
            "--json",
            *size,
            *extra,
        ],
    )
    try:  # the JSON comes first (stdout), the per-batch timings after it (stderr)
        result = json.JSONDecoder().raw_decode(output[output.index("{") :])[0]
    except ValueError:
        result = {}
    rows = {
        k: {f: v.get(f) for f in ("seconds_per_epoch", "reduction_pct", "paper_reduction_pct", "frames_per_second")}
        for k, v in result.get("strategies", {}).items()
    }
    reductions = ", ".join(f"{k} {v['reduction_pct']:.1f} %" for k, v in rows.items() if v["reduction_pct"] is not None)
    return Check(
        "bench",
        name,
        code == 0 and bool(rows),
        seconds,
        f"exit {code}; time reduction vs RAND: {reductions or 'n/a'}",
        {"strategies": rows, "capture_seconds": result.get("capture_seconds")},
        tail(output),
    )
