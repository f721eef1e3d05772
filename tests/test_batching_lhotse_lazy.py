"""PlanCutSampler on lazy JSONL manifests (batching/lhotse/manifest.py): indexed in 16 bytes a cut,
cuts read again by seeking, the sampler's contract kept, the cache healed when the manifest changes;
and the lazy-manifest benchmark's generator (scripts/bench/lhotse.py)."""

import gzip
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("lhotse", reason="lhotse is not installed: pip install 'tacotron2-batching[lhotse]'")
import torch  # noqa: E402
from lhotse import CutSet, MonoCut, SupervisionSegment  # noqa: E402
from lhotse.testing.dummies import dummy_cut  # noqa: E402

from batching.errors import UserError  # noqa: E402
from batching.lhotse import PlanCutSampler  # noqa: E402
from batching.lhotse.manifest import IndexedManifest, default_cache, indexed_manifest, line_duration  # noqa: E402
from scripts.bench.lhotse import LINE  # noqa: E402
from tests.kit import run_command  # noqa: E402

DURATIONS = np.random.default_rng(7).uniform(0.5, 4.0, 50).round(2)


def write_cuts(path: Path, durations, prefix: str = "c") -> CutSet:
    """An eager CutSet of dummy cuts (with a supervision each) saved at path (.jsonl or .jsonl.gz)."""
    cuts = CutSet.from_cuts(
        dummy_cut(i, duration=float(d), recording_duration=float(d), with_data=False, supervisions=[]).with_id(
            f"{prefix}{i:04d}"
        )
        for i, d in enumerate(durations)
    )
    cuts.to_file(path)
    return cuts


def ids(batches) -> list[list[str]]:
    return [[cut.id for cut in batch] for batch in batches]


@pytest.mark.parametrize("name", ["cuts.jsonl", "cuts.jsonl.gz"])
def test_a_lazy_manifest_is_indexed_in_16_bytes_a_cut_and_planned_as_the_eager_one(tmp_path, name, caplog):
    eager = write_cuts(tmp_path / name, DURATIONS)
    cache = tmp_path / "cache"
    index = indexed_manifest(CutSet.from_file(tmp_path / name), cache)
    assert isinstance(index, IndexedManifest) and len(index) == len(eager)
    assert index.locations.nbytes + index.durations.nbytes == 16 * len(eager)  # the whole per-cut state
    assert [index[i].to_dict() for i in (0, 17, len(eager) - 1)] == [eager[i].to_dict() for i in (0, 17, 49)]
    with caplog.at_level("INFO", logger="batching.lhotse"):
        lazy = PlanCutSampler(CutSet.from_file(tmp_path / name), max_duration=6.0, manifest_cache=cache)
    assert "reading a lazy CutSet" not in caplog.text
    assert ids(lazy) == ids(PlanCutSampler(eager, max_duration=6.0))
    assert sorted(i for b in ids(lazy) for i in b) == sorted(eager.ids)
    assert name.endswith(".gz") == any(p.name.endswith("-cuts.jsonl") for p in cache.iterdir())


