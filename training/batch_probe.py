"""The search behind `batch_size=auto`: the largest B0 a memory test passes, in few tests.

Each test of a B0 builds a model and runs a training step (seconds for the full model on a GPU),
so the search asks as few as it can, as NeMo's OOMptimizer does: double from the paper's B0 until
a B0 fails, then bisect between the last B0 that passed and the first that failed until they are
within `tolerance` of each other. Torch-free: the test is a function (training/auto_batch.py's on
a GPU, a simulated limit in the tests), so the search is tested on its own.
"""

from __future__ import annotations

from collections.abc import Callable

from batching.errors import UserError

#: The paper's B0: batch_size=auto's answer on the CPU and the search's first test.
PAPER_B0 = 16
#: The largest B0 the search tries (a DBS batch of short utterances is many times B0 already).
B0_CEILING = 4096


def largest_fitting(
    fits: Callable[[int], bool], start: int = PAPER_B0, tolerance: float = 0.05, ceiling: int = B0_CEILING
) -> int:
    """The largest B0 known to pass `fits` (assumed monotone: what fits, every smaller B0 fits):
    double from `start` while it passes (up to `ceiling`), then bisect until the first failing B0
    is within `tolerance` of the answer (or just above it). `start` must pass: a run that cannot
    take the paper's B0 is a setting to change, not a search to widen."""
    if not fits(start):
        raise UserError(
            f"batch_size=auto: not even B0 = {start} (the paper's) fits this GPU's free memory with "
            "the run's settings; free the GPU, or use less memory per batch (model.recompute_attention"
            "=true, amp=bf16, a smaller model_preset), or give batch_size=N below it"
        )
    good, bad = start, None
    while bad is None and good < ceiling:
        trial = min(2 * good, ceiling)
        good, bad = (trial, None) if fits(trial) else (good, trial)
    while bad is not None and bad - good > max(1.0, good * tolerance):
        middle = (good + bad) // 2
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    return good
