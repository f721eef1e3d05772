"""The tests part: tests/test_cuda.py alone (its tests skip without CUDA)."""

from __future__ import annotations

import re
import sys

from .checks import Check, Setup, run_logged, tail


def tests_part(setup: Setup) -> list[Check]:
    # --noconftest: the suite's guards (hashing ../shared, recording the checkout) guard the suite,
    # not this one file, which writes only under its tmp folders
    code, output, seconds = run_logged(
        setup,
        "cuda-tests",
        [sys.executable, "-m", "pytest", "-q", "-rs", "--noconftest", "-p", "no:cacheprovider", "tests/test_cuda.py"],
    )
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", output)}
    if not setup.cuda:
        ok = None if code == 0 and not counts.get("failed") else False
        return [Check("tests", "cuda-tests", ok, seconds, f"no CUDA here: {counts}", counts, tail(output))]
    return [
        Check(
            "tests",
            "cuda-tests",
            code == 0 and counts.get("passed", 0) > 0,
            seconds,
            f"exit {code}: {counts}",
            counts,
            tail(output),
        )
    ]
