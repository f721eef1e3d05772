"""Figures render headless; the diagonality score separates learned from unlearned attention."""

import io

import numpy as np
import pytest

from model.plotting import alignment_diagonality, plot_alignment, plot_gate, plot_mel


def diagonal(dec_len: int, text_len: int) -> np.ndarray:
    a = np.zeros((dec_len, text_len))
    a[np.arange(dec_len), (np.arange(dec_len) * text_len) // dec_len] = 1.0
    return a


def test_diagonality_diagonal_vs_uniform_vs_stuck():
    dec_len, text_len = 120, 30
    assert alignment_diagonality(diagonal(dec_len, text_len), text_len, dec_len) == pytest.approx(1.0)
    uniform = np.full((dec_len, text_len), 1.0 / text_len)
    assert alignment_diagonality(uniform, text_len, dec_len) < 0.5
    stuck = np.zeros((dec_len, text_len))
    stuck[:, 0] = 1.0  # attention never leaves the first symbol
    assert alignment_diagonality(stuck, text_len, dec_len) < 0.3


def test_diagonality_reads_only_the_real_region():
    a = np.random.default_rng(0).random((50, 20))  # padding full of noise
    a[:40, :10] = diagonal(40, 10)
    assert alignment_diagonality(a, text_len=10, dec_len=40) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        alignment_diagonality(a, text_len=0, dec_len=40)


def test_figures_render_to_png():
    rng = np.random.default_rng(0)
    gate_target = (np.arange(40) >= 35).astype(float)
    figures = (
        plot_alignment(diagonal(40, 12), "step 1"),
        plot_mel(rng.random((8, 40)), rng.random((8, 40))),
        plot_gate(gate_target, rng.random(40)),
    )
    for fig in figures:
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        assert buf.getvalue()[:4] == b"\x89PNG"
