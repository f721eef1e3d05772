"""The paper's analyses on a set of lengths: Table 1, the Fig. 2 parameter sweeps, and calibration."""
from __future__ import annotations

import dataclasses

import numpy as np

from .config import BatchingConfig, switch_strategy
from .metrics import randomness
from .paper import PAPER_TABLE1, TABLE1_CONFIGS
from .plan import batch_stats
from .planner import plan_epoch, plan_global

#: The parameter each Fig. 2 panel varies, for the strategy that has it.
SWEPT = {"lrf": "ssb", "bucket_size": "bkt", "n_bins": "ats"}


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
        rows.append(dict(name=name, n_batches=stats["n_batches"], zpr=round(stats["zpr"], 2),
                         abl=round(stats["abl"], 2), **paper))
    return rows


def sweep_grid(n_samples: int, batch_size: int, points: int = 40) -> dict[str, list]:
    """Fig. 2's ranges: LRF in [0, 1], bucket size in [B0, N], bins in [1, N / B0]; geometric where wide."""
    n_batches = max(1, -(-n_samples // batch_size))
    buckets = np.unique(np.geomspace(1, n_batches, points).round().astype(int)) * batch_size
    return dict(lrf=np.round(np.linspace(0, 1, points + 1), 4).tolist(),
                bucket_size=buckets.tolist(),
                n_bins=np.unique(np.geomspace(1, n_batches, points).round().astype(int)).tolist())


def sweep(lengths: np.ndarray, base: BatchingConfig, grid: dict[str, list]) -> dict[str, list[dict]]:
    """ZPR and ABL of epoch 0 for every value of every swept parameter."""
    curves = {}
    for param, values in grid.items():
        curves[param] = []
        for value in values:
            config = switch_strategy(base, SWEPT[param], **{param: value})
            stats = batch_stats(lengths, plan_epoch(lengths, config))
            curves[param].append(dict(value=value, zpr=stats["zpr"], abl=stats["abl"]))
    return curves


def calibrate(lengths: np.ndarray, base: BatchingConfig, target_zpr: float) -> dict[str, dict]:
    """The bucket size (a multiple of B0) and number of bins whose ZPR is closest to, not above, the target."""
    n_batches = max(1, -(-lengths.size // base.batch_size))
    grid = dict(bucket_size=(np.arange(1, n_batches + 1) * base.batch_size).tolist(),
                n_bins=list(range(1, n_batches + 1)))
    best = {}
    for param, points in sweep(lengths, base, grid).items():
        below = [p for p in points if p["zpr"] <= target_zpr]
        if below:
            chosen = max(below, key=lambda p: p["zpr"])
            best[SWEPT[param]] = {param: chosen["value"], "zpr": chosen["zpr"], "abl": chosen["abl"]}
        else:
            best[SWEPT[param]] = {param: None, "zpr": None, "abl": None}
    return best
