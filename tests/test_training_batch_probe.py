"""training/batch_probe.py: batch_size=auto's search, against simulated memory limits."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batching.errors import UserError
from training.batch_probe import PAPER_B0, largest_fitting


class Limit:
    """A simulated GPU: B0 up to `limit` fits; counts the tests asked."""

    def __init__(self, limit: int) -> None:
        self.limit, self.asked = limit, []

    def __call__(self, b0: int) -> bool:
        self.asked.append(b0)
        return b0 <= self.limit


@settings(max_examples=300, deadline=None)
@given(
    limit=st.integers(PAPER_B0, 20_000),
    tolerance=st.sampled_from([0.01, 0.05, 0.1, 0.25]),
    ceiling=st.sampled_from([64, 1000, 4096]),
)
def test_the_answer_fits_and_a_tolerance_more_does_not_in_logarithmically_many_tests(limit, tolerance, ceiling):
    fits = Limit(limit)
    b0 = largest_fitting(fits, tolerance=tolerance, ceiling=ceiling)
    assert b0 <= limit and b0 <= ceiling
    assert b0 == ceiling or not fits(b0 * (1 + tolerance)) or b0 == limit
    assert b0 >= min(limit, ceiling) / (1 + tolerance)
    doublings = math.ceil(math.log2(min(limit, ceiling) / PAPER_B0)) + 1
    assert len(fits.asked) - 1 <= doublings + math.ceil(math.log2(1 / tolerance)) + 2, fits.asked


def test_the_5_percent_default_and_the_doubling_from_16():
    fits = Limit(1000)
    assert largest_fitting(fits) == 992  # 512 fits, 1024 not, bisected until 1024 is within 5 % of 992
    assert fits.asked[:7] == [16, 32, 64, 128, 256, 512, 1024]
    assert len(fits.asked) <= 12


def test_a_gpu_that_cannot_take_the_papers_b0_says_what_to_do():
    fits = Limit(15)
    with pytest.raises(UserError, match="not even B0 = 16.*batch_size=N"):
        largest_fitting(fits)
    assert fits.asked == [16]
