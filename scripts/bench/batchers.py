"""The speech batchers side by side, and the frontier each draws: every strategy of ours beside Lhotse's
DynamicBucketingSampler, on the same lengths and the same frame budget (B0 x L_max), on one machine.

Per corpus: (1) a table of every batcher at its defaults and Lhotse at each num_buckets: batches,
ZPR, padding, padded frames, decoder steps (sum of each batch's longest), batches over the budget
and the largest padded batch over the budget, pair_repeat between epochs 0 and 1 (randomness) and
the planning time of one epoch. Lhotse runs twice: over a CutSet reshuffled before each epoch (as a
training loop over a shuffled manifest runs it) and over one kept in order (labelled in-order).
(2) The frontier: each family's parameter swept (SSB with each ssb_key: lrf; stream with each
stream_key: bucket_interval; BKT: bucket_size; ATS: n_bins), decoder steps against pair_repeat, one
PNG per corpus with Lhotse as points, and a table saying for each Lhotse point whether a family beats it: the
fewest decoder steps among its points at a pair_repeat no higher than Lhotse's, as a change against Lhotse's steps, and
SSB with ssb_key=cost calibrated to Lhotse's pair_repeat exactly (batching.analysis.resolve_width).

Corpora: `file` (the --lengths file, by default the LJSpeech training split), and N generated lengths
each: lognormal(ln 450, 0.45), bimodal (a short and a long lognormal mode, 1:1), outliers (the
lognormal with 0.01 % of the lengths 4-8x its longest). Lhotse sees each length as a cut of
frames / 100 s. Default N = 100,000 (12 min on 2 shared cores, most of it Lhotse); --full: N = 1,000,000
and a denser sweep (well over an hour there).
Your own lengths (a filelist or a TSV with a 'frames' column), all of them, nothing generated:
    python -m scripts.bench.batchers --lengths my_lengths.tsv --split 1 --corpora file --out frontier/
"""

from __future__ import annotations

import argparse
import platform
import time
import warnings
from datetime import date
from pathlib import Path

import numpy as np

from batching import STRATEGIES, BatchingConfig, pair_repeat, plan_global, read_lengths, train_split
from batching.analysis import resolve_width
from batching.errors import UserError
from batching.plan import batch_stats
from data.shared import LJSPEECH_LENGTHS
from scripts.common import cpu_name, markdown_table

B0 = 16
FRAME_SECONDS = 0.01
COLUMNS = [
    "batcher",
    "batches",
    "ZPR %",
    "padding %",
    "padded frames",
    "decoder steps",
    "over budget",
    "largest / budget",
    "pair_repeat",
    "plan ms",
]
#: The swept families: label -> (strategy, parameter, fixed options).
FAMILIES = {
    "ssb key=cost": ("ssb", "lrf", {"ssb_key": "cost"}),
    "ssb key=length": ("ssb", "lrf", {}),
    "stream key=length": ("stream", "bucket_interval", {}),
    "stream key=cost": ("stream", "bucket_interval", {"stream_key": "cost"}),
    "bkt": ("bkt", "bucket_size", {}),
    "ats": ("ats", "n_bins", {}),
}
CORPORA = ("file", "lognormal", "bimodal", "outliers")


def measure(
    lengths: np.ndarray,
    epochs: list[list[np.ndarray]],
    seconds: float,
    budget: int,
    block_rows: np.ndarray | None = None,
) -> dict:
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
    return dict(
        batches=len(first),
        samples=int(sizes.sum()),
        zpr=stats["zpr"],
        padding=100 * (1 - stats["real_frames"] / padded.sum()),
        padded_frames=int(padded.sum()),
        decoder_steps=int(longest.sum()),
        over_budget=int((padded > budget).sum()),
        largest=padded.max() / budget,
        pair_repeat=pair_repeat(first, epochs[1], lengths.size),
        plan_s=seconds,
    )


