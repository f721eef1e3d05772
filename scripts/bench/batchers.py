"""The speech batchers side by side: every strategy of ours beside Lhotse's DynamicBucketingSampler,
on the same lengths and the same frame budget (B0 x L_max), in one run on one machine.

For each batcher and data set: batches, ZPR (batch-weighted, the paper's), padding as a share of
all padded frames, padded frames and decoder steps per epoch (sum of each batch's longest),
batches over the budget, pair_repeat between epochs 0 and 1 (randomness), and the planning time
of one epoch (ours: plan_global; Lhotse: one pass over its sampler, which is how it plans).
Then the fair comparison: SSB-DBS-BR's lrf and stream's bucket_interval calibrated to each Lhotse
setting's ZPR (batching.analysis.bisect_parameter), and compared at that ZPR.

Data: the LJSpeech training split (lengths.tsv, the paper's seeded 80:20 split) and N lognormal
lengths. Lhotse sees each length as a cut of frames / 100 seconds (10 ms frames).
Usage: python -m scripts.bench.batchers [--lengths TSV] [-n 1000000] [--num-buckets 10,30]
"""
from __future__ import annotations

import argparse
import dataclasses
import platform
import time
import warnings
from datetime import date
from pathlib import Path

import numpy as np

from batching import STRATEGIES, BatchingConfig, pair_repeat, plan_global, read_lengths, train_split
from batching.analysis import BISECTED, LRF_CEILING, SWEPT, bisect_parameter
from batching.plan import batch_stats
from batching.planner import strategy_of
from data.shared import LJSPEECH_LENGTHS
from scripts.common import cpu_name, markdown_table

B0 = 16
FRAME_SECONDS = 0.01
COLUMNS = ["batcher", "batches", "ZPR %", "padding %", "padded frames", "decoder steps", "over budget",
           "largest / budget", "pair_repeat", "plan ms"]


def measure(lengths: np.ndarray, epochs: list[list[np.ndarray]], seconds: float, budget: int,
            block_rows: np.ndarray | None = None) -> dict:
    """The table's figures for two epochs' batches (epoch 0 measured, epoch 1 for pair_repeat).
    block_rows: blocks per batch of a block plan (each block_length frames), else None."""
    first = epochs[0]
    stats = batch_stats(lengths, first)
    longest = np.array([lengths[b].max() for b in first], np.int64)
    sizes = np.fromiter(map(len, first), np.int64, len(first))
    padded = sizes * longest
    if block_rows is not None:  # BLoad: a batch is rows x block_length frames, not B x L
        block_length = budget // B0
        padded, longest = block_rows * block_length, np.full(len(first), block_length)
    return dict(batches=len(first), samples=int(sizes.sum()), zpr=stats["zpr"],
                padding=100 * (1 - stats["real_frames"] / padded.sum()), padded_frames=int(padded.sum()),
                decoder_steps=int(longest.sum()), over_budget=int((padded > budget).sum()),
                largest=padded.max() / budget, pair_repeat=pair_repeat(first, epochs[1], lengths.size), plan_s=seconds)


def ours(lengths: np.ndarray, config: BatchingConfig, budget: int) -> dict:
    """One of our strategies: epoch 0 timed (after a warm-up that compiles numba), epoch 1 for randomness."""
    plan_global(lengths[:1000], config, 0)
    start = time.perf_counter()
    plan = plan_global(lengths, config, 0)
    seconds = time.perf_counter() - start
    rows = plan.n_rows() if strategy_of(config).block_plan else None
    return measure(lengths, [plan.batches(), plan_global(lengths, config, 1).batches()], seconds, budget, rows)


def our_config(name: str) -> BatchingConfig:
    """Strategy `name` at the common budget: token-budget batches (dbs) and shuffled batches (br);
    BLoad fills blocks of L_max instead (batches of B0 blocks: the same frames)."""
    return BatchingConfig(name, batch_size=B0, dbs=True, br=True)


def lhotse_cuts(lengths: np.ndarray):
    """Each length as a cut of lengths / 100 seconds, id = its index (no audio: the sampler needs none)."""
    from lhotse import CutSet, MonoCut

    return CutSet.from_cuts(MonoCut(str(i), 0.0, f * FRAME_SECONDS, 0) for i, f in enumerate(lengths.tolist()))


