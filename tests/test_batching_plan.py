"""Invariants of plan_epoch for every strategy, with and without DBS/BR, on 1 to 8 ranks."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batching import STRATEGIES, BatchingConfig, batch_stats, plan_digest, plan_epoch, plan_global
from batching.analysis import resolve_width
from batching.errors import UserError
from batching.strategies import KEYS
from tests.kit import AWKWARD

# bload's batches are whole blocks of several utterances each (not <= batch_size samples):
# tests/test_batching_bload.py checks its own invariants.
PLAN_STRATEGIES = [s for s in STRATEGIES if s != "bload"]


@st.composite
def configs(draw, lengths):
    dbs = draw(st.booleans())
    capacity = None
    if dbs and draw(st.booleans()):
        capacity = max(lengths) * draw(st.integers(1, 4)) + draw(st.integers(0, 50))
    batching = draw(st.sampled_from(PLAN_STRATEGIES))
    return BatchingConfig(
        batching=batching,
        batch_size=draw(st.integers(1, 20)),
        lrf=draw(st.floats(0, 1)),
        bucket_size=draw(st.integers(1, 50)),
        n_bins=draw(st.integers(1, 20)),
        dbs=dbs,
        br=draw(st.booleans()),
        capacity=capacity,
        drop_last=draw(st.booleans()),
        seed=draw(st.integers(0, 2**32)),
        ssb_key=draw(st.sampled_from(KEYS)) if batching == "ssb" else None,
    )


def all_ranks(lengths, config, epoch, world_size):
    return [plan_epoch(lengths, config, epoch, rank, world_size) for rank in range(world_size)]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), lengths=AWKWARD, world_size=st.integers(1, 8), epoch=st.integers(0, 5))
def test_plan_invariants(data, lengths, world_size, epoch):
    config = data.draw(configs(lengths))
    lengths = np.array(lengths)
    ranks = all_ranks(lengths, config, epoch, world_size)
    per_rank = {len(batches) for batches in ranks}
    assert len(per_rank) == 1, "every rank gets the same number of batches"
    batches = [b for rank in ranks for b in rank]
    assert all(b.dtype == np.int64 and b.size for b in batches)
    counts = np.bincount(np.concatenate(batches or [np.zeros(0, np.int64)]), minlength=lengths.size)
    if config.drop_last:
        assert counts.max(initial=0) <= 1
    elif counts.max() > 1:  # documented: fewer samples than the batches needed
        assert lengths.size < len(batches) and all(b.size == 1 for b in batches)
        assert counts.sum() == len(batches) and counts.min() >= 1
    else:
        assert (counts == 1).all()
    if config.dbs:
        capacity = config.capacity or config.batch_size * lengths.max()
        assert all(b.size * lengths[b].max() <= capacity for b in batches)
    else:
        sizes = np.array([b.size for b in batches])
        assert (sizes <= config.batch_size).all()
        if world_size == 1:
            assert (sizes != config.batch_size).sum() <= (0 if config.drop_last else 1)
            assert len(batches) == (
                lengths.size // config.batch_size if config.drop_last else -(-lengths.size // config.batch_size)
            )
    again = all_ranks(lengths, config, epoch, world_size)
    assert [plan_digest(r) for r in ranks] == [plan_digest(r) for r in again]
    plan = plan_global(lengths, config, epoch, world_size)
    for rank in (None, 0, world_size - 1):  # the vectorised extents against each batch's own
        longest, sizes = plan.extents(lengths, rank)
        own = plan.batches(rank)
        assert sizes.tolist() == [b.size for b in own] and longest.tolist() == [int(lengths[b].max()) for b in own]


@settings(max_examples=100, deadline=None)
@given(
    lengths=AWKWARD,
    lrf=st.floats(0, 1),
    seed=st.integers(0, 2**32),
    epoch=st.integers(0, 5),
    key=st.sampled_from([None, "length"]),
)
def test_ssb_length_key_is_equation_3_bit_for_bit(lengths, lrf, seed, epoch, key):
    """ssb_key=length (and unset) plans exactly the paper's SSB: argsort of l + U(-a/2, a/2), a = (max - min) * lrf."""
    lengths = np.array(lengths, np.int64)
    rng = np.random.default_rng([seed, epoch])
    a = float(lengths.max() - lengths.min()) * lrf
    if a > 0:
        order = np.argsort(lengths + rng.uniform(-a / 2, a / 2, lengths.size))
    else:
        perm = rng.permutation(lengths.size)
        order = perm[np.argsort(lengths[perm], kind="stable")]
    expected = [order[i : i + 16] for i in range(0, order.size, 16)]
    assert plan_digest(
        plan_epoch(lengths, BatchingConfig("ssb", lrf=lrf, seed=seed, ssb_key=key), epoch)
    ) == plan_digest(expected)


@pytest.mark.parametrize(
    "config",
    [
        BatchingConfig("rand"),
        BatchingConfig("ssb"),
        BatchingConfig("ssb", ssb_key="cost", dbs=True, br=True),
        BatchingConfig("bkt", bucket_size=32),
        BatchingConfig("ats", n_bins=4),
        BatchingConfig("sb", br=True),
        BatchingConfig("ssb", dbs=True, br=True),
    ],
)
def test_new_epoch_new_plan(config):
    lengths = np.random.default_rng(1).integers(50, 800, 300)
    plans = {plan_digest(plan_epoch(lengths, config, epoch)) for epoch in range(3)}
    assert len(plans) == 3


def test_sorting_still_reshuffles_ties_every_epoch():
    lengths = np.repeat([100, 200], 40)
    first, second = (plan_epoch(lengths, BatchingConfig("sb", batch_size=8), e) for e in (0, 1))
    assert [lengths[b].max() for b in first] == [100] * 5 + [200] * 5
    assert plan_digest(first) != plan_digest(second)


