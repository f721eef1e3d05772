"""The data check before the first step (and `train.py --check`): every clip and line of both
filelists, from headers only (data/check.py), and what the run will do with the training set."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from batching import BatchingConfig, plan_global, strategy_of
from batching.analysis import calibrated_line, resolve_width
from batching.degenerate import degenerate_settings
from batching.errors import UserError
from data.audio import MelConfig
from data.check import CheckLimits, CheckReport, check_filelists
from data.corpora import DataConfig
from data.filelist import read_filelist


class DataCheckError(UserError):
    """The data has problems; the message lists every one, `FILELIST:LINE: what; what to do`."""


def check_data(
    filelists: tuple[Path, Path], mel: MelConfig, batching: BatchingConfig, data: DataConfig, progress: bool
) -> CheckReport:
    """Check both filelists against the mel settings and the batching's length limit; cached under
    the mel cache folder (a resume on unchanged data costs one stat per clip)."""
    limit, source = batching.length_limit()
    cache = Path(data.mel_cache_dir) / "checks" if data.mel_cache_dir else None
    report = check_filelists(
        *filelists,
        mel,
        CheckLimits(limit, source),
        cache_dir=cache,
        progress=progress,
        unknown_chars=data.unknown_chars,
    )
    if not report.ok:
        raise DataCheckError(report.error_message())
    return report


def plan_summary(
    batching: BatchingConfig,
    n_frames_per_step: int,
    train_filelist: Path,
    mel: MelConfig,
    report: CheckReport,
    world_size: int = 1,
) -> str:
    """What an epoch of this run does (epoch 0's plan), against RAND batches of the same B0:
    batches, ZPR, ABL, decoder steps, the largest batch, and the time saved as far as decoder
    steps tell (the decoder loop dominates a Tacotron2 step); a warning for a setting that makes the
    strategy act as another on this corpus. `mel` gives the frames of `wav|text` lines."""
    frames = np.array([u.frames for u in read_filelist(train_filelist, mel)], dtype=np.int64)
    r = n_frames_per_step
    batching, calibration = resolve_width(frames, batching)
    plan = plan_global(frames, batching, 0, world_size)
    stats = plan.stats(frames, r)
    rand = batching.with_strategy("rand", dbs=False, br=False, capacity=None, n_frames_per_step=1)
    rand_steps = plan_global(frames, rand, 0, world_size).stats(frames, r)["decoder_steps"]
    largest = max(plan.batches(), key=lambda b: len(b) * int(frames[b].max(initial=0)))
    lines = [f"{c.filelist}: {c.utterances} utterances, {c.hours:.2f} h" for c in report.counts]
    lines += [
        f"batching={batching.batching} dbs={batching.dbs} br={batching.br} on {world_size} rank(s): "
        f"{stats['n_batches']} batches per epoch, ZPR {stats['zpr']:.2f}%, ABL {stats['abl']:.1f} frames",
        f"decoder steps per epoch: {stats['decoder_steps']} (RAND, B0={batching.batch_size}: {rand_steps}); "
        f"largest batch {len(largest)} x {int(frames[largest].max(initial=0))} frames",
        f"expected per-epoch time reduction against RAND, from decoder steps: "
        f"{100 * (1 - stats['decoder_steps'] / max(rand_steps, 1)):.1f}%",
    ]
    if calibration:
        lines.append(calibrated_line(calibration))
    lines += [f"warning: {w}" for w in degenerate_settings(frames.size, batching, calibrated=calibration is not None)]
    if stats.get("skipped"):
        lines.append(
            f"skipped: {stats['skipped']} utterances that batching={batching.batching} leaves out "
            f"({strategy_of(batching).summary})"
        )
    return "\n".join(lines)
