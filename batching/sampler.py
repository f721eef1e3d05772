"""PyTorch batch samplers over the planner: the same plan on every rank, resumable mid-epoch.

PlanBatchSampler serves every strategy; BlockBatchSampler (strategies whose plan is a block plan,
e.g. BLoad) only overrides the `_items` hook. The plan type does the rest: GlobalPlan.redeal /
BlockPlan.redeal re-deal an epoch's unrun batches after a resume on another world size, and
plan.digest() is what the ranks compare. Each epoch is planned once (twice after a resume on
another world size).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from torch.utils.data import Sampler

from .accelerate_shard import refuse_unannounced_shard
from .analysis import resolve_width
from .config import BatchingConfig
from .errors import UserError
from .lightning_guard import refuse_lightning_wrapper
from .plan import GlobalPlan, as_lengths
from .planner import plan_global


class PlanBatchSampler(Sampler[list]):
    """Yields this rank's batches (lists of sample indices) of the current epoch's plan.

    Use as DataLoader(dataset, batch_sampler=PlanBatchSampler(...)) and call set_epoch(e)
    before each epoch. state_dict() records how many batches this rank has consumed; all
    ranks run in lock-step, so that count is the same on every rank. len() is the epoch's
    batch count on this rank, also after a resume (Lightning's and torchdata's reading).

    Hook for subclasses: `_items(plan, rank)`, what each batch of a plan yields (None: all
    ranks, step-major, as the digest needs).
    """

    def __init__(self, lengths, config: BatchingConfig, rank: int = 0, world_size: int = 1) -> None:
        """
        :param lengths: each sample's length (frames, tokens: the unit of config's capacity); no default.
        :param config: the BatchingConfig planning the epochs; a calibration target is resolved here, once.
        :param rank: this rank, in [0, world_size); default 0.
        :param world_size: the number of ranks sharing each epoch's plan; default 1.
        """
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must be in [0, world_size={world_size})")
        self.lengths = as_lengths(lengths)
        config, self.calibration = resolve_width(self.lengths, config)  # a target_zpr / _pair_repeat: lrf set once
        self.config, self.rank, self.world_size = config, rank, world_size
        self.epoch = 0
        self._history: list[tuple[int, int]] = []  # (world_size, batches consumed per rank) before a resume
        self._consumed = 0
        self._exhausted = False  # a full pass ended: the next one starts the epoch over
        self._restored = False  # a state was just loaded: set_epoch of its epoch keeps it (Lhotse's rule)
        self._all_ranks = False  # under Accelerate's BatchSamplerShard: yield every rank's batches (see adopt_shard)
        self._cache: dict[tuple, GlobalPlan] = {}

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` afresh; right after load_state_dict of a state saved in `epoch`, keep that
        state instead, so a loop that restores and then calls set_epoch at the top of the epoch
        (icefall's, Lhotse's, this recipe's) continues where it stopped rather than replaying it.
        The state is kept until the next iteration starts or another epoch is set."""
        if self._restored and epoch == self.epoch:
            return
        self.epoch = epoch
        self.restart_epoch()

    def restart_epoch(self) -> None:
        """Run the current epoch from its first batch, discarding a restored position."""
        self._restored, self._history, self._consumed, self._exhausted = False, [], 0, False

    @property
    def plan(self) -> GlobalPlan:
        """The epoch's plan on this world size, as planned from (seed, epoch): its stats are the
        epoch's (the batches a resume re-deals are the same samples, cut again)."""
        return self._planned(self.epoch, ())

    def _current(self) -> GlobalPlan:
        """The plan this rank runs: after resumes, the batches not yet run re-dealt to this world size."""
        return self._planned(self.epoch, tuple(self._history))

    def _planned(self, epoch: int, history: tuple) -> GlobalPlan:
        key = (epoch, history)
        if key not in self._cache:
            self._cache = {k: v for k, v in self._cache.items() if k[0] == epoch}  # keep only this epoch's
            if not history:
                self._cache[key] = plan_global(self.lengths, self.config, epoch, self.world_size)
            else:
                world_sizes = [w for w, _ in history] + [self.world_size]
                plan = plan_global(self.lengths, self.config, epoch, world_sizes[0])
                for (_, consumed), world_size in zip(history, world_sizes[1:]):
                    plan = plan.redeal(consumed, world_size, self.lengths, self.config)
                self._cache[key] = plan
        return self._cache[key]

    def _items(self, plan: GlobalPlan, rank: int | None) -> list[np.ndarray]:
        """What each batch of `plan` yields for `rank`: the sample indices."""
        return plan.batches(rank)

    def _view(self) -> tuple[int | None, int]:
        """(the rank whose batches are yielded, None for every rank's; batches a step)."""
        return (None, self.world_size) if self._all_ranks else (self.rank, 1)

    def remaining_batches(self) -> list[np.ndarray]:
        """The batches the next iteration yields; after a full pass, a new pass without
        set_epoch replays the whole epoch (as torch's DistributedSampler does). Under Accelerate's
        shard, every rank's batches step-major, so that the shard's pick is this rank's."""
        rank, per_step = self._view()
        if self._exhausted:
            return self._items(self.plan, rank)
        return self._items(self._current(), rank)[self._consumed * per_step :]

    def __iter__(self):
        if not self._all_ranks:
            refuse_unannounced_shard(self)
        refuse_lightning_wrapper(self)
        return self._iterate()

    def _iterate(self):
        batches = self.remaining_batches()
        self._restored = False
        if self._exhausted:
            self._history, self._consumed, self._exhausted = [], 0, False
        per_step = self.world_size if self._all_ranks else 1
        for i, batch in enumerate(batches, 1):
            self._consumed += i % per_step == 0
            yield batch.tolist()
        self._exhausted = True

    def __len__(self) -> int:
        """This rank's batches in the epoch, those run before a resume included (the same on every
        rank): the epoch's length, as torchdata's samplers report it and as Lightning reads
        len(loader), counting the steps it restored from a checkpoint against it. An iteration
        after a resume yields the rest (remaining_batches)."""
        if self._exhausted:
            return len(self.remaining_batches())
        rank, per_step = self._view()
        run_before = sum(consumed for _, consumed in self._history)  # steps on the earlier world sizes
        return len(self._items(self._current(), rank)) + run_before * per_step

    @property
    def exhausted(self) -> bool:
        """A full pass has ended (the next iteration replays the epoch unless set_epoch moves on)."""
        return self._exhausted

    @property
    def yields_all_ranks(self) -> bool:
        """Under Accelerate's shard (adopt_shard): every rank's batches, step-major."""
        return self._all_ranks

    @property
    def sampler(self) -> PlanBatchSampler:
        """Itself: Accelerate's prepared loader passes set_epoch(e) on to its batch sampler's
        `batch_sampler.sampler`, so this is how loader.set_epoch reaches the plan."""
        return self

    def adopt_shard(self, processes: int, index: int) -> None:
        """Run under Accelerate's BatchSamplerShard (accelerator.prepare(loader), announced by
        batching.accelerate_shard.shard_aware) of `processes` processes, this being process `index`:
        yield every rank's batches, step-major, so that the shard's every processes-th batch is exactly
        this rank's (equal steps, nothing dropped or repeated). Built as this process's rank (or as
        rank 0 of 1, Accelerate's way, before any state was loaded), it takes the shard's world;
        anything else is refused."""
        if (self.world_size, self.rank) == (processes, index):
            self._all_ranks = True
            return
        if (self.world_size, self.rank) != (1, 0) or self._history or self._consumed:
            raise UserError(
                f"accelerator.prepare wrapped this sampler (rank {self.rank} of {self.world_size}) for "
                f"process {index} of {processes}: build it with rank=accelerator.process_index, "
                "world_size=accelerator.num_processes"
            )
        self.rank, self.world_size, self._all_ranks, self._cache = index, processes, True, {}

    def plan_digest(self) -> str:
        """Digest of the current epoch's global plan: equal on all ranks that agree."""
        return self._current().digest()

    def state_dict(self, consumed: int | None = None) -> dict:
        """Position in the epoch. `consumed` overrides the count of yielded batches, e.g. with
        the trainer's step count when a DataLoader's workers have prefetched ahead."""
        return dict(
            epoch=self.epoch,
            consumed=self._consumed if consumed is None else consumed,
            world_size=self.world_size,
            history=[list(h) for h in self._history],
            config=self.config.to_dict(),
        )

    def load_state_dict(self, state: dict) -> None:
        """Resume without replaying: with the same world size, skip the consumed batches; with
        another, re-deal only the global batches not yet consumed by any rank (sharding tail
        rules apply to them), so no sample is lost or repeated. A set_epoch of the saved epoch
        that follows keeps this state (see set_epoch)."""
        saved = BatchingConfig.from_dict(state["config"])
        if self.calibration is not None and saved == dataclasses.replace(self.config, lrf=saved.lrf):
            self.config, self._cache = saved, {}  # the checkpoint's calibrated width: the resume plans as the run did
        if saved != self.config:
            changed = [k for k, v in saved.to_dict().items() if getattr(self.config, k) != v]
            raise UserError(
                f"checkpoint was planned with other batching settings ({', '.join(changed)}): "
                f"saved {saved}, now {self.config}"
            )
        self.epoch, self._exhausted = state["epoch"], False
        self._history = [tuple(h) for h in state["history"]]
        if state["world_size"] == self.world_size:
            self._consumed = state["consumed"]
        else:
            self._history.append((state["world_size"], state["consumed"]))
            self._consumed = 0
        self._restored = True


