"""BLoad block packing: the planner (batching/bload.py), its sampler (batching/sampler.py) and collate
(data/collate.py, data/dataset.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batching import BatchingConfig, plan_digest, plan_global
from batching.bload import BlockPlan, block_stats, pack_blocks, slot_lengths
from tests.kit import AWKWARD

torch = pytest.importorskip("torch")
from batching.sampler import BlockBatchSampler  # noqa: E402
from data.collate import PackedCollate  # noqa: E402
from data.dataset import PackedView  # noqa: E402

LENGTHS = np.random.default_rng(5).integers(20, 800, 403)


def check_blocks(plan: BlockPlan, lengths: np.ndarray, r: int) -> None:
    """No block over block_length, utterances on multiples of r, in order and not overlapping."""
    slots = slot_lengths(lengths, r)
    for k in range(plan.n_blocks):
        ids = plan.order[plan.blocks[k] : plan.blocks[k + 1]]
        starts = plan.starts[plan.blocks[k] : plan.blocks[k + 1]]
        assert ids.size >= 1
        assert starts[0] == 0 and (starts % r == 0).all()
        assert (np.diff(starts) == slots[ids][:-1]).all()  # packed back to back, slot after slot
        assert starts[-1] + slots[ids[-1]] <= plan.block_length


@pytest.mark.parametrize("r", [1, 2, 3])
@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_every_utterance_once_blocks_fit_and_ranks_get_equal_batches(r, world_size):
    config = BatchingConfig("bload", batch_size=8, n_frames_per_step=r, seed=3)
    plan = plan_global(LENGTHS, config, 1, world_size)
    assert plan.block_length == slot_lengths(LENGTHS, r).max() and plan.block_length % r == 0
    check_blocks(plan, LENGTHS, r)
    per_rank = [plan.batches(rank) for rank in range(world_size)]
    assert len({len(b) for b in per_rank}) == 1, "every rank runs the same number of batches"
    counts = np.bincount(np.concatenate([b for rank in per_rank for b in rank]), minlength=LENGTHS.size)
    assert (counts == 1).all(), "every utterance exactly once per epoch"
    rows = plan.n_rows()
    assert rows.max() <= config.batch_size and rows.max() - rows.min() <= 1
    assert len(rows) == world_size * -(-plan.n_blocks // (config.batch_size * world_size))
    # each batch's rows are whole blocks: its row ids run 0 .. n_rows - 1
    for batch_rows, n in zip(plan.rows(), rows[plan.seq]):
        assert batch_rows[0] == 0 and batch_rows[-1] == n - 1 and (np.diff(batch_rows) >= 0).all()


@settings(max_examples=150, deadline=None)
@given(
    lengths=AWKWARD,
    world_size=st.integers(1, 8),
    epoch=st.integers(0, 3),
    r=st.integers(1, 3),
    batch_size=st.integers(1, 12),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_plan_invariants_on_awkward_lengths(lengths, world_size, epoch, r, batch_size, drop_last, seed):
    lengths = np.array(lengths)
    config = BatchingConfig("bload", batch_size=batch_size, n_frames_per_step=r, drop_last=drop_last, seed=seed)
    plan = plan_global(lengths, config, epoch, world_size)
    check_blocks(plan, lengths, r)
    assert len({len(plan.batches(rank)) for rank in range(world_size)}) == 1
    assert (plan.n_rows() <= batch_size).all() and (plan.n_rows() >= 1).all()
    counts = np.bincount(plan.order, minlength=lengths.size)
    if drop_last:
        assert counts.max(initial=0) <= 1
    elif counts.max() > 1:  # documented: fewer utterances than batches, blocks of one repeat
        assert (plan.n_rows() == 1).all() and (np.diff(plan.blocks) == 1).all()
        assert lengths.size < len(plan.n_rows()) and counts.min() >= 1
    else:
        assert (counts == 1).all()
    assert plan_digest(plan.batches()) == plan_digest(plan_global(lengths, config, epoch, world_size).batches())


def test_tiny_corpora_and_drop_last():
    # fewer blocks than ranks: blocks repeat, one per batch, so no rank is left without a batch
    plan = plan_global(np.array([30, 10]), BatchingConfig("bload"), 0, world_size=3)
    assert [len(plan.batches(r)) for r in range(3)] == [1, 1, 1]
    assert sorted(np.concatenate(plan.batches()).tolist()) in ([0, 0, 1], [0, 1, 1])
    # fewer blocks than batches: the fullest blocks are split, nothing is repeated
    plan = plan_global(np.array([10, 10, 10]), BatchingConfig("bload", block_length=30), 0, world_size=2)
    assert plan.n_blocks == 2 and sorted(plan.order.tolist()) == [0, 1, 2]
    check_blocks(plan, np.array([10, 10, 10]), 1)
    # drop_last: full batches of batch_size blocks only, nothing twice
    config = BatchingConfig("bload", batch_size=4, drop_last=True)
    plan = plan_global(LENGTHS, config, 0, world_size=3)
    assert (plan.n_rows() == 4).all() and len(plan.n_rows()) % 3 == 0
    assert np.bincount(plan.order).max() == 1


def test_deterministic_per_seed_and_epoch():
    config = BatchingConfig("bload", seed=11)
    digest = lambda p: plan_digest(p.batches() + [p.starts, p.blocks])  # noqa: E731
    assert digest(plan_global(LENGTHS, config, 2)) == digest(plan_global(LENGTHS, config, 2))
    assert len({digest(plan_global(LENGTHS, config, e)) for e in range(3)}) == 3
    other = BatchingConfig("bload", seed=12)
    assert digest(plan_global(LENGTHS, other, 2)) != digest(plan_global(LENGTHS, config, 2))


def test_draw_is_uniform_over_samples_not_over_lengths():
    """BLoad's code picks a random distinct length, then a sample of it. Here: 50 samples share
    length 5 and 50 have 50 distinct lengths. The first pick of a block is one of the 5s half the
    time (uniform over samples), not 1 time in 51 (uniform over lengths)."""
    slots = np.array([5] * 50 + list(range(6, 56)))
    runs = 3000
    firsts = [pack_blocks(slots, 100, np.random.default_rng(seed))[0][0] for seed in range(runs)]
    share = np.mean(slots[firsts] == 5)
    assert abs(share - 0.5) < 0.05
    # A restricted draw (only some samples fit): after a 35 in a 40-frame block, 5 frames are left,
    # which ten samples of 5 and one of 2 fit; the 2 must come 1 time in 11, not 1 in 2.
    slots = np.array([35] + [5] * 10 + [2])
    seconds = []
    for seed in range(12000):
        order, blocks, _ = pack_blocks(slots, 40, np.random.default_rng(seed))
        if order[0] == 0:
            seconds.append(order[1])
    share_two = np.mean(slots[seconds] == 2)
    assert len(seconds) > 700 and abs(share_two - 1 / 11) < 0.05


def test_block_length_checks_and_stats():
    with pytest.raises(ValueError, match="not a multiple of n_frames_per_step=2"):
        plan_global(LENGTHS, BatchingConfig("bload", block_length=901, n_frames_per_step=2))
    with pytest.raises(ValueError, match="over block_length=500"):
        plan_global(LENGTHS, BatchingConfig("bload", block_length=500))
    with pytest.raises(ValueError, match="block_length=900 applies only to batching=bload"):
        BatchingConfig("ssb", block_length=900)
    assert BatchingConfig("bload", dbs=True).dbs is False  # hparams.yaml's dbs=true does not apply
    lengths = np.array([3, 5, 4, 7])
    config = BatchingConfig("bload", block_length=8, n_frames_per_step=2, batch_size=2)
    plan = plan_global(lengths, config)
    check_blocks(plan, lengths, 2)
    stats = block_stats(lengths, plan, 2)
    real, rows = lengths.sum(), plan.n_blocks
    assert stats["zpr"] == pytest.approx(100 * (1 - real / (rows * 8)))
    assert stats["rounding_frames"] == 3 and stats["padded_frames"] == rows * 8
    assert stats["decoder_steps"] == stats["n_batches"] * 4


def test_longer_blocks_pad_less():
    zpr = [
        block_stats(LENGTHS, plan_global(LENGTHS, BatchingConfig("bload", block_length=t)))["zpr"]
        for t in (800, 1600, 3200)
    ]
    assert zpr[0] > zpr[1] > zpr[2]


def test_cli_stats_reports_bload(capsys):
    import tempfile
    from pathlib import Path

    from batching.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lengths.tsv"
        path.write_text("id\tframes\n" + "".join(f"u{i}\t{n}\n" for i, n in enumerate(LENGTHS)))
        # the library's defaults: one frame a decoder step, so the block is the longest utterance exactly
        assert (
            main(["stats", "--lengths", str(path), "--hparams", "batching=bload", "--json", "--defaults", "none"]) == 0
        )
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["n_samples"] == LENGTHS.size and out["block_length"] == LENGTHS.max()
    for key in ("zpr", "n_batches", "decoder_steps", "pair_repeat", "pair_repeat_chance"):
        assert key in out
    assert out["pair_repeat"] < 5 * out["pair_repeat_chance"]


# ------------------------------------------------------------------ torch side


def dataset(lengths, n_mels=3):
    """(text, mel) pairs whose mel values encode (index, frame), and text length index % 5 + 1."""
    return [
        (torch.arange(1, i % 5 + 2), torch.full((n_mels, int(n)), float(i)) + torch.arange(int(n)) / 1000)
        for i, n in enumerate(lengths)
    ]


@pytest.mark.parametrize("r", [1, 2])
def test_sampler_and_collate_lay_out_the_plan(r):
    lengths = np.random.default_rng(0).integers(3, 40, 57)
    config = BatchingConfig("bload", batch_size=3, n_frames_per_step=r, seed=1)
    sampler = BlockBatchSampler(lengths, config)
    sampler.set_epoch(0)
    collate = PackedCollate(r, sampler.block_length)
    loader = torch.utils.data.DataLoader(PackedView(dataset(lengths)), batch_sampler=sampler, collate_fn=collate)
    seen = []
    for batch in loader:
        p = batch.packing
        assert batch.mel.shape[2] == sampler.block_length and (p.start % r == 0).all()
        mask = batch.frame_mask()
        assert int(mask.sum()) == int(batch.mel_lengths.sum())
        for u in range(len(p.row)):
            row, start, n = int(p.row[u]), int(p.start[u]), int(batch.mel_lengths[u])
            index = int(batch.mel[row, 0, start])  # the dataset wrote its index into the values
            seen.append(index)
            assert n == lengths[index] and mask[row, start : start + n].all()
            assert torch.equal(batch.gate[row, start : start + n], (torch.arange(n) == n - 1).float()), (
                "gate target: 1 at each utterance's last frame only"
            )
            ids = batch.text[u, : batch.text_lengths[u]]
            assert ids.tolist() == list(range(1, index % 5 + 2))
        assert (batch.gate[~mask] == 1).all() and (batch.mel[:, :, ~mask.any(0)] == 0).all()
    assert sorted(seen) == list(range(lengths.size))


def test_collate_rejects_a_bad_layout():
    collate = PackedCollate(2, 10)
    with pytest.raises(ValueError, match="does not fit"):
        collate([(0, 1, torch.arange(1, 3), torch.zeros(3, 4))])  # start not a multiple of r
    with pytest.raises(ValueError, match="does not fit"):
        collate([(0, 0, torch.arange(1, 3), torch.zeros(3, 5)), (0, 4, torch.arange(1, 3), torch.zeros(3, 2))])


@pytest.mark.parametrize("old,new", [(1, 1), (2, 3), (4, 1)])
def test_sampler_resumes_on_any_world_size_without_loss_or_repeat(old, new):
    config = BatchingConfig("bload", batch_size=2, seed=4)
    before = [BlockBatchSampler(LENGTHS, config, rank, old) for rank in range(old)]
    for s in before:
        s.set_epoch(1)
    steps = len(before[0]) // 3
    consumed = []
    for s in before:
        it = iter(s)
        consumed += [next(it) for _ in range(steps)]
    state = before[0].state_dict()
    after = [BlockBatchSampler(LENGTHS, config, rank, new) for rank in range(new)]
    for s in after:
        s.load_state_dict(state)
    assert len({s.plan_digest() for s in after}) == 1 and len({len(s) for s in after}) == 1
    rest = [batch for s in after for batch in s]
    indices = [t[2] for batch in consumed + rest for t in batch]
    assert sorted(indices) == list(range(LENGTHS.size))