@settings(max_examples=15, deadline=None)
@given(
    durations=st.lists(st.floats(0.3, 5.0).map(lambda d: round(d, 2)), min_size=1, max_size=60),
    world_size=st.integers(1, 3),
    fraction=st.floats(0, 1),
    epoch=st.integers(0, 3),
)
def test_the_contract_holds_on_an_indexed_manifest(durations, world_size, fraction, epoch):
    """Every rank the same steps, never over max_duration, every cut once an epoch, and a state
    saved mid-epoch resumes exactly where it stopped."""
    with tempfile.TemporaryDirectory() as folder:
        eager = write_cuts(Path(folder) / "cuts.jsonl.gz", durations)

        def sampler(rank):
            built = PlanCutSampler(
                CutSet.from_jsonl_lazy(Path(folder) / "cuts.jsonl.gz"),
                max_duration=5.0,
                rank=rank,
                world_size=world_size,
                manifest_cache=Path(folder) / "cache",
            )
            built.set_epoch(epoch)
            return built

        ranks = [ids(sampler(r)) for r in range(world_size)]
        assert len({len(r) for r in ranks}) == 1
        seconds = {cut.id: cut.duration for cut in eager}
        for batch in (b for r in ranks for b in r):
            assert len(batch) * max(seconds[i.split("_dup")[0]] for i in batch) <= 5.0 + 1e-9
        taken = sorted(i for r in ranks for b in r for i in b)
        assert len(set(taken)) == len(taken) and {i.split("_dup")[0] for i in taken} == set(eager.ids)
        if not any("_dup" in i for i in taken):  # cuts repeat (renamed, as Lhotse does) only when too few for the ranks
            assert taken == sorted(eager.ids)
        first = sampler(world_size - 1)
        iterator = iter(first)
        stop = int(fraction * len(first))
        done = ids(next(iterator) for _ in range(stop))
        resumed = sampler(world_size - 1)
        resumed.load_state_dict(first.state_dict())
        resumed.set_epoch(epoch)  # icefall's order: restore, then set_epoch of the saved epoch keeps it
        assert done + ids(resumed) == ranks[-1]