class BlockBatchSampler(PlanBatchSampler):
    """PlanBatchSampler for block plans (e.g. BLoad's): yields [row, start, index] triples per batch.

    Same epoch/resume contract: the plan of (seed, epoch) on every rank, state_dict() /
    load_state_dict() to continue mid-epoch, also on another world size (the blocks not yet
    run are re-dealt, whole, to the new ranks: nothing lost or repeated).
    """

    def __init__(self, lengths, config: BatchingConfig, rank: int = 0, world_size: int = 1) -> None:
        if not config.plans_blocks:
            raise ValueError(
                f"BlockBatchSampler needs a strategy whose plan is a block plan (e.g. batching=bload), "
                f"got {config.batching!r}"
            )
        super().__init__(lengths, config, rank, world_size)
        self.block_length = self.plan.block_length  # a block plan's blocks have one length in every epoch

    def _items(self, plan, rank: int | None) -> list[np.ndarray]:
        return plan.triples(rank)


def make_batch_sampler(lengths, config: BatchingConfig, rank: int = 0, world_size: int = 1) -> PlanBatchSampler:
    """The sampler a strategy needs: BlockBatchSampler for block plans, else PlanBatchSampler."""
    kind = BlockBatchSampler if config.plans_blocks else PlanBatchSampler
    return kind(lengths, config, rank, world_size)
