"""The tests part: tests/test_cuda.py alone (its tests skip without CUDA); and the GPU window's cell of
the fused kernels' tests in it (those at the full model's sizes among them)."""

from __future__ import annotations

import re
import sys

from .checks import Check, Setup, run_logged, tail

#: pytest's -k for the fused kernels' CUDA tests: the kernels alone, graphed, without a host sync and
#: the whole decoder at the full model's sizes
FUSED_TESTS = "fused"


def tests_part(setup: Setup) -> list[Check]:
    return [pytest_check(setup, "tests", "cuda-tests")]


def fused_tests_check(setup: Setup) -> Check:
    """The GPU window's first cell: tests/test_cuda.py's tests of the fused kernels."""
    return pytest_check(setup, "window", "cuda-tests-fused", ["-k", FUSED_TESTS])


def pytest_check(setup: Setup, part: str, name: str, select: list[str] | None = None) -> Check:
    """tests/test_cuda.py (the tests `select` picks), its counts; skipped where there is no CUDA."""
    # --noconftest: the suite's guards (hashing ../shared, recording the checkout) guard the suite,
    # not this one file, which writes only under its tmp folders
    code, output, seconds = run_logged(
        setup,
        name,
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "--noconftest",
            "-p",
            "no:cacheprovider",
            "tests/test_cuda.py",
            *(select or []),
        ],
    )
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", output)}
    if not setup.cuda:
        ok = None if code == 0 and not counts.get("failed") else False
        return Check(part, name, ok, seconds, f"no CUDA here: {counts}", counts, tail(output))
    ok = code == 0 and counts.get("passed", 0) > 0
    return Check(part, name, ok, seconds, f"exit {code}: {counts}", counts, tail(output))