def test_a_changed_or_damaged_cache_heals_and_a_manifest_changed_under_a_sampler_is_one_error(tmp_path):
    manifest, cache = tmp_path / "cuts.jsonl.gz", tmp_path / "cache"
    write_cuts(manifest, DURATIONS[:10])
    assert len(PlanCutSampler(CutSet.from_file(manifest), max_duration=6.0, manifest_cache=cache).lengths) == 10
    changed = write_cuts(manifest, DURATIONS[:20], prefix="new")
    stat = manifest.stat()
    os.utime(manifest, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    healed = PlanCutSampler(CutSet.from_file(manifest), max_duration=6.0, manifest_cache=cache)
    assert sorted(i for b in ids(healed) for i in b) == sorted(changed.ids)
    copy = next(p for p in cache.iterdir() if p.name.endswith("-cuts.jsonl"))
    copy.write_bytes(copy.read_bytes()[:100])  # a damaged copy (e.g. a full disk) is made again
    again = PlanCutSampler(CutSet.from_file(manifest), max_duration=6.0, manifest_cache=cache)
    assert sorted(i for b in ids(again) for i in b) == sorted(changed.ids)
    plain = tmp_path / "plain.jsonl"
    write_cuts(plain, DURATIONS[:10])
    sampler = PlanCutSampler(CutSet.from_file(plain), max_duration=6.0, manifest_cache=cache)
    write_cuts(plain, DURATIONS[:12])
    with pytest.raises(UserError, match="plain.jsonl changed while a sampler was reading it"):
        list(sampler)


def test_several_files_are_indexed_and_chains_over_them_are_read_in_with_a_log_line(tmp_path, caplog):
    first, second = (
        write_cuts(tmp_path / "a.jsonl.gz", DURATIONS[:30]),
        write_cuts(tmp_path / "b.jsonl", DURATIONS[30:], "b"),
    )
    both = CutSet.from_files([tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl"])
    index = indexed_manifest(both, tmp_path / "cache")
    assert len(index) == 50 and index[35].id == "b0005" and index[3].id == "c0003"
    sampler = PlanCutSampler(both, max_duration=6.0, manifest_cache=tmp_path / "cache")
    assert sorted(i for b in ids(sampler) for i in b) == sorted([*first.ids, *second.ids])
    with caplog.at_level("INFO", logger="batching.lhotse"):
        filtered = PlanCutSampler(
            CutSet.from_file(tmp_path / "a.jsonl.gz").filter(lambda c: c.duration > 1.0),
            max_duration=6.0,
            manifest_cache=tmp_path / "cache",
        )
    assert "reading a lazy CutSet into memory" in caplog.text and "LazyFilter" in caplog.text
    assert sorted(i for b in ids(filtered) for i in b) == sorted(c.id for c in first if c.duration > 1.0)


def test_cuts_are_read_again_in_dataloader_workers(tmp_path):
    from lhotse.dataset.iterable_dataset import IterableDatasetWrapper

    write_cuts(tmp_path / "cuts.jsonl.gz", DURATIONS)
    sampler = PlanCutSampler(
        CutSet.from_file(tmp_path / "cuts.jsonl.gz"), max_duration=6.0, manifest_cache=tmp_path / "cache"
    )
    next(iter(sampler))  # the parent has opened the copy: the worker opens its own
    loader = torch.utils.data.DataLoader(IterableDatasetWrapper(CutIdList(), sampler), batch_size=None, num_workers=1)
    assert sorted(i for b in loader for i in b) == sorted(f"c{i:04d}" for i in range(len(DURATIONS)))


class CutIdList(torch.utils.data.Dataset):
    def __getitem__(self, cuts: CutSet) -> list[str]:
        return [cut.id for cut in cuts]


def test_a_line_that_is_not_a_cut_is_named_by_file_and_line(tmp_path):
    manifest = tmp_path / "cuts.jsonl.gz"
    write_cuts(manifest, DURATIONS[:3])
    with gzip.open(manifest, "ab") as out:
        out.write(b'{"id": "x", "type": "MonoCut"}\n')
    with pytest.raises(UserError, match=r"cuts.jsonl.gz:4 is not a Lhotse cut"):
        PlanCutSampler(CutSet.from_file(manifest), max_duration=6.0, manifest_cache=tmp_path / "cache")


def test_the_bench_writes_cuts_as_lhotse_does_and_durations_are_read_off_any_cut():
    text = SupervisionSegment("c1", "c1", 0, 6.53, text="printing in the only sense")
    cut = MonoCut("c1", 0, 6.53, 0, supervisions=[text])
    line = LINE.format(id="c1", d=repr(6.53))
    assert line == json.dumps(cut.to_dict()) + "\n" and line_duration(line.encode(), Path("m"), 1) == 6.53
    mixed = dummy_cut(0, duration=6.53, recording_duration=6.53).pad(duration=9.25)  # a MixedCut: its tracks' duration
    assert line_duration(json.dumps(mixed.to_dict()).encode(), Path("m"), 1) == pytest.approx(9.25)


@pytest.mark.slow
def test_bench_lhotse_smoke(tmp_path):
    """python -m scripts.bench.lhotse on 3,000 cuts: the table with both samplers and the goals' lines."""
    done = run_command(
        sys.executable,
        "-m",
        "scripts.bench.lhotse",
        "--cuts",
        "3000",
        "--reader-cuts",
        "500",
        "--folder",
        tmp_path,
        timeout=300,
    )
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == 4 and table[1].startswith("| PlanCutSampler, cold") and "DynamicBucketing" in table[3]
    assert " | 0 |" in table[1] and "(goal <= 1.5x)" in done.stdout and "(goal < 64)" in done.stdout


def test_bench_lhotse_refuses_a_folder_that_is_not_there(tmp_path, monkeypatch, capsys):
    """--folder names where the manifest goes: one that does not exist is an error line, exit 2, before
    anything is written (it was a traceback from deep in tempfile)."""
    from scripts.bench import lhotse as bench

    monkeypatch.setattr(sys, "argv", ["lhotse.py", "--cuts", "10", "--folder", str(tmp_path / "absent")])
    with pytest.raises(SystemExit) as stop:
        bench.main()
    assert stop.value.code == 2
    assert f"error: --folder {tmp_path / 'absent'} is not a folder" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_default_cache_folder_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    write_cuts(tmp_path / "cuts.jsonl.gz", DURATIONS[:5])
    PlanCutSampler(CutSet.from_file(tmp_path / "cuts.jsonl.gz"), max_duration=6.0)
    assert default_cache() == tmp_path / "xdg" / "tacotron2-batching" / "manifests"
    assert sorted(p.suffix for p in default_cache().iterdir()) == [".jsonl", ".npz"]
