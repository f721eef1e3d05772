"""batching.lhotse.PlanCutSampler: CutSet batches from the planner, in a DataLoader, on one and two
processes, resumed mid-epoch on another world size (cuts built from generated audio)."""

import json
import os
import re
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

from batching.accelerate_shard import shard_aware  # noqa: E402
from batching.errors import UserError  # noqa: E402
from batching.lhotse import PlanCutSampler, StreamCutSampler, cut_batch_loader  # noqa: E402
from batching.lhotse.measure import Measure  # noqa: E402
from tests.kit import RECIPES_IN_ONE_PROCESS, REPO, docs_recipe, icefall_loop, run_command  # noqa: E402

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
    cuts = CutSet.from_cuts(
        dummy_cut(i, duration=float(d), recording_duration=float(d)) for i, d in enumerate(durations)
    )
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
        return icefall_loop(
            lambda: PlanCutSampler(cuts, CONFIG),
            lambda sampler: torch.utils.data.DataLoader(
                CutIds(), sampler=sampler, batch_size=None, num_workers=workers
            ),
            list,
            **kw,
        )

    whole, _ = run()
    before, state = run(stop=(0, 2))
    after, _ = run(state=state)
    assert sorted(before[0] + after[0]) == sorted(cuts.ids) and before[0] + after[0] == whole[0]
    assert after[1] == whole[1] != whole[0]


def test_lazy_manifests_are_planned_shar_and_packed_strategies_refused_and_other_cuts(tmp_path):
    cuts = audio_cuts(tmp_path, n=6)
    cuts.to_file(tmp_path / "cuts.jsonl.gz")
    lazy = PlanCutSampler(CutSet.from_jsonl_lazy(tmp_path / "cuts.jsonl.gz"), CONFIG, manifest_cache=tmp_path / "cache")
    assert ids(lazy) == ids(PlanCutSampler(cuts, CONFIG))
    (tmp_path / "shar").mkdir()
    dummy_cuts(DURATIONS[:8]).to_shar(tmp_path / "shar", fields={}, shard_size=4)
    with pytest.raises(UserError, match="Shar shards"):
        PlanCutSampler(CutSet.from_shar(in_dir=tmp_path / "shar"), max_duration=5.0)
    assert isinstance(PlanCutSampler(cuts.repeat(), max_duration=5.0), StreamCutSampler)  # planned a window at a time
    with pytest.raises(ValueError, match="padded strategy"):
        PlanCutSampler(cuts, BatchingConfig("bload"))
    with pytest.raises(ValueError, match="budget is given twice"):
        PlanCutSampler(cuts, BatchingConfig("sb", dbs=True, capacity=500), max_duration=5.0)
    state = PlanCutSampler(cuts).state_dict()
    with pytest.raises(ValueError, match="over 6 cuts"):
        PlanCutSampler(cuts.subset(first=5)).load_state_dict(state)


