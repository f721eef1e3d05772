"""The paper's analyses on a set of lengths: Table 1, the Fig. 2 parameter sweeps, and calibration."""

from __future__ import annotations

import dataclasses

import numpy as np

from .budget import token_budget
from .config import PAPER_TARGET, BatchingConfig
from .degenerate import same_batches
from .grouping import ceil_div
from .metrics import randomness
from .paper import PAPER_TABLE1, TABLE1_CONFIGS
from .plan import batch_stats
from .planner import plan_epoch, plan_global

#: The parameter each sweep curve varies, for the strategy that has it (Fig. 2's three, and stream's).
SWEPT = {"lrf": "ssb", "bucket_size": "bkt", "n_bins": "ats", "bucket_interval": "stream"}
#: Strategies without a parameter: one point each on the trade-off plot.
FIXED = ("rand", "sb")
#: calibrate's search for the continuous / wide parameters: (lowest value, step of the bisection).
BISECTED = {"lrf": (0.0, 1e-4), "bucket_interval": (1, 1)}
#: Metrics that fall as the swept parameter grows (the others, zpr and padding, grow with it).
FALLING = ("pair_repeat",)
LRF_CEILING = 4.0  # beyond this the noise dwarfs every length difference: SSB is a shuffle
#: target_zpr is bisected on a seeded sample of at most this many lengths. ZPR is a property of the
#: length distribution, not of the corpus's size (a bisection over 10 million lengths takes minutes);
#: pair_repeat falls as the corpus grows, so a target_pair_repeat is always bisected on every length.
CALIBRATION_SAMPLE = 200_000


def describe(lengths: np.ndarray, config: BatchingConfig, epoch: int = 0) -> dict:
    """The plan's own stats of one configuration's epoch (padding, decoder steps, skipped samples)
    plus its randomness (pair repeats into the next epoch)."""
    stats = plan_global(lengths, config, epoch).stats(lengths, config.n_frames_per_step)
    return stats | randomness(lengths, config, (epoch, epoch + 1))


def table1(lengths: np.ndarray, seed: int = 0) -> list[dict]:
    """Table 1 (and the DBS rows) next to the paper's figures, epoch 0 of `seed`."""
    rows = []
    for name, config in TABLE1_CONFIGS.items():
        stats = batch_stats(lengths, plan_epoch(lengths, dataclasses.replace(config, seed=seed)))
        paper = dict(zip(("paper_n_batches", "paper_zpr", "paper_abl"), PAPER_TABLE1[name]))
        rows.append(
            dict(
                name=name, n_batches=stats["n_batches"], zpr=round(stats["zpr"], 2), abl=round(stats["abl"], 2), **paper
            )
        )
    return rows


def sweep_grid(lengths: np.ndarray, batch_size: int, points: int = 40) -> dict[str, list]:
    """Fig. 2's ranges (LRF in [0, 1], bucket size in [B0, N], bins in [1, N / B0]; geometric where
    wide) and stream's bucket interval in [1, L_max] frames (geometric)."""
    n_batches = max(1, ceil_div(lengths.size, batch_size))
    buckets = np.unique(np.geomspace(1, n_batches, points).round().astype(int)) * batch_size
    return dict(
        lrf=np.round(np.linspace(0, 1, points + 1), 4).tolist(),
        bucket_size=buckets.tolist(),
        n_bins=np.unique(np.geomspace(1, n_batches, points).round().astype(int)).tolist(),
        bucket_interval=np.unique(np.geomspace(1, lengths.max(initial=1), points).round().astype(int)).tolist(),
    )


def sweep(
    lengths: np.ndarray, base: BatchingConfig, grid: dict[str, list], with_randomness: bool = False
) -> dict[str, list[dict]]:
    """ZPR and ABL of epoch 0 for every value of every swept parameter; with_randomness adds
    pair_repeat into epoch 1 (the trade-off plot's other axis)."""
    curves = {}
    for param, values in grid.items():
        curves[param] = [
            dict(value=value, **_padding(lengths, _variant(base, SWEPT[param], param, value), with_randomness))
            for value in values
        ]
    return curves


def fixed_points(lengths: np.ndarray, base: BatchingConfig) -> dict[str, dict]:
    """ZPR, ABL and pair_repeat of the strategies that have no parameter (FIXED)."""
    return {name: _padding(lengths, base.with_strategy(name), True) for name in FIXED}


