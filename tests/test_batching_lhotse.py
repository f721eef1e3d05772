"""batching.lhotse.PlanCutSampler: CutSet batches from the planner, in a DataLoader, on one and two
processes, resumed mid-epoch on another world size (cuts built from generated audio)."""
import os
import sys
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batching import STRATEGIES, BatchingConfig, plan_epoch

pytest.importorskip("lhotse", reason="lhotse is not installed: pip install 'tacotron2-batching[lhotse]'")
import soundfile  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from lhotse import CutSet, MonoCut, Recording, SupervisionSegment  # noqa: E402
from lhotse.dataset import K2SpeechRecognitionDataset, OnTheFlyFeatures  # noqa: E402
from lhotse.features import Fbank  # noqa: E402
from lhotse.testing.dummies import dummy_cut  # noqa: E402

from batching.errors import UserError  # noqa: E402
from batching.lhotse import PlanCutSampler  # noqa: E402
from batching.lhotse_measure import Measure  # noqa: E402
from tests.kit import REPO, icefall_loop, run_command  # noqa: E402

RATE = 8000
CONFIG = BatchingConfig("ssb", batch_size=4, dbs=True, br=True, seed=3)


def audio_cuts(folder, n=40) -> CutSet:
    """n mono WAVs of 0.2-1.5 s of noise with a one-word transcript each, as an eager CutSet."""
    rng = np.random.default_rng(0)
    cuts = []
    for i in range(n):
        path = folder / f"u{i:03d}.wav"
        soundfile.write(path, rng.normal(0, 0.1, int(RATE * rng.uniform(0.2, 1.5))).astype(np.float32), RATE)
        recording = Recording.from_file(path, recording_id=path.stem)
        text = SupervisionSegment(path.stem, path.stem, 0, recording.duration, text="noise")
        cuts.append(MonoCut(path.stem, 0, recording.duration, 0, recording=recording, supervisions=[text]))
    return CutSet.from_cuts(cuts)


def ids(batches) -> list[list[str]]:
    return [[cut.id for cut in batch] for batch in batches]


def test_batches_are_the_plan_of_the_cut_durations(tmp_path):
    cuts = audio_cuts(tmp_path)
    sampler = PlanCutSampler(cuts, CONFIG)
    sampler.set_epoch(2)
    frames = Measure(step=0.01).lengths(Measure().values(list(cuts)))
    expected = [[cuts[int(i)].id for i in b] for b in plan_epoch(frames, CONFIG, epoch=2)]
    assert ids(sampler) == expected and len(sampler) == len(expected) > 1
    assert sorted(sum(expected, [])) == sorted(cuts.ids)


def test_a_k2_style_dataset_loads_the_batches_in_a_dataloader(tmp_path):
    cuts = audio_cuts(tmp_path)
    sampler = PlanCutSampler(cuts, max_duration=3.0)
    dataset = K2SpeechRecognitionDataset(input_strategy=OnTheFlyFeatures(Fbank()), return_cuts=True)
    loader = torch.utils.data.DataLoader(dataset, sampler=sampler, batch_size=None)
    seen = []
    for batch in loader:
        durations = [cut.duration for cut in batch["supervisions"]["cut"]]
        assert len(durations) * max(durations) <= 3.0 + 1e-9  # the budget in seconds, padding included
        assert batch["inputs"].shape[0] == len(durations) and batch["inputs"].shape[2] == 80
        seen += [cut.id for cut in batch["supervisions"]["cut"]]
    assert sorted(seen) == sorted(cuts.ids) and len(loader) == len(sampler)


@settings(max_examples=30, deadline=None)
@given(old=st.integers(1, 4), new=st.integers(1, 4), fraction=st.floats(0, 1), seed=st.integers(0, 9))
def test_resume_mid_epoch_on_another_world_size_replays_and_loses_nothing(old, new, fraction, seed):
    durations = np.random.default_rng(seed).uniform(0.5, 20, 97)
    cuts = CutSet.from_cuts(dummy_cut(i, duration=float(d), recording_duration=float(d)) for i, d in enumerate(durations))
    config = BatchingConfig("ssb", batch_size=6, dbs=True, br=True, seed=seed)
    before = [PlanCutSampler(cuts, config, rank=r, world_size=old) for r in range(old)]
    consumed = []
    for sampler in before:
        sampler.set_epoch(1)
        iterator = iter(sampler)
        consumed += ids(next(iterator) for _ in range(int(fraction * len(sampler))))
    after = [PlanCutSampler(cuts, config, rank=r, world_size=new) for r in range(new)]
    for sampler in after:
        sampler.load_state_dict(before[0].state_dict())
    rest = [ids(sampler) for sampler in after]
    assert len({len(r) for r in rest}) == 1  # the same number of batches on every rank
    everything = sum(consumed, []) + [i for r in rest for b in r for i in b]
    if len(everything) == len(cuts):  # else documented: fewer cuts left than the new ranks need batches
        assert sorted(everything) == sorted(cuts.ids)