def _two_ranks(rank: int, init_file: str, manifest: str, results) -> None:
    """One of two gloo processes: rank and world size come from torch.distributed, as in Lhotse."""
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=2, timeout=timedelta(seconds=60)
    )
    try:
        sampler = PlanCutSampler(CutSet.from_file(manifest).to_eager(), CONFIG)
        sampler.set_epoch(1)
        total = len(sampler)
        loader = torch.utils.data.DataLoader(
            K2SpeechRecognitionDataset(return_cuts=True, input_strategy=OnTheFlyFeatures(Fbank())),
            sampler=sampler,
            batch_size=None,
        )
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
    mp.start_processes(
        _two_ranks,
        args=(str(tmp_path / "init"), str(tmp_path / "cuts.jsonl.gz"), results),
        nprocs=2,
        start_method="spawn",
        join=True,
    )
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
    (tmp_path / "lengths.tsv").write_text(
        "id\tframes\n" + "".join(f"u{i}\t{40 + (i * 53) % 900}\n" for i in range(300))
    )
    done = run_command(
        sys.executable,
        "-m",
        "scripts.bench.batchers",
        "--lengths",
        tmp_path / "lengths.tsv",
        "--corpora",
        "file,bimodal",
        "-n",
        "2000",
        "--points",
        "4",
        "--num-buckets",
        "4",
        "--out",
        tmp_path,
        timeout=300,
    )
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
    done = run_command(
        sys.executable, "example.py", cwd=tmp_path, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    epoch, step, size = map(int, done.stdout.split())
    assert epoch == 2 and step >= 0 and size >= 1


def dummy_cuts(durations) -> CutSet:
    return CutSet.from_cuts(
        dummy_cut(i, duration=float(d), recording_duration=float(d)) for i, d in enumerate(durations)
    )


DURATIONS = np.random.default_rng(5).uniform(0.5, 4.0, 60).round(2)


def test_an_over_long_cut_is_found_at_build_by_id_seconds_and_max_duration():
    cuts = dummy_cuts([*DURATIONS[:20], 9.5, 12.0])
    with pytest.raises(
        UserError, match=r"cut 'dummy-mono-cut-0020' lasts 9.5 s, over max_duration=8 s \(2 such cuts\)"
    ):
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
        assert len(batch) * (longest + longest**2 / 20.0) <= 6.0 + 1e-6
    randomized = [ids(PlanCutSampler(cuts, max_duration=6.0, seed="trng")) for _ in range(2)]
    assert randomized[0] != randomized[1]


def test_the_default_is_the_cost_key_calibrated_to_the_papers_ssb_logged_once_built(caplog):
    cuts = dummy_cuts(DURATIONS)
    with caplog.at_level("INFO", logger="batching.lhotse"):
        sampler = PlanCutSampler(cuts, max_duration=6.0)
    config = sampler.config
    assert (config.batching, config.ssb_key, config.target_zpr, config.dbs, config.br) == (
        "ssb",
        "cost",
        "paper",
        True,
        True,
    )
    line = [r.getMessage() for r in caplog.records if "calibrated to target_zpr=paper" in r.getMessage()]
    assert len(line) == 1 and f"lrf={config.lrf} " in line[0]
    paper = PlanCutSampler(cuts, BatchingConfig("ssb", dbs=True, br=True), max_duration=6.0).config
    assert (paper.ssb_key, paper.lrf, paper.target_zpr) == (None, 0.1, None)
    asked = BatchingConfig("ssb", dbs=True, br=True, ssb_key="cost", target_pair_repeat=0.3)  # a target of one's own
    for source in (cuts, (cut for cut in cuts)):  # planned whole, and a stream (on its first window)
        sampler = PlanCutSampler(source, asked, max_duration=6.0)
        assert sum(map(len, sampler)) == len(cuts)
        record = sampler.calibration if isinstance(sampler, StreamCutSampler) else sampler._sampler.calibration
        assert record["target"] == "target_pair_repeat=0.3" and record["lrf"] is not None


def test_bucketing_knobs_are_accepted_and_logged_once(caplog):
    cuts = dummy_cuts(DURATIONS)
    with caplog.at_level("WARNING", logger="batching.lhotse"):
        for _ in range(2):
            PlanCutSampler(
                cuts,
                max_duration=6.0,
                shuffle=True,
                drop_last=False,
                num_buckets=30,
                buffer_size=100,
                shuffle_buffer_size=200,
                duration_bins=[1.0, 2.0],
                concurrent=False,
                sync_buckets=True,
            )
    noted = [r.getMessage().split("=")[0] for r in caplog.records]
    assert sorted(n.split(": ")[1] for n in noted) == sorted({n.split(": ")[1] for n in noted}) and len(noted) <= 6
    with pytest.raises(TypeError, match="unexpected keyword arguments: max_frames"):
        PlanCutSampler(cuts, max_frames=100)


def nemo_sampler(cuts, rank: int, world_size: int) -> PlanCutSampler:
    """The call NeMo 2.4's get_lhotse_dataloader_from_config makes for DynamicBucketingSampler (its
    bucketing branch, 1D, audio), keyword for keyword, with its defaults where a config has them:
    a TimeConstraint of batch_duration, batch_size and quadratic_duration, shard_seed "trng". NeMo
    itself is not installed here (its import pulls Lightning and more): docs/lhotse.md says so."""
    from lhotse.dataset.sampling.base import TimeConstraint

    return PlanCutSampler(
        cuts,
        constraint=TimeConstraint(max_cuts=5, max_duration=6.0, quadratic_duration=15.0),
        shuffle=True,
        drop_last=False,
        shuffle_buffer_size=10000,
        seed="trng",
        num_buckets=30,
        duration_bins=None,
        num_cuts_for_bins_estimate=10000,
        buffer_size=10000,
        concurrent=False,
        rank=rank,
        world_size=world_size,
    )


def test_nemos_sampler_call_runs_on_a_lazy_filtered_manifest_map_style_and_iterable(tmp_path):
    """NeMo's two ways to drive the sampler: map-style (sampler=..., batch_size=None; NeMo passes
    the global rank) and IterableDatasetWrapper (rank 0 of 1 in every worker, NeMo's worker_init_fn).
    Its manifests come lazily, through cuts.filter(...) (NeMo's duration and token filters)."""
    from lhotse.dataset import make_worker_init_fn
    from lhotse.dataset.iterable_dataset import IterableDatasetWrapper

    dummy_cuts(DURATIONS).to_file(tmp_path / "cuts.jsonl.gz")
    cuts = CutSet.from_file(tmp_path / "cuts.jsonl.gz").filter(lambda c: c.duration > 1.0)
    kept = sorted(c.id for c in cuts)
    sampler = nemo_sampler(cuts, rank=0, world_size=1)
    loader = torch.utils.data.DataLoader(CutIds(), sampler=sampler, batch_size=None)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        batches = list(loader)
        assert sorted(sum(batches, [])) == kept and max(map(len, batches)) <= 5
    for batch in sampler:
        longest = max(c.duration for c in batch)
        assert len(batch) * (longest + longest**2 / 15.0) <= 6.0 + 1e-6
    wrapped = torch.utils.data.DataLoader(
        IterableDatasetWrapper(CutIds(), nemo_sampler(cuts, rank=0, world_size=1)),
        batch_size=None,
        worker_init_fn=make_worker_init_fn(rank=0, world_size=1, seed=0),
    )
    assert sorted(sum(list(wrapped), [])) == kept


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
    stateful = pytest.importorskip(
        "torchdata.stateful_dataloader", reason="pip install torchdata (requirements-dev.txt)"
    )
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


def test_drop_last_drops_the_incomplete_last_batch_as_lhotse_and_counts_it():
    """Lhotse's own test: 100 one-second cuts, max_duration=15: six batches of 15, the rest of 10
    dropped (and reported as discarded); without drop_last it is a seventh batch."""
    cuts = dummy_cuts([1.0] * 100)
    dropping = PlanCutSampler(cuts, max_duration=15.0, drop_last=True)
    assert [len(b) for b in dropping] == [15] * 6
    assert "cuts discarded 10" in dropping.get_report()
    assert sorted(len(b) for b in PlanCutSampler(cuts, max_duration=15.0)) == [10] + [15] * 6
    per_rank = [
        [len(b) for b in PlanCutSampler(cuts, max_duration=15.0, drop_last=True, rank=r, world_size=4)]
        for r in range(4)
    ]
    assert per_rank == [[15]] * 4  # six full batches, then the tail that cannot fill a step on 4 ranks


def text_examples(tokens) -> list:
    from lhotse.cut.text import TextExample

    return [TextExample(f"t{i}", np.zeros(int(n), np.int8)) for i, n in enumerate(tokens)]


@settings(max_examples=40, deadline=None)
@given(
    tokens=st.lists(st.integers(1, 40), min_size=8, max_size=80),
    world_size=st.integers(1, 3),
    slack=st.integers(0, 60),
    quadratic=st.sampled_from([None, 32]),
    drop_last=st.booleans(),
)
def test_a_token_constraint_plans_text_examples_by_tokens_within_the_budget(
    tokens, world_size, slack, quadratic, drop_last
):
    from lhotse.dataset.sampling.base import TokenConstraint

    examples = text_examples(tokens)
    max_tokens = 2 * (40 + 40**2 // 32) + slack
    constraint = TokenConstraint(max_tokens=max_tokens, quadratic_length=quadratic)
    ranks = [
        list(PlanCutSampler(examples, constraint=constraint, drop_last=drop_last, rank=r, world_size=world_size))
        for r in range(world_size)
    ]
    assert len({len(r) for r in ranks}) == 1  # the same steps on every rank
    taken = [example.text for r in ranks for batch in r for example in batch]
    assert len(taken) == len(set(taken)) and (drop_last or sorted(taken) == sorted(e.text for e in examples))
    for batch in (b for r in ranks for b in r):
        longest = max(e.num_tokens + (0 if quadratic is None else e.num_tokens**2 / quadratic) for e in batch)
        assert len(batch) * longest <= max_tokens  # padding included, as TokenConstraint's exceeded()


class TokenIds(torch.utils.data.Dataset):
    """Lhotse's text test dataset: token ids padded with -1, and their lengths."""

    def __getitem__(self, examples):
        from lhotse.dataset.collation import collate_vectors

        tokens = collate_vectors([e.tokens.astype(np.int32) for e in examples], padding_value=-1)
        return tokens, torch.LongTensor([e.num_tokens for e in examples])


def test_lhotse_constraints_map_where_honest_and_are_refused_with_one_error_where_not():
    from lhotse.dataset.sampling.base import SamplingConstraint, TimeConstraint, TokenConstraint
    from lhotse.dataset.sampling.dynamic_bucketing import FixedBucketBatchSizeConstraint

    cuts = dummy_cuts(DURATIONS)
    assert ids(PlanCutSampler(cuts, constraint=TimeConstraint(max_duration=6.0, max_cuts=3))) == ids(
        PlanCutSampler(cuts, max_duration=6.0, max_cuts=3)
    )
    examples = text_examples([11, 12, 20] * 20)
    assert sorted(map(len, PlanCutSampler(examples, constraint=TokenConstraint(max_examples=16)))) == [12, 16, 16, 16]
    loader = torch.utils.data.DataLoader(
        TokenIds(), batch_size=None, sampler=PlanCutSampler(examples, constraint=TokenConstraint(max_tokens=256))
    )
    for tokens, lengths in loader:
        assert tokens.shape == (len(lengths), int(lengths.max())) and tokens.shape[0] * tokens.shape[1] <= 256
    # Lhotse's FixedBucketBatchSizeConstraint test: 1 s cuts two a batch, 2 s cuts alone, buckets never mixed
    buckets = FixedBucketBatchSizeConstraint(max_seq_len_buckets=[1.5, 2.5], batch_sizes=[2, 1])
    batches = list(PlanCutSampler(dummy_cuts([1.0] * 5 + [2.0] * 5), constraint=buckets))
    assert sorted((len(b), sum(c.duration for c in b)) for b in batches) == [(1, 1.0)] + [(1, 2.0)] * 5 + [(2, 2.0)] * 2
    with pytest.raises(UserError, match=r"cut 'dummy-mono-cut-0001' lasts 3 s, over the last bucket bound 2.5"):
        PlanCutSampler(dummy_cuts([1.0, 3.0]), constraint=buckets)
    coprime = FixedBucketBatchSizeConstraint(
        max_seq_len_buckets=list(range(1, 16)), batch_sizes=[2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47]
    )
    with pytest.raises(UserError, match="least common multiple over"):
        PlanCutSampler(cuts, constraint=coprime)
    with pytest.raises(UserError, match=r"example 1 has 30 tokens, over max_tokens=20 \(1 such examples\)"):
        PlanCutSampler(text_examples([5, 30]), constraint=TokenConstraint(max_tokens=20))
    with pytest.raises(UserError, match="cut 'dummy-mono-cut-0000' has no num_tokens"):
        PlanCutSampler(cuts, constraint=TokenConstraint(max_tokens=20))
    with pytest.raises(UserError, match="the budget is given twice: constraint=TokenConstraint and max_duration=5"):
        PlanCutSampler(examples, max_duration=5, constraint=TokenConstraint(max_tokens=20))
    subclass = type("Custom", (TimeConstraint,), {})(max_duration=5)  # may count otherwise: not mapped
    custom = type("Custom", (SamplingConstraint,), {m: lambda *_: None for m in SamplingConstraint.__abstractmethods__})
    for refused in (TimeConstraint(max_duration=5, concatenate_cuts=True), subclass, custom()):
        with pytest.raises(UserError, match="constraint=Custom cannot be planned|concatenate_cuts"):
            PlanCutSampler(cuts, constraint=refused)
    assert isinstance(
        PlanCutSampler((e for e in examples), constraint=TokenConstraint(max_tokens=256)), StreamCutSampler
    )  # a one-pass source: planned a window at a time (test_batching_lhotse_stream.py)


def prepared_cut_loader(sampler, process: int, dataset=None):
    """What accelerator.prepare does on process `process` of 2 to a cut_batch_loader, passed to shard_aware."""
    from accelerate.data_loader import prepare_data_loader

    return shard_aware(
        prepare_data_loader(
            cut_batch_loader(dataset or CutIds(), sampler), num_processes=2, process_index=process, put_on_device=False
        )
    )


@pytest.mark.parametrize("built_as", ["the process's rank", "rank 0 of 1"])
def test_under_accelerate_each_cut_is_trained_once_on_equal_steps_with_a_new_plan_each_epoch(tmp_path, built_as):
    pytest.importorskip("accelerate", reason="pip install accelerate (requirements-dev.txt)")
    cuts = audio_cuts(tmp_path, n=24)
    dataset = K2SpeechRecognitionDataset(input_strategy=OnTheFlyFeatures(Fbank()), return_cuts=True)
    epochs = []
    for epoch in (0, 1):
        ranks = []
        for process in (0, 1):
            sampler = PlanCutSampler(
                cuts,
                max_duration=3.0,
                seed=1,
                **(dict(rank=process, world_size=2) if built_as == "the process's rank" else {}),
            )
            loader = prepared_cut_loader(sampler, process, dataset)
            loader.set_epoch(epoch)
            ranks.append([sorted(c.id for c in batch["supervisions"]["cut"]) for batch in loader])
            kept = sum(map(len, ranks[-1]))
            assert len(loader) == len(ranks[-1]) and sampler.epoch == epoch and sampler.world_size == 2
            assert f"cuts kept {kept}/{kept} " in sampler.get_report()  # only this process's batches
        assert sorted(i for r in ranks for b in r for i in b) == sorted(cuts.ids) and len(ranks[0]) == len(ranks[1])
        epochs.append(ranks)
    assert epochs[0] != epochs[1]
    with pytest.raises(UserError, match="rank=accelerator.process_index, world_size=accelerator.num_processes"):
        prepared_cut_loader(PlanCutSampler(cuts, max_duration=3.0, rank=1, world_size=3), 1)
    with pytest.raises(UserError, match="yields only its rank's batches"):
        prepared_cut_loader(PlanCutSampler(cuts.repeat(), max_duration=3.0, rank=0, world_size=2), 0)
    from accelerate.data_loader import prepare_data_loader

    unannounced = prepare_data_loader(
        cut_batch_loader(CutIds(), PlanCutSampler(cuts, max_duration=3.0, rank=0, world_size=2)),
        num_processes=2,
        process_index=0,
        put_on_device=False,
    )
    with pytest.raises(UserError, match="shard_aware"):
        next(iter(unannounced))


def recipe_rows(stdout: str, key: str) -> dict[int, list[tuple[int, list]]]:
    """The recipe's printed batches (the lines holding `key`) per epoch, as (rank, sorted ids)."""
    rows = [json.loads(row) for row in re.findall(r"\{[^{}]*\}", stdout)]  # the processes' lines interleave
    return {
        epoch: sorted((r["rank"], sorted(r[key])) for r in rows if key in r and r["epoch"] == epoch) for epoch in (0, 1)
    }


@pytest.mark.slow
def test_the_docs_accelerate_recipes_on_two_processes_resume_mid_epoch(tmp_path):
    """torchrun, 2 gloo CPU processes, the two recipes of docs/lhotse.md (PlanBatchSampler, and
    PlanCutSampler through cut_batch_loader) sharing 3 torchrun starts. PlanBatchSampler: an
    uninterrupted run (sampler built Accelerate's way, rank 0 of 1), then one built with the
    process's rank stopped after 3 steps and restarted. PlanCutSampler: stopped after 3 steps, then
    restarted; together they run exactly the uninterrupted plan (computed here, as the prepared
    loaders of 2 processes)."""
    pytest.importorskip("accelerate", reason="pip install accelerate (requirements-dev.txt)")
    recipe = docs_recipe("lhotse.md", "## Hugging Face Accelerate")
    own_way = recipe.replace(
        ",\n                           rank=accelerator.process_index, world_size=accelerator.num_processes", ""
    )
    assert own_way != recipe
    for name, text in (
        ("recipe.py", recipe),
        ("own_way.py", own_way),
        ("in_one.py", RECIPES_IN_ONE_PROCESS),
        ("cut_recipe.py", docs_recipe("lhotse.md", "### PlanCutSampler (a Lhotse dataset) under Accelerate")),
    ):
        (tmp_path / name).write_text(text)
    cuts = audio_cuts(tmp_path, n=30)
    cuts.to_file(tmp_path / "cuts.jsonl.gz")
    whole_cuts = {epoch: [] for epoch in (0, 1)}
    for epoch in (0, 1):
        for process in (0, 1):
            loader = prepared_cut_loader(
                PlanCutSampler(cuts, max_duration=3.0, seed=1, rank=process, world_size=2), process
            )
            loader.set_epoch(epoch)
            whole_cuts[epoch] += [(process, sorted(batch)) for batch in loader]

    def run(*recipes):
        done = run_command(
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node=2",
            "in_one.py",
            json.dumps([[str(a) for a in r] for r in recipes]),
            cwd=tmp_path,
            timeout=240,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        return recipe_rows(done.stdout, "items"), recipe_rows(done.stdout, "cuts")

    cut_recipe = ["cut_recipe.py", tmp_path / "cuts.jsonl.gz", tmp_path / "cut_state.json"]
    # each process's last recipe is one that runs to its end (accelerator.end_training ends the process group)
    whole, cuts_before = run([*cut_recipe, "3"], ["own_way.py", tmp_path / "whole.json"])
    before, cuts_after = run(["recipe.py", tmp_path / "state.json", "3"], cut_recipe)
    after, _ = run(["recipe.py", tmp_path / "state.json"])

    for epoch in (0, 1):
        steps = [sum(rank == r for rank, _ in whole[epoch]) for r in (0, 1)]
        assert steps[0] == steps[1] and sorted(i for _, b in whole[epoch] for i in b) == list(range(400))
    assert whole[0] != whole[1] and len(before[0]) == 6 and not before[1]
    assert sorted(before[0] + after[0]) == whole[0] and after[1] == whole[1]

    assert len(cuts_before[0]) == 6 and not cuts_before[1] and whole_cuts[0] != whole_cuts[1]
    assert sorted(cuts_before[0] + cuts_after[0]) == sorted(whole_cuts[0])
    assert sorted(cuts_after[1]) == sorted(whole_cuts[1])
    for epoch in (0, 1):
        assert sorted(i for _, b in whole_cuts[epoch] for i in b) == sorted(cuts.ids)
        assert sum(rank == 0 for rank, _ in whole_cuts[epoch]) == sum(rank == 1 for rank, _ in whole_cuts[epoch])


@pytest.mark.slow  # a pytest subprocess that imports torch and lhotse: about 5-12 s on 2 cores
def test_the_lhotse_suite_runner_rebinds_lhotses_samplers_in_a_copy_of_a_checkout(tmp_path, capfd):
    from scripts.tools import lhotse_suite

    suite = tmp_path / "lhotse" / "test" / "dataset" / "sampling"
    suite.mkdir(parents=True)
    source = (
        '"""A stand-in for a Lhotse sampler test module."""\nimport pytest\n\nfrom lhotse.dataset import '
        "(\n    DynamicBucketingSampler,\n)\nfrom lhotse.dataset.sampling import SimpleCutSampler\n\n\n"
        "def test_rebound():\n    assert DynamicBucketingSampler is SimpleCutSampler\n"
        '    assert SimpleCutSampler.__name__ == "PlanCutSampler"\n'
    )
    (suite / "test_samplers.py").write_text(source)
    assert (
        lhotse_suite.main(["--lhotse", str(tmp_path / "lhotse"), "--work", str(tmp_path / "work"), "--", "-n", "0"])
        == 0
    )
    assert "1 passed" in capfd.readouterr().out
    assert (suite / "test_samplers.py").read_text() == source  # the checkout is only read
    lhotse_suite.copy_suite(tmp_path / "lhotse", tmp_path / "own", substitute=False)
    assert (tmp_path / "own" / "test" / "dataset" / "sampling" / "test_samplers.py").read_text() == source
    assert lhotse_suite.main(["--lhotse", str(tmp_path)]) == 2
    error = capfd.readouterr().err
    assert error.startswith("error: ") and "must be a Lhotse checkout" in error