def calibrate(lengths: np.ndarray, base: BatchingConfig, target: float, metric: str = "zpr") -> dict[str, dict]:
    """For each strategy, its parameter whose `metric` (zpr, or pair_repeat) is closest to, not above,
    the target: the bucket size (a multiple of B0) and number of bins from every value; SSB's lrf
    (to 1e-4) and stream's bucket_interval (frames) by bisection (bisect_parameter). The given
    strategy, when it has no parameter here (SWEPT), gets its own plan's figures at the given
    options and a note saying it was not calibrated."""
    n_batches = max(1, ceil_div(lengths.size, base.batch_size))
    grid = dict(
        bucket_size=(np.arange(1, n_batches + 1) * base.batch_size).tolist(), n_bins=list(range(1, n_batches + 1))
    )
    best = {}
    for param, points in sweep(lengths, base, grid, with_randomness=metric in FALLING).items():
        below = [p for p in points if p[metric] <= target]
        if below:
            chosen = max(below, key=lambda p: p[metric])
            best[SWEPT[param]] = {
                param: chosen["value"],
                "zpr": chosen["zpr"],
                "abl": chosen["abl"],
                metric: chosen[metric],
            }
        else:
            best[SWEPT[param]] = {param: None, "zpr": None, "abl": None}
    top = dict(lrf=LRF_CEILING, bucket_interval=int(lengths.max(initial=1)) + 1)
    for param, (low, step) in BISECTED.items():
        best[SWEPT[param]] = bisect_parameter(lengths, base, param, target, low, top[param], step, metric)
    if base.batching not in SWEPT.values():
        stats = plan_global(lengths, base).stats(lengths, base.n_frames_per_step)
        best[base.batching] = dict(
            zpr=stats["zpr"],
            abl=stats["abl"],
            note=f"not calibrated: {base.batching} has "
            "no parameter that calibrate tunes; its figures at the given options",
        )
    return best


def bisect_parameter(
    lengths: np.ndarray,
    base: BatchingConfig,
    param: str,
    target: float,
    low: float,
    high: float,
    step: float,
    metric: str = "zpr",
) -> dict:
    """The value low + k * step in [low, high] whose `metric` is closest to, not above, the target,
    by bisection on k: for zpr and padding (the padded share of all frames, in percent), which grow
    with the value, the largest such value; for pair_repeat, which falls as it grows, the smallest.
    None when no value meets the target. Where the metric is not monotone the value returned still
    meets the target, but a closer one may lie elsewhere (docs/batching/ssb_key.md)."""
    measure = dict(lengths=lengths, base=base, param=param, low=low, step=step, metric=metric)
    top = int(round((high - low) / step))
    good, bad = (top, 0) if metric in FALLING else (0, top)
    found = _measured(k=good, **measure)
    if found[metric] > target:
        return {param: None, "zpr": None, "abl": None, "padding": None}
    record = _measured(k=bad, **measure)
    if record[metric] <= target:
        return {param: _grid_value(low, bad, step), **record}
    while abs(good - bad) > 1:
        middle = (good + bad) // 2
        record = _measured(k=middle, **measure)
        if record[metric] <= target:
            good, found = middle, record
        else:
            bad = middle
    return {param: _grid_value(low, good, step), **found}


def _measured(
    lengths: np.ndarray, base: BatchingConfig, param: str, low: float, step: float, metric: str, k: int
) -> dict:
    """_padding of grid point k (with pair_repeat when that is the metric)."""
    config = _variant(base, SWEPT[param], param, _grid_value(low, k, step))
    return _padding(lengths, config, with_randomness=metric in FALLING)


