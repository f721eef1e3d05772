"""PyTorch batch sampler over the planner: the same plan on every rank, resumable mid-epoch."""
from __future__ import annotations

import numpy as np
from torch.utils.data import Sampler

from .config import BatchingConfig
from .planner import GlobalPlan, as_lengths, plan_digest, plan_global
from .sharding import arrange


class PlanBatchSampler(Sampler[list[int]]):
    """Yields this rank's batches (lists of sample indices) of the current epoch's plan.

    Use as DataLoader(dataset, batch_sampler=PlanBatchSampler(...)) and call set_epoch(e)
    before each epoch. state_dict() records how many batches this rank has consumed; all
    ranks run in lock-step, so that count is the same on every rank.
    """

    def __init__(self, lengths, config: BatchingConfig, rank: int = 0, world_size: int = 1) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must be in [0, world_size={world_size})")
        self.lengths = as_lengths(lengths)
        self.config, self.rank, self.world_size = config, rank, world_size
        self.epoch = 0
        self._history: list[tuple[int, int]] = []  # (world_size, batches consumed per rank) before a resume
        self._consumed = 0
        self._exhausted = False  # a full pass ended: the next one starts the epoch over

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self._history, self._consumed, self._exhausted = epoch, [], 0, False

    def _plan(self) -> GlobalPlan:
        """The epoch's plan; after resumes, the batches not yet consumed re-dealt to this world size."""
        world_sizes = [w for w, _ in self._history] + [self.world_size]
        plan = plan_global(self.lengths, self.config, self.epoch, world_sizes[0])
        for (_, consumed), world_size in zip(self._history, world_sizes[1:]):
            rest = plan.batches()[consumed * plan.world_size:]
            order = np.concatenate(rest or [plan.order[:0]])
            cuts = np.concatenate([[0], np.cumsum([len(b) for b in rest], dtype=np.int64)])
            plan = GlobalPlan(*arrange(order, cuts, self.lengths, world_size, self.config.drop_last, None), world_size)
        return plan

    def _remaining(self) -> list[np.ndarray]:
        """The batches the next iteration yields; after a full pass, a new pass without
        set_epoch replays the whole epoch (as torch's DistributedSampler does)."""
        if self._exhausted:
            return plan_global(self.lengths, self.config, self.epoch, self.world_size).batches(self.rank)
        return self._plan().batches(self.rank)[self._consumed:]

    def __iter__(self):
        batches = self._remaining()
        if self._exhausted:
            self._history, self._consumed, self._exhausted = [], 0, False
        for batch in batches:
            self._consumed += 1
            yield batch.tolist()
        self._exhausted = True

    def __len__(self) -> int:
        """Batches the next iteration yields: the whole epoch, or what is left after a resume."""
        return len(self._remaining())

    def plan_digest(self) -> str:
        """Digest of the current epoch's global plan: equal on all ranks that agree."""
        return plan_digest(self._plan().batches())

    def state_dict(self, consumed: int | None = None) -> dict:
        """Position in the epoch. `consumed` overrides the count of yielded batches, e.g. with
        the trainer's step count when a DataLoader's workers have prefetched ahead."""
        return dict(epoch=self.epoch, consumed=self._consumed if consumed is None else consumed,
                    world_size=self.world_size, history=[list(h) for h in self._history],
                    config=self.config.to_dict())

    def load_state_dict(self, state: dict) -> None:
        """Resume without replaying: with the same world size, skip the consumed batches; with
        another, re-deal only the global batches not yet consumed by any rank (sharding tail
        rules apply to them), so no sample is lost or repeated."""
        saved = BatchingConfig.from_dict(state["config"])
        if saved != self.config:
            changed = [k for k, v in saved.to_dict().items() if getattr(self.config, k) != v]
            raise ValueError(f"checkpoint was planned with other batching settings ({', '.join(changed)}): "
                             f"saved {saved}, now {self.config}")
        self.epoch, self._exhausted = state["epoch"], False
        self._history = [tuple(h) for h in state["history"]]
        if state["world_size"] == self.world_size:
            self._consumed = state["consumed"]
        else:
            self._history.append((state["world_size"], state["consumed"]))
            self._consumed = 0
