"""PlanCutSampler on a lazy manifest against Lhotse's DynamicBucketingSampler on the same file.

    python -m scripts.bench.lhotse                      # 10,000,000 cuts (about 25 minutes on 2 cores)
    python -m scripts.bench.lhotse --cuts 200000        # a quick look

Writes an N-cut `cuts.jsonl.gz` of MonoCut metadata (one supervision with a short text, no audio;
durations resampled from LJSpeech's clips, or a stand-in with their spread), then measures, each in
a subprocess of its own so that its peak RSS is its own:

* reader: Lhotse's lazy reader iterating the manifest (the first --reader-cuts cuts: its memory
  does not grow with the file), the memory every lazy sampler starts from; reader+planner: the
  same after a PlanCutSampler of 1,000 cuts has run (its modules and compiled code), the baseline
  of PlanCutSampler's bytes a cut;
* plan (cold): PlanCutSampler with its defaults (the cost key calibrated to the paper's SSB's ZPR,
  once, when it is built) and an empty cache folder (decompresses and indexes the manifest), its
  time to the first batch, planning an epoch (and the paper's SSB's, for comparison), a full pass over the batches
  (no audio loaded;
  --pass-cuts K stops each sampler's pass after K cuts, for a 10M-cut run on a small machine);
* plan (warm): the same with the cache filled by the cold run: time to the first batch and planning;
* lhotse: DynamicBucketingSampler (shuffle=True, num_buckets=30): time to the first batch, a full pass;
* argsort: numpy.argsort of the cuts' lengths in frames, the planner's yardstick.

Padding is the padded fraction (1 - real seconds / (cuts x longest) summed over batches); a batch is
over budget when its cut count x its longest cut exceeds max_duration (Lhotse's own budget is the
sum of durations, so its batches are over this padded budget by design: it is reported as such).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from data.shared import LJSPEECH_LENGTHS
from scripts.common import cpu_name, markdown_table, median_seconds

SAMPLE_RATE = 22050  # LJSpeech's
FRAME_SHIFT = 0.01
#: A MonoCut with one supervision exactly as Lhotse 1.33 writes it (json.dumps of to_dict).
LINE = (
    '{{"id": "{id}", "start": 0, "duration": {d}, "channel": 0, "supervisions": [{{"id": "{id}", '
    '"recording_id": "{id}", "start": 0, "duration": {d}, "channel": 0, "text": "printing in the only sense"}}], '
    '"type": "MonoCut"}}\n'
)
MEASURES = ("reader", "reader+planner", "plan", "lhotse", "argsort")


def bench_durations(n: int, seed: int = 0) -> np.ndarray:
    """n durations in seconds (2 decimals), resampled from LJSpeech's clips when ../shared has them."""
    rng = np.random.default_rng(seed)
    if LJSPEECH_LENGTHS.is_file():
        with open(LJSPEECH_LENGTHS, newline="", encoding="utf-8") as table:
            real = np.array([int(row["samples"]) / SAMPLE_RATE for row in csv.DictReader(table, delimiter="\t")])
    else:  # a stand-in with LJSpeech's range and spread
        real = np.clip(rng.normal(6.6, 2.2, 13_100), 1.1, 10.1)
    return np.round(rng.choice(real, n), 2)


def write_manifest(path: Path, durations: np.ndarray) -> None:
    """A lazy-readable cuts.jsonl.gz of one MonoCut per duration (ids c0000000...)."""
    with gzip.open(path, "wt", compresslevel=1, encoding="utf-8") as out:
        for start in range(0, durations.size, 100_000):
            out.write(
                "".join(
                    LINE.format(id=f"c{start + i:08d}", d=repr(float(d)))
                    for i, d in enumerate(durations[start : start + 100_000])
                )
            )


