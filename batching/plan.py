"""The plan of one epoch, the type every strategy returns: which samples form each batch, which
rank runs it, in what order, and the plan's own statistics (padding, straggler cost).

It sits below the strategies and above the config: every strategy module can build a GlobalPlan
(or a subclass) without an import circle.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from .config import BatchingConfig
from .grouping import ceil_div
from .sharding import arrange


def _no_samples() -> np.ndarray:
    return np.zeros(0, np.int64)


def as_lengths(lengths) -> np.ndarray:
    """Validate sample lengths: a 1-D array of positive integers."""
    array = np.asarray(lengths)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"lengths must be a 1-D array of integers, got shape {array.shape} dtype {array.dtype}")
    if array.size and array.min() < 1:
        i = int(np.argmin(array))
        raise ValueError(f"sample {i} has length {array[i]}: lengths must be >= 1")
    return array.astype(np.int64, copy=False)


@dataclass(frozen=True)
class GlobalPlan:
    """All ranks' batches of one epoch: batch b is order[cuts[b]:cuts[b+1]]; seq is step-major
    (rank r runs seq[s * world_size + r] at step s); skipped: samples the strategy left out."""

    order: np.ndarray
    cuts: np.ndarray
    seq: np.ndarray
    world_size: int
    skipped: np.ndarray = field(default_factory=_no_samples, kw_only=True)

    def batches(self, rank: int | None = None) -> list[np.ndarray]:
        """One rank's batches in run order, or with rank=None every batch in step-major order."""
        seq = self.seq if rank is None else self.seq[rank :: self.world_size]
        starts, stops = self.cuts[seq].tolist(), self.cuts[seq + 1].tolist()
        return list(map(self.order.__getitem__, map(slice, starts, stops)))

    def extents(self, lengths: np.ndarray, rank: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Each batch's longest length and its size, in the order of batches(rank), without a
        Python loop over the batches (a run's shape table takes every epoch's of a large corpus)."""
        seq = self.seq if rank is None else self.seq[rank :: self.world_size]
        starts, stops = self.cuts[:-1], self.cuts[1:]
        filled = stops > starts  # reduceat reads one element for an empty batch: such a batch's longest is 0
        longest = np.zeros(starts.size, np.int64)
        if filled.any():
            values = np.asarray(lengths, np.int64)[self.order[: stops[-1]]]
            longest[filled] = np.maximum.reduceat(values, starts[filled])
        return longest[seq], (stops - starts)[seq].astype(np.int64)

    def redeal(self, consumed_steps: int, world_size: int, lengths: np.ndarray, config: BatchingConfig) -> GlobalPlan:
        """The batches not yet run after `consumed_steps` steps, dealt to `world_size` ranks (a resume
        on another number of processes); the sharding tail rules apply to them."""
        rest = self.batches()[consumed_steps * self.world_size :]
        order = np.concatenate(rest or [self.order[:0]])
        cuts = np.concatenate([[0], np.cumsum([len(b) for b in rest], dtype=np.int64)])
        return GlobalPlan(
            *arrange(order, cuts, lengths, world_size, config.drop_last, None), world_size, skipped=self.skipped
        )

    def stats(self, lengths: np.ndarray, n_frames_per_step: int = 1) -> dict:
        """The epoch's padding figures, all ranks together (batch_stats), the decoder steps it runs
        (each batch runs ceil(longest / r) steps), skipped samples and, on several ranks, the
        straggler cost: in each step every rank waits for that step's longest batch."""
        record = batch_stats(lengths, self.batches())
        longest, _ = self.extents(lengths)
        record["decoder_steps"] = int(ceil_div(longest, n_frames_per_step).sum())
        record["skipped"] = int(self.skipped.size)
        if self.world_size > 1 and longest.size:
            per_step = longest.reshape(-1, self.world_size).astype(np.float64)
            record["straggler_frames"] = float((per_step.max(1) - per_step.mean(1)).sum())
            record["straggler_fraction"] = record["straggler_frames"] / float(per_step.max(1).sum())
        return record

    def digest(self) -> str:
        """A SHA-256 of every batch in step-major order, for ranks to check that they agree."""
        return plan_digest(self.batches())


def plan_digest(batches: list[np.ndarray]) -> str:
    """A SHA-256 of the batches' contents and boundaries, for ranks to check they agree."""
    digest = hashlib.sha256()
    digest.update(np.fromiter(map(len, batches), np.int64, len(batches)).tobytes())
    if batches:
        digest.update(np.concatenate(batches).astype("<i8", copy=False).tobytes())
    return digest.hexdigest()


def batch_stats(lengths, batches: list[np.ndarray]) -> dict:
    """Padding statistics of a list of batches.

    zpr: equation (1) per batch, averaged with weights B_j (Section 4: sum B_j ZPR_j / sum B_j;
    the plain mean when all batches have B0 samples), in percent. abl: sum B_j L_j / sum B_j,
    L_j the batch's longest sample. capacity_max: max B_j L_j, the largest padded batch.
    """
    lengths = as_lengths(lengths)
    batches = [b for b in batches if len(b)]
    if not batches:
        return dict(n_batches=0, n_samples=0, zpr=0.0, abl=0.0, capacity_max=0, padded_frames=0, real_frames=0)
    sizes = np.fromiter(map(len, batches), np.int64, len(batches))
    flat = lengths[np.concatenate(batches)]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    real = np.add.reduceat(flat, starts)
    padded = sizes * np.maximum.reduceat(flat, starts)
    weights = sizes / sizes.sum()
    return dict(
        n_batches=int(len(batches)),
        n_samples=int(sizes.sum()),
        zpr=float(100 * weights @ (1 - real / padded)),
        abl=float(weights @ (padded / sizes)),
        capacity_max=int(padded.max()),
        padded_frames=int(padded.sum()),
        real_frames=int(real.sum()),
    )
