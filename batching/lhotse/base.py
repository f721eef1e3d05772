"""The base of the Lhotse samplers, in the manner of Lhotse's CutSampler (lhotse/dataset/sampling/base.py):
a sampler writes its batch source, the base does the rest once.

A sampler (PlanCutSampler, StreamCutSampler, SharCutSampler) writes `_start_pass()`, which returns
the pass's batches as `Drawn` records (this rank's, or under Accelerate's shard every rank's), and
the state of its source (`_source_state`, `_parse_state`, `_restore`). The base owns the rest:
`__iter__` (Accelerate's unannounced shard refused), `__next__` (a repeat renamed `<id>_dup<k>` as
Lhotse does, the diagnostics of this rank's batches, dataloading info, the transforms of `map`),
which examples pass `filter` (`_passing`), the state envelope (kind, version, the wrong-kind and
damaged-state errors) and pickling (everything but a running pass, with dill when Lhotse enables it).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from lhotse import CutSet
from lhotse.dataset.sampling.base import CutSampler, _filter_nothing, attach_dataloading_info
from lhotse.lazy import is_dill_enabled

from ..accelerate_shard import refuse_unannounced_shard
from ..errors import UserError
from ..lightning_guard import refuse_lightning_wrapper

#: The Lhotse wing's one logger (calibrated widths, skipped examples, knobs without effect, manifest caches).
log = logging.getLogger("batching.lhotse")
#: The version of the samplers' state layout; a state without one was saved before versions (1).
STATE_VERSION = 1


@dataclass(frozen=True)
class Drawn:
    """One batch of a sampler's source: its examples (one list per zipped source), how many times each
    was drawn before in this epoch (None: none was; a repeat is renamed), and whether it is this rank's
    (under Accelerate's shard every rank's batches pass through, and only this rank's are counted)."""

    parts: tuple[list, ...]
    repeats: list[int] | None = None
    own: bool = True


class BaseCutSampler(CutSampler):
    """A Lhotse CutSampler whose subclasses write their batch source only (see the module docstring)."""

    #: The state's kind, what load_state_dict checks first, and the sampler's name in its errors.
    STATE_KIND: ClassVar[str]
    NAME: ClassVar[str]

    def __init__(self, world_size: int | None = None, rank: int | None = None, seed: int = 0) -> None:
        super().__init__(world_size=world_size, rank=rank, seed=seed)
        self._pass: Iterator[Drawn] | None = None  # the running pass (see __iter__)

    # --- what a sampler writes -------------------------------------------------------------------------

    def _start_pass(self) -> Iterator[Drawn]:
        """The batches of the pass that __iter__ starts (or the running one, where a pass goes on)."""
        raise NotImplementedError

    def _refilter(self) -> None:
        """Apply the filter just added (filter) where the source plans; by default nothing."""

    def _source_state(self, consumed: int | None) -> dict:
        """The source's position and what ties it to its examples (state_dict's keys beyond Lhotse's)."""
        raise NotImplementedError

    def _parse_state(self, state: dict):
        """What _restore needs, read off a state of this kind; a missing or bad entry raises KeyError,
        TypeError or ValueError (a damaged state)."""
        raise NotImplementedError

    def _restore(self, parsed) -> None:
        """Continue where the state parsed by _parse_state stopped."""
        raise NotImplementedError

    # --- what the base does ----------------------------------------------------------------------------

    @property
    def yields_all_ranks(self) -> bool:
        """Under Accelerate's shard (adopt_shard): every rank's batches, step-major."""
        return False

    def adopt_shard(self, processes: int, index: int) -> None:
        """Accelerate's shard over this sampler (batching.accelerate_shard.shard_aware): refused unless
        the sampler can yield every rank's batches (PlanCutSampler can)."""
        raise UserError(
            f"accelerator.prepare wrapped a {self.NAME}, which yields only its rank's batches: build the "
            "loader with sampler=... (not cut_batch_loader) and pass rank= and world_size=, or plan a "
            "finite CutSet with PlanCutSampler"
        )

    def filter(self, predicate: Callable) -> BaseCutSampler:
        """Keep only the examples for which predicate(example) is true (Lhotse's filter), from the next
        pass on; call it before iterating."""
        super().filter(predicate)
        self._refilter()
        return self

    def _passing(self, examples) -> np.ndarray:
        """Whether each of `examples` passes the filter (all do without one)."""
        if isinstance(self._filter_fn, _filter_nothing):
            return np.ones(len(examples), bool)
        return np.fromiter(map(self._filter_fn, examples), bool, len(examples))

    def __iter__(self) -> BaseCutSampler:
        """Lhotse's iterator protocol (ZipSampler, RoundRobinSampler and IterableDatasetWrapper call
        next() on the sampler itself): start the pass, then __next__ yields its batches."""
        if not self.yields_all_ranks:
            refuse_unannounced_shard(self)
        refuse_lightning_wrapper(self)
        self._pass = self._start_pass()
        return self

    def __next__(self):
        if self._pass is None:
            iter(self)
        drawn = next(self._pass)
        self.allow_iter_to_reset_state()
        selected = tuple(CutSet.from_cuts(renamed(part, drawn.repeats)) for part in drawn.parts)
        if drawn.own:
            self._log_diagnostics(selected if len(selected) > 1 else selected[0])
        for part in selected:
            attach_dataloading_info(part, rank=self.rank, world_size=self.world_size)
        selected = selected if len(selected) > 1 else selected[0]
        for transform in self._transforms:
            selected = transform(selected)
        return selected

    def __getstate__(self):
        """For DataLoader workers (IterableDatasetWrapper): everything but a running pass."""
        state = dict(self.__dict__, _pass=None)
        if is_dill_enabled():  # as lhotse's Dillable does
            import dill

            return dill.dumps(state)
        return state

    def state_dict(self, consumed: int | None = None) -> dict:
        """Lhotse's CutSampler state, the source's position and the envelope (kind, version).
        `consumed` overrides the count of yielded batches (e.g. the steps trained, with workers)."""
        return super().state_dict() | self._source_state(consumed) | dict(kind=self.STATE_KIND, version=STATE_VERSION)

    def load_state_dict(self, state: dict) -> None:
        """Continue the saved pass where it stopped: a state of another kind or version, or a damaged
        one, is one error; the rest is the source's (_parse_state, _restore)."""
        if not isinstance(state, dict) or state.get("kind") != self.STATE_KIND:
            keys = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise UserError(
                f"this sampler state was not saved by {self.NAME} (it has {keys}): load it into the "
                "sampler that saved it, or start the epoch afresh without it"
            )
        if state.get("version", 1) != STATE_VERSION:
            raise UserError(
                f"this {self.NAME} state has version {state.get('version')!r}, this sampler reads version "
                f"{STATE_VERSION}: load it with the version of batching that saved it, or start afresh"
            )
        try:
            parsed = self._parse_state(copy.deepcopy(state))  # Lhotse's diagnostics empty the dict they load
        except (KeyError, TypeError, ValueError) as err:
            if isinstance(err, UserError):
                raise
            raise UserError(
                f"{self.NAME} state is damaged ({type(err).__name__}: {err}): use another checkpoint, "
                "or start the epoch afresh without it"
            ) from None
        self._restore(parsed)
        self._just_restored_state = True


def renamed(examples: list, repeats: list[int] | None) -> list:
    """The examples, the k-th repeat of one renamed `<id>_dup<k-1>` as Lhotse does (a text example,
    which has no id, is kept as is)."""
    if repeats is None:
        return examples
    return [
        example if k == 0 or not hasattr(example, "with_id") else example.with_id(f"{example.id}_dup{k - 1}")
        for example, k in zip(examples, repeats)
    ]


def occurrences(values: np.ndarray) -> np.ndarray:
    """For each position, how many times its value occurred before it."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if values.size else np.zeros(0, np.int64)
    out = np.empty_like(values)
    out[order] = np.arange(values.size) - np.repeat(starts, np.diff(np.r_[starts, values.size]))
    return out
