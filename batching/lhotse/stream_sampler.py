"""One-pass and infinite example sources for PlanCutSampler, planned a window at a time.

A generator of examples (e.g. Lhotse's TextExample streams), a lazy CutSet over one, a CutSet
repeated without end (`.repeat()`) or an infinite mux cannot be planned a whole epoch ahead.
PlanCutSampler(...) returns a StreamCutSampler for them (is_stream says which): it reads the source
in windows of `buffer_size` examples (Lhotse's knob; DEFAULT_WINDOW, Lhotse's DynamicBucketingSampler
default, when not given), plans each window with the planner the whole-epoch path uses (the same
strategy, budget, max_cuts and too_long), yields the window's batches, then reads the next window.

Every rank reads the same stream and plans every rank's batches of each window (a multiple of
world_size of them), so every rank runs the same steps. A window that is not the last is planned
with drop_last, and what that leaves out (its incomplete last batch, the batches that cannot fill a
step) is carried into the next window's examples: every example read is yielded once. The last
window of a finite source is planned as the whole-epoch path plans an epoch (the config's drop_last).
"""

from __future__ import annotations

import dataclasses
import itertools
import warnings
from collections.abc import Iterator

import numpy as np
from lhotse import CutSet
from lhotse.lazy import LazyInfiniteApproximateMultiplexer, LazyRepeater

from ..analysis import calibrated_line, resolve_width
from ..config import BatchingConfig
from ..errors import UserError
from ..planner import plan_global
from .base import BaseCutSampler, Drawn, log, occurrences
from .measure import fit_budget
from .settings import check_padded, lazy_chain, sampler_settings

#: Examples read a window when buffer_size is not given (Lhotse's DynamicBucketingSampler default).
DEFAULT_WINDOW = 20_000


def is_stream(source) -> bool:
    """A source that cannot be planned whole: an iterator (e.g. a generator), or a lazy CutSet that
    reads one or never ends (`.repeat()` without `times`, an infinite mux)."""
    if isinstance(source, CutSet):
        return source.is_lazy and any(_reads_once(s) or _endless(s) for s in lazy_chain(source.data))
    return hasattr(source, "__next__")


def is_one_pass(source) -> bool:
    """A stream that can be read once only (an iterator, or a lazy CutSet over one): no resume."""
    if isinstance(source, CutSet):
        return any(_reads_once(s) for s in lazy_chain(source.data))
    return True


def _reads_once(node) -> bool:
    return hasattr(node, "__next__") and not type(node).__module__.startswith("lhotse")


def _endless(node) -> bool:
    return isinstance(node, LazyRepeater) and node.times is None or isinstance(node, LazyInfiniteApproximateMultiplexer)


