"""A Lhotse sampler over the planner: `CutSet` mini-batches planned by any padded strategy.

Lhotse-based stacks (Lhotse, icefall, NeMo's Lhotse loader) take a sampler that yields `CutSet`s
and a dataset that turns a `CutSet` into tensors (`DataLoader(dataset, sampler=..., batch_size=None)`).
PlanCutSampler is that sampler, a Lhotse `CutSampler` (filter, map, diagnostics, get_report,
dataloading_info, allow_iter_to_reset_state come from there) that plans with PlanBatchSampler, so
it keeps the planner's contract: one plan of (seed, epoch) on every rank, the same number of
batches on every rank, never over the budget, and state_dict() / load_state_dict() that continue
mid-epoch, also on another world size. It takes Lhotse's constructor (see PlanCutSampler and
docs/lhotse.md, which also says where it differs).

The planner needs every length up front: a lazy CutSet read from JSONL manifests is indexed (each
cut's byte offset and duration, batching/lhotse_manifest.py) and its cuts read again by offset;
any other lazy CutSet is read in (metadata); infinite ones are refused with what to do, Shar ones
pointed to batching/lhotse_shar.py. Lengths are cut durations in frames of `frame_shift` seconds,
rounded up, so a budget given in seconds (`max_duration`, as in Lhotse) holds.
Needs `pip install 'tacotron2-batching[lhotse]'`; nothing else in `batching` imports this module.
"""
from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
from lhotse import CutSet
from lhotse.dataset.sampling.base import CutSampler, _filter_nothing, attach_dataloading_info
from lhotse.lazy import is_dill_enabled

from .accelerate_shard import calling_shard
from .analysis import calibrated_line
from .config import BatchingConfig
from .errors import UserError
from .lhotse_manifest import IndexedManifest, cut_source
from .lhotse_measure import example_name, measure_from
from .lhotse_options import (check_knobs, check_zipped, log, resolved_seed, split_positional, with_budget,
                             with_lhotse_options)
from .sampler import PlanBatchSampler

TOO_LONG = ("error", "skip", "alone")
STATE_KIND = "batching.lhotse.PlanCutSampler"


