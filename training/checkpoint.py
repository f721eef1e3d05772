"""Checkpoints that a crash cannot corrupt, the run's progress, and the random state that makes
resuming exact.

A checkpoint goes through data.atomic.atomic_open (temporary file, fsync, rename), so at any
instant the run directory holds either the old complete checkpoint or the new complete one. A
process killed mid-write leaves only the temporary file, which the next start removes.
"""

from __future__ import annotations

import dataclasses
import pickle
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from batching.errors import UserError
from data.atomic import atomic_open
from training.rundir import LAST, read_hparams


@dataclass
class RunState:
    """Where the run is: the checkpoint's `progress`. `partial` holds the running epoch's sums
    (training.loop.EpochSums as a dict) when a checkpoint is written inside an epoch."""

    epoch: int = 0
    step_in_epoch: int = 0
    global_step: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)
    best_val: float = float("inf")
    partial: dict[str, float] | None = None

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RunState:
        return from_known_fields(cls, values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def from_known_fields(cls, values: dict[str, Any] | None):
    """A dataclass from what a checkpoint stored: fields it predates take their defaults, fields
    it has and the class no longer does are dropped, so old checkpoints keep loading."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in (values or {}).items() if k in names})


def atomic_torch_save(obj: Any, path: Path) -> None:
    """torch.save through the atomic writer."""
    with atomic_open(path, "wb") as handle:
        torch.save(obj, handle)


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


class CheckpointError(UserError):
    """A checkpoint file that cannot be read; the message names it and what to do."""


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint on the CPU, with an error that says what to do when it is missing or damaged."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}: was the run started with this output_dir?")
    ckpt = read_torch_file(path)
    if not is_recipe_checkpoint(ckpt):
        raise CheckpointError(f"{path} is not a checkpoint of this recipe (no model, hparams and progress)")
    return ckpt


def is_recipe_checkpoint(ckpt: Any) -> bool:
    """Whether a loaded file is this recipe's checkpoint (a dict with model, hparams and progress)."""
    return isinstance(ckpt, dict) and {"model", "hparams", "progress"} <= set(ckpt)


def read_torch_file(path: Path) -> Any:
    """torch.load on the CPU; a damaged file is a CheckpointError that says what to do."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    except (EOFError, RuntimeError, pickle.UnpicklingError, ValueError) as err:
        raise CheckpointError(
            f"{path} is damaged and cannot be read ({type(err).__name__}: {err}); copy a good "
            f"checkpoint (e.g. checkpoint_best.pt) over it, or start a new run"
        ) from None
    return ckpt


@dataclass(frozen=True)
class Weights:
    """The state dicts a resume loads into the model, the optimiser and the AMP scaler."""

    model: dict[str, Any]
    optimizer: dict[str, Any]
    scaler: dict[str, Any]


@dataclass(frozen=True)
class EpochPosition:
    """Where inside an epoch a checkpoint was written: the sampler's position (None at an epoch's
    end) and every rank's random state."""

    sampler: dict[str, Any] | None
    rngs: list[dict[str, Any]]


@dataclass(frozen=True)
class ResumePoint:
    """What a resume reads from a checkpoint, read once (train.py's resolve); the rest of the dict goes."""

    weights: Weights
    state: RunState
    position: EpochPosition

    @classmethod
    def from_checkpoint(cls, ckpt: dict[str, Any]) -> ResumePoint:
        """Checkpoints of any version: entries it no longer reads (e.g. an old "config") are ignored."""
        return cls(
            Weights(ckpt["model"], ckpt["optimizer"], ckpt["scaler"]),
            RunState.from_dict(ckpt["progress"]),
            EpochPosition(ckpt.get("sampler"), ckpt.get("rng") or []),
        )


def resume_point(run_dir: Path) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(the last checkpoint or None, the run's stored hparams). A run killed before its first
    checkpoint has only hparams.json: it resumes from its beginning (None), so `--resume` works
    whenever the run was started."""
    run_dir = Path(run_dir)
    if run_dir.is_file():
        raise CheckpointError(
            f"--resume takes a run folder, not a file: --resume {run_dir.parent} continues the run that wrote "
            f"{run_dir.name}; to start a new run from its weights, use --hparams init_checkpoint={run_dir}"
        )
    stored = read_hparams(run_dir)
    if stored is not None and not (run_dir / LAST).is_file():
        return None, stored
    ckpt = load_checkpoint(run_dir / LAST)  # missing too: load_checkpoint's error says what to do
    return ckpt, ckpt["hparams"]


def remove_stale_temporaries(run_dir: Path) -> list[Path]:
    """Delete the temporary files (data.atomic's `.NAME.*.tmp`) that a process killed while writing
    left in the run directory; a checkpoint's can be hundreds of MB. Only rank 0 writes there, so
    call it there, before anything is written."""
    stale = sorted(Path(run_dir).glob(".*.tmp"))
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


@dataclass
class CheckpointClock:
    """Time since the last checkpoint, for checkpoint_every_minutes: long epochs still get a
    checkpoint every few minutes, so a crash loses at most that much training. every_s 0: never due."""

    every_s: float
    last: float = field(default_factory=time.monotonic)

    def due(self) -> bool:
        return self.every_s > 0 and time.monotonic() - self.last >= self.every_s

    def reset(self) -> None:
        self.last = time.monotonic()
