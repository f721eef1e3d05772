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

`filter(predicate)` is applied where the epoch is simulated: the shards' cuts files are read once
more, and only the cuts that pass are planned and read (the others are counted as discarded).

state_dict() records the epoch and the batches this rank has yielded, with the shard (in the epoch's
order) and the cut where reading resumes; load_state_dict() continues there: the shards before it
are not opened again. A resume needs the same world size and the same shards.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from lhotse import CutSet
from lhotse.shar.readers.lazy import LazySharIterator

from ..errors import UserError
from ..sharding import halve_largest
from ..stream import bucket_ids, stream_cuts
from .base import BaseCutSampler, Drawn, occurrences
from .manifest import line_duration
from .measure import Measure
from .settings import sampler_settings


class SharCutSampler(BaseCutSampler):
    """Yields this rank's batches (CutSets) of a CutSet read from Shar (CutSet.from_shar; its own
    shuffle_shards and split_for_dataloading are not used: the sampler orders and deals the shards) for the
    current epoch. `filter(predicate)` reads the shards' cuts files once more and keeps, from the next
    pass on, the cuts whose manifest entry (no audio or features loaded) passes; `map(fn)` applies to
    each batch. Call set_epoch(e) before each epoch."""

    STATE_KIND = "batching.lhotse_shar.SharCutSampler"  # the module it was first saved from: states stay loadable
    NAME = "SharCutSampler"

    def __init__(
        self,
        cuts: CutSet,
        max_duration: float,
        bucket_interval: float = 0.5,
        seed: int = 0,
        world_size: int | None = None,
        rank: int | None = None,
        frame_shift: float = 0.01,
    ) -> None:
        """
        :param cuts: a CutSet made by CutSet.from_shar, with nothing over it (no cut_map_fns or slice_length).
        :param max_duration: the budget in seconds a batch, padding included (its cut count x its longest cut);
            no default. A cut over it is one error.
        :param bucket_interval: the stream bucketer's bucket width in seconds; default 0.5.
        :param seed: the seed of the shard order (shuffled from (seed, epoch)); default 0.
        :param world_size: the number of ranks (each needs a shard); default None (WORLD_SIZE, else
            torch.distributed, else 1).
        :param rank: this rank; default None (RANK, else torch.distributed, else 0).
        :param frame_shift: seconds a planning frame; default 0.01.
        """
        super().__init__(world_size=world_size, rank=rank, seed=seed)
        self.shards = shar_shards(cuts)
        if not bucket_interval > 0:
            raise UserError(f"bucket_interval={bucket_interval} must be a positive number of seconds")
        self.measure = sampler_settings(
            (cuts,), self.world_size, False, max_duration=max_duration, frame_shift=frame_shift
        ).measure
        if len(self.shards) < self.world_size:
            raise UserError(
                f"{len(self.shards)} Shar shards for {self.world_size} ranks: every rank needs a shard; "
                "write the corpus in smaller shards (shard_size) or use fewer ranks"
            )
        self.capacity = self.measure.capacity
        self.interval = max(1, round(bucket_interval / frame_shift))
        self.max_duration, self.frame_shift = max_duration, frame_shift
        self._all_lengths = [shard_lengths(Path(shard["cuts"]), self.measure) for shard in self.shards]
        self.lengths = self._all_lengths  # of the cuts that pass the filter, per shard
        self._passes: list[np.ndarray | None] = [None] * len(self.shards)  # per shard: which pass (None: all)
        self._yielded = 0  # batches of this epoch this rank has yielded

    def _refilter(self) -> None:
        """Which cuts of each shard pass the filter, read off its cuts file (the cuts without their fields)."""
        self._passes = [self._passing(list(CutSet.from_jsonl_lazy(shard["cuts"]))) for shard in self.shards]
        self._passes = [None if passes.all() else passes for passes in self._passes]
        self.lengths = [
            lengths if passes is None else lengths[passes] for lengths, passes in zip(self._all_lengths, self._passes)
        ]

    def dealt_shards(self) -> list[np.ndarray]:
        """Each rank's shards in this epoch, in reading order: the order shuffled from (seed, epoch), dealt
        round-robin."""
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.shards))
        return [order[r :: self.world_size] for r in range(self.world_size)]

    def epoch_plan(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This rank's epoch: its shards in order, and its batches as (positions in its stream,
        boundaries), in the bucketer's order, as many as the rank with the most."""
        dealt = self.dealt_shards()
        counts = [self._bucketed(shards)[1].size - 1 for shards in dealt]
        mine = dealt[self.rank]
        positions, cuts = self._bucketed(mine)
        cuts, missing = halve_largest(cuts, max(counts) - counts[self.rank])
        if missing:  # fewer cuts than steps: the stream's last cuts again, each alone, renamed as Lhotse does
            positions = np.concatenate(
                [positions, np.arange(positions.size - 1, positions.size - 1 - missing, -1) % positions.size]
            )
            cuts = np.concatenate([cuts, cuts[-1] + np.arange(1, missing + 1)])
        return mine, positions, cuts

    def _bucketed(self, shards: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The bucketer's batches over `shards` read in order: (positions, boundaries), as stream_cuts."""
        lengths = np.concatenate([self.lengths[s] for s in shards]) if len(shards) else np.zeros(0, np.int64)
        return stream_cuts(lengths, bucket_ids(lengths, self.interval, None), self.capacity)

    def set_epoch(self, epoch: int) -> None:
        """Lhotse's: right after load_state_dict of a state saved in `epoch`, the state is kept."""
        self._pass = None  # a running pass ends
        super().set_epoch(epoch)

    def _start_pass(self) -> Iterator[Drawn]:
        if not self._just_restored_state:
            self._yielded = 0
            self.diagnostics.reset_current_epoch()
        return self._read(*self.epoch_plan())

    def _read(self, shards: np.ndarray, positions: np.ndarray, cuts: np.ndarray) -> Iterator[Drawn]:
        """The batches after the first self._yielded, reading the shards in order and holding a
        cut only until its batch is yielded; shards none of whose cuts are needed are not opened."""
        bounds = list(zip(cuts[self._yielded : -1].tolist(), cuts[self._yielded + 1 :].tolist()))
        if not bounds:
            return
        starts = np.cumsum([0] + [self.lengths[s].size for s in shards])
        uses = np.bincount(positions[bounds[0][0] :], minlength=starts[-1])  # a cut is held until its last use
        repeated = occurrences(positions) if positions.size > starts[-1] else None
        ready = np.maximum.accumulate([positions[a:b].max() for a, b in bounds])  # read up to here: yield the batch
        held, k = {}, 0
        for number, shard in enumerate(shards):
            if not uses[starts[number] : starts[number + 1]].any():
                continue
            for position, cut in enumerate(self._passing_cuts(shard), starts[number]):
                if uses[position]:
                    held[position] = cut
                while k < len(bounds) and ready[k] <= position:
                    batch = [_take(held, uses, int(positions[i])) for i in range(*bounds[k])]
                    self._yielded += 1
                    yield Drawn((batch,), None if repeated is None else repeated[bounds[k][0] : bounds[k][1]].tolist())
                    k += 1

    def _passing_cuts(self, shard: int) -> Iterator:
        """A shard's cuts that pass the filter, with their fields, in order; the others counted as discarded."""
        passes = self._passes[shard]
        if passes is None:
            yield from _shard_cuts(self.shards[shard])
            return
        for cut, kept in zip(_shard_cuts(self.shards[shard]), passes):
            if kept:
                yield cut
            else:
                self.diagnostics.discard_single(cut)

    def __len__(self) -> int:
        """Batches this rank yields in the epoch (the same on every rank)."""
        return self.epoch_plan()[2].size - 1

    def resume_point(self) -> tuple[int, int]:
        """(the shard's number in this rank's epoch order, the cut in its cuts file) where reading resumes."""
        shards, positions, cuts = self.epoch_plan()
        if self._yielded >= cuts.size - 1:
            return len(shards), 0
        first = int(positions[cuts[self._yielded] :].min())
        starts = np.cumsum([0] + [self.lengths[s].size for s in shards])
        number = int(np.searchsorted(starts, first, side="right") - 1)
        passes = self._passes[shards[number]]
        cut = first - int(starts[number])
        return number, cut if passes is None else int(np.flatnonzero(passes)[cut])

    def _source_state(self, consumed: int | None) -> dict:
        """The batches yielded (or `consumed`, the steps trained, with workers) and where reading resumes
        (shard, cut)."""
        yielded, self._yielded = self._yielded, self._yielded if consumed is None else consumed
        shard, cut = self.resume_point()
        state = dict(
            consumed=self._yielded,
            n_shards=len(self.shards),
            shard=shard,
            cut=cut,
            capacity=self.capacity,
            interval=self.interval,
        )
        self._yielded = yielded
        return state

    def _parse_state(self, state: dict):
        saved = (state["n_shards"], state["world_size"], state["capacity"], state["interval"])
        return saved, int(state["epoch"]), state["seed"], int(state["consumed"]), state["diagnostics"]

    def _restore(self, parsed) -> None:
        """Continue the saved epoch where it stopped (the same world size and shards)."""
        saved, epoch, seed, consumed, diagnostics = parsed
        if saved != (len(self.shards), self.world_size, self.capacity, self.interval):
            raise UserError(
                f"SharCutSampler state of (shards, world size, budget, bucket) = {saved}, this sampler has "
                f"{(len(self.shards), self.world_size, self.capacity, self.interval)}: resume with the "
                "same shards, ranks, max_duration and bucket_interval"
            )
        self.epoch, self.seed, self._yielded = epoch, seed, consumed
        self.diagnostics.load_state_dict(diagnostics)


def shar_shards(cuts: CutSet) -> list[dict]:
    """The shards ({field: path}) of a CutSet read from Shar with nothing over it; else one error."""
    if not isinstance(cuts.data, LazySharIterator):
        raise UserError(
            f"SharCutSampler reads a CutSet made by CutSet.from_shar, got one of {type(cuts.data).__name__}: "
            "use batching.lhotse.PlanCutSampler for other CutSets"
        )
    reader = cuts.data
    if any(fn is not None for fn in reader.cut_map_fns) or reader.slice_length is not None:
        raise UserError(
            "SharCutSampler reads whole shards in its own order: CutSet.from_shar's cut_map_fns and "
            "slice_length would not apply; map the batches with sampler.map(...) instead"
        )
    return list(reader.shards)


def shard_lengths(path: Path, measure: Measure) -> np.ndarray:
    """The cut lengths in planning frames of a shard's cuts file; a cut over the budget is an error."""
    with gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb") as lines:
        durations = np.array([line_duration(line, path, number) for number, line in enumerate(lines, 1)], np.float64)
    frames = measure.lengths(durations)
    over = np.flatnonzero(frames > measure.capacity)
    if over.size:
        raise UserError(
            f"{path}:{over[0] + 1} {measure.over_limit(durations[over[0]])} ({over.size} such cuts in this "
            "shard): raise max_duration or leave such cuts out of the Shar"
        )
    return frames


def _take(held: dict, uses: np.ndarray, position: int):
    """The held cut at `position`, let go after its last use."""
    cut = held[position]
    uses[position] -= 1
    if not uses[position]:
        del held[position]
    return cut


def _shard_cuts(shard: dict) -> Iterator:
    """One shard's cuts with their fields (audio, features...) attached, in order."""
    return iter(LazySharIterator(fields={field: [path] for field, path in shard.items()}))
