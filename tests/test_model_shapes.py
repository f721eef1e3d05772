"""The decoder loop's padded shapes (model/shapes.py, model/fast_decoder.py, graph_bucket): the
padded loop equals the plain reference loop in float64, outputs and every gradient, with dummy
rows, padded steps and padded text in play; every batch of every epoch fits its shape of the
run-wide table; the hparam is checked; and on LJSpeech's lengths a whole SSB-DBS-BR run needs one
shape per frame bucket for about +5 % decoder steps."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batching import BatchingConfig, plan_global, read_lengths, train_split
from model import Tacotron2
from model.shapes import TEXT_MULTIPLE, LoopShape, ShapeTable, round_up, shape_table, shape_table_of
from tests.kit import float64_pass, make_batch, relative_error, tiny_config
from training.config import resolve_config
from training.hparams import HParamsError, load_hparams


@pytest.mark.parametrize("r", [1, 2])
def test_the_padded_loop_equals_the_plain_one_in_float64(r):
    """4 utterances padded to a shape of 7 rows (3 dummy), 32 frames and 16 symbols."""
    plain = tiny_config(n_frames_per_step=r)
    state = Tacotron2(plain).double().state_dict()
    batch = make_batch([4, 7, 2, 5], [9, 13, 6, 10], r)
    shape = LoopShape(rows=7, frames=32, text=16)
    assert shape.frames > batch.mel.size(2) and shape.text > batch.text.size(1)  # padded steps and text in play
    want, want_grads = float64_pass(plain, state, batch, None)
    got, got_grads = float64_pass(dataclasses.replace(plain, fast_decoder=True), state, batch, shape)
    for name, a, b in zip(want._fields, got, want):
        assert a.shape == b.shape and relative_error(a, b) < 1e-12, name
    for name, grad in want_grads.items():
        assert relative_error(got_grads[name], grad) < 1e-12, name


def test_a_shape_smaller_than_the_batch_or_on_the_plain_decoder_is_refused():
    cfg = tiny_config(n_frames_per_step=2)
    batch = make_batch([4, 7], [9, 13], 2)
    with pytest.raises(ValueError, match="needs fast_decoder=true"):
        Tacotron2(cfg)(batch, shape=LoopShape(2, 16, 16))
    with pytest.raises(ValueError, match="smaller than the batch"):
        Tacotron2(dataclasses.replace(cfg, fast_decoder=True))(batch, shape=LoopShape(1, 16, 16))


LENGTHS = st.lists(st.integers(1, 900), min_size=1, max_size=300)


@settings(max_examples=150, deadline=None)
@given(
    lengths=LENGTHS,
    strategy=st.sampled_from(["rand", "sb", "ssb", "bkt", "ats"]),
    dbs=st.booleans(),
    r=st.sampled_from([1, 2, 3]),
    k=st.integers(1, 8),
    epochs=st.integers(1, 3),
    world_size=st.integers(1, 4),
)
def test_every_batch_of_a_run_fits_a_shape_of_its_table(lengths, strategy, dbs, r, k, epochs, world_size):
    """The table from every epoch's plan: every batch of every epoch maps to one of its shapes
    (rows, frames and text at least the batch's own, frames within one graph_bucket, text on its
    grid), one shape per frame bucket."""
    frames = np.array(lengths)
    text_lengths = (frames * 7) % 53 + 1
    graph_bucket = r * k
    cfg = BatchingConfig.from_dict(
        {"batching": strategy, "dbs": dbs, "br": True, "batch_size": 4, "bucket_size": 16, "n_bins": 5, "seed": 0}
    )
    plans = [plan_global(frames, cfg, epoch, world_size).batches() for epoch in range(epochs)]
    table = shape_table((b for batches in plans for b in batches), frames, text_lengths, graph_bucket)
    assert table == reference_table([b for batches in plans for b in batches], frames, text_lengths, graph_bucket)
    extents = [plan_global(frames, cfg, epoch, world_size).extents(frames) for epoch in range(epochs)]
    assert table == shape_table_of(
        np.concatenate([e[0] for e in extents]),
        np.concatenate([e[1] for e in extents]),
        frames,
        text_lengths,
        graph_bucket,
    )  # training/run.py's way
    captured = set(table.shapes())
    assert len(captured) == len(table.rows)
    for batch in (b for batches in plans for b in batches):
        padded = round_up(int(frames[batch].max()), r)  # what the collate pads to
        text = int(text_lengths[batch].max())
        shape = table.shape_of(len(batch), padded, text)
        assert shape in captured
        assert shape.rows >= len(batch) and shape.frames >= padded and shape.frames % graph_bucket == 0
        assert shape.frames - padded < graph_bucket and shape.text >= text and shape.text % TEXT_MULTIPLE == 0


def reference_table(batches, frames, text_lengths, graph_bucket) -> ShapeTable:
    """The table by a loop over the batches and buckets, as model/shapes.py built it before it was
    vectorised: the plain reference."""
    rows: dict[int, int] = {}
    for batch in batches:
        bucket = round_up(int(frames[batch].max()), graph_bucket)
        rows[bucket] = max(rows.get(bucket, 0), len(batch))
    order = np.argsort(frames, kind="stable")
    longest_text = np.maximum.accumulate(text_lengths[order])
    text = {
        bucket: round_up(
            int(longest_text[int(np.searchsorted(frames[order], bucket, side="right")) - 1]), TEXT_MULTIPLE
        )
        for bucket in rows
    }
    return ShapeTable(graph_bucket, rows, text)


def test_graph_bucket_hparam_is_checked():
    assert resolve_config(load_hparams("dataset=demo,graph_bucket=64")).train.graph_bucket == 64
    for bad, why in [
        ("dataset=demo,graph_bucket=63", "multiple of n_frames_per_step=2"),
        ("dataset=demo,graph_bucket=64,fast_decoder=false", "fast_decoder=False"),
        ("dataset=demo,graph_bucket=64,batching=bload,dbs=false,br=false", "batching=bload"),
    ]:
        with pytest.raises(HParamsError, match=why):
            resolve_config(load_hparams(bad))


def test_a_whole_ljspeech_ssb_dbs_br_run_needs_one_shape_per_frame_bucket(ljspeech_lengths_tsv):
    """On the real lengths of the paper's training split, 40 epochs of SSB-DBS-BR at graph_bucket=64
    run on 11 shapes, one per frame bucket that holds a batch's longest utterance, at about 5 %
    more decoder steps than the batches' own and under 25 % more row-steps (README)."""
    frames = read_lengths(ljspeech_lengths_tsv)
    frames = frames[train_split(len(frames))]
    text_lengths = np.ones_like(frames)  # text does not change the rows or frames
    cfg = BatchingConfig.from_dict({"batching": "ssb", "dbs": True, "br": True, "seed": 0})
    plans = [plan_global(frames, cfg, epoch).batches() for epoch in range(40)]
    table = shape_table((b for batches in plans for b in batches), frames, text_lengths, 64)
    batches = [b for batches in plans for b in batches]
    shapes = [table.shape_of(len(b), int(frames[b].max()), 1) for b in batches]
    assert len(set(shapes)) == len(table.shapes()) == len({s.frames for s in shapes}) == 11
    own = sum(int(frames[b].max()) for b in batches)
    assert 1.03 < sum(s.frames for s in shapes) / own < 1.07
    row_steps = sum(s.rows * s.frames for s in shapes) / sum(len(b) * int(frames[b].max()) for b in batches)
    print(f"decoder steps x{sum(s.frames for s in shapes) / own:.4f}, row-steps x{row_steps:.4f}")
    assert row_steps < 1.25
