"""What the scripts repeat, torch-free: Markdown tables (written and read back), the machine in
words, a median time."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

#: The caption of bench.step's second table, which gpu_check reports under its own heading.
OPS_HEADING = "ops per decoder step"


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """The lines of a Markdown table."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def cpu_name() -> str:
    """The CPU's model name and logical cores (from /proc/cpuinfo where there is one)."""
    info = Path("/proc/cpuinfo")
    names = [
        line.split(":", 1)[1].strip()
        for line in (info.read_text().splitlines() if info.is_file() else [])
        if line.startswith("model name")
    ]
    return (
        f"{names[0] if names else platform.processor() or platform.machine() or 'CPU'}, {os.cpu_count()} logical cores"
    )


def median_seconds(repeats: int, fn: Callable, *args) -> float:
    """Median wall time of `repeats` calls (a shared machine is noisy; the median resists it)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def markdown_tables(output: str) -> list[list[str]]:
    """The Markdown tables in a command's output, each a run of consecutive `|` lines."""
    tables, current = [], []
    for line in output.splitlines() + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def add_split_arguments(parser: argparse.ArgumentParser) -> None:
    """--out, --seed and --val-fraction: where a corpus tool (prepare_filelist, prepare_ljspeech) writes
    the filelists and how it splits the clips, alike in every tool."""
    parser.add_argument(
        "--out",
        default=Path(__file__).resolve().parents[1] / "filelists",
        type=Path,
        help="where the filelists go (default: the repo's filelists/, where train.py looks)",
    )
    parser.add_argument("--seed", default=0, type=int, help="seed of the random train/validation split (default 0)")
    parser.add_argument("--val-fraction", default=0.2, type=float, help="share of clips for validation (default 0.2)")