def resolve_width(lengths: np.ndarray, config: BatchingConfig) -> tuple[BatchingConfig, dict | None]:
    """The config with lrf calibrated to its target_zpr or target_pair_repeat on these lengths (the
    targets stay, to say where lrf came from), and what was found: (config, None) without a target.
    A target out of reach (a ZPR below the sorted plan's, a pair_repeat below a shuffle's) plans at
    the nearest width, lrf 0 or LRF_CEILING, and the record says so (`reached`): the recipe's and
    PlanCutSampler's default target meets corpora nobody calibrated it for, and the nearest width
    is what the target asks for as far as the corpus allows.
    The bisection plans single-rank epochs 0 and 1, so every rank resolves the same width."""
    metric, target = next(
        (
            (m, getattr(config, f"target_{m}"))
            for m in ("zpr", "pair_repeat")
            if getattr(config, f"target_{m}") is not None
        ),
        (None, None),
    )
    if metric is None:
        return config, None
    low, step = BISECTED["lrf"]
    bisected, on = _calibration_set(lengths, config, metric)
    asked = f"target_{metric}={target}"
    if target == PAPER_TARGET:  # the paper's SSB's ZPR on the same lengths, budget and seed
        paper = on.with_strategy("ssb", ssb_key=None, lrf=TABLE1_CONFIGS["SSB"].lrf, target_zpr=None)
        target = _padding(bisected, paper, with_randomness=False)["zpr"]
        asked = f"target_zpr=paper (the paper's SSB's {target:.2f}%)"
    found = bisect_parameter(bisected, on, "lrf", target, low, LRF_CEILING, step, metric)
    reached = found["lrf"] is not None
    lrf = found["lrf"] if reached else low if metric == "zpr" else LRF_CEILING
    resolved = config.with_strategy("ssb", lrf=lrf)
    # The figures logged: the whole corpus's; on a sampled one the sample's ZPR alone (planning two
    # whole epochs to count repeated pairs would hold several times the plan's memory at 10M lengths)
    # (the bisection measured it at the width found; out of reach, the edge is measured here)
    if bisected is lengths:
        record = describe(lengths, resolved)
    else:
        record = dict(
            pair_repeat=None,
            zpr=found["zpr"] if reached else _padding(bisected, on.with_strategy("ssb", lrf=lrf))["zpr"],
        )
    return resolved, dict(
        target=asked,
        ssb_key=config.ssb_key,
        lrf=lrf,
        reached=reached,
        zpr=record["zpr"],
        pair_repeat=record["pair_repeat"],
        bisected_on=None if bisected is lengths else int(bisected.size),
    )


def _calibration_set(lengths: np.ndarray, config: BatchingConfig, metric: str) -> tuple[np.ndarray, BatchingConfig]:
    """The lengths (and config) the bisection plans: for a ZPR target on more than CALIBRATION_SAMPLE
    lengths a sample drawn from config.seed (so every rank draws the same), with the DBS budget
    pinned to the whole corpus's B0 * L_max, which the sample's own longest would change."""
    if metric != "zpr" or lengths.size <= CALIBRATION_SAMPLE:
        return lengths, config
    sample = np.random.default_rng(config.seed).choice(lengths, CALIBRATION_SAMPLE, replace=False)
    if config.dbs and config.capacity is None:
        config = dataclasses.replace(config, capacity=token_budget(lengths, config))
    return sample, config


def calibrated_line(record: dict) -> str:
    """resolve_width's record as the one line a run logs."""
    sampled = record.get("bisected_on")
    where = "these lengths" if sampled is None else f"a {sampled:,}-length sample of these lengths"
    key = f"ssb_key={record['ssb_key'] or 'length'}"
    figures = (
        f"ZPR {record['zpr']:.2f}%, pair_repeat {record['pair_repeat']:.4f}"
        if sampled is None
        else f"ZPR {record['zpr']:.2f}% on the sample"
    )
    warning = f"; warning: {same_batches(record['lrf'])}" if not record["lrf"] else ""
    if not record.get("reached", True):
        return (
            f"{record['target']} is out of reach on {where}: {key} plans at the nearest width, "
            f"lrf={record['lrf']}: {figures}{warning}"
        )
    return f"{key} lrf={record['lrf']} calibrated to {record['target']} on {where}: {figures}{warning}"


def _grid_value(low: float, k: int, step: float):
    """low + k * step, an int for integer steps, else rounded off float noise (0.0612, not 0.06120000001)."""
    return low + k * step if isinstance(step, int) else round(low + k * step, 10)


def _variant(base: BatchingConfig, strategy: str, param: str, value) -> BatchingConfig:
    """`base` switched to `strategy` (the one switch: options it does not own dropped), `param` set."""
    return base.with_strategy(strategy, **{param: value})


def _padding(lengths: np.ndarray, config: BatchingConfig, with_randomness: bool = False) -> dict:
    """ZPR, ABL and padding (share of all padded frames, %) of epoch 0's batches, and with_randomness
    pair_repeat into epoch 1."""
    stats = batch_stats(lengths, plan_epoch(lengths, config))
    padding = 100 * (1 - stats["real_frames"] / stats["padded_frames"]) if stats["padded_frames"] else 0.0
    record = dict(zpr=stats["zpr"], abl=stats["abl"], padding=padding)
    if with_randomness:
        record["pair_repeat"] = randomness(lengths, config)["pair_repeat"]
    return record
