"""Shape-faithful training steps, what bench.epoch and bench.step both time: the real lengths of a
corpus, random text ids and mels of exactly those lengths, the one training step of train.py."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import functools
import gc
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from batching import LengthsFileError, read_lengths
from data.collate import TextMelCollate
from data.filelist import read_filelist
from data.text import N_SYMBOLS, text_to_sequence
from model.graphs import LoopGraphs
from model.shapes import ShapeTable
from scripts.common import cpu_name
from scripts.reproduction.paper import EXPERIMENTS
from training.config import RunConfig
from training.step import build_step_parts, loop_shape, train_step

#: Rows beside the paper's experiments: the recipe's own default batching (hparams.yaml: SSB on the
#: cost key, its width calibrated to the paper's SSB's ZPR, with DBS and BR), which the paper's SSB
#: rows (ssb_key=length, lrf 0.1) do not time.
RECIPE_ROWS = {"SSB-DBS-BR-cost": {**EXPERIMENTS["SSB-DBS-BR"], "ssb_key": "cost", "target_zpr": "paper"}}
#: What the benches can plan: the paper's experiments and the recipe's rows (resolve a row's
#: calibration target with batching.analysis.resolve_width before planning).
BENCH_STRATEGIES = {**EXPERIMENTS, **RECIPE_ROWS}


def read_frames_and_texts(path: Path) -> tuple[np.ndarray, list[str]]:
    """(mel frames, text) per utterance from a TSV with `frames` and `text` columns, or a filelist;
    a bad line is a LengthsFileError naming it (batching.read_lengths checks every line first)."""
    frames = read_lengths(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    if "\t" not in lines[0]:
        return frames, [u.text for u in read_filelist(path)]
    if "text" in header:
        return frames, [line.split("\t")[header.index("text")] for line in lines[1:] if line.strip()]
    raise LengthsFileError(f"{path}:1: TSV header has no 'text' column (columns: {', '.join(header)})")


def symbol_counts(texts: list[str], keep: np.ndarray) -> np.ndarray:
    """Symbols per kept utterance, after the text front end: only those kept, as the front end takes
    seconds over a corpus (LJSpeech: about 3 s on a CPU core) and a bench may keep a few hundred."""
    return np.array([len(text_to_sequence(texts[i])) for i in keep], dtype=np.int64)


@contextlib.contextmanager
def cpu_threads_without_denormals(threads: int) -> Iterator[None]:
    """torch's CPU threads set to `threads` and denormals flushed to zero (random targets' denormals
    slow a CPU, not a GPU), both as they were afterwards: a bench called in-process (the suite) leaves
    the process as it found it."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)  # torch's default; it has no getter
        torch.set_num_threads(before)


def release_memory() -> None:
    """Hand freed host memory back to the system between steps: glibc keeps the freed blocks of a
    step's activations in its heap, so without a trim a process's resident set grows by about a step's
    working set with every step and variant (bench.step on the small model, 2 batches of eager and
    fast: 5.5 GiB resident at the end instead of 1.2). No-op where the C library has no malloc_trim (macOS, musl)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    """The C library's malloc_trim, or None: looked up once (find_library runs ldconfig)."""
    return getattr(ctypes.CDLL(ctypes.util.find_library("c")), "malloc_trim", None)


def pick_timed(costs: np.ndarray, k: int) -> np.ndarray:
    """k batch positions spread evenly over the plan's batches sorted by cost (all when k is 0)."""
    if not k or k >= costs.size:
        return np.arange(costs.size)
    by_cost = np.argsort(costs, kind="stable")
    return by_cost[((np.arange(k) + 0.5) * costs.size / k).astype(int)]


class Bench:
    """The training step being timed (training/step.py, what train.py runs), with one model and
    optimiser shared by every strategy."""

    def __init__(self, cfg: RunConfig, device: torch.device):
        self.device, self.cfg = device, cfg
        self.parts = build_step_parts(cfg.train, cfg.model, device)
        self.collate = TextMelCollate(cfg.model.n_frames_per_step)

    def batch(self, frames: np.ndarray, text_lengths: np.ndarray, seed: int):
        """Random text ids and mels of exactly these lengths, padded as the training collate pads."""
        gen = torch.Generator().manual_seed(seed)
        n_mels = self.cfg.mel.n_mels
        pairs = [
            (torch.randint(1, N_SYMBOLS, (int(t),), generator=gen), torch.randn(n_mels, int(f), generator=gen))
            for f, t in zip(frames, text_lengths)
        ]
        return self.collate(pairs).to(self.device)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def step(self, batch, table: ShapeTable | None = None, graphs: LoopGraphs | None = None) -> float:
        """Seconds of one training step, from a batch already on the device to the updated weights;
        the decoder loop at the batch's shape of `table`, replayed from `graphs` if given."""
        parts = self.parts if graphs is None else dataclasses.replace(self.parts, graphs=graphs)
        self.sync()
        tick = time.perf_counter()
        train_step(parts, batch, shape=loop_shape(table, batch))
        self.sync()
        return time.perf_counter() - tick


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's with its cores and torch's threads."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{cpu_name()}, {torch.get_num_threads()} torch threads"
