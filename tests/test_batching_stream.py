"""batching=stream: the blog's streaming length-bucket sampler with its end-of-epoch flush,
seeded stream order, skipped-sample reporting and equal batch counts on every rank."""

import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import train
from batching import BatchingConfig, StreamBucketer, deal_steps, plan_digest, plan_epoch, plan_global, skipped_samples
from batching.cli import main
from batching.cost_key import CostKey
from batching.stream import bucket_ids, stream_budget
from training.config import batching_config
from training.hparams import load_hparams
from training.rundir import read_metrics

LENGTHS = st.one_of(
    st.lists(st.integers(1, 1000), min_size=1, max_size=150),
    st.builds(lambda n, x: [x] * n, st.integers(1, 60), st.integers(1, 900)),
    st.builds(lambda n, k: [5] * n + [3000] * k, st.integers(0, 100), st.integers(1, 3)),
)


@st.composite
def stream_configs(draw, lengths):
    max_length = draw(st.one_of(st.none(), st.integers(1, max(lengths) + 10)))
    kept = [x for x in lengths if max_length is None or x <= max_length] or [1]
    capacity = draw(st.one_of(st.none(), st.integers(max(kept), 4 * max(kept) + 50)))
    return BatchingConfig(
        "stream",
        batch_size=draw(st.integers(1, 20)),
        bucket_interval=draw(st.integers(1, 300)),
        max_length=max_length,
        capacity=capacity,
        br=draw(st.booleans()),
        drop_last=draw(st.booleans()),
        seed=draw(st.integers(0, 2**32)),
        stream_key=draw(st.sampled_from([None, "length", "cost"])),
    )


def buckets_of(lengths, config):
    """The bucket of each length as the planner files it (the cost key fitted on the kept lengths)."""
    kept = lengths[lengths <= (config.max_length or lengths.max())]
    key = CostKey(kept) if config.stream_key == "cost" and kept.size else None
    return bucket_ids(lengths, config.bucket_interval, key)


def quiet_plan(lengths, config, epoch=0, world_size=1):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return plan_global(lengths, config, epoch, world_size)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), lengths=LENGTHS, world_size=st.integers(1, 8), epoch=st.integers(0, 5))
def test_stream_plan_invariants(data, lengths, world_size, epoch):
    config = data.draw(stream_configs(lengths))
    lengths = np.array(lengths)
    plan = quiet_plan(lengths, config, epoch, world_size)
    ranks = [plan.batches(r) for r in range(world_size)]
    assert len({len(r) for r in ranks}) == 1, "every rank gets the same number of batches"
    batches = [b for r in ranks for b in r]
    skipped = skipped_samples(lengths, config)
    kept = np.setdiff1d(np.arange(lengths.size), skipped)
    counts = np.bincount(np.concatenate(batches or [np.zeros(0, np.int64)]), minlength=lengths.size)
    assert (counts[skipped] == 0).all(), "skipped samples never appear"
    if config.drop_last:
        assert counts.max(initial=0) <= 1
    elif kept.size >= len(batches):
        assert (counts[kept] == 1).all(), "every kept sample exactly once"
    else:  # documented: fewer samples than ranks need batches -> cyclic single-sample repeats
        assert all(b.size == 1 for b in batches) and (counts[kept] >= 1).all()
    budget = stream_budget(lengths, config) if kept.size else 0
    assert all(b.size and b.size * lengths[b].max() <= budget for b in batches), "no batch over the budget"
    buckets = buckets_of(lengths, config)
    assert all(np.unique(buckets[b]).size == 1 for b in batches), "one bucket per batch"
    assert plan_digest(plan.batches()) == plan_digest(quiet_plan(lengths, config, epoch, world_size).batches())


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 900), min_size=0, max_size=300),
    interval=st.integers(1, 200),
    batch_size=st.integers(1, 20),
    epoch=st.integers(0, 3),
    key=st.sampled_from([None, "cost"]),
)
def test_compiled_planner_is_the_streaming_bucketer(lengths, interval, batch_size, epoch, key):
    """plan_global (numba, arrays) emits exactly the batches of StreamBucketer (any iterator), with
    either key (the bucketer's CostKey fitted on the same lengths)."""
    lengths = np.array(lengths, np.int64)
    config = BatchingConfig("stream", batch_size=batch_size, bucket_interval=interval, seed=5, stream_key=key)
    planned = plan_epoch(lengths, config, epoch)
    stream = np.random.default_rng([5, epoch]).permutation(lengths.size)  # the documented seeded stream
    budget = stream_budget(lengths, config)
    fitted = CostKey(lengths) if key and lengths.size else None
    streamed = list(StreamBucketer(budget, interval, key=fitted).run(zip(stream.tolist(), lengths[stream].tolist())))
    assert [b.tolist() for b in planned] == streamed


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 2000), min_size=1, max_size=300),
    sample=st.integers(1, 50),
    interval=st.integers(1, 300),
)
def test_a_key_fitted_on_a_sample_keeps_the_stream_within_budget(lengths, sample, interval):
    """A true stream fits its key before it has seen the lengths: those outside the sample's range
    go to the end buckets and are counted; no batch passes the budget, every sample once."""
    lengths = np.array(lengths, np.int64)
    key = CostKey(lengths[:sample])
    budget = 4 * int(lengths.max())
    bucketer = StreamBucketer(budget, interval, key=key)
    batches = list(bucketer.run(enumerate(lengths.tolist())))
    assert bucketer.outside == key.outside(lengths) and bucketer.seen == lengths.size
    assert sorted(i for b in batches for i in b) == list(range(lengths.size))
    assert all(len(b) * lengths[b].max() <= budget for b in batches)
    buckets = bucket_ids(lengths, interval, key)
    assert all(np.unique(buckets[b]).size == 1 for b in batches)