class StreamCutSampler(BaseCutSampler):
    """PlanCutSampler over a one-pass or infinite source (see the module docstring): this rank's
    batches (CutSets), window after window. An epoch ends when a finite source does (a one-pass
    source is then spent: another pass is one error); an infinite one never ends.
    state_dict()/load_state_dict() resume a re-iterable source (a CutSet) mid-stream by reading it
    again from its start and planning the windows again up to the saved position (no batch built);
    a one-pass source cannot be resumed (one error)."""

    STATE_KIND = "batching.lhotse_stream.StreamCutSampler"  # the module it was first saved from: states stay loadable
    NAME = "StreamCutSampler (PlanCutSampler over a one-pass or infinite source)"

    def __init__(
        self,
        *cuts,
        world_size: int | None = None,
        rank: int | None = None,
        buffer_size: int | None = None,
        manifest_cache=None,
        **options,
    ) -> None:
        """
        :param cuts: one source (an iterator such as a generator, or a lazy CutSet over one or without end),
            then optionally the budget in seconds or a BatchingConfig, positionally; zipped sources are refused.
        :param world_size: the number of ranks; default None (WORLD_SIZE, else torch.distributed, else 1).
        :param rank: this rank; default None (RANK, else torch.distributed, else 0).
        :param buffer_size: examples read and planned a window; default None (DEFAULT_WINDOW, 20,000, Lhotse's
            DynamicBucketingSampler default).
        :param manifest_cache: accepted for PlanCutSampler's signature, unused (a stream is not indexed);
            default None.
        :param options: PlanCutSampler's other arguments, with its units and defaults: config, max_duration
            (seconds), max_cuts, shuffle, drop_last, seed, quadratic_duration (seconds), constraint,
            frame_shift (seconds, 0.01), too_long ("error") and Lhotse's bucketing knobs (no effect).
        """
        super().__init__(world_size=world_size, rank=rank)
        settings = sampler_settings(cuts, self.world_size, False, **options)
        if len(settings.sources) != 1:
            raise UserError(
                f"PlanCutSampler got {len(settings.sources)} zipped sources, one of them one-pass or "
                "infinite: zipped sources must be finite CutSets or lists; zip a stream with CutSet.mux "
                "or a generator of tuples instead"
            )
        self.window = DEFAULT_WINDOW if buffer_size is None else buffer_size
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise UserError(f"buffer_size={buffer_size!r} must be a positive integer: the examples read a window")
        check_padded(settings.config)
        self.source, self.one_pass = settings.sources[0], is_one_pass(settings.sources[0])
        self.measure, self.config, self.too_long = settings.measure, settings.config, settings.too_long
        self.max_duration, self.max_cuts = settings.max_duration, self.measure.max_cuts
        self.constraint = settings.constraint
        self.shuffle, self.drop_last, self.seed = settings.shuffle, self.config.drop_last, self.config.seed
        self.skipped: dict[str, int] = {}
        self.calibration: dict | None = None  # a target_zpr's width, found on the pass's first window
        self._spent, self._yielded, self._resume_at = False, 0, 0

    # --- windows ----------------------------------------------------------------------------------------

    def _windows(self, examples: Iterator, epoch: int) -> Iterator[tuple[list[tuple[list, list | None]], list]]:
        """Each window's batches (every rank's, step-major, as (examples, repeats): examples_of) and the
        examples it leaves out for good (filtered, too long with too_long='skip', dropped at the end)."""
        held, held_lengths, read, ahead, planning = [], np.zeros(0, np.int64), 0, [], None
        for number in itertools.count():
            fresh = ahead + list(itertools.islice(examples, max(0, self.window - len(ahead))))
            # a look ahead of world_size examples: a source that ends within it ends with this window, so
            # the last window never holds fewer examples than ranks (only a source that short repeats some)
            ahead = list(itertools.islice(examples, self.world_size))
            last = len(ahead) < self.world_size
            if last:
                fresh += ahead
            kept, lengths, left_out = self._measured(fresh, read)
            read += len(fresh)
            pool, pool_lengths = held + kept, np.concatenate([held_lengths, lengths])
            if planning is None and pool:
                planning = self._calibrated(pool_lengths)
            batches, rest = self._planned(
                pool_lengths, planning, window_epoch(epoch if self.shuffle else 0, number), last
            )
            if last:
                left_out += [pool[i] for i in rest]
            else:
                held, held_lengths = [pool[i] for i in rest], pool_lengths[rest]
            yield examples_of(pool, batches), left_out
            if last:
                return

    def _measured(self, fresh: list, offset: int) -> tuple[list, np.ndarray, list]:
        """The window's new examples that are kept (the filter's and too_long's choice), their planning
        lengths, and those left out (counted in `skipped`). offset: the first one's place in the source."""
        kept = self._passing(fresh)
        values = self.measure.values(fresh)
        lengths = self.measure.lengths(values)
        skipped = {"filter": int((~kept).sum()), "too_long": 0}
        if self.config.capacity is not None:
            kept, lengths, skipped["too_long"] = fit_budget(
                self.measure, self.config.capacity, self.too_long, values, lengths, kept, fresh, offset
            )
        for reason, count in skipped.items():
            if count:
                self.skipped[reason] = self.skipped.get(reason, 0) + count
        return [fresh[i] for i in np.flatnonzero(kept)], lengths[kept], [fresh[i] for i in np.flatnonzero(~kept)]

    def _calibrated(self, lengths: np.ndarray) -> BatchingConfig:
        """The config planning the pass's windows: a target_zpr (the default's) or target_pair_repeat
        calibrates lrf on the first window, the only lengths known ahead (every rank reads the same)."""
        config, self.calibration = resolve_width(lengths, self.config)
        if self.calibration:
            log.info("%s (a stream: its first window)", calibrated_line(self.calibration))
        return config

    def _planned(
        self, lengths: np.ndarray, config: BatchingConfig, key: int, last: bool
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """A window's plan (every rank's batches, step-major) and the examples it leaves out: the last
        window planned as an epoch is, any other with drop_last (what it leaves is carried on)."""
        if not lengths.size:
            return [], np.zeros(0, np.int64)
        config = config if last else dataclasses.replace(config, drop_last=True)
        batches = plan_global(lengths, config, key, self.world_size).batches()
        used = np.zeros(lengths.size, bool)
        if batches:
            used[np.concatenate(batches)] = True
        return batches, np.flatnonzero(~used)

    def _rank_batches(self, examples: Iterator, skip: int) -> Iterator[Drawn]:
        """This rank's batches of the pass, after the first `skip` (a resume: planned, not built)."""
        position = 0
        for batches, left_out in self._windows(examples, self.epoch):
            if left_out and position >= skip:  # windows before the resume point were counted before
                self.diagnostics.discard(left_out)
            for batch, repeats in batches[self.rank :: self.world_size]:
                position += 1
                if position > skip:
                    self._yielded += 1
                    yield Drawn((batch,), repeats)
        self._spent = True

    # --- passes ----------------------------------------------------------------------------------------

    def _start_pass(self) -> Iterator[Drawn]:
        """A re-iterable source starts the epoch over at every pass (as PlanCutSampler), unless a state
        was just loaded (then it goes on from there); a one-pass source goes on where the last pass
        stopped, and once read to its end cannot be read again."""
        if self._just_restored_state:
            return self._from(self._resume_at)
        if not self.one_pass or self._pass is None:
            self.diagnostics.reset_current_epoch()
            return self._from(0)
        if self._spent:
            raise UserError(
                "PlanCutSampler's one-pass source (e.g. a generator) was read to its end: it cannot be "
                "read again for another pass; pass a re-iterable source (a list or CutSet, or "
                "CutSet.repeat()) to run several epochs"
            )
        return self._pass

    def _from(self, skip: int) -> Iterator[Drawn]:
        """A pass from the source's start (or a one-pass source's first), after `skip` batches."""
        self.skipped, self._yielded, self._spent = {}, skip, False
        return self._rank_batches(iter(self.source), skip)

    @property
    def remaining_duration(self) -> None:
        """Unknown ahead (a stream), as Lhotse's samplers say for a lazy CutSet."""
        return None

    @property
    def remaining_cuts(self) -> None:
        return None

    @property
    def num_cuts(self) -> None:
        return None

    # --- state ------------------------------------------------------------------------------------------

    def _source_state(self, consumed: int | None) -> dict:
        """The batches yielded this pass (`consumed` overrides the count, e.g. with the steps trained when
        DataLoader workers prefetch) and what plans the windows."""
        return dict(
            consumed=self._yielded if consumed is None else consumed,
            window=self.window,
            config=self.config.to_dict(),
            skipped=dict(self.skipped),
        )

    def _parse_state(self, state: dict):
        if self.one_pass:
            raise UserError(
                "PlanCutSampler cannot resume a one-pass source (e.g. a generator): what it read is gone; "
                "start afresh without load_state_dict, or pass a re-iterable source (a CutSet, e.g. "
                "CutSet.from_file(...).repeat()) to resume mid-stream"
            )
        return (
            int(state["consumed"]),
            int(state["epoch"]),
            int(state["world_size"]),
            BatchingConfig.from_dict(state["config"]),
            int(state["window"]),
            state["diagnostics"],
            state.get("shuffle", self.shuffle),
        )

    def _restore(self, parsed) -> None:
        """Continue the saved pass after its `consumed` batches: the next pass reads the source again
        from its start and plans the windows up to there again (reading, not loading, what was
        consumed). The state's settings win over this sampler's, with a warning (Lhotse's rule)."""
        consumed, epoch, world_size, config, window, diagnostics, shuffle = parsed
        if world_size != self.world_size:
            raise UserError(
                f"this stream's state was saved on {world_size} ranks, this sampler runs on "
                f"{self.world_size}: every window is planned for all ranks, so resume on {world_size}"
            )
        if (config, window) != (self.config, self.window):
            warnings.warn(
                "PlanCutSampler: the loaded state was planned with other settings or buffer_size; "
                "continuing with the state's, as Lhotse's samplers do"
            )
            self.config, self.window, self.drop_last, self.seed = config, window, config.drop_last, config.seed
            self.shuffle = shuffle
        self.epoch, self._resume_at = epoch, consumed
        self.diagnostics.load_state_dict(diagnostics)


def window_epoch(epoch: int, number: int) -> int:
    """The planner's epoch for window `number` of `epoch`: every window is shuffled anew, alike on every rank."""
    return int(np.random.SeedSequence([epoch, number]).generate_state(1)[0])


def examples_of(pool: list, batches: list[np.ndarray]) -> list[tuple[list, list | None]]:
    """The batches as (examples, repeats): how many times each example occurred before in the window
    (None when none did; the last window repeats some when there are fewer examples than ranks need
    batches, and the base renames those as Lhotse does)."""
    occurrence = occurrences(np.concatenate(batches) if batches else np.zeros(0, np.int64))
    if not occurrence.any():
        return [([pool[i] for i in batch.tolist()], None) for batch in batches]
    repeats = np.split(occurrence, np.cumsum([len(b) for b in batches])[:-1])
    return [([pool[i] for i in batch.tolist()], r.tolist()) for batch, r in zip(batches, repeats)]
