"""TensorBoard scalars and figures (PNGs beside them in the run directory); only the main rank
writes. metrics.jsonl is training/rundir.py's."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

from data.atomic import atomic_open  # noqa: E402
from model.plotting import render  # noqa: E402
from training.rundir import TENSORBOARD  # noqa: E402


class RunLogger:
    """TensorBoard scalars and figures; a no-op on ranks other than 0."""

    def __init__(self, run_dir: Path, enabled: bool, purge_step: int | None = None):
        self.run_dir = Path(run_dir)
        self.writer = SummaryWriter(str(self.run_dir / TENSORBOARD), purge_step=purge_step) if enabled else None

    def scalars(self, values: dict[str, float], step: int, prefix: str) -> None:
        if self.writer is None:
            return
        for key, value in values.items():
            if isinstance(value, (int, float)) and math.isfinite(value):
                self.writer.add_scalar(f"{prefix}/{key}", value, step)

    def figure(self, tag: str, fig, step: int, png_name: str | None = None) -> None:
        """Add a matplotlib figure to TensorBoard and, if named, save it as a PNG in the run dir,
        from one drawing of it."""
        if self.writer is None:
            return
        image = render(fig)
        if png_name:  # atomically: a kill mid-write leaves the previous PNG, not half of one
            from matplotlib.image import imsave

            with atomic_open(self.run_dir / png_name, "wb") as out:
                imsave(out, image, format="png")
        self.writer.add_image(tag, image, step, dataformats="HWC")

    def flush(self) -> None:
        """Put everything logged so far on disk (before a checkpoint: a kill then loses none of it)."""
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
