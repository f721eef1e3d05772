"""Checkpoints that a crash cannot corrupt, and the random state that makes resuming exact.

A checkpoint is written to a temporary file in the run directory, flushed to disk, and only then
renamed over the previous one (`os.replace` is atomic on POSIX), so at any instant the run
directory holds either the old complete checkpoint or the new complete one.
"""
from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

LAST = "checkpoint_last.pt"
BEST = "checkpoint_best.pt"


def atomic_torch_save(obj: Any, path: Path) -> None:
    """torch.save through a temporary file + fsync + rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            torch.save(obj, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def rng_state() -> dict[str, Any]:
    """Every random generator the training step touches (CPU, CUDA, numpy, python)."""
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint on the CPU, with an error that says what to do when it is missing."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: was the run started with this output_dir?")
    return torch.load(path, map_location="cpu", weights_only=False)