def ours(lengths: np.ndarray, config: BatchingConfig, budget: int) -> dict:
    """One of our strategies: epoch 0 timed (after a warm-up that compiles numba), epoch 1 for randomness."""
    plan_global(lengths[:1000], config, 0)
    start = time.perf_counter()
    plan = plan_global(lengths, config, 0)
    seconds = time.perf_counter() - start
    rows = plan.n_rows() if config.plans_blocks else None
    return measure(lengths, [plan.batches(), plan_global(lengths, config, 1).batches()], seconds, budget, rows)


def our_config(name: str, **options) -> BatchingConfig:
    """Strategy `name` at the common budget: token-budget batches (dbs) and shuffled batches (br);
    BLoad fills blocks of L_max instead (batches of B0 blocks: the same frames)."""
    return BatchingConfig(name, batch_size=B0, dbs=True, br=True, **options)


def lhotse_bucketing(lengths: np.ndarray, num_buckets: int, budget: int, reshuffle: bool) -> dict:
    """Lhotse's DynamicBucketingSampler (default buffer_size, shuffle=True, seed 0) at max_duration =
    the budget in seconds, epochs 0 (timed) and 1; with `reshuffle` over a CutSet shuffled anew
    before each epoch (cut id = the length's index), else over one kept in index order."""
    from lhotse.dataset import DynamicBucketingSampler

    epochs, seconds = [], 0.0
    for epoch in (0, 1):
        order = np.random.default_rng([1, epoch]).permutation(lengths.size) if reshuffle else np.arange(lengths.size)
        with warnings.catch_warnings():  # it warns that an eager CutSet gains nothing from it: the batches are the same
            warnings.simplefilter("ignore")
            sampler = DynamicBucketingSampler(
                lhotse_cuts(lengths, order),
                max_duration=budget * FRAME_SECONDS,
                num_buckets=num_buckets,
                shuffle=True,
                seed=0,
            )
        sampler.set_epoch(epoch)
        start = time.perf_counter()
        epochs.append([np.array([int(cut.id) for cut in batch], np.int64) for batch in sampler])
        seconds = seconds or time.perf_counter() - start
    return measure(lengths, epochs, seconds, budget)


def lhotse_cuts(lengths: np.ndarray, order: np.ndarray):
    """Length i as a cut of lengths[i] / 100 seconds with id i, in `order` (no audio: the sampler needs none)."""
    from lhotse import CutSet, MonoCut

    return CutSet.from_cuts(MonoCut(str(i), 0.0, lengths[i] * FRAME_SECONDS, 0) for i in order.tolist())


