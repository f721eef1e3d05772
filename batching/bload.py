"""BLoad block packing (Iftekhar, Ruschel et al., seed 002): blocks of T_max frames built from
randomly drawn utterances that fit, padded only at the end, with a table of where each starts.

The paper's algorithm (its Fig. 7): while samples remain, open a block of T_max frames; while
the space left is at least the shortest remaining sample, draw a remaining sample that fits,
append it and record where it starts; pad the rest of the block. Two things its code gets
wrong are fixed here:

* the draw: the published code picks a random *distinct length* (a key of its length -> ids
  dictionary) and then a sample of that length, so a sample of a rare length is drawn far
  more often than one of a common length. Here every remaining sample that fits is equally
  likely (a Fenwick tree over the samples sorted by length: O(log N) per draw, compiled).
* the padding: the paper pads with zeros (or repeats the last frame), which a model cannot
  tell from silence. Here the plan says exactly which frames are real (`starts` + lengths);
  the recipe turns that into a frame mask (data/collate.py) and the loss ignores the rest.

Reduction factor: with n_frames_per_step r > 1 a decoder step emits r frames, so every
utterance occupies ceil(len / r) * r frames (its "slot") and starts on a multiple of r; the
frames after its end inside the slot are padding too. block_length (None: the longest slot)
must be a multiple of r.

Batches and ranks: a batch is up to batch_size blocks (rows). The blocks are shuffled and dealt
into n_batches = world_size * ceil(n_blocks / (batch_size * world_size)) batches whose row counts
differ by at most one (largest first), so every rank runs the same number of batches and, since
every block has the same length, no rank waits on another (BLoad's point). With drop_last, the
blocks that do not fill world_size * batch_size rows are dropped instead (their utterances are
not trained that epoch). Fewer blocks than batches (e.g. fewer blocks than ranks): the blocks with
the most utterances are split in two (more padding, nothing repeated); only when every block
holds a single utterance are blocks repeated, cyclically, one per batch.

The plan is a GlobalPlan (order, cuts, seq, world_size): batch b holds the utterances
order[cuts[b]:cuts[b + 1]], so resume, plan digests and pair-repeat randomness work as for
every other strategy; BlockPlan adds the block boundaries and each utterance's start frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from .budget import over_limit
from .config import BatchingConfig
from .errors import UserError
from .grouping import ceil_div
from .plan import GlobalPlan, plan_digest
from .sharding import halve_largest


@dataclass(frozen=True)
class BlockPlan(GlobalPlan):
    """A GlobalPlan whose batches are made of blocks.

    order: utterances block by block; blocks: block k is order[blocks[k]:blocks[k + 1]] (every
    batch boundary in `cuts` is also a block boundary); starts[i]: the first frame of order[i]
    inside its block (a multiple of n_frames_per_step); block_length: frames per block.
    """

    blocks: np.ndarray
    starts: np.ndarray
    block_length: int

    @property
    def n_blocks(self) -> int:
        return self.blocks.size - 1

    def rows(self, rank: int | None = None) -> list[np.ndarray]:
        """For each batch of batches(rank), the row (block within the batch) of each utterance."""
        seq = self.seq if rank is None else self.seq[rank :: self.world_size]
        block_of = np.repeat(np.arange(self.n_blocks), np.diff(self.blocks))
        first = np.searchsorted(self.blocks, self.cuts)
        return [block_of[self.cuts[b] : self.cuts[b + 1]] - first[b] for b in seq.tolist()]

    def batch_starts(self, rank: int | None = None) -> list[np.ndarray]:
        """For each batch of batches(rank), each utterance's first frame in its block."""
        seq = self.seq if rank is None else self.seq[rank :: self.world_size]
        return [self.starts[self.cuts[b] : self.cuts[b + 1]] for b in seq.tolist()]

    def n_rows(self) -> np.ndarray:
        """Rows (blocks) of every batch, in batch-id order."""
        return np.diff(np.searchsorted(self.blocks, self.cuts))

    def triples(self, rank: int | None = None) -> list[np.ndarray]:
        """For each batch of batches(rank), an [n, 3] int64 array of (row, start frame, sample)."""
        return [
            np.stack([rows, starts, batch], 1)
            for rows, starts, batch in zip(self.rows(rank), self.batch_starts(rank), self.batches(rank))
        ]

    def redeal(self, consumed_steps: int, world_size: int, lengths: np.ndarray, config: BatchingConfig) -> BlockPlan:
        """The blocks of the steps not yet run, whole and in run order, dealt to `world_size` ranks."""
        seq = self.seq[consumed_steps * self.world_size :]
        first = np.searchsorted(self.blocks, self.cuts)
        block_ids = np.concatenate([np.arange(first[b], first[b + 1]) for b in seq.tolist()] or [np.zeros(0, np.int64)])
        order, blocks, starts = _take_blocks(self.order, self.blocks, self.starts, block_ids)
        return deal_blocks(
            order, blocks, starts, self.block_length, config.batch_size, world_size, config.drop_last, None
        )

    def stats(self, lengths: np.ndarray, n_frames_per_step: int = 1) -> dict:
        """block_stats: padding over whole blocks; no straggler, since every block has one length."""
        return block_stats(lengths, self, n_frames_per_step) | {"skipped": 0}

    def digest(self) -> str:
        """A SHA-256 of the plan's utterances, rows and start frames."""
        return plan_digest([t.ravel() for t in self.triples()])


