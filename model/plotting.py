"""Figures for TensorBoard and PNGs, and a score telling whether attention has learned to align.

Figures are built on the Agg canvas directly (no pyplot), so they work headless and never touch
matplotlib's global backend or leak open figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _figure(height: float, rows: int = 1) -> Figure:
    """A figure on its own Agg canvas. Matplotlib's figure modules load here, on the first figure,
    not with the recipe: about a second off every start of train.py. Fixed margins instead of
    tight_layout, which draws the figure once more only to measure its labels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, height * rows))
    FigureCanvasAgg(fig)
    inch = 1 / fig.get_figheight()  # margins in inches, whatever the height
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.55 * inch, top=1 - 0.35 * inch, hspace=0.7 * inch * rows)
    return fig


def render(fig: Figure) -> np.ndarray:
    """The figure drawn once, as an RGB image [H, W, 3] (uint8): TensorBoard and the PNG share it."""
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[:, :, :3].copy()


def plot_alignment(alignment: np.ndarray, title: str = "") -> Figure:
    """alignment [T_dec, T_text]: decoder steps on x, text positions on y (a rising diagonal when learned)."""
    fig = _figure(4)
    ax = fig.add_subplot()
    im = ax.imshow(np.asarray(alignment).T, aspect="auto", origin="lower", interpolation="none")
    fig.colorbar(im, ax=ax)
    ax.set(xlabel="decoder step", ylabel="text position", title=title)
    return fig


def plot_mel(mel_target: np.ndarray, mel_pred: np.ndarray) -> Figure:
    """Target above prediction, both [n_mels, T], on a shared colour scale."""
    fig = _figure(3, rows=2)
    lo = min(np.min(mel_target), np.min(mel_pred))
    hi = max(np.max(mel_target), np.max(mel_pred))
    for i, (mel, name) in enumerate([(mel_target, "target"), (mel_pred, "predicted")]):
        ax = fig.add_subplot(2, 1, i + 1)
        im = ax.imshow(np.asarray(mel), aspect="auto", origin="lower", interpolation="none", vmin=lo, vmax=hi)
        fig.colorbar(im, ax=ax)
        ax.set(ylabel="mel channel", title=f"{name} mel")
    ax.set_xlabel("frame")
    return fig


def plot_gate(gate_target: np.ndarray, gate_pred: np.ndarray) -> Figure:
    """Stop-token target and predicted probability (pass sigmoid(logits)) over frames."""
    fig = _figure(2.5)
    ax = fig.add_subplot()
    frames = np.arange(len(gate_target))
    ax.scatter(frames, gate_target, s=4, color="green", alpha=0.5, label="target")
    ax.scatter(frames, gate_pred, s=4, color="red", alpha=0.5, label="predicted")
    ax.set(xlabel="frame", ylabel="stop probability", ylim=(-0.05, 1.05))
    ax.legend(loc="upper left")
    return fig


def alignment_diagonality(alignment: np.ndarray, text_len: int, dec_len: int, band: float = 0.2) -> float:
    """Mean attention mass within +-band*text_len of the ideal diagonal, over real steps; in [0, 1].

    A learned Tacotron2 alignment moves through the text roughly at constant speed, so most of
    each step's attention sits near the diagonal (score near 1); an unlearned, diffuse alignment
    scores about 2*band. Speaking-rate changes bend the path, hence the generous band.
    """
    if dec_len < 1 or text_len < 1:
        raise ValueError(f"need dec_len >= 1 and text_len >= 1, got {dec_len}, {text_len}")
    a = np.asarray(alignment, dtype=np.float64)[:dec_len, :text_len]
    ideal = (np.arange(dec_len) + 0.5) * text_len / dec_len  # text position at each step's centre
    width = max(band * text_len, 1.0)
    positions = np.arange(text_len) + 0.5
    near = np.abs(positions[None, :] - ideal[:, None]) <= width
    mass = (a * near).sum(1) / np.maximum(a.sum(1), 1e-12)
    return float(np.clip(mass.mean(), 0.0, 1.0))