def peak_rss() -> int:
    """This process's peak resident memory in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def batch_figures(batches, max_duration: float, pass_cuts: int) -> dict:
    """A pass over the batches (stopping after the batch that reaches pass_cuts cuts): its time,
    batches, cuts, padded fraction and batches over the padded budget."""
    start, n_batches, n_cuts, real, padded, over = time.perf_counter(), 0, 0, 0.0, 0.0, 0
    for batch in batches:
        if n_cuts >= pass_cuts:
            break
        durations = [cut.duration for cut in batch]
        n_batches, n_cuts, real = n_batches + 1, n_cuts + len(durations), real + sum(durations)
        padded += len(durations) * max(durations)
        over += len(durations) * max(durations) > max_duration + 1e-9
    return dict(
        pass_s=time.perf_counter() - start,
        batches=n_batches,
        cuts=n_cuts,
        over=over,
        padded_fraction=1 - real / padded if padded else 0.0,
    )


def warm_up_the_sampler() -> None:
    """PlanCutSampler on 1,000 cuts to its first batch: the reader baseline then holds what the
    sampler costs whatever the corpus (its modules, the planner's compiled code), so that the
    difference from the baseline is what the sampler holds for the cuts."""
    from lhotse import CutSet
    from lhotse.testing.dummies import dummy_cut

    from batching.lhotse import PlanCutSampler

    durations = bench_durations(1000)
    next(
        iter(
            PlanCutSampler(
                CutSet.from_cuts(dummy_cut(i, duration=float(d)) for i, d in enumerate(durations)), max_duration=200.0
            )
        )
    )


def plan_seconds(sampler, epochs=(1, 2, 3)) -> float:
    """The median time to plan an epoch (each epoch is planned once, then kept: a new one each time)."""
    times = []
    for epoch in epochs:
        sampler.set_epoch(epoch)
        start = time.perf_counter()
        sampler.plan
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def measure(
    kind: str, manifest: Path, cache: Path, max_duration: float, n: int, reader_cuts: int, pass_cuts: int
) -> dict:
    """One measurement (run in a subprocess of its own, see MEASURES); returns its figures."""
    from lhotse import CutSet

    start = time.perf_counter()
    if kind.startswith("reader"):
        if kind == "reader+planner":
            warm_up_the_sampler()
        taken = sum(1 for _ in zip(range(reader_cuts), CutSet.from_file(manifest)))
        return dict(cuts_read=taken, read_s=time.perf_counter() - start, rss=peak_rss())
    if kind == "argsort":
        lengths = np.ceil(np.round(bench_durations(n) / FRAME_SHIFT, 6))
        return dict(argsort_s=median_seconds(3, np.argsort, lengths.astype(np.int64)), rss=peak_rss())
    if kind == "plan":
        from batching.lhotse import PlanCutSampler

        sampler = PlanCutSampler(CutSet.from_file(manifest), max_duration=max_duration, manifest_cache=cache)
        next(iter(sampler))
        figures = dict(first_batch_s=time.perf_counter() - start)
        figures["plan_s"] = plan_seconds(sampler)
    else:
        from lhotse.dataset import DynamicBucketingSampler

        sampler = DynamicBucketingSampler(
            CutSet.from_file(manifest), max_duration=max_duration, shuffle=True, num_buckets=30, seed=0
        )
        next(iter(sampler))
        figures = dict(first_batch_s=time.perf_counter() - start)
        sampler.set_epoch(1)
    if pass_cuts:
        return figures | batch_figures(sampler, max_duration, pass_cuts) | dict(rss=peak_rss())
    figures["rss"] = peak_rss()
    if kind == "plan":  # the same epochs with the paper's SSB (the length key, lrf 0.1), after the RSS is taken
        from batching import BatchingConfig

        del sampler
        paper = PlanCutSampler(
            CutSet.from_file(manifest),
            BatchingConfig("ssb", dbs=True, br=True),
            max_duration=max_duration,
            manifest_cache=cache,
        )
        paper.plan  # epoch 0, not timed
        figures["plan_paper_s"] = plan_seconds(paper)
    return figures


def run_measure(kind: str, args, full_pass: bool = True) -> dict:
    """measure() in a fresh Python process: its peak RSS is its own."""
    command = [
        sys.executable,
        "-m",
        "scripts.bench.lhotse",
        "--measure",
        kind,
        "--manifest",
        str(args.manifest),
        "--cache",
        str(args.cache),
        "--max-duration",
        str(args.max_duration),
        "--reader-cuts",
        str(args.reader_cuts),
        "--cuts",
        str(args.cuts),
        "--pass-cuts",
        str(args.pass_cuts if full_pass else 0),
    ]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.splitlines()[-1])


def table_row(name: str, figures: dict, reader_rss: int, n: int) -> list[str]:
    """One sampler's row (bytes a cut: over reader_rss, its reader baseline); '-': not measured for it."""
    passed = "pass_s" in figures
    return [
        name,
        f"{figures['first_batch_s']:.2f}",
        f"{figures['plan_s']:.3f}" if "plan_s" in figures else "-",
        f"{figures['pass_s']:.0f} ({figures['cuts']:,} cuts, {figures['batches']:,} batches)" if passed else "-",
        f"{figures['rss'] / 2**20:.0f}",
        f"{(figures['rss'] - reader_rss) / n:.1f}",
        f"{figures['padded_fraction']:.1%}" if passed else "-",
        f"{figures['over']:,}" if passed else "-",
    ]


def report(n: int, args, results: dict) -> None:
    """The side-by-side table and the goals."""
    reader, cold, warm, lhotse = (results[k] for k in ("reader+planner", "plan cold", "plan warm", "lhotse"))
    argsort = results["argsort"]["argsort_s"]
    print(f"{n:,} cuts, max_duration={args.max_duration:g} s; {cpu_name()}; one run, side by side")
    rows = [
        table_row("PlanCutSampler, cold cache (decompress + index)", cold, reader["rss"], n),
        table_row("PlanCutSampler, warm cache", warm, reader["rss"], n),
        table_row("DynamicBucketingSampler (plans while streaming)", lhotse, results["reader"]["rss"], n),
    ]
    print(
        "\n".join(
            markdown_table(
                [
                    "sampler",
                    "first batch s",
                    "plan an epoch s",
                    "pass s",
                    "peak RSS MiB",
                    "bytes a cut over the reader",
                    "padded fraction",
                    "batches over budget",
                ],
                rows,
            )
        )
    )
    print(
        f"numpy.argsort of the {n:,} lengths: {argsort:.3f} s; planning / argsort = {warm['plan_s'] / argsort:.2f}x, "
        f"the paper's SSB (ssb_key=length) {warm['plan_paper_s']:.3f} s = {warm['plan_paper_s'] / argsort:.2f}x "
        "(goal <= 1.5x)"
    )
    print(
        f"Lhotse's reader ({reader['cuts_read']:,} cuts read): peak RSS {results['reader']['rss'] / 2**20:.0f} MiB, "
        f"{reader['rss'] / 2**20:.0f} MiB with the planner's modules and code loaded; "
        f"PlanCutSampler holds {(cold['rss'] - reader['rss']) / n:.1f} bytes a cut more (goal < 64)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cuts", type=int, default=10_000_000, help="cuts in the generated manifest")
    parser.add_argument("--max-duration", type=float, default=200.0, help="the batch budget in seconds")
    parser.add_argument("--folder", type=Path, help="where the manifest and the cache go (default: a temp folder)")
    parser.add_argument("--reader-cuts", type=int, default=200_000, help="cuts the reader baseline reads")
    parser.add_argument(
        "--pass-cuts",
        type=int,
        help="stop each sampler's pass over the batches once it has "
        "yielded this many cuts (default: a full pass over the epoch)",
    )
    parser.add_argument("--measure", choices=MEASURES, help=argparse.SUPPRESS)
    parser.add_argument("--manifest", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.folder is not None and not args.folder.is_dir():
        parser.error(f"--folder {args.folder} is not a folder: create it, or leave --folder out for a temporary one")
    args.pass_cuts = args.cuts if args.pass_cuts is None else args.pass_cuts
    if args.measure:
        print(
            json.dumps(
                measure(
                    args.measure,
                    args.manifest,
                    args.cache,
                    args.max_duration,
                    args.cuts,
                    args.reader_cuts,
                    args.pass_cuts,
                )
            )
        )
        return
    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        args.manifest, args.cache = Path(folder) / "cuts.jsonl.gz", Path(folder) / "cache"
        start = time.perf_counter()
        write_manifest(args.manifest, bench_durations(args.cuts))
        print(
            f"wrote {args.manifest.stat().st_size / 2**20:.0f} MiB in {time.perf_counter() - start:.0f} s",
            file=sys.stderr,
        )
        results = {
            "reader": run_measure("reader", args),
            "reader+planner": run_measure("reader+planner", args),
            "plan cold": run_measure("plan", args),
            "plan warm": run_measure("plan", args, full_pass=False),
            "lhotse": run_measure("lhotse", args),
            "argsort": run_measure("argsort", args),
        }
        report(args.cuts, args, results)


if __name__ == "__main__":
    main()