class CutIds(torch.utils.data.Dataset):
    """A dataset of CutSet batches that returns their cut ids (picklable for DataLoader workers)."""

    def __getitem__(self, cuts: CutSet) -> list[str]:
        return [cut.id for cut in cuts]


@pytest.mark.parametrize("workers", [0, 2])
def test_an_icefall_loop_restarted_mid_epoch_trains_each_cut_once(tmp_path, workers):
    cuts = audio_cuts(tmp_path)

    def run(**kw):
        return icefall_loop(lambda: PlanCutSampler(cuts, CONFIG), lambda sampler: torch.utils.data.DataLoader(
            CutIds(), sampler=sampler, batch_size=None, num_workers=workers), list, **kw)

    whole, _ = run()
    before, state = run(stop=(0, 2))
    after, _ = run(state=state)
    assert sorted(before[0] + after[0]) == sorted(cuts.ids) and before[0] + after[0] == whole[0]
    assert after[1] == whole[1] != whole[0]


def test_lazy_manifests_are_read_in_shar_and_packed_strategies_refused_and_other_cuts(tmp_path):
    cuts = audio_cuts(tmp_path, n=6)
    cuts.to_file(tmp_path / "cuts.jsonl.gz")
    lazy = PlanCutSampler(CutSet.from_jsonl_lazy(tmp_path / "cuts.jsonl.gz"), CONFIG)
    assert ids(lazy) == ids(PlanCutSampler(cuts, CONFIG))
    (tmp_path / "shar").mkdir()
    dummy_cuts(DURATIONS[:8]).to_shar(tmp_path / "shar", fields={}, shard_size=4)
    with pytest.raises(UserError, match="Shar shards"):
        PlanCutSampler(CutSet.from_shar(in_dir=tmp_path / "shar"), max_duration=5.0)
    with pytest.raises(UserError, match="infinite"):
        PlanCutSampler(cuts.repeat(), max_duration=5.0)
    with pytest.raises(ValueError, match="padded strategy"):
        PlanCutSampler(cuts, BatchingConfig("bload"))
    with pytest.raises(ValueError, match="budget is given twice"):
        PlanCutSampler(cuts, BatchingConfig("sb", dbs=True, capacity=500), max_duration=5.0)
    state = PlanCutSampler(cuts).state_dict()
    with pytest.raises(ValueError, match="over 6 cuts"):
        PlanCutSampler(cuts.subset(first=5)).load_state_dict(state)


def _two_ranks(rank: int, init_file: str, manifest: str, results) -> None:
    """One of two gloo processes: rank and world size come from torch.distributed, as in Lhotse."""
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2,
                            timeout=timedelta(seconds=60))
    try:
        sampler = PlanCutSampler(CutSet.from_file(manifest).to_eager(), CONFIG)
        sampler.set_epoch(1)
        total = len(sampler)
        loader = torch.utils.data.DataLoader(K2SpeechRecognitionDataset(return_cuts=True, input_strategy=OnTheFlyFeatures(
            Fbank())), sampler=sampler, batch_size=None)
        taken = []
        for step, batch in enumerate(loader):
            taken.append([cut.id for cut in batch["supervisions"]["cut"]])
            if step == 2:
                break
        results.put((rank, sampler.world_size, total, taken, sampler.state_dict(consumed=3)))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_processes_share_an_epoch_and_one_process_finishes_it(tmp_path):
    cuts = audio_cuts(tmp_path)
    cuts.to_file(tmp_path / "cuts.jsonl.gz")
    results = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(_two_ranks, args=(str(tmp_path / "init"), str(tmp_path / "cuts.jsonl.gz"), results),
                       nprocs=2, start_method="spawn", join=True)
    ranks = sorted(results.get() for _ in range(2))
    assert [r[:2] for r in ranks] == [(0, 2), (1, 2)] and ranks[0][2] == ranks[1][2] > 3
    position = ("epoch", "consumed", "world_size", "history", "config")
    assert [ranks[0][4][k] for k in position] == [ranks[1][4][k] for k in position]  # rank and diagnostics differ
    resumed = PlanCutSampler(cuts, CONFIG)  # one process now
    resumed.load_state_dict(ranks[0][4])
    everything = [i for r in ranks for b in r[3] for i in b] + [i for b in ids(resumed) for i in b]
    assert sorted(everything) == sorted(cuts.ids)