def sweep_values(lengths: np.ndarray, points: int) -> dict[str, list]:
    """Each family's parameter values, geometric: lrf in [1e-3, 2], bucket_interval in [1, L_max],
    bucket_size in [B0, N] (multiples of B0), n_bins in [1, N / B0]."""
    n_batches = max(1, -(-lengths.size // B0))
    lrf = np.round(np.geomspace(1e-3, 2, points), 5).tolist()
    return {
        "lrf": lrf,
        "bucket_interval": geometric_ints(int(lengths.max()), points),
        "bucket_size": [v * B0 for v in geometric_ints(n_batches, points)],
        "n_bins": geometric_ints(n_batches, points),
    }


def geometric_ints(top: int, points: int) -> list[int]:
    return np.unique(np.geomspace(1, top, points).round().astype(int)).tolist()


def frontier(lengths: np.ndarray, points: int, budget: int) -> dict[str, list[dict]]:
    """Every family's sweep: one measured record per parameter value, with the value."""
    values = sweep_values(lengths, points)
    curves = {}
    for label, (strategy, param, fixed) in FAMILIES.items():
        curves[label] = [
            dict(value=v, **ours(lengths, our_config(strategy, **{param: v}, **fixed), budget)) for v in values[param]
        ]
    return curves


def beaten(curves: dict[str, list[dict]], point: dict) -> dict[str, float | None]:
    """Per family: its fewest decoder steps at a pair_repeat no higher than the point's, as a change
    in percent against the point's steps (negative: fewer); None when no swept value is that random."""
    out = {}
    for label, curve in curves.items():
        steps = [p["decoder_steps"] for p in curve if p["pair_repeat"] <= point["pair_repeat"]]
        out[label] = 100 * (min(steps) / point["decoder_steps"] - 1) if steps else None
    return out


def corpus(name: str, args: argparse.Namespace) -> tuple[str, np.ndarray]:
    """(title, lengths) of one corpus (module doc)."""
    rng = np.random.default_rng(0)
    if name == "file":
        real = read_lengths(args.lengths)
        return f"{args.lengths.name}, {args.split:.0%} training split", real[train_split(real.size, args.split)]
    lognormal = np.maximum(1, rng.lognormal(np.log(450), 0.45, args.n).round()).astype(np.int64)
    if name == "lognormal":
        return "lognormal(ln 450, 0.45) frames", lognormal
    if name == "bimodal":
        short = rng.lognormal(np.log(150), 0.25, args.n // 2)
        long = rng.lognormal(np.log(700), 0.15, args.n - args.n // 2)
        return "bimodal: lognormal(ln 150, 0.25) and (ln 700, 0.15), 1:1", np.maximum(
            1, np.concatenate([short, long]).round()
        ).astype(np.int64)[rng.permutation(args.n)]
    few = max(1, args.n // 10_000)
    lognormal[rng.choice(args.n, few, replace=False)] = rng.integers(4, 9, few) * lognormal.max()
    return f"outliers: the lognormal with {few} lengths 4-8x its longest", lognormal


def bench(title: str, lengths: np.ndarray, args: argparse.Namespace, stem: str) -> str:
    """Both tables of one corpus as markdown, and its frontier PNG under args.out."""
    from batching.plots import plot_frontier

    budget = B0 * int(lengths.max())
    rows = {
        f"{n}{'' if our_config(n).plans_blocks else '-dbs-br'}": ours(lengths, our_config(n), budget)
        for n in STRATEGIES
    }
    rows["ssb-dbs-br ssb_key=cost"] = ours(lengths, our_config("ssb", ssb_key="cost"), budget)
    rows["stream-dbs-br stream_key=cost"] = ours(lengths, our_config("stream", stream_key="cost"), budget)
    theirs = {
        f"lhotse num_buckets={n} {'reshuffled' if again else 'in-order'}": lhotse_bucketing(lengths, n, budget, again)
        for n in args.num_buckets
        for again in (True, False)
    }
    curves = frontier(lengths, args.points, budget)
    png = args.out / f"frontier_{stem}.png"
    plot_frontier(curves, theirs, png, f"{title}: {lengths.size:,} lengths, budget B0 x L_max (DBS, BR)")
    parts = [
        f"### {title}: {lengths.size:,} lengths, L_max {lengths.max()} frames, budget B0 x L_max = "
        f"{budget:,} frames (B0 = {B0})",
        table(rows | theirs, lengths.size),
        f"Frontier ({args.points} values per family; plot: {png.name}). Each family's fewest decoder steps at a "
        "pair_repeat no higher than Lhotse's, against Lhotse's steps (negative: fewer; - : no value that random), "
        "and ssb_key=cost with lrf calibrated to Lhotse's pair_repeat:",
        frontier_table(lengths, curves, theirs, budget),
    ]
    return "\n\n".join(parts)


def calibrated_cost(lengths: np.ndarray, point: dict, budget: int) -> tuple[float, dict] | None:
    """ssb_key=cost with lrf calibrated to the point's pair_repeat (closest, not above; resolve_width's
    bisection), measured: (lrf, record); None when no lrf is that random."""
    try:
        config, _ = resolve_width(lengths, our_config("ssb", ssb_key="cost", target_pair_repeat=point["pair_repeat"]))
    except UserError:
        return None
    return config.lrf, ours(lengths, config, budget)


def frontier_table(lengths: np.ndarray, curves: dict[str, list[dict]], theirs: dict[str, dict], budget: int) -> str:
    """One row per Lhotse point: its steps, pair_repeat and budget overruns, ssb_key=cost calibrated to
    its pair_repeat, whether it is dominated (by that or by a swept point), and each family's change."""
    lines = [
        "| Lhotse point | decoder steps | pair_repeat | over budget (largest) | cost key at its pair_repeat "
        "| dominated | " + " | ".join(f"{c} (swept)" for c in curves) + " |",
        "|" + "---|" * (6 + len(curves)),
    ]
    for label, point in theirs.items():
        change = beaten(curves, point)
        calibrated = calibrated_cost(lengths, point, budget)
        if calibrated is not None:
            change["ssb key=cost, calibrated"] = 100 * (calibrated[1]["decoder_steps"] / point["decoder_steps"] - 1)
        known = {k: v for k, v in change.items() if v is not None}
        best = min(known, key=known.get) if known else None
        verdict = f"yes: {best} {known[best]:+.1f} %" if best and known[best] < 0 else "no"
        cells = [
            label.removeprefix("lhotse "),
            f"{point['decoder_steps']:,}",
            f"{point['pair_repeat']:.4f}",
            f"{point['over_budget']} (x{point['largest']:.3f})",
            "-"
            if calibrated is None
            else f"lrf={calibrated[0]}: {calibrated[1]['decoder_steps']:,} steps, "
            f"pair_repeat {calibrated[1]['pair_repeat']:.4f}, {change['ssb key=cost, calibrated']:+.1f} %",
            verdict,
        ]
        cells += ["-" if change[c] is None else f"{change[c]:+.1f} %" for c in curves]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table(rows: dict[str, dict], n_samples: int) -> str:
    """Markdown; a batcher whose epoch does not hold every sample exactly once says so in its label."""
    cells = []
    for label, r in rows.items():
        if r["samples"] != n_samples:
            label += f" ({r['samples']:,} samples of {n_samples:,})"
        cells.append(
            [
                label,
                f"{r['batches']:,}",
                f"{r['zpr']:.2f}",
                f"{r['padding']:.2f}",
                f"{r['padded_frames']:,}",
                f"{r['decoder_steps']:,}",
                str(r["over_budget"]),
                f"{r['largest']:.4f}",
                f"{r['pair_repeat']:.4f}",
                f"{1000 * r['plan_s']:,.1f}",
            ]
        )
    return "\n".join(markdown_table(COLUMNS, cells))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--lengths",
        type=Path,
        default=LJSPEECH_LENGTHS,
        help="the `file` corpus: a filelist or TSV with a 'frames' column (default LJSpeech's)",
    )
    parser.add_argument("--split", type=float, default=0.8, help="train fraction of the seeded split (default 0.8)")
    parser.add_argument("--corpora", default=",".join(CORPORA), help=f"some of {', '.join(CORPORA)} (default all)")
    parser.add_argument("-n", type=int, default=100_000, help="lengths per generated corpus (default 100,000)")
    parser.add_argument("--points", type=int, default=12, help="sweep values per family (default 12)")
    parser.add_argument("--full", action="store_true", help="the documented run: -n 1000000 --points 16")
    parser.add_argument("--num-buckets", default="5,10,30", help="Lhotse num_buckets values (default 5,10,30)")
    parser.add_argument("--out", type=Path, default=Path("."), help="folder for frontier_<corpus>.png (default .)")
    args = parser.parse_args(argv)
    if args.full:
        args.n, args.points = 1_000_000, 16
    args.num_buckets = [int(n) for n in args.num_buckets.split(",")]
    names = [name.strip() for name in args.corpora.split(",")]
    unknown = sorted(set(names) - set(CORPORA))
    if unknown:
        parser.error(f"--corpora: unknown {', '.join(unknown)}; choose from {', '.join(CORPORA)}")
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    print(f"# Batchers side by side ({date.today()}, {cpu_name()}, python {platform.python_version()})")
    for name in names:
        title, lengths = corpus(name, args)
        print("\n" + bench(title, lengths, args, name), flush=True)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
