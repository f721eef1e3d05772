"""tests/kit.py's order for pytest-xdist (conftest.py's pytest_collection_modifyitems): every test
kept, the slow ones spread over the workers' first shares, at their starts, never back to back."""

from hypothesis import given
from hypothesis import strategies as st

from tests.kit import dealt_order, xdist_share_sizes


def test_xdist_share_sizes_split_like_the_work_stealing_scheduler():
    assert xdist_share_sizes(1161, 2) == [580, 581]
    assert xdist_share_sizes(10, 3) == [3, 3, 4]
    assert xdist_share_sizes(5, 1) == [5]


# about one test in five slow, as (index, slow) pairs
@given(
    st.lists(st.integers(0, 4).map(lambda n: n == 0), max_size=80).map(lambda flags: list(enumerate(flags))),
    st.integers(1, 4),
)
def test_slow_tests_are_dealt_to_the_starts_of_the_shares(items, workers):
    order = dealt_order(items, workers, lambda item: item[1])
    assert sorted(order) == items  # a permutation
    slow = [item for item in items if item[1]]
    quick = [item for item in items if not item[1]]
    assert [item for item in order if not item[1]] == quick  # the quick ones keep their order
    if len(quick) < len(slow):
        return  # too few quick tests to put one after every slow one
    assert not any(a[1] and b[1] for a, b in zip(order, order[1:]))
    sizes = xdist_share_sizes(len(items), workers)
    if any(size < 2 * len(slow[worker::workers]) for worker, size in enumerate(sizes)):
        return  # a share too short for its slow tests and a quick one after each shifts the next ones
    start = 0
    for worker, size in enumerate(sizes):
        dealt = slow[worker::workers]
        assert order[start : start + 2 * len(dealt) : 2] == dealt  # this worker's slow tests first, one apart
        start += size
