"""batching.lhotse.SharCutSampler: a Shar directory (written with Lhotse's own writer, with and
without audio) streamed in shard order shuffled per epoch, with the sampler's contract: every rank
the same steps, never over the budget, every cut once an epoch (of those that pass its filter), and
a mid-epoch resume that goes on where it stopped without opening the shards before it."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("lhotse", reason="lhotse is not installed: pip install 'tacotron2-batching[lhotse]'")
import soundfile  # noqa: E402
from lhotse import CutSet, MonoCut, Recording  # noqa: E402
from lhotse.testing.dummies import dummy_cut  # noqa: E402

from batching.errors import UserError  # noqa: E402
from batching.lhotse import (
    PlanCutSampler,  # noqa: E402
    SharCutSampler,  # noqa: E402
)

DURATIONS = np.random.default_rng(3).uniform(0.3, 3.0, 64).round(2)


def write_shar(folder: Path, durations, shard_size: int) -> CutSet:
    """Dummy cuts (metadata only) written as Shar in folder; returns the eager CutSet."""
    cuts = CutSet.from_cuts(
        dummy_cut(i, duration=float(d), recording_duration=float(d)).drop_features() for i, d in enumerate(durations)
    )
    folder.mkdir(parents=True, exist_ok=True)
    cuts.to_shar(folder, fields={}, shard_size=shard_size)
    return cuts


def ids(batches) -> list[list[str]]:
    return [[cut.id for cut in batch] for batch in batches]


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(8, 64),
    shard_size=st.integers(2, 16),
    world_size=st.integers(1, 3),
    epoch=st.integers(0, 3),
    fraction=st.floats(0, 1),
)
def test_every_rank_runs_the_same_steps_over_budget_never_and_a_resume_goes_on(
    tmp_path_factory, n, shard_size, world_size, epoch, fraction
):
    folder = tmp_path_factory.mktemp("shar")
    eager = write_shar(folder, DURATIONS[:n], shard_size)
    if -(-n // shard_size) < world_size:
        with pytest.raises(UserError, match="every rank needs a shard"):
            SharCutSampler(CutSet.from_shar(in_dir=folder), max_duration=4.0, world_size=world_size, rank=0)
        return
    samplers = [
        SharCutSampler(CutSet.from_shar(in_dir=folder), max_duration=4.0, world_size=world_size, rank=r)
        for r in range(world_size)
    ]
    for sampler in samplers:
        sampler.set_epoch(epoch)
    ranks = [ids(sampler) for sampler in samplers]
    seconds = {cut.id: cut.duration for cut in eager}
    assert len({len(r) for r in ranks}) == 1 and len(ranks[0]) == len(samplers[0])
    taken = sorted(i for r in ranks for b in r for i in b)
    assert len(set(taken)) == len(taken) and {i.split("_dup")[0] for i in taken} == set(eager.ids)
    if not any("_dup" in i for i in taken):  # repeats only when a rank holds fewer cuts than another's batches
        assert taken == sorted(eager.ids)
    assert all(len(b) * max(seconds[i.split("_dup")[0]] for i in b) <= 4.0 + 1e-9 for r in ranks for b in r)
    first = samplers[-1]
    iterator = iter(first)
    done = ids(next(iterator) for _ in range(int(fraction * len(ranks[-1]))))
    resumed = SharCutSampler(
        CutSet.from_shar(in_dir=folder), max_duration=4.0, world_size=world_size, rank=world_size - 1
    )
    resumed.load_state_dict(first.state_dict())
    resumed.set_epoch(epoch)  # icefall's order: restore, then set_epoch of the saved epoch keeps the state
    assert done + ids(resumed) == ranks[-1]


def test_the_shard_order_changes_with_the_epoch_and_a_resume_skips_the_shards_done(tmp_path, monkeypatch):
    write_shar(tmp_path, DURATIONS, shard_size=8)
    sampler = SharCutSampler(CutSet.from_shar(in_dir=tmp_path), max_duration=4.0, seed=1)
    epochs = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        epochs.append(ids(sampler))
    assert epochs[0] != epochs[1] and sorted(sum(epochs[0], [])) == sorted(sum(epochs[1], []))
    iterator = iter(sampler)
    for _ in range(len(epochs[1]) * 3 // 4):
        next(iterator)
    state = sampler.state_dict()
    assert state["shard"] > 0 and state["consumed"] == len(epochs[1]) * 3 // 4
    opened = []
    real = SharCutSampler.__init__.__globals__["_shard_cuts"]
    monkeypatch.setitem(
        SharCutSampler.__init__.__globals__, "_shard_cuts", lambda shard: opened.append(shard) or real(shard)
    )
    resumed = SharCutSampler(CutSet.from_shar(in_dir=tmp_path), max_duration=4.0, seed=1)
    resumed.load_state_dict(state)
    rest = ids(resumed)
    assert rest == epochs[1][state["consumed"] :] and len(opened) == 8 - state["shard"]


def test_filter_and_map_apply_to_the_batches_read_from_the_shards(tmp_path):
    """40 cuts of 0.5-2.5 s, filter(duration < 1.0): only the cuts that pass come out, on every rank in
    equal steps, the others counted as discarded; a resume of the filtered epoch goes on; map applies."""
    durations = np.random.default_rng(5).uniform(0.5, 2.5, 40).round(2)
    eager = write_shar(tmp_path, durations, shard_size=6)
    short = sorted(cut.id for cut in eager if cut.duration < 1.0)
    assert 0 < len(short) < 40
    samplers = [
        SharCutSampler(CutSet.from_shar(in_dir=tmp_path), max_duration=3.0, world_size=2, rank=r).filter(
            lambda cut: cut.duration < 1.0
        )
        for r in range(2)
    ]
    ranks = [ids(sampler) for sampler in samplers]
    assert sorted(i for r in ranks for b in r for i in b) == short
    assert len(ranks[0]) == len(ranks[1]) == len(samplers[0])
    read = sum(len(r) for r in samplers[0].lengths)
    assert f"cuts kept {sum(map(len, ranks[0]))}/" in samplers[0].get_report() and read == len(short)
    first = samplers[1]
    iterator = iter(first)
    done = ids([next(iterator)])
    resumed = SharCutSampler(CutSet.from_shar(in_dir=tmp_path), max_duration=3.0, world_size=2, rank=1)
    resumed.filter(lambda cut: cut.duration < 1.0).load_state_dict(first.state_dict())
    assert done + ids(resumed) == ranks[1]
    mapped = SharCutSampler(CutSet.from_shar(in_dir=tmp_path), max_duration=3.0).map(lambda cuts: cuts.subset(first=1))
    assert all(len(batch) == 1 for batch in mapped) and len(list(mapped)) == len(mapped)


def test_cuts_keep_their_audio_and_mistakes_are_one_error(tmp_path):
    rng = np.random.default_rng(0)
    cuts = []
    for i in range(12):
        path = tmp_path / f"u{i}.wav"
        soundfile.write(path, rng.normal(0, 0.1, int(8000 * rng.uniform(0.2, 1.0))).astype(np.float32), 8000)
        recording = Recording.from_file(path, recording_id=path.stem)
        cuts.append(MonoCut(path.stem, 0, recording.duration, 0, recording=recording))
    (tmp_path / "shar").mkdir()
    CutSet.from_cuts(cuts).to_shar(tmp_path / "shar", fields={"recording": "wav"}, shard_size=4)
    sampler = SharCutSampler(CutSet.from_shar(in_dir=tmp_path / "shar"), max_duration=3.0)
    loaded = [cut.load_audio().shape[1] for batch in sampler for cut in batch]
    assert sorted(loaded) == sorted(cut.num_samples for cut in cuts)
    assert all(b[0].dataloading_info["world_size"] == 1 for b in sampler)
    with pytest.raises(UserError, match="SharCutSampler"):
        PlanCutSampler(CutSet.from_shar(in_dir=tmp_path / "shar"), max_duration=3.0)
    with pytest.raises(UserError, match=r"cuts.000000.jsonl.gz:\d+ lasts .* over max_duration=0.5 s"):
        SharCutSampler(CutSet.from_shar(in_dir=tmp_path / "shar"), max_duration=0.5)
    for bad, message in (
        (dict(max_duration=0), "max_duration=0 must be a positive number"),  # the settings PlanCutSampler reads
        (dict(max_duration=3.0, frame_shift=-1), "frame_shift=-1 must be a positive number of seconds"),
        (dict(max_duration=3.0, bucket_interval=0), "bucket_interval=0 must be a positive number of seconds"),
    ):
        with pytest.raises(UserError, match=message):
            SharCutSampler(CutSet.from_shar(in_dir=tmp_path / "shar"), **bad)
    with pytest.raises(UserError, match="not saved by SharCutSampler"):
        sampler.load_state_dict(PlanCutSampler(CutSet.from_cuts(cuts), max_duration=3.0).state_dict())
    with pytest.raises(UserError, match="SharCutSampler state is damaged"):
        sampler.load_state_dict({k: v for k, v in sampler.state_dict().items() if k != "consumed"})
    with pytest.raises(UserError, match="CutSet.from_shar"):
        SharCutSampler(CutSet.from_cuts(cuts), max_duration=3.0)
    with pytest.raises(UserError, match="cut_map_fns"):
        SharCutSampler(CutSet.from_shar(in_dir=tmp_path / "shar", cut_map_fns=[str] * 3), max_duration=3.0)


def test_iterable_dataset_wrapper_reads_the_shards_in_a_worker(tmp_path):
    import torch
    from lhotse.dataset.iterable_dataset import IterableDatasetWrapper

    eager = write_shar(tmp_path, DURATIONS[:20], shard_size=5)
    sampler = SharCutSampler(CutSet.from_shar(in_dir=tmp_path), max_duration=4.0)
    next(iter(sampler))  # a running pass is not pickled
    loader = torch.utils.data.DataLoader(IterableDatasetWrapper(CutIdList(), sampler), batch_size=None, num_workers=1)
    assert sorted(i for batch in loader for i in batch) == sorted(eager.ids)


class CutIdList:
    def __getitem__(self, cuts: CutSet) -> list[str]:
        return [cut.id for cut in cuts]