def test_cost_key_buckets_count_and_one_bucket_is_the_length_keys():
    """stream_key=cost cuts G into (L_max - L_min) // bucket_interval + 1 equal buckets; one bucket
    (an interval past the range) plans what the length key's single bucket plans."""
    lengths = np.random.default_rng(2).integers(100, 900, 2000)
    key = CostKey(lengths)
    assert np.unique(bucket_ids(lengths, 100, key)).tolist() == list(range((lengths.max() - 100) // 100 + 1))
    one = [BatchingConfig("stream", bucket_interval=1000, stream_key=k, br=True, seed=1) for k in ("length", "cost")]
    assert plan_digest(plan_epoch(lengths, one[0], 3)) == plan_digest(plan_epoch(lengths, one[1], 3))


def test_flush_at_epoch_end_in_ascending_bucket_order():
    bucketer = StreamBucketer(budget=40, interval=50)
    emitted = [bucketer.push(i, 10) for i in range(10)]
    assert [e for e in emitted if e] == [[0, 1, 2, 3], [4, 5, 6, 7]]  # a fifth 10 would make 50 > 40
    assert bucketer.pending == 2 and bucketer.flush() == [[8, 9]] and bucketer.pending == 0
    lengths = np.array([120, 10, 60, 10, 10, 130])  # buckets 2, 0, 1, 0, 0, 2: nothing fills up
    batches = plan_epoch(lengths, BatchingConfig("stream", capacity=1000, bucket_interval=50))
    assert [sorted(lengths[b].tolist()) for b in batches] == [[10, 10, 10], [60], [120, 130]]


def test_seeded_stream_same_epoch_same_plan_new_epoch_new_plan():
    lengths = np.random.default_rng(1).integers(50, 800, 500)
    config = BatchingConfig("stream", br=True, seed=3)
    digests = [plan_digest(plan_epoch(lengths, config, e)) for e in (0, 1, 2, 0)]
    assert digests[0] == digests[3] and len(set(digests)) == 3
    assert plan_digest(plan_epoch(lengths, BatchingConfig("stream", br=True, seed=4))) != digests[0]


def test_samples_over_max_length_are_skipped_and_reported():
    lengths = np.array([100, 900, 200, 950, 300] * 4)
    config = BatchingConfig("stream", max_length=800)
    with pytest.warns(UserWarning, match=r"8 of 20 samples are longer than max_length=800 frames .*longest 950"):
        batches = plan_epoch(lengths, config)
    assert skipped_samples(lengths, config).tolist() == [1, 3, 6, 8, 11, 13, 16, 18]
    assert sorted(np.concatenate(batches).tolist()) == [i for i in range(20) if lengths[i] <= 800]
    bucketer = StreamBucketer(budget=1000, interval=50, max_length=800)
    list(bucketer.run(enumerate(lengths.tolist())))
    assert (bucketer.skipped, bucketer.seen) == (8, 20)


def test_budget_is_capacity_else_batch_size_times_longest_kept():
    lengths = np.array([100, 900, 200])
    assert stream_budget(lengths, BatchingConfig("stream", batch_size=4)) == 3600
    assert stream_budget(lengths, BatchingConfig("stream", batch_size=4, max_length=500)) == 800
    with pytest.raises(
        ValueError, match=r"sample 1 has length 900 frames, over the batch capacity of 500 .*max_length"
    ):
        plan_epoch(lengths, BatchingConfig("stream", capacity=500))
    with pytest.warns(UserWarning):  # the same sample skipped instead of an error once max_length says so
        assert len(plan_epoch(lengths, BatchingConfig("stream", capacity=500, max_length=500))) == 2


def test_config_dbs_implied_and_validation():
    assert BatchingConfig("stream").dbs and BatchingConfig("stream", capacity=9000).capacity == 9000
    assert BatchingConfig.from_hparams("batching=stream,bucket_interval=25,max_length=none") == BatchingConfig(
        "stream", dbs=True, bucket_interval=25
    )
    with pytest.raises(ValueError, match=r"max_length=800 applies only to batching=stream"):
        BatchingConfig("ssb", max_length=800)
    with pytest.raises(ValueError, match=r"bucket_interval=0 is invalid"):
        BatchingConfig("stream", bucket_interval=0)
    with pytest.raises(ValueError, match=r"stream_key='frames' is invalid: expected one of 'length', 'cost'"):
        BatchingConfig.from_hparams("batching=stream,stream_key=frames")
    with pytest.raises(ValueError, match=r"stream_key=cost applies only to batching=stream"):
        BatchingConfig("ssb", stream_key="cost")
    assert BatchingConfig("stream", stream_key="cost").with_strategy("ssb").stream_key is None
    hp = load_hparams("batching=stream,bucket_interval=25,max_length=null")
    assert batching_config(hp, 2) == BatchingConfig("stream", dbs=True, br=True, bucket_interval=25, max_length=None)
    assert batching_config(load_hparams("batching=stream,max_length=700"), 2).max_length == 700
    assert batching_config(load_hparams("batching=stream,stream_key=cost"), 2).stream_key == "cost"


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 12), max_size=40), world_size=st.integers(1, 8), window=st.integers(1, 4))
def test_deal_steps_gives_every_rank_the_same_count(sizes, world_size, window):
    stops = np.cumsum(sizes).tolist()
    batches = [list(range(a, b)) for a, b in zip([0] + stops[:-1], stops)]
    steps = list(deal_steps(iter(batches), world_size, window, key=len))
    assert all(len(step) == world_size and all(step) for step in steps)
    counts = np.bincount([i for step in steps for batch in step for i in batch], minlength=sum(sizes))
    assert (counts >= 1).all() and counts.sum() - counts.size < world_size
    if counts.max(initial=0) > 1:  # only when the held tail was all single samples
        assert all(len(b) == 1 for b in steps[-1])
    if len(sizes) <= 2 * window * world_size and sum(sizes) >= -(-len(sizes) // world_size) * world_size:
        assert counts.max(initial=0) <= 1  # all held: the same rules as arrange


@pytest.mark.parametrize("key", [None, "cost"])
def test_plan_batch_sampler_and_resume_on_another_world_size(key):
    torch = pytest.importorskip("torch")
    from batching.sampler import PlanBatchSampler

    lengths = np.random.default_rng(3).integers(20, 800, 403)
    config = BatchingConfig("stream", br=True, bucket_interval=25, seed=7, stream_key=key)
    sampler = PlanBatchSampler(lengths, config)
    sampler.set_epoch(2)
    loader = torch.utils.data.DataLoader(torch.arange(lengths.size), batch_sampler=sampler)
    assert torch.cat(list(loader)).sort().values.tolist() == list(range(lengths.size))
    before = [PlanBatchSampler(lengths, config, r, 3) for r in range(3)]
    consumed = []
    for s in before:
        s.set_epoch(1)
        iterator = iter(s)
        consumed += [next(iterator) for _ in range(5)]
    after = [PlanBatchSampler(lengths, config, r, 2) for r in range(2)]
    for s in after:
        s.load_state_dict(before[0].state_dict())
    rest = [list(s) for s in after]
    assert len(rest[0]) == len(rest[1])
    assert sorted(i for b in consumed + rest[0] + rest[1] for i in b) == list(range(lengths.size))


def test_stats_cli_reports_stream(capsys, ljspeech_lengths_tsv):
    with pytest.warns(UserWarning, match="skipped"):  # the planner's warning, besides the count
        code = main(
            [
                "stats",
                "--lengths",
                str(ljspeech_lengths_tsv),
                "--split",
                "0.8",
                "--json",
                "--hparams",
                "batching=stream,br=true,bucket_interval=50,max_length=700",
            ]
        )
    out = capsys.readouterr()[0]
    stats = json.loads(out)
    assert code == 0 and stats["config"]["batching"] == "stream" and stats["config"]["dbs"]
    assert stats["skipped"] > 0 and stats["n_samples"] + stats["skipped"] == 10480
    assert 0 < stats["zpr"] < 10 and stats["n_batches"] > 0 and 0 <= stats["pair_repeat"] < 0.2
    main(["stats", "--lengths", str(ljspeech_lengths_tsv), "--split", "0.8", "--hparams", "batching=stream"])
    out = capsys.readouterr()[0]
    assert "| skipped | 0 |" in out and "| zpr |" in out and "| pair_repeat |" in out


@pytest.mark.slow
def test_train_with_stream_runs_and_learns(tmp_path, demo_corpus):
    """Training end to end on stream batches: every epoch's plan is a stream plan, the loss falls.
    (Stream batches go through the same sampler, collate and model path as every padded strategy,
    which test_training_run.test_demo_learns_at_reduced_size checks at length.)"""
    from tests.kit import tiny

    assert (
        train.main(
            [
                "--hparams",
                tiny(tmp_path, "epochs=4,batching=stream,bucket_interval=25,learning_rate=0.003", demo_corpus),
            ]
        )
        == 0
    )
    records = read_metrics(tmp_path / "run")
    assert [r["epoch"] for r in records] == [0, 1, 2, 3]
    assert all(r["steps"] == r["n_batches"] and r["skipped"] == 0 for r in records)
    assert records[-1]["train_loss_valid"] < 0.8 * records[0]["train_loss_valid"]
    assert records[-1]["val_loss_valid"] < records[0]["val_loss_valid"]
