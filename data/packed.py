"""BLoad blocks through torch: the batch sampler, a dataset view and the collate.

The planner (batching/bload.py) decides which utterances share a block and where each starts.
BlockBatchSampler yields, per batch, one (row, start, index) triple per utterance; DataLoader
hands each triple to PackedView, which returns (row, start, text ids, mel); PackedCollate lays
them out as a PackedBatch:

* mel [R, n_mels, T] and gate [R, T]: R blocks (rows) of T = block_length frames, utterance u at
  frames start .. start + len - 1 of its row; zeros elsewhere, which the model and the loss never
  take for data: padding is known from the table (Packing.frame_mask), not from the values;
* gate: 1.0 at each utterance's last frame, 0.0 at its other frames, 1.0 at padding (the model
  writes a "stop" logit there, so padding adds ~0 even to the `padded` loss);
* text [N, T_text], text_lengths [N], mel_lengths [N]: the utterances as an ordinary padded batch
  (the encoder runs on it, so its convolutions and BiLSTM never see a neighbour);
* packing: the table (row, start, text_start, n_text), rows in order, utterances in start order.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from batching.bload import BlockPlan, block_length_of, deal_blocks
from batching.config import BatchingConfig
from batching.planner import plan_digest, plan_global
from batching.sampler import PlanBatchSampler
from model.packing import Packing


class PackedBatch(NamedTuple):
    text: torch.Tensor  # long [N, T_text_max], zero-padded, one row per utterance
    text_lengths: torch.Tensor  # long [N]
    mel: torch.Tensor  # float [R, n_mels, T]: R blocks
    gate: torch.Tensor  # float [R, T]: 1.0 at each utterance's last frame and at padding
    mel_lengths: torch.Tensor  # long [N]: real frames of each utterance
    packing: Packing  # where each utterance sits

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "PackedBatch":
        return PackedBatch(*(t.to(device, non_blocking=non_blocking) for t in self))

    def frame_mask(self) -> torch.Tensor:
        """bool [R, T]: True at real frames."""
        return self.packing.frame_mask(self.mel_lengths, self.mel.size(0), self.mel.size(2))


class PackedView(Dataset):
    """dataset[(row, start, index)] -> (row, start, text ids, mel) of a TextMelDataset-like dataset."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key):
        row, start, index = (int(k) for k in key)
        text, mel = self.dataset[index]
        return row, start, text, mel


class PackedCollate:
    """(row, start, text, mel) items -> PackedBatch of blocks of block_length frames (module doc)."""

    def __init__(self, n_frames_per_step: int, block_length: int):
        if n_frames_per_step < 1 or block_length < 1 or block_length % n_frames_per_step:
            raise ValueError(f"block_length={block_length} must be a positive multiple of "
                             f"n_frames_per_step={n_frames_per_step}")
        self.r, self.block_length = n_frames_per_step, block_length

    def __call__(self, items: Sequence[tuple[int, int, torch.Tensor, torch.Tensor]]) -> PackedBatch:
        items = sorted(items, key=lambda item: (item[0], item[1]))
        rows = items[-1][0] + 1
        r, frames = self.r, self.block_length
        text_lengths = torch.tensor([len(text) for _, _, text, _ in items], dtype=torch.long)
        mel_lengths = torch.tensor([mel.shape[-1] for _, _, _, mel in items], dtype=torch.long)
        text = torch.zeros(len(items), int(text_lengths.max()), dtype=torch.long)
        mel = torch.zeros(rows, items[0][3].shape[0], frames, dtype=torch.float32)
        gate = torch.ones(rows, frames, dtype=torch.float32)
        row_of, start_of, text_start = [], [], []
        end = {}  # row -> first free frame; text used so far
        used = [0] * rows
        for i, (row, start, ids, spec) in enumerate(items):
            length = spec.shape[-1]
            if start % r or start < end.get(row, 0) or start + length > frames:
                raise ValueError(f"utterance at row {row} frame {start} ({length} frames) does not fit the "
                                 f"block layout (block_length={frames}, n_frames_per_step={r})")
            end[row] = start + -(-length // r) * r
            text[i, : len(ids)] = ids
            mel[row, :, start:start + length] = spec
            gate[row, start:start + length - 1] = 0.0
            row_of.append(row)
            start_of.append(start)
            text_start.append(used[row])
            used[row] += len(ids)
        if len(end) != rows:
            raise ValueError(f"rows {sorted(set(range(rows)) - set(end))} of the batch hold no utterance")
        packing = Packing(torch.tensor(row_of), torch.tensor(start_of), torch.tensor(text_start), max(used))
        return PackedBatch(text, text_lengths, mel, gate, mel_lengths, packing)


class BlockBatchSampler(PlanBatchSampler):
    """PlanBatchSampler for batching=bload: yields [row, start, index] triples per batch.

    Same epoch/resume contract as PlanBatchSampler: the plan of (seed, epoch) on every rank,
    state_dict() / load_state_dict() to continue mid-epoch, also on another world size (the
    blocks not yet run are re-dealt, whole, to the new ranks: nothing lost or repeated).
    """

    def __init__(self, lengths, config: BatchingConfig, rank: int = 0, world_size: int = 1) -> None:
        if config.batching != "bload":
            raise ValueError(f"BlockBatchSampler needs batching=bload, got {config.batching!r}")
        super().__init__(lengths, config, rank, world_size)
        self.block_length = block_length_of(self.lengths, config)

    def _plan(self) -> BlockPlan:
        world_sizes = [w for w, _ in self._history] + [self.world_size]
        plan = plan_global(self.lengths, self.config, self.epoch, world_sizes[0])
        for (_, consumed), world_size in zip(self._history, world_sizes[1:]):
            order, blocks, starts = plan.remaining_blocks(consumed)
            plan = deal_blocks(order, blocks, starts, plan.block_length, self.config.batch_size, world_size,
                               self.config.drop_last, None)
        return plan

    def _remaining(self) -> list[np.ndarray]:
        if self._exhausted:
            return _triples(plan_global(self.lengths, self.config, self.epoch, self.world_size), self.rank)
        return _triples(self._plan(), self.rank)[self._consumed:]

    def plan_digest(self) -> str:
        """Digest of the global plan's utterances, rows and start frames."""
        return plan_digest([t.ravel() for t in _triples(self._plan(), None)])


def _triples(plan: BlockPlan, rank: int | None) -> list[np.ndarray]:
    """[n, 3] int64 arrays (row, start, index) per batch of `rank` (None: all, step-major)."""
    return [np.stack([rows, starts, batch], 1)
            for rows, starts, batch in zip(plan.rows(rank), plan.batch_starts(rank), plan.batches(rank))]
