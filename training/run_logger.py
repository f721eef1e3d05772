"""What a run leaves behind: metrics.jsonl (one object per epoch), TensorBoard events, PNGs.

Only the main rank writes. metrics.jsonl is rewritten atomically from the epoch records kept
in the checkpoint, so a resumed run never duplicates or loses an epoch's line.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

METRICS = "metrics.jsonl"


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_metrics(run_dir: Path, records: list[dict[str, Any]]) -> None:
    """Replace metrics.jsonl with `records`, atomically."""
    path = Path(run_dir) / METRICS
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "w") as handle:
        for record in records:
            handle.write(json.dumps({k: _json_safe(v) for k, v in record.items()}) + "\n")
    os.replace(tmp, path)


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / METRICS
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


class RunLogger:
    """TensorBoard scalars and figures; a no-op on ranks other than 0."""

    def __init__(self, run_dir: Path, enabled: bool, purge_step: int | None = None):
        self.run_dir = Path(run_dir)
        self.writer = SummaryWriter(str(self.run_dir / "tensorboard"), purge_step=purge_step) if enabled else None

    def scalars(self, values: dict[str, float], step: int, prefix: str) -> None:
        if self.writer is None:
            return
        for key, value in values.items():
            if isinstance(value, (int, float)) and math.isfinite(value):
                self.writer.add_scalar(f"{prefix}/{key}", value, step)

    def figure(self, tag: str, fig, step: int, png_name: str | None = None) -> None:
        """Add a matplotlib figure to TensorBoard and, if named, save it as a PNG in the run dir."""
        if self.writer is None:
            return
        if png_name:
            fig.savefig(self.run_dir / png_name, dpi=100, bbox_inches="tight")
        self.writer.add_figure(tag, fig, step, close=True)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
