"""A hard crash (SIGKILL) anywhere loses only the work since the last checkpoint: `--resume` then
reaches the same per-epoch losses as a run that never stopped.

Training runs in forked processes (train is imported once, here) with one function of
training.loop replaced by a PauseAt that stops at a chosen call; the test then SIGKILLs the
process from outside, so every kill lands at a known point.
"""

import io
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

import train
import training.loop
from data.atomic import atomic_open
from tests.kit import tiny
from training.checkpoint import CheckpointClock, atomic_torch_save, load_checkpoint
from training.rundir import BEST, LAST, read_metrics

FORK = multiprocessing.get_context("fork")
LOSSES = ("train_loss_valid", "train_loss_padded", "val_loss_valid", "val_loss_padded")


def pause_here(marker: Path) -> None:
    """Tell the test that the process reached its point, then wait there for the SIGKILL."""
    marker.write_text(str(os.getpid()))
    time.sleep(300)
    os._exit(3)  # not killed: the test has failed already


def write_half_then_pause(obj: Any, path: Path, marker: Path) -> None:
    """atomic_torch_save, stopped with half of the checkpoint's bytes in its temporary file."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    data = buffer.getvalue()
    with atomic_open(path, "wb") as out:
        out.write(data[: len(data) // 2])
        out.flush()
        os.fsync(out.fileno())
        pause_here(marker)


@dataclass
class PauseAt:
    """Stands in for a function of training.loop; its `call`-th call pauses: before running
    (`before`), after running (`after`: inside the step, its update applied but not recorded) or,
    for atomic_torch_save, halfway through writing (`half_write`)."""

    real: Callable
    call: int
    marker: Path
    when: str = "before"
    calls: int = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls != self.call:
            return self.real(*args, **kwargs)
        if self.when == "half_write":
            write_half_then_pause(*args, self.marker)
        if self.when == "before":
            pause_here(self.marker)
        result = self.real(*args, **kwargs)
        pause_here(self.marker)
        return result


def train_until_paused(argv: list[str], name: str, call: int, marker: Path, when: str) -> None:
    """The forked process: train.main with training.loop.<name> replaced by a PauseAt."""
    setattr(training.loop, name, PauseAt(getattr(training.loop, name), call, marker, when))
    sys.exit(train.main(argv))


def kill_at(tmp_path: Path, argv: list[str], name: str, call: int, when: str = "before") -> None:
    """Train in a forked process until its `call`-th call of training.loop.<name>, and SIGKILL it there."""
    marker = tmp_path / f"paused-{name}-{call}-{when}"
    proc = FORK.Process(target=train_until_paused, args=(argv, name, call, marker, when))
    proc.start()
    try:
        deadline = time.monotonic() + 180
        while not marker.exists():
            assert proc.is_alive(), f"training ended (exit {proc.exitcode}) before call {call} of {name}"
            assert time.monotonic() < deadline, f"no call {call} of {name} within 180 s"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.join()
    assert proc.exitcode == -signal.SIGKILL


def position(run: Path) -> tuple[int, int]:
    """(epoch, step in epoch) of the run's last checkpoint."""
    progress = load_checkpoint(run / LAST)["progress"]
    return progress["epoch"], progress["step_in_epoch"]