def test_multi_rank_tail_splits_largest_batches():
    lengths = np.arange(1, 51)  # 50 samples, B0 16: batches of 16, 16, 16, 2
    ranks = all_ranks(lengths, BatchingConfig("sb"), 0, world_size=3)
    sizes = sorted(b.size for r in ranks for b in r)
    assert sizes == [2, 8, 8, 8, 8, 16]  # two 16s split in two: 6 batches = 2 steps of 3
    assert all(len(r) == 2 for r in ranks)


def test_fewer_samples_than_ranks_repeats_cyclically():
    ranks = all_ranks(np.array([30, 10, 20]), BatchingConfig("sb"), 0, world_size=5)
    flat = sorted(int(b[0]) for r in ranks for b in r)
    assert all(len(r) == 1 and r[0].size == 1 for r in ranks)
    assert flat == [0, 1, 1, 2, 2]  # all three once, then the first two of the order (1, 2) again


def test_drop_last_drops_smallest_batches_for_ranks():
    ranks = all_ranks(np.arange(1, 51), BatchingConfig("sb", drop_last=True), 0, world_size=2)
    assert [[b.size for b in r] for r in ranks] == [[16], [16]]  # 2 of 3 full batches; rest dropped


@settings(max_examples=150, deadline=None)
@given(
    lengths=AWKWARD,
    batching=st.sampled_from(["rand", "sb", "ssb", "bkt", "ats"]),
    slack=st.integers(0, 50),
    seed=st.integers(0, 2**32),
    epoch=st.integers(0, 3),
)
def test_drop_last_under_a_budget_drops_only_an_incomplete_last_batch(lengths, batching, slack, seed, epoch):
    """dbs + drop_last on one rank: the plan without drop_last, less the walk's last batch exactly
    when one more sample as long as its longest would still fit the budget (Lhotse's drop_last)."""
    lengths = np.array(lengths)
    config = BatchingConfig(batching, dbs=True, capacity=int(lengths.max()) * 3 + slack, seed=seed)
    whole = plan_global(lengths, config, epoch)
    last = whole.order[whole.cuts[-2] : whole.cuts[-1]]
    incomplete = (last.size + 1) * lengths[last].max() <= config.capacity
    expected = [b for b in whole.batches() if not (incomplete and np.array_equal(b, last))]
    dropped = plan_global(lengths, dataclasses.replace(config, drop_last=True), epoch).batches()
    assert sorted(map(tuple, dropped)) == sorted(map(tuple, expected))


def test_ranks_in_a_step_get_neighbouring_lengths():
    lengths = np.random.default_rng(0).integers(50, 800, 4000)
    config = BatchingConfig("sb", br=True)
    ranks = all_ranks(lengths, config, 0, 4)
    step_lens = np.array([[lengths[r[s]].max() for r in ranks] for s in range(len(ranks[0]))])
    # a step holds 4 x 16 neighbours in sorted order: about 64 / 4000 of the 750-frame range
    assert (step_lens.max(axis=1) - step_lens.min(axis=1)).max() <= 25


def test_dbs_grows_batches_to_the_capacity():
    lengths = np.array([10, 10, 10, 40, 10])
    batches = plan_epoch(lengths, BatchingConfig("sb", dbs=True, capacity=40))
    assert [b.size for b in batches] == [4, 1]  # 4 x 10 fits 40; the 40 sample is alone


def test_sample_over_capacity_is_named():
    with pytest.raises(ValueError, match=r"sample 3 has length 40 frames, over the batch capacity of 30"):
        plan_epoch(np.array([10, 10, 10, 40]), BatchingConfig("sb", dbs=True, capacity=30))


def test_global_plan_is_the_ranks_interleaved():
    lengths = np.random.default_rng(2).integers(1, 500, 333)
    config = BatchingConfig("bkt", bucket_size=64, dbs=True, br=True)
    glob = plan_global(lengths, config, 3, world_size=4).batches()
    ranks = all_ranks(lengths, config, 3, 4)
    assert plan_digest(glob[1::4]) == plan_digest(ranks[1])


def test_lengths_are_validated():
    with pytest.raises(ValueError, match="sample 1 has length 0"):
        plan_epoch(np.array([3, 0]), BatchingConfig())
    assert plan_epoch(np.zeros(0, np.int64), BatchingConfig()) == []


def test_a_calibration_target_is_refused_by_the_planner_until_resolve_width_resolves_it():
    """plan_epoch (and plan_global, where every entry point meets) never plans a target at a width it
    was not calibrated to: the config from_dict gives waits for its lrf, and resolve_width's is planned."""
    lengths = np.random.default_rng(0).integers(50, 800, 2000)
    asked = BatchingConfig.from_dict({"batching": "ssb", "dbs": True, "ssb_key": "cost", "target_zpr": "6.62"})
    assert asked.lrf is None and asked.pending_target == "target_zpr=6.62"
    for plan in (lambda c: plan_epoch(lengths, c), lambda c: plan_global(lengths, c, 0, 2)):
        with pytest.raises(UserError, match=r"target_zpr=6.62 .* batching\.analysis\.resolve_width"):
            plan(asked)
    resolved, record = resolve_width(lengths, asked)
    assert resolved.lrf == record["lrf"] != 0.1 and resolved.target_zpr == 6.62 and not resolved.pending_target
    assert batch_stats(lengths, plan_epoch(lengths, resolved))["zpr"] <= 6.62
    assert BatchingConfig("ssb").lrf == 0.1  # without a target, the paper's width
    assert BatchingConfig("ssb", target_pair_repeat=0.5).with_strategy("sb").lrf == 0.1
