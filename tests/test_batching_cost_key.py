"""SSB's cost key (batching/cost_key.py) and the calibration of lrf to a target (batching.analysis.resolve_width)."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batching import BatchingConfig, plan_digest, plan_epoch
from batching.analysis import LRF_CEILING, calibrated_line, describe, resolve_width
from batching.cli import main
from batching.cost_key import CostKey, cost_key, cost_order
from batching.errors import UserError
from tests.kit import AWKWARD

LENGTHS = np.random.default_rng(5).lognormal(np.log(400), 0.4, 600).round().astype(np.int64) + 1
COST = BatchingConfig("ssb", ssb_key="cost", dbs=True, br=True)


@settings(max_examples=200, deadline=None)
@given(lengths=AWKWARD)
def test_key_rises_with_the_length_from_0_to_1(lengths):
    lengths = np.array(lengths, np.int64)
    keys = cost_key(lengths)
    by_length = np.argsort(lengths, kind="stable")
    steps, rises = np.diff(keys[by_length]), np.diff(lengths[by_length])
    assert (steps[rises > 0] > 0).all() and (steps[rises == 0] == 0).all()
    if lengths.min() < lengths.max():
        assert keys.min() == pytest.approx(0, abs=1e-12) and keys.max() == pytest.approx(1)


@settings(max_examples=100, deadline=None)
@given(lengths=AWKWARD, width=st.floats(1e-3, 4), seed=st.integers(0, 2**32))
def test_order_sorts_key_plus_noise(lengths, width, seed):
    """The radix sort of the quantised key is argsort of G + noise up to one quantum (2^-32 of its range)."""
    lengths = np.array(lengths, np.int64)
    if lengths.min() == lengths.max():
        return
    noise = np.random.default_rng(seed).uniform(-width / 2, width / 2, lengths.size)
    order = cost_order(lengths, noise, width)
    assert np.array_equal(np.sort(order), np.arange(lengths.size))
    noisy = (cost_key(lengths) + noise)[order]
    assert (np.diff(noisy) >= -(1 + width) * 2.0**-31).all()


@settings(max_examples=100, deadline=None)
@given(reference=AWKWARD, unseen=st.lists(st.integers(1, 5000), max_size=50), n_buckets=st.integers(1, 40))
def test_a_fitted_key_clamps_unseen_lengths_into_the_end_buckets(reference, unseen, n_buckets):
    """CostKey (stream_key=cost): G of the reference is cost_key's; lengths it did not span get G = 0
    below it and 1 above it, are counted, and the buckets stay contiguous length ranges."""
    reference, unseen = np.array(reference, np.int64), np.array(unseen, np.int64)
    key = CostKey(reference)
    assert np.array_equal(key(reference), cost_key(reference)) and key.outside(reference) == 0
    below, above = unseen < reference.min(), unseen > reference.max()
    assert key.outside(unseen) == below.sum() + above.sum()
    assert key(unseen)[below] == pytest.approx(0, abs=1e-12) and key(unseen)[above] == pytest.approx(1)
    everything = np.sort(np.concatenate([reference, unseen]))
    buckets = key.buckets(everything, n_buckets)
    assert (np.diff(buckets) >= 0).all() and buckets.min() >= 0 and buckets.max() <= n_buckets - 1
    if reference.min() < reference.max():
        assert key.buckets(reference, n_buckets).max() == n_buckets - 1 and key.buckets(reference, n_buckets).min() == 0


def test_zero_width_is_strict_sorting():
    for key in ("length", "cost"):
        plan = plan_epoch(LENGTHS, BatchingConfig("ssb", lrf=0.0, ssb_key=key, dbs=True))
        assert plan_digest(plan) == plan_digest(plan_epoch(LENGTHS, BatchingConfig("sb", dbs=True)))


def test_noise_is_narrow_in_frames_where_lengths_are_dense_and_long():
    """h ∝ density^(-1/2) l^(-3/2): at equal width in G, the long dense mode mixes fewer frames than the short
    sparse one."""
    lengths = np.concatenate([np.full(50, 100), np.full(50, 110), np.full(2000, 800), np.full(2000, 810)])
    keys = cost_key(lengths)
    assert keys[-1] - keys[100] > 10 * (keys[50] - keys[0])  # G(810) - G(800) against G(110) - G(100)


@pytest.mark.parametrize("target", [dict(target_zpr=10.0), dict(target_pair_repeat=0.05)])
def test_a_target_resolves_lrf_that_meets_it(target):
    config = BatchingConfig("ssb", ssb_key="cost", dbs=True, br=True, **target)
    resolved, record = resolve_width(LENGTHS, config)
    ((name, value),) = target.items()
    metric = name.removeprefix("target_")
    assert resolved.lrf == record["lrf"] and getattr(resolved, name) == value
    assert describe(LENGTHS, resolved)[metric] == pytest.approx(record[metric]) and record[metric] <= value
    step = 1e-4 if metric == "zpr" else -1e-4  # the next grid point the other way misses the target
    assert describe(LENGTHS, resolved.with_strategy("ssb", lrf=round(resolved.lrf + step, 4)))[metric] > value
    assert resolve_width(LENGTHS, COST) == (COST, None)


def test_a_zpr_target_on_a_large_corpus_is_bisected_on_a_seeded_sample(monkeypatch):
    """Over CALIBRATION_SAMPLE lengths a ZPR target is bisected on a sample drawn from the seed (the
    same on every rank) under the whole corpus's budget; the ZPR logged is the whole corpus's and lands
    near the target; a pair_repeat target (which depends on the corpus's size) is never sampled."""
    import batching.analysis as analysis

    monkeypatch.setattr(analysis, "CALIBRATION_SAMPLE", 20_000)
    lengths = np.clip(np.random.default_rng(1).lognormal(6.0, 0.5, 100_000), 30, 3_000).astype(np.int64)
    config = BatchingConfig("ssb", ssb_key="cost", dbs=True, br=True, seed=3, target_zpr=8.0)
    resolved, record = resolve_width(lengths, config)
    sample = np.random.default_rng(3).choice(lengths, 20_000, replace=False)
    pinned = BatchingConfig("ssb", ssb_key="cost", dbs=True, br=True, seed=3, capacity=16 * int(lengths.max()))
    assert record["bisected_on"] == 20_000 and resolved.capacity is None
    assert (
        record["lrf"] == analysis.bisect_parameter(sample, pinned, "lrf", 8.0, 0.0, analysis.LRF_CEILING, 1e-4)["lrf"]
    )
    assert record["zpr"] <= 8.0 and record["pair_repeat"] is None  # the sample's ZPR: no whole-corpus epochs planned
    assert record["zpr"] == pytest.approx(describe(sample, dataclasses.replace(pinned, lrf=resolved.lrf))["zpr"])
    assert 7.5 < describe(lengths, resolved)["zpr"] <= 8.05  # a sample pads a little more at a width: the lrf errs low
    assert "on a 20,000-length sample of these lengths: ZPR" in analysis.calibrated_line(record)
    assert analysis.calibrated_line(record).endswith("% on the sample")
    assert resolve_width(lengths, config) == (resolved, record)
    by_randomness = resolve_width(
        lengths, BatchingConfig("ssb", ssb_key="cost", dbs=True, br=True, target_pair_repeat=0.05)
    )[1]
    assert by_randomness["bisected_on"] is None and "on these lengths" in analysis.calibrated_line(by_randomness)


def test_target_zpr_paper_is_the_papers_ssbs_zpr_on_the_same_lengths(tmp_path):
    """The recipe's default: the cost key padded as the paper's SSB (the length key, lrf 0.1) pads
    these lengths under the same budget and seed, so it is never more padded than the paper's."""
    for dbs in (True, False):
        paper = describe(LENGTHS, BatchingConfig("ssb", dbs=dbs, br=True, seed=2, lrf=0.1))["zpr"]
        resolved, record = resolve_width(
            LENGTHS, BatchingConfig("ssb", ssb_key="cost", dbs=dbs, br=True, seed=2, target_zpr="paper")
        )
        explicit = resolve_width(
            LENGTHS, BatchingConfig("ssb", ssb_key="cost", dbs=dbs, br=True, seed=2, target_zpr=paper)
        )[0]
        assert resolved == dataclasses.replace(explicit, target_zpr="paper") and record["zpr"] <= paper + 1e-9
        assert record["target"] == f"target_zpr=paper (the paper's SSB's {paper:.2f}%)"
    assert BatchingConfig.from_dict({"batching": "ssb", "target_zpr": "paper"}).target_zpr == "paper"
    with pytest.raises(UserError, match="target_zpr='papers' is invalid"):
        BatchingConfig.from_dict({"batching": "ssb", "target_zpr": "papers"})


def test_a_target_out_of_reach_plans_at_the_nearest_width_and_says_so():
    """A ZPR below the sorted plan's is met by the sorted plan (lrf 0); a pair_repeat below a
    shuffle's (fewer repeats than the widest noise gives) by the widest noise."""
    resolved, record = resolve_width(LENGTHS, BatchingConfig("ssb", dbs=False, target_zpr=0.001))
    assert resolved.lrf == record["lrf"] == 0.0 and record["reached"] is False
    assert record["zpr"] == pytest.approx(describe(LENGTHS, resolved)["zpr"]) and record["zpr"] > 0.001
    assert calibrated_line(record).startswith(
        "target_zpr=0.001 is out of reach on these lengths: ssb_key=length plans at the nearest width, lrf=0.0: ZPR "
    )
    widest, record = resolve_width(LENGTHS, BatchingConfig("ssb", dbs=True, ssb_key="cost", target_pair_repeat=1e-9))
    assert widest.lrf == LRF_CEILING and record["reached"] is False and record["pair_repeat"] > 1e-9
    sorted_zpr = describe(LENGTHS, BatchingConfig("ssb", dbs=True, lrf=0.0))["zpr"]
    assert resolve_width(LENGTHS, BatchingConfig("ssb", dbs=True, target_zpr=sorted_zpr + 1))[1]["reached"] is True


def test_the_sampler_resolves_once_and_a_resume_keeps_the_saved_width():
    torch = pytest.importorskip("torch")  # noqa: F841 - the sampler needs it
    from batching.sampler import PlanBatchSampler

    config = BatchingConfig("ssb", ssb_key="cost", dbs=True, br=True, target_pair_repeat=0.05)
    sampler = PlanBatchSampler(LENGTHS, config)
    assert sampler.calibration["lrf"] == sampler.config.lrf == resolve_width(LENGTHS, config)[0].lrf
    state = sampler.state_dict()
    state["config"]["lrf"] = 0.5  # as if an older run had resolved another width
    again = PlanBatchSampler(LENGTHS, config)
    again.load_state_dict(state)
    assert again.config.lrf == 0.5
    assert plan_digest(again.plan.batches()) == plan_digest(plan_epoch(LENGTHS, again.config))


def test_calibrate_takes_a_target_pair_repeat(tmp_path, capsys):
    path = tmp_path / "lengths.tsv"
    path.write_text("id\tframes\n" + "".join(f"u{i}\t{n}\n" for i, n in enumerate(LENGTHS)))
    assert (
        main(
            [
                "calibrate",
                "--lengths",
                str(path),
                "--split",
                "1",
                "--hparams",
                "batching=ssb,ssb_key=cost,dbs=true",
                "--target-pair-repeat",
                "0.05",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("target pair_repeat 0.0500") and "| ssb | lrf |" in out and "pair_repeat |" in out
