"""PlanBatchSampler: the planner's batches through torch, and mid-epoch resume on any world size."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batching import BatchingConfig, batch_stats, plan_epoch

torch = pytest.importorskip("torch")
from batching.sampler import PlanBatchSampler  # noqa: E402
from tests.kit import icefall_loop  # noqa: E402

LENGTHS = np.random.default_rng(3).integers(20, 800, 403)
CONFIG = BatchingConfig("ssb", dbs=True, br=True, seed=7)


def samplers(world_size, config=CONFIG, epoch=2):
    out = [PlanBatchSampler(LENGTHS, config, rank, world_size) for rank in range(world_size)]
    for sampler in out:
        sampler.set_epoch(epoch)
    return out


def test_yields_the_plan_and_works_in_a_dataloader():
    sampler = samplers(1)[0]
    assert list(sampler) == [b.tolist() for b in plan_epoch(LENGTHS, CONFIG, epoch=2)]
    loader = torch.utils.data.DataLoader(torch.arange(LENGTHS.size), batch_sampler=sampler)
    assert len(loader) == len(sampler) and torch.cat(list(loader)).sort().values.tolist() == list(range(LENGTHS.size))


@settings(max_examples=60, deadline=None)
@given(
    old=st.integers(1, 8),
    new=st.integers(1, 8),
    fraction=st.floats(0, 1),
    config=st.sampled_from(
        [
            CONFIG,
            BatchingConfig("rand"),
            BatchingConfig("sb", batch_size=7),
            BatchingConfig("ats", dbs=True),
            BatchingConfig("ssb", ssb_key="cost", lrf=0.05, dbs=True, br=True),
            BatchingConfig("stream", stream_key="cost", bucket_interval=100, br=True),
        ]
    ),
)
def test_resume_mid_epoch_loses_and_repeats_nothing(old, new, fraction, config):
    before = samplers(old, config)
    steps = int(fraction * len(before[0]))
    consumed = []
    for sampler in before:
        iterator = iter(sampler)
        consumed += [next(iterator) for _ in range(steps)]
    state = before[0].state_dict()
    assert all(s.state_dict() == state for s in before)
    after = samplers(new, config, epoch=0)
    for sampler in after:
        sampler.load_state_dict(state)
    lens = {len(s) for s in after}
    rest = [batch for sampler in after for batch in sampler]
    assert len(lens) == 1 and len(rest) == (lens.pop() - steps) * new  # len(): the epoch's, steps run included
    counts = np.bincount(np.concatenate(consumed + rest).astype(int), minlength=LENGTHS.size)
    if counts.max() > 1:  # documented: fewer samples left than the new world size needs batches
        assert all(len(b) == 1 for b in rest) and sum(map(len, rest)) < new * len(after[0].state_dict()) + new
    else:
        assert (counts == 1).all()


def test_resume_same_world_size_continues_exactly():
    full = [list(s) for s in samplers(2)]
    before = samplers(2)
    for sampler in before:
        iterator = iter(sampler)
        [next(iterator) for _ in range(5)]
    after = samplers(2, epoch=0)
    for sampler, old in zip(after, before):
        sampler.load_state_dict(old.state_dict())
    assert [list(s) for s in after] == [f[5:] for f in full]
    assert after[0].plan_digest() == after[1].plan_digest() == before[0].plan_digest()


def test_resume_twice_across_world_sizes():
    before = samplers(2)
    for sampler in before:
        iterator = iter(sampler)
        [next(iterator) for _ in range(3)]
    middle = samplers(3, epoch=0)
    taken = []
    for sampler in middle:
        sampler.load_state_dict(before[0].state_dict())
        iterator = iter(sampler)
        taken += [next(iterator) for _ in range(2)]
    after = samplers(5, epoch=0)
    for sampler in after:
        sampler.load_state_dict(middle[0].state_dict())
    first = [b.tolist() for r in range(2) for b in plan_epoch(LENGTHS, CONFIG, 2, r, 2)[:3]]
    everything = first + taken + [b for s in after for b in s]
    assert sorted(i for b in everything for i in b) == list(range(LENGTHS.size))


def test_other_settings_are_refused():
    state = samplers(1)[0].state_dict()
    other = PlanBatchSampler(LENGTHS, BatchingConfig("sb"))
    with pytest.raises(ValueError, match="other batching settings"):
        other.load_state_dict(state)


@pytest.mark.parametrize("workers", [0, 2])
def test_an_icefall_loop_restarted_mid_epoch_trains_each_sample_once(workers):
    """Restore, then set_epoch(e) at the top of the epoch (Lhotse's rule): the saved epoch goes on
    where it stopped, and the next epoch is the uninterrupted run's."""

    def make_loader(sampler):
        return torch.utils.data.DataLoader(torch.arange(LENGTHS.size), batch_sampler=sampler, num_workers=workers)

    def run(**kw):
        return icefall_loop(lambda: PlanBatchSampler(LENGTHS, CONFIG), make_loader, torch.Tensor.tolist, **kw)

    whole, _ = run()
    before, state = run(stop=(0, 3))
    after, _ = run(state=state)
    assert sorted(before[0] + after[0]) == list(range(LENGTHS.size)) and before[0] + after[0] == whole[0]
    assert after[1] == whole[1] != whole[0]


def test_set_epoch_keeps_a_restored_state_only_for_its_own_epoch():
    sampler = samplers(1)[0]  # epoch 2
    iterator = iter(sampler)
    [next(iterator) for _ in range(3)]
    state = sampler.state_dict()

    def restored(*epochs):
        out = PlanBatchSampler(LENGTHS, CONFIG)
        out.load_state_dict(state)
        for epoch in epochs:
            out.set_epoch(epoch)
        return list(out)

    epoch2, epoch3 = list(samplers(1, epoch=2)[0]), list(samplers(1, epoch=3)[0])
    assert restored(2) == restored() == epoch2[3:]
    assert restored(2, 2) == epoch2[3:]  # kept until an iteration starts (Accelerate sets the epoch twice)
    assert restored(3) == epoch3 and restored(3, 2) == epoch2  # another epoch discards it


@pytest.mark.parametrize("workers", [0, 2])
def test_torchdata_stateful_dataloader_resumes_exactly(workers):
    stateful = pytest.importorskip(
        "torchdata.stateful_dataloader", reason="pip install torchdata (requirements-dev.txt)"
    )

    def loader():
        sampler = PlanBatchSampler(LENGTHS, CONFIG)
        sampler.set_epoch(1)
        return stateful.StatefulDataLoader(torch.arange(LENGTHS.size), batch_sampler=sampler, num_workers=workers)

    whole = [b.tolist() for b in loader()]
    first = loader()
    iterator = iter(first)
    taken = [next(iterator).tolist() for _ in range(4)]
    state = first.state_dict()
    resumed = loader()
    resumed.load_state_dict(state)
    assert taken + [b.tolist() for b in resumed] == whole


def test_a_calibration_target_is_resolved_when_the_sampler_is_built():
    from batching.analysis import resolve_width

    asked = BatchingConfig("ssb", dbs=True, ssb_key="cost", target_zpr=15)
    sampler = PlanBatchSampler(LENGTHS, asked)
    assert sampler.config == resolve_width(LENGTHS, asked)[0] and sampler.calibration["lrf"] == sampler.config.lrf
    assert batch_stats(LENGTHS, list(map(np.array, sampler)))["zpr"] <= 15