def slot_lengths(lengths: np.ndarray, n_frames_per_step: int) -> np.ndarray:
    """Frames an utterance occupies in a block: its length rounded up to a multiple of r."""
    r = n_frames_per_step
    return ceil_div(lengths, r) * r


def block_length_of(lengths: np.ndarray, config: BatchingConfig) -> int:
    """config.block_length, or the longest slot; checked against r and the longest utterance."""
    r = config.n_frames_per_step
    longest = int(slot_lengths(lengths, r).max(initial=r))
    if config.block_length is None:
        return longest
    if config.block_length % r:
        raise UserError(f"block_length={config.block_length} is not a multiple of n_frames_per_step={r}")
    if longest > config.block_length:
        too_long = np.flatnonzero(slot_lengths(lengths, r) > config.block_length)
        i = int(too_long[0])
        raise over_limit(
            i,
            lengths[i],
            f"block_length={config.block_length} once rounded up to a multiple of {r}",
            "raise block_length or leave it unset (the longest utterance)",
            too_long.size,
        )
    return config.block_length


def pack_blocks(
    slots: np.ndarray, block_length: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BLoad's block construction with a uniform draw over the samples that fit.

    slots: frames each sample occupies. Returns (order, blocks, starts): block k holds samples
    order[blocks[k]:blocks[k + 1]] in the order drawn, sample order[i] starting at frame starts[i].
    """
    n = slots.size
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64)
    by_length = np.argsort(slots, kind="stable")
    draws = rng.random(n)
    picks, ends = _pack(np.ascontiguousarray(slots[by_length], dtype=np.int64), draws, np.int64(block_length))
    order = by_length[picks]
    blocks = np.concatenate([[0], ends]).astype(np.int64)
    within = np.cumsum(slots[order]) - slots[order]  # starts if everything were one block
    starts = within - np.repeat(within[blocks[:-1]], np.diff(blocks))
    return order, blocks, starts


@numba.njit(cache=True, nogil=True)
def _pack(sorted_slots, draws, block_length):  # pragma: no cover - compiled
    """Positions (into sorted_slots) in draw order, and the end of every block in that sequence.

    A Fenwick tree counts the samples still unplaced; the ones that fit in `room` frames are the
    unplaced among the first searchsorted(sorted_slots, room, 'right') positions, and the draw
    picks the k-th of them, k uniform: every fitting sample is equally likely.
    """
    n = sorted_slots.size
    tree = np.zeros(n + 1, np.int64)
    for i in range(1, n + 1):
        tree[i] += 1
        j = i + (i & -i)
        if j <= n:
            tree[j] += tree[i]
    top = 1
    while top * 2 <= n:
        top *= 2
    picks = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    d = 0
    n_blocks = 0
    while d < n:
        room = block_length
        while d < n:
            k = np.searchsorted(sorted_slots, room, side="right")
            count = 0
            i = k
            while i > 0:
                count += tree[i]
                i -= i & -i
            if count == 0:
                break
            target = min(int(draws[d] * count), count - 1) + 1  # 1-based rank among the fitting
            pos = 0
            step = top
            while step > 0:  # Fenwick descent: the smallest position whose prefix count reaches target
                nxt = pos + step
                if nxt <= n and tree[nxt] < target:
                    pos = nxt
                    target -= tree[nxt]
                step //= 2
            i = pos + 1
            while i <= n:
                tree[i] -= 1
                i += i & -i
            picks[d] = pos
            d += 1
            room -= sorted_slots[pos]
        ends[n_blocks] = d
        n_blocks += 1
    return picks, ends[:n_blocks]


def deal_blocks(
    order: np.ndarray,
    blocks: np.ndarray,
    starts: np.ndarray,
    block_length: int,
    batch_size: int,
    world_size: int,
    drop_last: bool,
    rng: np.random.Generator | None,
) -> BlockPlan:
    """Blocks -> batches of at most batch_size rows, a multiple of world_size of them (module doc).

    rng shuffles the blocks first (None keeps their order, as when re-dealing after a resume).
    """
    n_blocks = blocks.size - 1
    block_ids = rng.permutation(n_blocks) if rng is not None else np.arange(n_blocks)
    per_step = batch_size * world_size
    if drop_last:
        n_batches = world_size * (n_blocks // per_step)
        block_ids = block_ids[: n_batches * batch_size]
    else:
        n_batches = world_size * ceil_div(n_blocks, per_step)
    order, blocks, starts = _take_blocks(order, blocks, starts, block_ids)
    if blocks.size - 1 < n_batches:  # every batch needs a block: split the fullest, repeat only singletons
        order, blocks, starts = _split_blocks(order, blocks, starts, n_batches - (blocks.size - 1))
        if blocks.size - 1 < n_batches:
            order, blocks, starts = _take_blocks(
                order, blocks, starts, np.resize(np.arange(blocks.size - 1), n_batches)
            )
    n_final = blocks.size - 1
    rows = np.full(n_batches, n_final // max(n_batches, 1), np.int64)
    rows[: n_final - rows.sum()] += 1  # row counts differ by at most one, largest first
    cuts = blocks[np.concatenate([[0], np.cumsum(rows)])]
    return BlockPlan(
        order,
        cuts.astype(np.int64),
        np.arange(n_batches, dtype=np.int64),
        world_size,
        blocks,
        starts,
        int(block_length),
    )


def _split_blocks(
    order: np.ndarray, blocks: np.ndarray, starts: np.ndarray, need: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Up to `need` more blocks by halving the blocks with the most utterances (starts re-based)."""
    blocks, _ = halve_largest(blocks, need)
    starts = starts - np.repeat(starts[blocks[:-1]], np.diff(blocks))
    return order, blocks, starts


def _take_blocks(
    order: np.ndarray, blocks: np.ndarray, starts: np.ndarray, block_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The given blocks, in the given order, as (order, blocks, starts)."""
    sizes = np.diff(blocks)[block_ids]
    new_blocks = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    positions = np.repeat(blocks[:-1][block_ids] - new_blocks[:-1], sizes) + np.arange(new_blocks[-1])
    return order[positions], new_blocks, starts[positions]


def plan_bload(lengths: np.ndarray, config: BatchingConfig, epoch: int = 0, world_size: int = 1) -> BlockPlan:
    """The epoch's blocks and batches for all ranks, from a generator seeded with (seed, epoch)."""
    block_length = block_length_of(lengths, config)
    rng = np.random.default_rng([config.seed, epoch])
    order, blocks, starts = pack_blocks(slot_lengths(lengths, config.n_frames_per_step), block_length, rng)
    return deal_blocks(order, blocks, starts, block_length, config.batch_size, world_size, config.drop_last, rng)


def block_stats(lengths: np.ndarray, plan: BlockPlan, n_frames_per_step: int = 1) -> dict:
    """Padding and cost of a block plan (all ranks), in the terms of metrics.batch_stats.

    zpr: padded share of all block frames, 1 - real / (rows * block_length), in percent (the
    gaps that round utterances up to multiples of r count as padding); abl: block frames per
    utterance; decoder_steps: the epoch's decoder steps, n_batches * block_length / r (every
    batch runs the decoder over whole blocks); rounding_frames / end_frames: the padding that
    rounds utterances to multiples of r, and the padding at block ends.
    """
    real = int(lengths[plan.order].sum())
    slots = int(slot_lengths(lengths[plan.order], n_frames_per_step).sum())
    rows = plan.n_rows()
    n_batches = int(rows.size)
    padded = int(rows.sum()) * plan.block_length
    return dict(
        n_batches=n_batches,
        n_samples=int(plan.order.size),
        n_blocks=int(rows.sum()),
        block_length=plan.block_length,
        zpr=float(100 * (1 - real / padded)) if padded else 0.0,
        abl=float(padded / plan.order.size) if plan.order.size else 0.0,
        capacity_max=int(rows.max(initial=0)) * plan.block_length,
        padded_frames=padded,
        real_frames=real,
        rounding_frames=slots - real,
        end_frames=padded - slots,
        decoder_steps=n_batches * (plan.block_length // n_frames_per_step),
    )