def lhotse_bucketing(lengths: np.ndarray, cuts, num_buckets: int, budget: int) -> dict:
    """Lhotse's DynamicBucketingSampler (default buffer_size, shuffled, seed 0) at max_duration =
    the budget in seconds; epoch 0 timed, epoch 1 for randomness."""
    from lhotse.dataset import DynamicBucketingSampler

    with warnings.catch_warnings():  # it warns that an eager CutSet gains nothing from it: the batches are the same
        warnings.simplefilter("ignore")
        sampler = DynamicBucketingSampler(cuts, max_duration=budget * FRAME_SECONDS, num_buckets=num_buckets,
                                          shuffle=True, seed=0)
    epochs, seconds = [], 0.0
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        start = time.perf_counter()
        epochs.append([np.array([int(cut.id) for cut in batch], np.int64) for batch in sampler])
        seconds = seconds or time.perf_counter() - start
    return measure(lengths, epochs, seconds, budget)


def at_equal(lengths: np.ndarray, metric: str, target: float, budget: int) -> dict[str, dict]:
    """SSB-DBS-BR and stream with their parameter calibrated to the target value of `metric`
    (zpr or padding; closest, not above)."""
    rows = {}
    for param, (low, step) in BISECTED.items():
        base = our_config(SWEPT[param])
        top = dict(lrf=LRF_CEILING, bucket_interval=int(lengths.max()) + 1)[param]
        found = bisect_parameter(lengths, base, param, target, low, top, step, metric)
        if found[param] is None:
            rows[f"{SWEPT[param]} ({metric} {target:.2f} % out of reach)"] = None
            continue
        config = dataclasses.replace(base, **{param: found[param]})
        rows[f"{SWEPT[param]}-dbs-br {param}={found[param]}"] = ours(lengths, config, budget)
    return rows


def bench(name: str, lengths: np.ndarray, num_buckets: list[int]) -> str:
    """Both tables for one data set, as markdown."""
    budget = B0 * int(lengths.max())
    rows = {f"{n}{'' if strategy_of(our_config(n)).block_plan else '-dbs-br'}": ours(lengths, our_config(n), budget)
            for n in STRATEGIES}
    cuts = lhotse_cuts(lengths)
    theirs = {f"lhotse DynamicBucketing num_buckets={n}": lhotse_bucketing(lengths, cuts, n, budget)
              for n in num_buckets}
    rows |= theirs
    parts = [f"### {name}: {lengths.size:,} lengths, L_max {lengths.max()} frames, budget B0 x L_max = "
             f"{budget:,} frames (B0 = {B0})", table(rows, lengths.size)]
    for metric, words in (("zpr", "ZPR"), ("padding", "padding (share of padded frames)")):
        equal = {}
        for label, record in theirs.items():
            equal[label] = record
            equal |= at_equal(lengths, metric, record[metric], budget)
        parts += [f"At Lhotse's {words}, our parameter calibrated to it (closest, not above):",
                  table(equal, lengths.size)]
    return "\n\n".join(parts)


def table(rows: dict[str, dict | None], n_samples: int) -> str:
    """Markdown; a batcher whose epoch does not hold every sample exactly once says so in its label."""
    cells = []
    for label, r in rows.items():
        if r is not None and r["samples"] != n_samples:
            label += f" ({r['samples']:,} samples of {n_samples:,})"
        cells.append([label] + (["-"] * (len(COLUMNS) - 1) if r is None else [
            f"{r['batches']:,}", f"{r['zpr']:.2f}", f"{r['padding']:.2f}", f"{r['padded_frames']:,}",
            f"{r['decoder_steps']:,}", str(r["over_budget"]), f"{r['largest']:.4f}", f"{r['pair_repeat']:.4f}",
            f"{1000 * r['plan_s']:,.1f}"]))
    return "\n".join(markdown_table(COLUMNS, cells))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=Path, default=LJSPEECH_LENGTHS, help="LJSpeech lengths.tsv (or any lengths file)")
    parser.add_argument("--split", type=float, default=0.8, help="train fraction of the seeded split (default 0.8)")
    parser.add_argument("-n", type=int, default=1_000_000, help="lognormal lengths (default 1,000,000; 0: none)")
    parser.add_argument("--num-buckets", default="5,10,30", help="Lhotse num_buckets values (default 5,10,30)")
    args = parser.parse_args(argv)
    num_buckets = [int(n) for n in args.num_buckets.split(",")]
    start = time.perf_counter()
    real = read_lengths(args.lengths)
    print(f"# Batchers side by side ({date.today()}, {cpu_name()}, "
          f"python {platform.python_version()})\n")
    print(bench(f"{args.lengths.name}, {args.split:.0%} training split", real[train_split(real.size, args.split)],
                num_buckets))
    if args.n:
        rng = np.random.default_rng(0)
        lognormal = np.maximum(1, rng.lognormal(np.log(450), 0.45, args.n).round()).astype(np.int64)
        print("\n" + bench("lognormal(ln 450, 0.45) frames", lognormal, num_buckets))
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