@pytest.mark.slow
def test_killed_anywhere_the_resumed_run_matches_an_uninterrupted_one(tmp_path, demo_corpus):
    run, resume = tmp_path / "run", ["--resume", str(tmp_path / "run")]
    assert train.main(["--hparams", tiny(tmp_path, "epochs=2,n_frames_per_step=4", demo_corpus)]) == 0
    want = {"metrics": read_metrics(run), LAST: load_checkpoint(run / LAST), BEST: load_checkpoint(run / BEST)}
    # the kill points below count calls on this plan: 7 steps per epoch, 8 validation utterances
    assert [r["steps"] for r in want["metrics"]] == [7, 7]

    # the same run started over (overwrite=true), killed inside step 2, before its first checkpoint
    # (every 3 steps): the old run's checkpoints are gone, and --resume starts from the beginning
    hparams = tiny(tmp_path, "epochs=2,n_frames_per_step=4,checkpoint_every_steps=3,overwrite=true", demo_corpus)
    kill_at(tmp_path, ["--hparams", hparams], "train_step", 2, "after")
    assert not (run / LAST).exists() and not (run / BEST).exists() and read_metrics(run) == []
    # halfway through writing LAST at the end of epoch 0 (after BEST): the step-6 checkpoint stays
    kill_at(tmp_path, resume, "atomic_torch_save", 4, "half_write")
    assert list(run.glob(f".{LAST}.*.tmp")) and position(run) == (0, 6)
    assert load_checkpoint(run / BEST)["progress"]["epoch"] == 1
    # inside step 11 (epoch 1): back to the step-9 checkpoint; the half-written file is gone
    kill_at(tmp_path, resume, "train_step", 5, "after")
    assert not list(run.glob(".*.tmp")) and position(run) == (1, 2)
    # inside epoch 1's validation (its 3rd utterance), after a checkpoint at the epoch's last step
    kill_at(tmp_path, resume + ["--hparams", "checkpoint_every_steps=7"], "_alignment", 3)
    assert position(run) == (1, 7)
    # after the last LAST, before metrics.jsonl: the run is complete, metrics.jsonl an epoch short
    kill_at(tmp_path, resume, "write_metrics", 2)
    assert position(run) == (2, 0) and [r["epoch"] for r in read_metrics(run)] == [0]
    assert train.main(resume) == 0  # nothing left to train; metrics.jsonl is rewritten from LAST

    got = read_metrics(run)
    assert [r["epoch"] for r in got] == [0, 1]
    for ra, rb in zip(want["metrics"], got):
        for key in LOSSES:
            assert ra[key] == pytest.approx(rb[key], rel=1e-6, abs=1e-7), (ra["epoch"], key)
    for name in (LAST, BEST):
        ckpt = load_checkpoint(run / name)
        assert ckpt["progress"]["epoch"] == want[name]["progress"]["epoch"]
        assert all(torch.allclose(want[name]["model"][k], v, rtol=1e-5, atol=1e-7) for k, v in ckpt["model"].items())


def test_the_checkpoint_clock_runs_out_and_restarts():
    clock = CheckpointClock(every_s=0.05)
    assert not clock.due()
    time.sleep(0.06)
    assert clock.due()
    clock.reset()
    assert not clock.due()
    assert not CheckpointClock(every_s=0).due()


def test_checkpoint_every_minutes_writes_mid_epoch_checkpoints(tmp_path, demo_corpus, monkeypatch):
    """A clock that is always due checkpoints after every step (the stop at step 3 writes once)."""
    saves = []
    monkeypatch.setattr(training.loop, "atomic_torch_save", SaveRecorder(training.loop.atomic_torch_save, saves))
    hp = tiny(tmp_path, "epochs=1,checkpoint_every_minutes=0.000001,stop_after_steps=3", demo_corpus)
    assert train.main(["--hparams", hp]) == 0
    assert [progress["global_step"] for progress in saves] == [1, 2, 3]


@dataclass
class SaveRecorder:
    """atomic_torch_save that also notes each checkpoint's progress."""

    real: Callable
    saves: list

    def __call__(self, obj, path):
        self.saves.append(obj["progress"])
        return self.real(obj, path)


def test_files_written_atomically_get_the_users_umask(tmp_path):
    """A checkpoint (and every file the atomic writer makes) is 0o666 less the umask, as open()
    makes files: 0o644 under a umask of 0o022, so colleagues can read it (mkstemp alone gives 0o600)."""
    before = os.umask(0o022)
    try:
        atomic_torch_save({"weights": torch.zeros(2)}, tmp_path / LAST)
        with atomic_open(tmp_path / "notes.txt") as out:
            out.write("text")
    finally:
        os.umask(before)
    assert [oct((tmp_path / name).stat().st_mode & 0o777) for name in (LAST, "notes.txt")] == ["0o644", "0o644"]
