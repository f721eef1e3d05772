"""Shar shards through the streaming strategy: SharCutSampler yields CutSet batches read in order.

A Shar corpus (lhotse.shar: per shard a `cuts.*.jsonl.gz` and tar files of audio or features) can
only be read in order. Each epoch the shard order is shuffled from (seed, epoch) and the shards are
dealt round-robin to the ranks; a rank's cuts, in that order, go through the stream bucketer of
batching/stream.py (buckets of bucket_interval, a bucket emitted as a batch before it would pass the
budget, the rest flushed at the end), so no batch is over max_duration (padding included).

Equal steps: the shards' `cuts` files hold every duration without the audio. One pass over them when
the sampler is built keeps 8 bytes a cut (its length in frames); from those, every epoch is
simulated for every rank (stream_cuts, compiled), so each rank knows every rank's batch count, and a
rank with fewer batches than the most splits its largest ones in two (sharding.halve_largest) until
it has as many (a rank with fewer cuts than that then repeats its stream's last cuts, each alone,
renamed `<id>_dup<k>` as Lhotse does). Then the rank reads its shards in order, holding a cut from its arrival until its
batch is yielded (at most what the buckets hold), and yields the batches in the bucketer's order.

state_dict() records the epoch and the batches this rank has yielded, with the shard (in the epoch's
order) and the cut where reading resumes; load_state_dict() continues there: the shards before it
are not opened again. A resume needs the same world size and the same shards.
"""
from __future__ import annotations

import gzip
from pathlib import Path
from typing import Iterator

import numpy as np
from lhotse import CutSet
from lhotse.dataset.sampling.base import CutSampler, attach_dataloading_info
from lhotse.shar.readers.lazy import LazySharIterator

from .errors import UserError
from .lhotse import occurrences
from .lhotse_manifest import line_duration
from .sharding import halve_largest
from .stream import bucket_ids, stream_cuts

STATE_KIND = "batching.lhotse_shar.SharCutSampler"