class PlanCutSampler(CutSampler):
    """Yields this rank's mini-batches of `cuts` for the current epoch: CutSets, or tuples of
    CutSets when several CutSets (with the same cut ids in the same order) are zipped, the budget
    applying to the first, as Lhotse's DynamicBucketingSampler does.

    Positional: the CutSets, then optionally the budget in seconds (SimpleCutSampler's
    `max_duration`) or a BatchingConfig. config: any strategy whose plan is not a block plan (not
    bload); its capacity is in frames of frame_shift seconds. max_duration: the budget in seconds
    instead (sets dbs and capacity). max_cuts: at most this many cuts a batch. shuffle: None
    keeps the config's (shuffled); False plans sorted, the same batches every epoch (validation);
    True keeps the config. drop_last, seed (an int, "randomized" or "trng", as Lhotse's): None
    keeps the config's. quadratic_duration: plan with duration + duration**2 / quadratic_duration,
    as Lhotse. constraint: a Lhotse TimeConstraint, TokenConstraint (examples measured by
    num_tokens, e.g. TextExample) or FixedBucketBatchSizeConstraint instead of the budget
    arguments (batching/lhotse_measure.py). too_long: what to do with cuts over the budget, found
    here: "error" (default), "skip" (counted in `skipped` and reported) or "alone" (each in a
    batch of its own, as Lhotse).
    rank / world_size: as Lhotse's (arguments, else RANK/WORLD_SIZE, else torch.distributed).
    manifest_cache: the folder for a lazy `.jsonl.gz` manifest's uncompressed copy and the index of
    a lazy manifest (default: lhotse_manifest.default_cache()), rebuilt when the manifest changes.
    Lhotse's bucketing knobs (NO_EFFECT_KNOBS) are accepted and logged once as having no effect.
    Call set_epoch(e) before each epoch; save state_dict() with checkpoints.
    """

    def __init__(self, *cuts, config: BatchingConfig | None = None, max_duration: float | None = None,
                 max_cuts: int | None = None, shuffle: bool | None = None, drop_last: bool | None = None,
                 seed: int | str | None = None, world_size: int | None = None, rank: int | None = None,
                 quadratic_duration: float | None = None, constraint=None, frame_shift: float = 0.01,
                 too_long: str = "error", manifest_cache: str | Path | None = None, **bucketing) -> None:
        check_knobs(bucketing)
        cut_sets, config, max_duration = split_positional(cuts, config, max_duration)
        if too_long not in TOO_LONG:
            raise UserError(f"too_long={too_long!r} must be one of {', '.join(map(repr, TOO_LONG))}")
        if not frame_shift > 0:
            raise UserError(f"frame_shift={frame_shift} must be a positive number of seconds")
        super().__init__(world_size=world_size, rank=rank)
        self.frame_shift, self.too_long = frame_shift, too_long
        self.measure = measure_from(constraint, max_duration, max_cuts, quadratic_duration, frame_shift)
        self.max_duration, self.max_cuts, self.constraint = max_duration, self.measure.max_cuts, constraint
        self._cut_lists = [cut_source(c, manifest_cache) for c in cut_sets]
        check_zipped(self._cut_lists)
        config = with_budget(config, self.measure.capacity)
        # "randomized" / "trng" on one rank: drawn where the sampler first iterates, as Lhotse does, so
        # each DataLoader worker of an IterableDatasetWrapper draws its own; on several ranks: now, shared
        self._deferred_seed = seed if seed in ("randomized", "trng") and self.world_size == 1 else None
        if self._deferred_seed:
            seed = None
        config = with_lhotse_options(config, self.max_cuts, shuffle, drop_last, resolved_seed(seed, self.world_size))
        self.shuffle, self.drop_last, self.seed = shuffle is not False, config.drop_last, config.seed
        self.skipped: dict[str, int] = {}
        self._batches, self._position = None, 0  # the running pass and its batches so far (see __iter__)
        self._build(config)

    # --- planning -------------------------------------------------------------------------------------

    def _build(self, config: BatchingConfig) -> None:
        """Plan over the kept cuts (the filter's and too_long's choice) with their planning lengths."""
        if config.plans_blocks:
            raise UserError(f"batching={config.batching} plans blocks that pack several cuts each (a block plan); "
                            "PlanCutSampler yields padded CutSet batches: choose a padded strategy (e.g. ssb)")
        cuts = self._cut_lists[0]
        values = cut_durations(cuts) if self.measure.unit == "s" else self.measure.values(cuts)
        lengths = self.measure.lengths(values)
        kept = (np.ones(len(cuts), bool) if isinstance(self._filter_fn, _filter_nothing)
                else np.fromiter((self._filter_fn(cut) for cut in cuts), bool, len(cuts)))
        self.skipped = {"filter": int((~kept).sum())} if (~kept).any() else {}
        if config.capacity is not None:
            kept, lengths = self._fit(lengths, kept, config.capacity, values)
            if self.max_cuts is not None:  # a cut shorter than capacity / max_cuts counts as that long
                lengths = np.maximum(lengths, -(-config.capacity // self.max_cuts))
        self._left_out = np.flatnonzero(~kept)
        # the kept cuts' indices; None when all are kept (8 bytes a cut fewer on a 10-million-cut manifest)
        self._kept = np.flatnonzero(kept) if self._left_out.size else None
        self._n_kept = len(cuts) - int(self._left_out.size)
        del kept
        self._sampler = _IndexSampler(lengths if self._kept is None else lengths[self._kept], config,
                                      self.rank, self.world_size)
        if self._sampler.calibration:  # the default target_zpr (or the config's target): the width found
            log.info(calibrated_line(self._sampler.calibration))
        self._sampler.set_epoch(self._planned_epoch(self.epoch))

    def _fit(self, lengths: np.ndarray, kept: np.ndarray, capacity: int, values: np.ndarray):
        """Cuts over the budget: refused, skipped (counted) or planned alone, as too_long says."""
        over = kept & (lengths > capacity)
        if not over.any():
            return kept, lengths
        first = int(np.flatnonzero(over)[0])
        what = f"{example_name(self._cut_lists[0][first], first)} {self.measure.over_limit(values[first])}"
        if self.too_long == "error":
            such = f"{int(over.sum())} such {'cuts' if self.measure.unit == 's' else 'examples'}"
            raise UserError(f"{what} ({such}): raise the budget, or pass too_long='skip' (leave them out, counted) "
                            "or too_long='alone' (each in a batch of its own, as Lhotse does)")
        if self.too_long == "skip":
            self.skipped["too_long"] = int(over.sum())
            log.warning("PlanCutSampler: skipped %d examples over the budget (the first: %s)", over.sum(), what)
            return kept & ~over, lengths
        return kept, np.minimum(lengths, capacity)  # alone: as long as the budget, so nothing joins it

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

    def filter(self, predicate: Callable) -> "PlanCutSampler":
        """Keep only the cuts for which predicate(cut) is true (Lhotse's filter); the epoch is
        planned again over them, so it must be called before iterating."""
        super().filter(predicate)
        self._build(self.config)
        return self

    # --- epochs and iteration ---------------------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """As PlanBatchSampler.set_epoch: right after load_state_dict of a state saved in `epoch`,
        the state is kept (Lhotse's rule); any other epoch starts afresh."""
        if epoch != self.epoch:
            self.allow_iter_to_reset_state()
            self._batches = None  # the running pass ends (and lets its plan go)
        self.epoch = epoch
        self.diagnostics.set_epoch(epoch)
        self._sampler.set_epoch(self._planned_epoch(epoch))

    def _planned_epoch(self, epoch: int) -> int:
        """shuffle=False: every epoch runs epoch 0's plan (sorted; ties are broken by the seed)."""
        return epoch if self.shuffle else 0

    def __iter__(self) -> "PlanCutSampler":
        """Lhotse's iterator protocol (ZipSampler, RoundRobinSampler and IterableDatasetWrapper call
        next() on the sampler itself): start the pass, then __next__ yields the batches. As in
        Lhotse, a new pass starts the epoch over, unless a state was just loaded (then it goes on
        from there; allow_iter_to_reset_state() or set_epoch of another epoch lifts that)."""
        shard = calling_shard(self)
        if shard:
            self._adopt_shard(*shard)
        if not self._just_restored_state:
            self._sampler.restart_epoch()
            self.diagnostics.reset_current_epoch()
            self.diagnostics.discard(self._cut_lists[0][i] for i in self._left_out)
            self.diagnostics.discard(self._cut_lists[0][self._source_index(i)] for i in self._dropped_by_plan())
        if self._deferred_seed:
            self.seed, self._deferred_seed = resolved_seed(self._deferred_seed, 1), None
            self._build(dataclasses.replace(self.config, seed=self.seed))
        self._batches = iter(self._sampler) if self.num_cuts else iter(())  # no cuts: no (empty) batch
        self._position = 0
        return self

    def _dropped_by_plan(self) -> np.ndarray:
        """The kept cuts this epoch's plan leaves out (drop_last), counted as discarded as Lhotse does."""
        if not (self.config.drop_last and self.num_cuts):
            return np.zeros(0, np.int64)
        planned = [_indices(batch) for batch in self.plan.batches()]
        return np.setdiff1d(np.arange(self.num_cuts), np.concatenate(planned or [np.zeros(0, np.int64)]))

    def _adopt_shard(self, processes: int, index: int) -> None:
        """Under Accelerate's BatchSamplerShard (a loader from batching.lhotse_loader.cut_batch_loader,
        prepared): yield every rank's batches step-major, so that the shard's pick is this rank's
        (PlanBatchSampler.adopt_shard); a deferred random seed is drawn now, shared by the ranks."""
        if self._deferred_seed and processes > 1:
            self.seed, self._deferred_seed = resolved_seed(self._deferred_seed, processes), None
            self._build(dataclasses.replace(self.config, seed=self.seed))
        self._sampler.adopt_shard(processes, index)
        self.rank, self.world_size = index, processes

    @property
    def sampler(self) -> "PlanCutSampler":
        """Itself: Accelerate's prepared loader passes set_epoch(e) on to `batch_sampler.sampler`."""
        return self

    def __next__(self):
        if self._batches is None:
            iter(self)
        batch = next(self._batches)
        self.allow_iter_to_reset_state()
        selected = tuple(CutSet.from_cuts(self._cut(cuts, entry) for entry in batch) for cuts in self._cut_lists)
        mine = not self._sampler.yields_all_ranks or self._position % self.world_size == self.rank
        self._position += 1
        if mine:  # under Accelerate's shard the other ranks' batches pass through, uncounted
            self._log_diagnostics(selected if len(selected) > 1 else selected[0])
        for part in selected:
            attach_dataloading_info(part, rank=self.rank, world_size=self.world_size)
        selected = selected if len(selected) > 1 else selected[0]
        for transform in self._transforms:
            selected = transform(selected)
        return selected

    def __getstate__(self):
        """For DataLoader workers (IterableDatasetWrapper): everything but a running pass."""
        state = dict(self.__dict__, _batches=None)
        if is_dill_enabled():  # as lhotse's Dillable does
            import dill
            return dill.dumps(state)
        return state

    def _cut(self, cuts, entry):
        """The kept cut `entry` (an index, or [index, occurrence] when the epoch repeats cuts); a
        repeat (fewer cuts than ranks need) renamed as Lhotse does (a text example has no id to rename)."""
        index, occurrence = entry if isinstance(entry, list) else (entry, 0)
        cut = cuts[self._source_index(index)]
        return cut if occurrence == 0 or not hasattr(cut, "with_id") else cut.with_id(f"{cut.id}_dup{occurrence - 1}")

    def __len__(self) -> int:
        """Batches the next iteration yields on this rank (the same on every rank); to Accelerate's
        shard, every rank's."""
        shard = calling_shard(self)
        if shard:
            self._adopt_shard(*shard)
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

    def state_dict(self, consumed: int | None = None) -> dict:
        """Lhotse's CutSampler state plus the plan's position and what ties it to these cuts.
        `consumed` overrides the count of yielded batches (e.g. the steps trained, with workers)."""
        return (self._sampler.state_dict(consumed) | super().state_dict()  # the epoch: the sampler's, not the plan's
                | dict(kind=STATE_KIND, n_cuts=len(self._cut_lists[0]), frame_shift=self.frame_shift,
                       skipped=dict(self.skipped)))

    def load_state_dict(self, state: dict) -> None:
        """Continue the saved epoch where it stopped, on this world size: no cut replayed or lost.
        The state's batching settings win over this sampler's, with a warning (Lhotse's rule)."""
        if not isinstance(state, dict) or state.get("kind") != STATE_KIND:
            keys = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise UserError(f"this sampler state was not saved by PlanCutSampler (it has {keys}): load it into "
                            "the sampler that saved it, or start the epoch afresh without it")
        try:
            saved = (state["n_cuts"], state["frame_shift"])
            config = BatchingConfig.from_dict(state["config"])
            position = {key: state[key] for key in ("epoch", "consumed", "world_size", "history", "config")}
            diagnostics = state["diagnostics"]
        except (KeyError, TypeError, ValueError) as err:
            raise UserError(f"PlanCutSampler state is damaged ({type(err).__name__}: {err}): use another "
                            "checkpoint, or start the epoch afresh without it") from None
        if saved != (len(self._cut_lists[0]), self.frame_shift):
            raise UserError(f"checkpoint was planned over {saved[0]} cuts at frame_shift={saved[1]}, "
                            f"this sampler has {len(self._cut_lists[0])} at frame_shift={self.frame_shift}")
        if self._deferred_seed:  # the state's seed was drawn by the sampler that saved it
            self._deferred_seed, self.seed = None, config.seed
            self._build(dataclasses.replace(self.config, seed=config.seed))
        if config != self.config:
            changed = [k for k, v in config.to_dict().items() if getattr(self.config, k) != v]
            warnings.warn(f"PlanCutSampler: the loaded state was planned with other settings ({', '.join(changed)}); "
                          "continuing with the state's, as Lhotse's samplers do")
            self.drop_last, self.seed, self.shuffle = config.drop_last, config.seed, state.get("shuffle", self.shuffle)
            self._build(config)
        self._sampler.load_state_dict(position | dict(epoch=self._planned_epoch(position["epoch"])))
        self.epoch = position["epoch"]
        self.diagnostics.load_state_dict(diagnostics)
        self._just_restored_state = True


class _IndexSampler(PlanBatchSampler):
    """PlanBatchSampler whose batches, in an epoch that repeats samples (the planner does so only
    when there are fewer than the ranks need batches), are [index, occurrence] pairs: occurrence
    k > 0 marks the k-th repeat, which PlanCutSampler renames `<id>_dup<k-1>` as Lhotse does.
    Other epochs keep plain indices (no per-sample pairs: a 10-million-cut epoch stays small)."""

    def _items(self, plan, rank: int | None) -> list[np.ndarray]:
        if not plan.order.size or np.bincount(plan.order).max() == 1:
            return plan.batches(rank)
        batches = plan.batches()
        flat = np.concatenate(batches)
        occurrence = occurrences(flat)
        pairs = np.split(np.column_stack([flat, occurrence]), np.cumsum([len(b) for b in batches])[:-1])
        return pairs if rank is None else pairs[rank::plan.world_size]


def occurrences(values: np.ndarray) -> np.ndarray:
    """For each position, how many times its value occurred before it."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if values.size else np.zeros(0, np.int64)
    out = np.empty_like(values)
    out[order] = np.arange(values.size) - np.repeat(starts, np.diff(np.r_[starts, values.size]))
    return out


def _indices(batch: np.ndarray) -> np.ndarray:
    """A batch's kept-cut indices, whether plain or [index, occurrence] pairs (_IndexSampler)."""
    return batch if batch.ndim == 1 else batch[:, 0]


def cut_durations(cuts) -> np.ndarray:
    """The durations of a list of cuts, or an indexed manifest's (held, not computed)."""
    if isinstance(cuts, IndexedManifest):
        return cuts.durations
    return np.fromiter((cut.duration for cut in cuts), np.float64, len(cuts))