@pytest.mark.slow
def test_bench_batchers_smoke(tmp_path):
    """scripts/bench/batchers.py on 300 lengths and 2,000 bimodal ones: every strategy and Lhotse (reshuffled
    and in order) in the table, a frontier PNG per corpus, and ssb_key=cost calibrated to each Lhotse
    point's pair_repeat, not above it."""
    (tmp_path / "lengths.tsv").write_text("id\tframes\n" + "".join(f"u{i}\t{40 + (i * 53) % 900}\n" for i in range(300)))
    done = run_command(sys.executable, "-m", "scripts.bench.batchers", "--lengths", tmp_path / "lengths.tsv",
                       "--corpora", "file,bimodal", "-n", "2000", "--points", "4", "--num-buckets", "4",
                       "--out", tmp_path, timeout=300)
    rows = [line.split(" | ") for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    labels = [row[0].lstrip("| ") for row in rows]
    for name in STRATEGIES:
        assert sum(label.startswith(name) for label in labels) >= 2, name  # both corpora
    lhotse = [row for row in rows if row[0].startswith("| lhotse num_buckets=4")]
    frontier = [row for row in rows if row[0].startswith("| num_buckets=4")]
    assert len(lhotse) == 4 and len(frontier) == 4  # 2 corpora x (reshuffled, in-order)
    for row in frontier:
        calibrated = row[4].split("pair_repeat ")[1].split(",")[0]
        assert float(calibrated) <= float(row[2])
    assert sorted(p.name for p in tmp_path.glob("frontier_*.png")) == ["frontier_bimodal.png", "frontier_file.png"]


def test_readme_lhotse_example(tmp_path):
    """docs/batching.md's paste-ready example runs as a user's script, on a manifest of generated audio."""
    section = (REPO / "docs" / "batching.md").read_text().split("## With Lhotse (`batching.lhotse`)", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    audio_cuts(tmp_path).to_file(tmp_path / "cuts_train.jsonl.gz")
    (tmp_path / "example.py").write_text(code + "print(epoch, step, batch['inputs'].shape[0])\n")
    done = run_command(sys.executable, "example.py", cwd=tmp_path, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    epoch, step, size = map(int, done.stdout.split())
    assert epoch == 2 and step >= 0 and size >= 1


def dummy_cuts(durations) -> CutSet:
    return CutSet.from_cuts(dummy_cut(i, duration=float(d), recording_duration=float(d)) for i, d in enumerate(durations))


DURATIONS = np.random.default_rng(5).uniform(0.5, 4.0, 60).round(2)


def test_an_over_long_cut_is_found_at_build_by_id_seconds_and_max_duration():
    cuts = dummy_cuts([*DURATIONS[:20], 9.5, 12.0])
    with pytest.raises(UserError, match=r"cut 'dummy-mono-cut-0020' lasts 9.5 s, over max_duration=8 s \(2 such cuts\)"):
        PlanCutSampler(cuts, max_duration=8.0)
    skipping = PlanCutSampler(cuts, max_duration=8.0, too_long="skip")
    taken = [c.id for b in skipping for c in b]
    assert skipping.skipped == {"too_long": 2} and sorted(taken) == sorted(list(cuts.ids)[:20])
    assert skipping.get_report().count("cuts discarded 2")
    alone = list(PlanCutSampler(cuts, max_duration=8.0, too_long="alone"))
    assert sorted(c.id for b in alone for c in b) == sorted(cuts.ids)
    for batch in alone:
        longest = max(c.duration for c in batch)
        assert len(batch) == 1 if longest > 8 else len(batch) * longest <= 8.0 + 1e-9


def test_lhotse_constructor_forms():
    cuts = dummy_cuts(DURATIONS)
    positional = PlanCutSampler(cuts, 6.0)
    assert ids(positional) == ids(PlanCutSampler(cuts, max_duration=6.0))
    capped = list(PlanCutSampler(cuts, max_duration=30.0, max_cuts=3))
    assert max(map(len, capped)) <= 3 and sum(map(len, capped)) == len(cuts)
    fixed = list(PlanCutSampler(cuts, max_cuts=7))
    assert sorted(map(len, fixed)) == [len(cuts) % 7] + [7] * (len(cuts) // 7)
    validation = PlanCutSampler(cuts, max_duration=6.0, shuffle=False)
    first = ids(validation)
    validation.set_epoch(5)
    assert ids(validation) == first
    renamed = cuts.modify_ids(lambda i: i + "_b")
    for a, b in PlanCutSampler(cuts, renamed, max_duration=6.0):  # zipped CutSets: tuples, budget on the first
        assert [c.id + "_b" for c in a] == list(b.ids) and len(a) * max(c.duration for c in a) <= 6.0 + 1e-9
    quadratic = PlanCutSampler(cuts, max_duration=6.0, quadratic_duration=20.0)
    for batch in quadratic:
        longest = max(c.duration for c in batch)
        assert len(batch) * (longest + longest ** 2 / 20.0) <= 6.0 + 1e-6
    randomized = [ids(PlanCutSampler(cuts, max_duration=6.0, seed="trng")) for _ in range(2)]
    assert randomized[0] != randomized[1]


def test_bucketing_knobs_are_accepted_and_logged_once(caplog):
    cuts = dummy_cuts(DURATIONS)
    with caplog.at_level("WARNING", logger="batching.lhotse"):
        for _ in range(2):
            PlanCutSampler(cuts, max_duration=6.0, shuffle=True, drop_last=False, num_buckets=30, buffer_size=100,
                           shuffle_buffer_size=200, duration_bins=[1.0, 2.0], concurrent=False, sync_buckets=True)
    noted = [r.getMessage().split("=")[0] for r in caplog.records]
    assert sorted(n.split(": ")[1] for n in noted) == sorted({n.split(": ")[1] for n in noted}) and len(noted) <= 6
    with pytest.raises(TypeError, match="unexpected keyword arguments: max_frames"):
        PlanCutSampler(cuts, max_frames=100)


def test_a_state_wins_over_other_arguments_and_a_foreign_or_damaged_state_is_one_error():
    cuts = dummy_cuts(DURATIONS)
    sampler = PlanCutSampler(cuts, max_duration=6.0)
    sampler.set_epoch(1)
    iterator = iter(sampler)
    done = [list(next(iterator).ids) for _ in range(3)]
    other = PlanCutSampler(cuts, max_duration=9.0)
    with pytest.warns(UserWarning, match="other settings .*capacity"):
        other.load_state_dict(sampler.state_dict())
    rest = ids(other)
    assert sorted(sum(done, []) + sum(rest, [])) == sorted(cuts.ids) and other.config == sampler.config
    from lhotse.dataset import DynamicBucketingSampler
    with pytest.raises(UserError, match="not saved by PlanCutSampler"):
        other.load_state_dict(DynamicBucketingSampler(cuts, max_duration=6.0).state_dict())
    damaged = sampler.state_dict()
    del damaged["history"]
    with pytest.raises(UserError, match="state is damaged"):
        other.load_state_dict(damaged)


def test_iterable_dataset_wrapper_filter_map_and_dataloading_info():
    from lhotse.dataset.iterable_dataset import IterableDatasetWrapper
    cuts = dummy_cuts(DURATIONS)
    sampler = PlanCutSampler(cuts, max_duration=6.0).filter(lambda c: c.duration > 1.0).map(lambda b: b.subset(first=1))
    loader = torch.utils.data.DataLoader(IterableDatasetWrapper(CutIds(), sampler), batch_size=None)
    batches = list(loader)
    assert all(len(b) == 1 for b in batches) and len(batches) == len(sampler)
    assert sampler.skipped == {"filter": int((DURATIONS <= 1.0).sum())}
    assert all(c.dataloading_info == {"rank": 0, "world_size": 1, "worker_id": None} for b in sampler for c in b)


def test_fewer_cuts_than_ranks_are_repeated_under_lhotse_duplicate_ids():
    cuts = dummy_cuts([1.0, 2.0])
    per_rank = [ids(PlanCutSampler(cuts, max_duration=5.0, rank=r, world_size=5)) for r in range(5)]
    assert all(len(r) == 1 for r in per_rank)
    taken = sorted(i for r in per_rank for b in r for i in b)
    assert len(set(taken)) == 5 and {i.split("_dup")[0] for i in taken} == set(cuts.ids)
    assert sum("_dup" in i for i in taken) == 3 and any(i.endswith("_dup1") for i in taken)


@pytest.mark.parametrize("workers", [0, 2])
def test_torchdata_stateful_dataloader_resumes_the_cut_sampler_exactly(workers):
    stateful = pytest.importorskip("torchdata.stateful_dataloader", reason="pip install torchdata (requirements-dev.txt)")
    cuts = dummy_cuts(DURATIONS)

    def loader():
        sampler = PlanCutSampler(cuts, max_duration=6.0)
        sampler.set_epoch(1)
        return stateful.StatefulDataLoader(CutIds(), sampler=sampler, batch_size=None, num_workers=workers)

    whole = list(loader())
    first = loader()
    iterator = iter(first)
    taken = [next(iterator) for _ in range(4)]
    state = first.state_dict()
    resumed = loader()
    resumed.load_state_dict(state)
    assert taken + list(resumed) == whole and sorted(sum(whole, [])) == sorted(cuts.ids)