class SharCutSampler(CutSampler):
    """Yields this rank's batches (CutSets) of a CutSet read from Shar (CutSet.from_shar; its own
    shuffle_shards and split_for_dataloading are not used: the sampler orders and deals the shards) for the
    current epoch. max_duration: the budget in seconds, padding included (a batch's cut count x
    its longest cut). bucket_interval: the bucketer's bucket width in seconds. seed: the shard
    order's (with the epoch). rank / world_size: as Lhotse's. Call set_epoch(e) before each epoch."""

    def __init__(self, cuts: CutSet, max_duration: float, bucket_interval: float = 0.5, seed: int = 0,
                 world_size: int | None = None, rank: int | None = None, frame_shift: float = 0.01) -> None:
        super().__init__(world_size=world_size, rank=rank, seed=seed)
        if not (max_duration > 0 and bucket_interval > 0 and frame_shift > 0):
            raise UserError(f"max_duration={max_duration}, bucket_interval={bucket_interval} and "
                            f"frame_shift={frame_shift} must be positive numbers of seconds")
        self.shards = shar_shards(cuts)
        if len(self.shards) < self.world_size:
            raise UserError(f"{len(self.shards)} Shar shards for {self.world_size} ranks: every rank needs a shard; "
                            "write the corpus in smaller shards (shard_size) or use fewer ranks")
        self.capacity = int(max_duration / frame_shift + 1e-9)
        self.interval = max(1, round(bucket_interval / frame_shift))
        self.max_duration, self.frame_shift = max_duration, frame_shift
        self.lengths = [shard_lengths(Path(shard["cuts"]), frame_shift, self.capacity) for shard in self.shards]
        self._yielded = 0  # batches of this epoch this rank has yielded
        self._batches = None

    def dealt_shards(self) -> list[np.ndarray]:
        """Each rank's shards in this epoch, in reading order: the order shuffled from (seed, epoch), dealt round-robin."""
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.shards))
        return [order[r::self.world_size] for r in range(self.world_size)]

    def epoch_plan(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This rank's epoch: its shards in order, and its batches as (positions in its stream,
        boundaries), in the bucketer's order, as many as the rank with the most."""
        dealt = self.dealt_shards()
        counts = [self._bucketed(shards)[1].size - 1 for shards in dealt]
        mine = dealt[self.rank]
        positions, cuts = self._bucketed(mine)
        cuts, missing = halve_largest(cuts, max(counts) - counts[self.rank])
        if missing:  # fewer cuts than steps: the stream's last cuts again, each alone, renamed as Lhotse does
            positions = np.concatenate([positions, np.arange(positions.size - 1, positions.size - 1 - missing, -1)
                                        % positions.size])
            cuts = np.concatenate([cuts, cuts[-1] + np.arange(1, missing + 1)])
        return mine, positions, cuts

    def _bucketed(self, shards: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The bucketer's batches over `shards` read in order: (positions, boundaries), as stream_cuts."""
        lengths = np.concatenate([self.lengths[s] for s in shards]) if len(shards) else np.zeros(0, np.int64)
        return stream_cuts(lengths, bucket_ids(lengths, self.interval, None), self.capacity)

    def set_epoch(self, epoch: int) -> None:
        """Lhotse's: right after load_state_dict of a state saved in `epoch`, the state is kept."""
        self._batches = None  # a running pass ends
        super().set_epoch(epoch)

    def __iter__(self) -> "SharCutSampler":
        if not self._just_restored_state:
            self._yielded = 0
            self.diagnostics.reset_current_epoch()
        self._batches = self._read(*self.epoch_plan())
        return self

    def __next__(self) -> CutSet:
        if self._batches is None:
            iter(self)
        cuts = CutSet.from_cuts(next(self._batches))
        self.allow_iter_to_reset_state()
        self._yielded += 1
        self._log_diagnostics(cuts)
        attach_dataloading_info(cuts, rank=self.rank, world_size=self.world_size)
        for transform in self._transforms:
            cuts = transform(cuts)
        return cuts

    def _read(self, shards: np.ndarray, positions: np.ndarray, cuts: np.ndarray) -> Iterator[list]:
        """The batches after the first self._yielded, reading the shards in order and holding a
        cut only until its batch is yielded; shards none of whose cuts are needed are not opened."""
        bounds = list(zip(cuts[self._yielded:-1].tolist(), cuts[self._yielded + 1:].tolist()))
        if not bounds:
            return
        starts = np.cumsum([0] + [self.lengths[s].size for s in shards])
        uses = np.bincount(positions[bounds[0][0]:], minlength=starts[-1])  # a cut is held until its last use
        repeated = occurrences(positions) if positions.size > starts[-1] else np.zeros(positions.size, np.int64)
        ready = np.maximum.accumulate([positions[a:b].max() for a, b in bounds])  # read up to here: yield the batch
        held, k = {}, 0
        for number, shard in enumerate(shards):
            if not uses[starts[number]:starts[number + 1]].any():
                continue
            for position, cut in enumerate(_shard_cuts(self.shards[shard]), starts[number]):
                if uses[position]:
                    held[position] = cut
                while k < len(bounds) and ready[k] <= position:
                    yield [_take(held, uses, int(positions[i]), int(repeated[i])) for i in range(*bounds[k])]
                    k += 1

    def __getstate__(self) -> dict:
        """For DataLoader workers (IterableDatasetWrapper): everything but a running pass."""
        return dict(self.__dict__, _batches=None)

    def __len__(self) -> int:
        """Batches this rank yields in the epoch (the same on every rank)."""
        return self.epoch_plan()[2].size - 1

    def resume_point(self) -> tuple[int, int]:
        """(the shard's number in this rank's epoch order, the cut in it) where reading resumes."""
        shards, positions, cuts = self.epoch_plan()
        if self._yielded >= cuts.size - 1:
            return len(shards), 0
        first = int(positions[cuts[self._yielded]:].min())
        starts = np.cumsum([0] + [self.lengths[s].size for s in shards])
        number = int(np.searchsorted(starts, first, side="right") - 1)
        return number, first - int(starts[number])

    def state_dict(self, consumed: int | None = None) -> dict:
        """Lhotse's state plus the batches yielded (or `consumed`, the steps trained, with workers)
        and where reading resumes (shard, cut)."""
        yielded, self._yielded = self._yielded, self._yielded if consumed is None else consumed
        shard, cut = self.resume_point()
        state = super().state_dict() | dict(kind=STATE_KIND, consumed=self._yielded, n_shards=len(self.shards),
                                            shard=shard, cut=cut, capacity=self.capacity, interval=self.interval)
        self._yielded = yielded
        return state

    def load_state_dict(self, state: dict) -> None:
        """Continue the saved epoch where it stopped (the same world size and shards)."""
        if not isinstance(state, dict) or state.get("kind") != STATE_KIND:
            raise UserError("this sampler state was not saved by SharCutSampler: load it into the sampler that "
                            "saved it, or start the epoch afresh without it")
        saved = (state.get("n_shards"), state.get("world_size"), state.get("capacity"), state.get("interval"))
        if saved != (len(self.shards), self.world_size, self.capacity, self.interval):
            raise UserError(f"SharCutSampler state of (shards, world size, budget, bucket) = {saved}, this sampler has "
                            f"{(len(self.shards), self.world_size, self.capacity, self.interval)}: resume with the "
                            "same shards, ranks, max_duration and bucket_interval")
        self.epoch, self.seed, self._yielded = state["epoch"], state["seed"], state["consumed"]
        self.diagnostics.load_state_dict(state["diagnostics"])
        self._just_restored_state = True


def shar_shards(cuts: CutSet) -> list[dict]:
    """The shards ({field: path}) of a CutSet read from Shar with nothing over it; else one error."""
    if not isinstance(cuts.data, LazySharIterator):
        raise UserError(f"SharCutSampler reads a CutSet made by CutSet.from_shar, got one of {type(cuts.data).__name__}: "
                        "use batching.lhotse.PlanCutSampler for other CutSets")
    reader = cuts.data
    if any(fn is not None for fn in reader.cut_map_fns) or reader.slice_length is not None:
        raise UserError("SharCutSampler reads whole shards in its own order: CutSet.from_shar's cut_map_fns and "
                        "slice_length would not apply; map the batches with sampler.map(...) instead")
    return list(reader.shards)


def shard_lengths(path: Path, frame_shift: float, capacity: int) -> np.ndarray:
    """The cut lengths in frames (rounded up) of a shard's cuts file; a cut over the budget is an error."""
    with (gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")) as lines:
        durations = np.array([line_duration(line, path, number) for number, line in enumerate(lines, 1)], np.float64)
    frames = np.maximum(np.ceil(np.round(durations / frame_shift, 6)).astype(np.int64), 1)
    over = np.flatnonzero(frames > capacity)
    if over.size:
        raise UserError(f"{path}:{over[0] + 1} lasts {durations[over[0]]:g} s, over max_duration="
                        f"{capacity * frame_shift:g} s ({over.size} such cuts in this shard): raise max_duration or "
                        "leave such cuts out of the Shar")
    return frames


def _take(held: dict, uses: np.ndarray, position: int, occurrence: int):
    """The held cut at `position`, let go after its last use; a repeat renamed `<id>_dup<k>` as Lhotse does."""
    cut = held[position]
    uses[position] -= 1
    if not uses[position]:
        del held[position]
    return cut if occurrence == 0 else cut.with_id(f"{cut.id}_dup{occurrence - 1}")


def _shard_cuts(shard: dict) -> Iterator:
    """One shard's cuts with their fields (audio, features...) attached, in order."""
    return iter(LazySharIterator(fields={field: [path] for field, path in shard.items()}))
