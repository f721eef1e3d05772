"""Pictures like the paper's: Fig. 2 (sweeps), Figs. 1/3 (the batches of one epoch), and the
padding-randomness trade-off of every strategy."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

LABELS = {
    "lrf": "LRF (SSB)",
    "bucket_size": "bucket size (BKT)",
    "n_bins": "number of bins (ATS)",
    "bucket_interval": "bucket interval (stream, frames)",
}


def plot_sweep(curves: dict[str, list[dict]], path: Path, selected: dict[str, float]) -> None:
    """ZPR (top) and ABL (bottom) against each strategy's parameter; dashed lines mark the selection."""
    fig, axes = plt.subplots(2, len(curves), figsize=(4 * len(curves), 6), squeeze=False)
    for column, (param, points) in enumerate(curves.items()):
        values = [p["value"] for p in points]
        for row, metric in enumerate(("zpr", "abl")):
            ax = axes[row, column]
            ax.plot(values, [p[metric] for p in points], marker=".")
            if param in selected:
                ax.axvline(selected[param], color="gray", linestyle="--")
            if param != "lrf":
                ax.set_xscale("log")
            ax.set_xlabel(LABELS[param])
            ax.set_ylabel("ZPR (%)" if metric == "zpr" else "ABL (frames)")
            ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_tradeoff(curves: dict[str, list[dict]], points: dict[str, dict], path: Path, title: str) -> None:
    """ZPR against pair_repeat (log), one curve per strategy over its parameter and one marker per
    strategy without one: the lower left is less padding and more randomness between epochs."""
    fig, ax = plt.subplots(figsize=(7, 5))
    for param, curve in curves.items():
        ax.plot([p["pair_repeat"] for p in curve], [p["zpr"] for p in curve], marker=".", label=LABELS[param])
    for name, point in points.items():
        ax.plot(point["pair_repeat"], point["zpr"], marker="o", linestyle="none", label=name.upper())
    _save_against_pair_repeat(fig, ax, "ZPR (%)", title, path, legend_size=8)


def plot_frontier(curves: dict[str, list[dict]], points: dict[str, dict], path: Path, title: str) -> None:
    """Decoder steps per epoch against pair_repeat (log), one line per family over its parameter and one
    marker per point (e.g. another sampler's settings): the lower left is cheaper and more random."""
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for name, curve in curves.items():
        ax.plot(
            [max(p["pair_repeat"], 1e-6) for p in curve], [p["decoder_steps"] for p in curve], marker=".", label=name
        )
    for name, point in points.items():
        ax.plot(
            max(point["pair_repeat"], 1e-6),
            point["decoder_steps"],
            linestyle="none",
            label=name,
            marker="o" if "reshuffled" in name else "s",
            fillstyle="full" if "reshuffled" in name else "none",
        )
    if points:  # the region around the other sampler's points: the families' far ends run off it
        steps = [p["decoder_steps"] for p in points.values()]
        ax.set_ylim(0.8 * min(steps), 1.25 * max(steps))
    _save_against_pair_repeat(fig, ax, "decoder steps per epoch", title, path, legend_size=7)


def _save_against_pair_repeat(fig, ax, ylabel: str, title: str, path: Path, legend_size: int) -> None:
    """The trade-off plots' common frame: pair_repeat on a log x axis, grid, legend; written to path."""
    ax.set_xscale("log")
    ax.set_xlabel("pair_repeat into the next epoch (lower: more random)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_batches(lengths: np.ndarray, panels: dict[str, list[np.ndarray]], path: Path) -> None:
    """Samples as bars in plan order, batches in alternating colours, padding up to L_j in grey."""
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 2.6 * len(panels)), squeeze=False)
    for ax, (title, batches) in zip(axes[:, 0], panels.items()):
        sizes = np.fromiter(map(len, batches), np.int64, len(batches))
        real = lengths[np.concatenate(batches)] if batches else np.zeros(0, np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        batch_len = np.repeat(np.maximum.reduceat(real, starts), sizes) if batches else real
        parity = np.repeat(np.arange(len(batches)) % 2, sizes).astype(bool)
        x = np.arange(real.size + 1)
        step = dict(step="post", linewidth=0)
        ax.fill_between(x, np.append(batch_len, 0), color="0.85", label="zero padding", **step)
        for odd, colour in ((False, "tab:blue"), (True, "tab:orange")):
            mask = parity == odd
            mask = np.append(mask, False) | np.append(False, mask)  # a run's last bar ends at the next point
            ax.fill_between(x, np.append(real, 0), where=mask, color=colour, **step)
        ax.set_title(title, fontsize=10)
        ax.set_xlim(0, max(real.size, 1))
        ax.set_xlabel("sample (in batch order)")
        ax.set_ylabel("length (frames)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
