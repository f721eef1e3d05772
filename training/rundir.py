"""The run directory's one home: its file names, and reading and writing its metrics and hparams.

Torch-free, so the reproduction scripts and make_tables.py read runs without importing torch.
Every write goes through data.atomic.atomic_open (temporary file, fsync, rename).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from batching.errors import UserError
from data.atomic import atomic_open

LAST = "checkpoint_last.pt"  # everything needed to continue (written every epoch and on stop)
BEST = "checkpoint_best.pt"  # the lowest validation loss so far
METRICS = "metrics.jsonl"  # one JSON object per finished epoch
HPARAMS = "hparams.json"  # the resolved flat hparams, for people and scripts
TENSORBOARD = "tensorboard"


def _json_safe(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def write_metrics(run_dir: Path, records: list[dict[str, Any]]) -> None:
    """Replace metrics.jsonl with `records` (non-finite floats as null)."""
    with atomic_open(Path(run_dir) / METRICS) as out:
        for record in records:
            out.write(json.dumps({k: _json_safe(v) for k, v in record.items()}) + "\n")


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The epoch records, sorted by epoch; [] when the run has finished no epoch."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        return []
    records = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return sorted(records, key=lambda record: record["epoch"])


def last_epoch(run_dir: Path) -> int:
    """The last finished 0-based epoch, -1 when there is none."""
    records = read_metrics(run_dir)
    return records[-1]["epoch"] if records else -1


def write_hparams(run_dir: Path, hp: dict[str, Any]) -> None:
    with atomic_open(Path(run_dir) / HPARAMS) as out:
        out.write(json.dumps(hp, indent=2) + "\n")


def read_hparams(run_dir: Path) -> dict[str, Any] | None:
    path = Path(run_dir) / HPARAMS
    return json.loads(path.read_text()) if path.is_file() else None


def has_checkpoint(run_dir: Path) -> bool:
    return (Path(run_dir) / LAST).is_file()


class RunDirError(UserError):
    """An output_dir that cannot hold a run; the message names the path in the way."""


def check_writable(run_dir: Path) -> None:
    """Fail before any work if run_dir cannot be created or written (nothing is created here)."""
    path = Path(run_dir).absolute()
    for ancestor in [path, *path.parents]:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise RunDirError(
                    f"output_dir {run_dir}: {ancestor} is a file, not a folder; choose another output_dir"
                )
            if not os.access(ancestor, os.W_OK | os.X_OK):
                raise RunDirError(f"output_dir {run_dir}: {ancestor} is not writable; choose another output_dir")
            return


LOCK = "run.lock"  # held (flock) by the run's main process for as long as it lives; holds its PID


@contextmanager
def hold_run_dir(run_dir: Path) -> Iterator[None]:
    """Hold run_dir for this process: a second run into it stops with a RunDirError naming the
    holder's PID. The operating system releases the lock when the process ends, kill -9 included;
    the file a killed run leaves (its PID in it, no lock held) is taken over and removed on the way
    out, as is an empty run_dir this call created, so a run that stopped early leaves the folder
    as it found it."""
    run_dir = Path(run_dir)
    created_dir = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = _take_lock(run_dir / LOCK, run_dir)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        # unlinked while still locked: a run that opened it meanwhile retries (_take_lock)
        (run_dir / LOCK).unlink(missing_ok=True)
        if created_dir and not any(run_dir.iterdir()):
            run_dir.rmdir()
        os.close(fd)  # releases the lock


def _take_lock(path: Path, run_dir: Path) -> int:
    """The fd of the locked file. The lock counts only while `path` still names the locked file: a
    holder that ended may have unlinked it, then we try again."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:  # unlinked between the two opens
                continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise RunDirError(
                f"output_dir {run_dir} is in use by another run (process {holder}, which holds "
                f"{path}); wait for it to end or stop it, or choose another output_dir"
            ) from None
        if _same_file(fd, path):
            return fd
        os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False
