"""The paper's ZPR / ABL against hand-computed examples, and the randomness measure."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batching import BatchingConfig, batch_stats, pair_repeat, plan_epoch, randomness
from batching.analysis import BISECTED, SWEPT, bisect_parameter


def test_zpr_and_abl_by_hand_with_varying_batch_sizes():
    lengths = np.array([2, 4, 4, 8])
    stats = batch_stats(lengths, [np.array([0]), np.array([1, 2, 3])])
    # batch 1: B=1, L=2, ZPR 0; batch 2: B=3, L=8, ZPR = 1 - 16/24 = 1/3
    assert stats["zpr"] == pytest.approx(100 * (1 * 0 + 3 / 3) / 4)  # 25 %
    assert stats["abl"] == pytest.approx((1 * 2 + 3 * 8) / 4)  # 6.5
    assert (stats["n_batches"], stats["n_samples"], stats["capacity_max"]) == (2, 4, 24)
    assert (stats["padded_frames"], stats["real_frames"]) == (26, 18)


def test_fixed_batch_size_gives_the_plain_mean():
    lengths = np.array([3, 6, 5, 5])
    stats = batch_stats(lengths, [np.array([0, 1]), np.array([2, 3])])
    assert stats["zpr"] == pytest.approx(100 * ((1 - 9 / 12) + 0) / 2)
    assert stats["abl"] == pytest.approx((6 + 5) / 2)


def test_pair_repeat_by_hand():
    a = [np.array([0, 1, 2]), np.array([3])]
    b = [np.array([0, 1]), np.array([2, 3])]
    assert pair_repeat(a, b, 4) == pytest.approx(1 / 3)  # of (0,1), (0,2), (1,2) only (0,1) again
    assert pair_repeat(a, a, 4) == 1.0


def test_randomness_orders_the_strategies():
    lengths = np.random.default_rng(0).integers(100, 800, 3000)
    repeat = {name: randomness(lengths, BatchingConfig(name))["pair_repeat"] for name in ("rand", "ssb", "sb")}
    chance = randomness(lengths, BatchingConfig("rand"))["pair_repeat_chance"]
    assert chance == pytest.approx(15 / 2999, rel=0.01)
    assert repeat["rand"] < 3 * chance < repeat["ssb"] < repeat["sb"] <= 1


def test_paper_ordering_of_padding():
    lengths = np.random.default_rng(0).integers(100, 800, 3000)
    zpr = {n: batch_stats(lengths, plan_epoch(lengths, BatchingConfig(n)))["zpr"] for n in ("rand", "ssb", "sb")}
    assert zpr["sb"] < zpr["ssb"] < zpr["rand"]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 50), target=st.floats(0, 40), param=st.sampled_from(["lrf", "bucket_interval"]))
def test_calibrated_parameter_is_the_last_step_not_above_the_target(seed, target, param):
    """calibrate's bisection: the value's ZPR is not above the target, and where the search stopped
    short of its top, the next step up is above it (None only when the lowest value is above it)."""
    lengths = np.random.default_rng(seed).integers(20, 900, 300)
    base = BatchingConfig("ssb", dbs=True)
    low, step = BISECTED[param]
    top = dict(lrf=2.0, bucket_interval=901)[param]
    found = bisect_parameter(lengths, base, param, target, low, top, step)
    if found[param] is None:
        assert zpr_of(lengths, base, param, low) > target
    else:
        assert found["zpr"] == zpr_of(lengths, base, param, found[param]) <= target
        assert found[param] == top or zpr_of(lengths, base, param, round(found[param] + step, 10)) > target


def zpr_of(lengths, base, param, value) -> float:
    config = dataclasses.replace(base, batching=SWEPT[param], **{param: value})
    return batch_stats(lengths, plan_epoch(lengths, config))["zpr"]
