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

from batching.lhotse import PlanCutSampler, cut_frames  # noqa: E402
from tests.kit import REPO, run_command  # noqa: E402

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
    frames = cut_frames(cuts, 0.01)
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


def test_refuses_lazy_cutsets_packed_strategies_and_other_cuts(tmp_path):
    cuts = audio_cuts(tmp_path, n=6)
    cuts.to_file(tmp_path / "cuts.jsonl.gz")
    with pytest.raises(ValueError, match="lazy CutSet.*to_eager"):
        PlanCutSampler(CutSet.from_jsonl_lazy(tmp_path / "cuts.jsonl.gz"))
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
    assert ranks[0][4] == ranks[1][4]
    resumed = PlanCutSampler(cuts, CONFIG)  # one process now
    resumed.load_state_dict(ranks[0][4])
    everything = [i for r in ranks for b in r[3] for i in b] + [i for b in ids(resumed) for i in b]
    assert sorted(everything) == sorted(cuts.ids)


def test_bench_batchers_smoke(tmp_path):
    """scripts.bench.batchers on 300 lengths and 2,000 lognormal ones: every strategy and Lhotse in
    the table, and ours calibrated to Lhotse's ZPR not above it."""
    (tmp_path / "lengths.tsv").write_text("id\tframes\n" + "".join(f"u{i}\t{40 + (i * 53) % 900}\n" for i in range(300)))
    done = run_command(sys.executable, "-m", "scripts.bench.batchers", "--lengths", tmp_path / "lengths.tsv",
                       "-n", "2000", "--num-buckets", "4", timeout=300)
    rows = [line.split(" | ") for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    labels = [row[0].lstrip("| ") for row in rows]
    for name in STRATEGIES:
        assert sum(label.startswith(name) for label in labels) >= 2, name  # 300 lengths and lognormal
    lhotse = [row for row in rows if row[0].endswith("num_buckets=4")]
    ssb_at_zpr = [row for row in rows if row[0].startswith("| ssb-dbs-br lrf=")]
    assert len(lhotse) == 6 and len(ssb_at_zpr) == 4  # 2 data sets x (main, at ZPR, at padding)
    assert float(ssb_at_zpr[0][2]) <= float(lhotse[1][2]) and float(ssb_at_zpr[1][3]) <= float(lhotse[2][3])


def test_readme_lhotse_example(tmp_path):
    """docs/batching.md's paste-ready example runs as a user's script, on a manifest of generated audio."""
    section = (REPO / "docs" / "batching.md").read_text().split("## With Lhotse (`batching.lhotse`)", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    audio_cuts(tmp_path).to_file(tmp_path / "cuts_train.jsonl.gz")
    (tmp_path / "example.py").write_text(code + "print(epoch, step, batch['inputs'].shape[0])\n")
    done = run_command(sys.executable, "example.py", cwd=tmp_path, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    epoch, step, size = map(int, done.stdout.split())
    assert epoch == 2 and step >= 0 and size >= 1
