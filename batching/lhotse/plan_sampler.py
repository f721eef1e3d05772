"""PlanCutSampler: a Lhotse sampler over the planner, `CutSet` mini-batches planned by any padded strategy.

It plans with PlanBatchSampler (an _IndexSampler over the kept cuts), so it keeps the planner's
contract: one plan of (seed, epoch) on every rank, the same number of batches on every rank, never
over the budget, and state_dict() / load_state_dict() that continue mid-epoch, also on another world
size. The planner needs every length up front: a lazy CutSet read from JSONL manifests is indexed
(manifest.py) and its cuts read again by offset; any other lazy CutSet is read in (metadata).
Lengths are cut durations in frames of `frame_shift` seconds, rounded up, so a budget given in
seconds (`max_duration`, as in Lhotse) holds.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..analysis import calibrated_line
from ..config import BatchingConfig
from ..errors import UserError
from ..sampler import PlanBatchSampler
from .base import BaseCutSampler, Drawn, log, occurrences
from .manifest import IndexedManifest, cut_source
from .measure import fit_budget
from .settings import as_cut_sets, check_padded, check_zipped, resolved_seed, sampler_settings
from .stream_sampler import StreamCutSampler, is_stream


class PlanCutSampler(BaseCutSampler):
    """Yields this rank's mini-batches of `cuts` for the current epoch: CutSets, or tuples of
    CutSets when several CutSets (with the same cut ids in the same order) are zipped, the budget
    applying to the first, as Lhotse's DynamicBucketingSampler does. Lhotse's CutSampler protocol
    (filter, map, diagnostics, get_report, dataloading_info, allow_iter_to_reset_state) comes from
    the base (batching/lhotse/base.py); this class writes the source: the epoch's plan.
    A one-pass or infinite source (stream_sampler.is_stream) makes a StreamCutSampler instead.
    Call set_epoch(e) before each epoch; save state_dict() with checkpoints.
    """

    STATE_KIND = "batching.lhotse.PlanCutSampler"
    NAME = "PlanCutSampler"

    def __new__(cls, *cuts, **options):
        """A one-pass or infinite source (is_stream) is planned a window at a time: a StreamCutSampler."""
        if cls is PlanCutSampler and any(is_stream(source) for source in cuts):
            return StreamCutSampler(*cuts, **options)
        return super().__new__(cls)

    def __init__(
        self,
        *cuts,
        config: BatchingConfig | None = None,
        max_duration: float | None = None,
        max_cuts: int | None = None,
        shuffle: bool | None = None,
        drop_last: bool | None = None,
        seed: int | str | None = None,
        world_size: int | None = None,
        rank: int | None = None,
        quadratic_duration: float | None = None,
        constraint=None,
        frame_shift: float = 0.01,
        too_long: str = "error",
        manifest_cache: str | Path | None = None,
        **bucketing,
    ) -> None:
        """
        :param cuts: the CutSets (eager, lazy or lists of examples; several are zipped), then optionally the
            budget in seconds (as SimpleCutSampler's max_duration) or a BatchingConfig, positionally.
        :param config: the BatchingConfig planning the batches, any strategy whose plan is not a block plan;
            its capacity in frames of frame_shift seconds. Default: settings.DEFAULT_CONFIG (SSB-DBS-BR on the
            cost key calibrated to the paper's SSB's ZPR on the cuts).
        :param max_duration: the budget in seconds a batch, padding included (sets dbs and capacity); default
            None (the config's budget).
        :param max_cuts: at most this many cuts a batch (alone: fixed batches of max_cuts); default None.
        :param shuffle: None (default) or True: the config's order (shuffled); False: sorted, the same batches
            every epoch (validation).
        :param drop_last: drop the incomplete last step, as Lhotse; default None (the config's, False).
        :param seed: an int, "randomized" or "trng" (as Lhotse's); default None (the config's, 0).
        :param world_size: the number of ranks; default None (WORLD_SIZE, else torch.distributed, else 1).
        :param rank: this rank; default None (RANK, else torch.distributed, else 0).
        :param quadratic_duration: seconds: plan with duration + duration**2 / quadratic_duration, as Lhotse;
            default None (no quadratic term).
        :param constraint: a Lhotse TimeConstraint, TokenConstraint (examples measured by num_tokens) or
            FixedBucketBatchSizeConstraint instead of the budget arguments; default None.
        :param frame_shift: seconds a planning frame; default 0.01.
        :param too_long: cuts over the budget: "error" (default), "skip" (left out, counted in `skipped`) or
            "alone" (each in a batch of its own, as Lhotse).
        :param manifest_cache: the folder for a lazy manifest's index and a `.jsonl.gz`'s uncompressed copy;
            default None (manifest.default_cache(), under XDG_CACHE_HOME).
        :param bucketing: Lhotse's bucketing and buffering knobs (settings.NO_EFFECT_KNOBS), accepted without
            effect and logged once; default none.
        """
        super().__init__(world_size=world_size, rank=rank)
        settings = sampler_settings(
            cuts,
            self.world_size,
            True,
            config=config,
            max_duration=max_duration,
            max_cuts=max_cuts,
            shuffle=shuffle,
            drop_last=drop_last,
            seed=seed,
            quadratic_duration=quadratic_duration,
            constraint=constraint,
            frame_shift=frame_shift,
            too_long=too_long,
            **bucketing,
        )
        self.frame_shift, self.too_long, self.measure = frame_shift, too_long, settings.measure
        self.max_duration, self.max_cuts, self.constraint = settings.max_duration, self.measure.max_cuts, constraint
        self._cut_lists = [cut_source(c, manifest_cache) for c in as_cut_sets(settings.sources)]
        check_zipped(self._cut_lists)
        config, self._deferred_seed = settings.config, settings.deferred_seed
        self.shuffle, self.drop_last, self.seed = settings.shuffle, config.drop_last, config.seed
        self.skipped: dict[str, int] = {}
        self._shard: tuple[int, int] | None = None  # Accelerate's shard (processes, index), once announced
        self._build(config)

    # --- planning -------------------------------------------------------------------------------------

    def _build(self, config: BatchingConfig) -> None:
        """Plan over the kept cuts (the filter's and too_long's choice) with their planning lengths."""
        check_padded(config)
        cuts = self._cut_lists[0]
        values = cut_durations(cuts) if self.measure.unit == "s" else self.measure.values(cuts)
        lengths = self.measure.lengths(values)
        kept = self._passing(cuts)
        self.skipped = {"filter": int((~kept).sum())} if (~kept).any() else {}
        if config.capacity is not None:
            kept, lengths, too_long = fit_budget(
                self.measure, config.capacity, self.too_long, values, lengths, kept, cuts
            )
            self.skipped.update({"too_long": too_long} if too_long else {})
        self._left_out = np.flatnonzero(~kept)
        # the kept cuts' indices; None when all are kept (8 bytes a cut fewer on a 10-million-cut manifest)
        self._kept = np.flatnonzero(kept) if self._left_out.size else None
        self._n_kept = len(cuts) - int(self._left_out.size)
        del kept
        self._sampler = _IndexSampler(
            lengths if self._kept is None else lengths[self._kept], config, self.rank, self.world_size
        )
        if self._shard:
            self._sampler.adopt_shard(*self._shard)
        if self._sampler.calibration:  # the default target_zpr (or the config's target): the width found
            log.info(calibrated_line(self._sampler.calibration))
        self._sampler.set_epoch(self._planned_epoch(self.epoch))

    def _reseed(self, seed: int) -> None:
        """Plan again with `seed` in place of the deferred "randomized" / "trng" seed, now drawn (or a
        loaded state's)."""
        self.seed, self._deferred_seed = seed, None
        self._build(dataclasses.replace(self.config, seed=seed))

    @property
    def config(self) -> BatchingConfig:
        return self._sampler.config

    @property
    def plan(self):
        """The epoch's GlobalPlan over the kept cuts (its stats(lengths) give padding and steps)."""
        return self._sampler.plan

    @property
    def lengths(self) -> np.ndarray:
        """The planning length of each kept cut, in frames."""
        return self._sampler.lengths

    def _refilter(self) -> None:
        """The epoch is planned again over the cuts that pass the filter."""
        self._build(self.config)

    # --- epochs and iteration ---------------------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """As PlanBatchSampler.set_epoch: right after load_state_dict of a state saved in `epoch`,
        the state is kept (Lhotse's rule); any other epoch starts afresh."""
        if epoch != self.epoch:
            self.allow_iter_to_reset_state()
            self._pass = None  # the running pass ends (and lets its plan go)
        self.epoch = epoch
        self.diagnostics.set_epoch(epoch)
        self._sampler.set_epoch(self._planned_epoch(epoch))

    def _planned_epoch(self, epoch: int) -> int:
        """shuffle=False: every epoch runs epoch 0's plan (sorted; ties are broken by the seed)."""
        return epoch if self.shuffle else 0

    def _start_pass(self) -> Iterator[Drawn]:
        """As in Lhotse, a new pass starts the epoch over, unless a state was just loaded (then it goes
        on from there; allow_iter_to_reset_state() or set_epoch of another epoch lifts that)."""
        if not self._just_restored_state:
            self._sampler.restart_epoch()
            self.diagnostics.reset_current_epoch()
            self.diagnostics.discard(self._cut_lists[0][i] for i in self._left_out)
            self.diagnostics.discard(self._cut_lists[0][self._source_index(i)] for i in self._dropped_by_plan())
        if self._deferred_seed:
            self._reseed(resolved_seed(self._deferred_seed, 1))
        return self._drawn(iter(self._sampler) if self.num_cuts else iter(()))  # no cuts: no (empty) batch

    def _drawn(self, batches: Iterator[list]) -> Iterator[Drawn]:
        """The plan's batches of kept-cut indices (or [index, occurrence] pairs, see _IndexSampler) as
        one list of cuts per zipped CutSet; under Accelerate's shard the other ranks' are not this rank's."""
        for position, batch in enumerate(batches):
            own = not self._sampler.yields_all_ranks or position % self.world_size == self.rank
            pairs = bool(batch) and isinstance(batch[0], list)
            indices, repeats = ([i for i, _ in batch], [k for _, k in batch]) if pairs else (batch, None)
            sources = [self._source_index(i) for i in indices]
            yield Drawn(tuple([cuts[i] for i in sources] for cuts in self._cut_lists), repeats, own)

    def _dropped_by_plan(self) -> np.ndarray:
        """The kept cuts this epoch's plan leaves out (drop_last), counted as discarded as Lhotse does."""
        if not (self.config.drop_last and self.num_cuts):
            return np.zeros(0, np.int64)
        planned = [_indices(batch) for batch in self.plan.batches()]
        return np.setdiff1d(np.arange(self.num_cuts), np.concatenate(planned or [np.zeros(0, np.int64)]))

    @property
    def yields_all_ranks(self) -> bool:
        return self._sampler.yields_all_ranks

    def adopt_shard(self, processes: int, index: int) -> None:
        """Under Accelerate's BatchSamplerShard (a loader from batching.lhotse.cut_batch_loader, prepared
        and passed to batching.accelerate_shard.shard_aware): yield every rank's batches step-major, so
        that the shard's pick is this rank's (PlanBatchSampler.adopt_shard); a deferred random seed is
        drawn now, shared by the ranks."""
        if self._deferred_seed and processes > 1:
            self._reseed(resolved_seed(self._deferred_seed, processes))
        self._sampler.adopt_shard(processes, index)
        self.rank, self.world_size, self._shard = index, processes, (processes, index)

    @property
    def sampler(self) -> PlanCutSampler:
        """Itself: Accelerate's prepared loader passes set_epoch(e) on to `batch_sampler.sampler`."""
        return self

    def __len__(self) -> int:
        """This rank's batches in the epoch, those run before a resume included (the same on every
        rank; PlanBatchSampler.__len__); to Accelerate's shard, every rank's."""
        return len(self._sampler)

    @property
    def num_cuts(self) -> int:
        return self._n_kept

    def _source_index(self, kept_index):
        """The position in the CutSet of kept cut(s) `kept_index` (an int or an index array)."""
        return kept_index if self._kept is None else self._kept[kept_index]

    def _left_in_pass(self) -> list[np.ndarray]:
        """The batches this pass has still to yield (none after a full pass, as in Lhotse)."""
        return [] if self._sampler.exhausted or not self.num_cuts else self._sampler.remaining_batches()

    @property
    def remaining_cuts(self) -> int:
        return sum(len(batch) for batch in self._left_in_pass())

    @property
    def remaining_duration(self) -> float | None:
        """Seconds left in this pass (None when examples are measured in tokens, as Lhotse's None when unknown)."""
        if self.measure.unit != "s":
            return None
        durations = cut_durations(self._cut_lists[0])
        return float(sum(durations[self._source_index(_indices(batch))].sum() for batch in self._left_in_pass()))

    # --- state ------------------------------------------------------------------------------------------

    def _source_state(self, consumed: int | None) -> dict:
        """The plan's position (its epoch left out: the sampler's is saved) and what ties it to these cuts."""
        position = {k: v for k, v in self._sampler.state_dict(consumed).items() if k != "epoch"}
        return position | dict(n_cuts=len(self._cut_lists[0]), frame_shift=self.frame_shift, skipped=dict(self.skipped))

    def _parse_state(self, state: dict):
        saved = (state["n_cuts"], state["frame_shift"])
        config = BatchingConfig.from_dict(state["config"])
        position = {key: state[key] for key in ("epoch", "consumed", "world_size", "history", "config")}
        return saved, config, position, state["diagnostics"], state.get("shuffle", self.shuffle)

    def _restore(self, parsed) -> None:
        """Continue the saved epoch where it stopped, on this world size: no cut replayed or lost.
        The state's batching settings win over this sampler's, with a warning (Lhotse's rule)."""
        saved, config, position, diagnostics, shuffle = parsed
        if saved != (len(self._cut_lists[0]), self.frame_shift):
            raise UserError(
                f"checkpoint was planned over {saved[0]} cuts at frame_shift={saved[1]}, "
                f"this sampler has {len(self._cut_lists[0])} at frame_shift={self.frame_shift}"
            )
        if self._deferred_seed:  # the state's seed was drawn by the sampler that saved it
            self._reseed(config.seed)
        if config != self.config:
            changed = [k for k, v in config.to_dict().items() if getattr(self.config, k) != v]
            warnings.warn(
                f"PlanCutSampler: the loaded state was planned with other settings ({', '.join(changed)}); "
                "continuing with the state's, as Lhotse's samplers do"
            )
            self.drop_last, self.seed, self.shuffle = config.drop_last, config.seed, shuffle
            self._build(config)
        self._sampler.load_state_dict(position | dict(epoch=self._planned_epoch(position["epoch"])))
        self.epoch = position["epoch"]
        self.diagnostics.load_state_dict(diagnostics)


class _IndexSampler(PlanBatchSampler):
    """PlanBatchSampler whose batches, in an epoch that repeats samples (the planner does so only
    when there are fewer than the ranks need batches), are [index, occurrence] pairs: occurrence
    k > 0 marks the k-th repeat, which the base renames `<id>_dup<k-1>` as Lhotse does.
    Other epochs keep plain indices (no per-sample pairs: a 10-million-cut epoch stays small)."""

    def _items(self, plan, rank: int | None) -> list[np.ndarray]:
        if not plan.order.size or np.bincount(plan.order).max() == 1:
            return plan.batches(rank)
        batches = plan.batches()
        flat = np.concatenate(batches)
        occurrence = occurrences(flat)
        pairs = np.split(np.column_stack([flat, occurrence]), np.cumsum([len(b) for b in batches])[:-1])
        return pairs if rank is None else pairs[rank :: plan.world_size]


def _indices(batch: np.ndarray) -> np.ndarray:
    """A batch's kept-cut indices, whether plain or [index, occurrence] pairs (_IndexSampler)."""
    return batch if batch.ndim == 1 else batch[:, 0]


def cut_durations(cuts) -> np.ndarray:
    """The durations of a list of cuts, or an indexed manifest's (held, not computed)."""
    if isinstance(cuts, IndexedManifest):
        return cuts.durations
    return np.fromiter((cut.duration for cut in cuts), np.float64, len(cuts))
