"""Graph-ready shape buckets (batching/buckets.py, model/fast_decoder.py, graph_bucket): the
bucketed loop equals the plain reference loop in float64, outputs and every gradient, with dummy
rows, padded steps and padded text in play; every batch of a plan fits its bucket; the hparam is
checked; and on LJSpeech's lengths SSB-DBS-BR needs 11 shapes an epoch for +5 % decoder steps."""
import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from batching import BatchingConfig, plan_global, read_lengths, train_split
from batching.buckets import TEXT_MULTIPLE, Bucket, bucket_of, bucket_table, round_up
from model import Tacotron2
from tests.test_fast_decoder import relative_error
from tests.test_model import make_batch, tiny_config
from training.config import resolve_config
from training.hparams import HParamsError, load_hparams


def float64_pass(cfg, state: dict, inputs, bucket: Bucket | None, seed: int = 7):
    """Train-mode float64 forward (dropout seeded) and the backward of a random projection of
    every output; the outputs and every parameter's gradient."""
    model = Tacotron2(cfg).double().train()
    model.load_state_dict(state)
    text, tl, mel, ml = inputs
    torch.manual_seed(seed)
    out = model(text, tl, mel.double(), ml, bucket=bucket)
    g = torch.Generator().manual_seed(3)
    loss = sum((o * torch.randn(o.shape, generator=g, dtype=torch.float64)).sum() for o in out)
    loss.backward()
    return out, {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize("r", [1, 2])
def test_the_bucketed_loop_equals_the_plain_one_in_float64(r):
    """4 utterances padded to a bucket of 7 rows (3 dummy), 32 frames and 16 symbols."""
    plain = tiny_config(n_frames_per_step=r)
    state = Tacotron2(plain).double().state_dict()
    text, tl, mel, ml, _ = make_batch([4, 7, 2, 5], [9, 13, 6, 10], r)
    bucket = Bucket(batch=7, frames=32, text=16)
    assert bucket.frames > mel.size(2) and bucket.text > text.size(1)  # padded steps and text in play
    want, want_grads = float64_pass(plain, state, (text, tl, mel, ml), None)
    got, got_grads = float64_pass(dataclasses.replace(plain, fast_decoder=True), state, (text, tl, mel, ml), bucket)
    for name, a, b in zip(want._fields, got, want):
        assert a.shape == b.shape and relative_error(a, b) < 1e-12, name
    for name, grad in want_grads.items():
        assert relative_error(got_grads[name], grad) < 1e-12, name


def test_a_bucket_smaller_than_the_batch_or_on_the_plain_decoder_is_refused():
    cfg = tiny_config(n_frames_per_step=2)
    text, tl, mel, ml, _ = make_batch([4, 7], [9, 13], 2)
    with pytest.raises(ValueError, match="needs fast_decoder=true"):
        Tacotron2(cfg)(text, tl, mel, ml, bucket=Bucket(2, 16, 16))
    with pytest.raises(ValueError, match="smaller than the batch"):
        Tacotron2(dataclasses.replace(cfg, fast_decoder=True))(text, tl, mel, ml, bucket=Bucket(1, 16, 16))


LENGTHS = st.lists(st.integers(1, 900), min_size=1, max_size=300)


@settings(max_examples=150, deadline=None)
@given(lengths=LENGTHS, strategy=st.sampled_from(["rand", "sb", "ssb", "bkt", "ats"]), dbs=st.booleans(),
       r=st.sampled_from([1, 2, 3]), k=st.integers(1, 8), epoch=st.integers(0, 3), world_size=st.integers(1, 4))
def test_every_batch_of_a_plan_fits_its_bucket(lengths, strategy, dbs, r, k, epoch, world_size):
    """Rows and frames at least the batch's own, frames on the bucket grid, text on its grid, and
    no more shapes in an epoch than frame buckets."""
    frames = np.array(lengths)
    graph_bucket = r * k
    cfg = BatchingConfig.from_dict({"batching": strategy, "dbs": dbs, "br": True, "batch_size": 4,
                                    "bucket_size": 16, "n_bins": 5, "seed": 0})
    batches = plan_global(frames, cfg, epoch, world_size).batches()
    table = bucket_table(batches, frames, graph_bucket)
    shapes = set()
    for i, batch in enumerate(batches):
        padded = round_up(int(frames[batch].max()), r)  # what the collate pads to
        text = 1 + i % 40
        bucket = bucket_of(table, len(batch), padded, text, graph_bucket)
        assert bucket.batch >= len(batch) and bucket.frames >= padded and bucket.frames % graph_bucket == 0
        assert bucket.frames - padded < graph_bucket and bucket.text >= text and bucket.text % TEXT_MULTIPLE == 0
        shapes.add(bucket[:2])
    assert len(shapes) == len(table)


def test_graph_bucket_hparam_is_checked():
    assert resolve_config(load_hparams("dataset=demo,graph_bucket=64")).train.graph_bucket == 64
    for bad, why in [("dataset=demo,graph_bucket=63", "multiple of n_frames_per_step=2"),
                     ("dataset=demo,graph_bucket=64,fast_decoder=false", "fast_decoder=False"),
                     ("dataset=demo,graph_bucket=64,batching=bload,dbs=false,br=false", "batching=bload")]:
        with pytest.raises(HParamsError, match=why):
            resolve_config(load_hparams(bad))


def test_ljspeech_ssb_dbs_br_needs_eleven_shapes_an_epoch(ljspeech_lengths_tsv):
    """The issue's estimate, on the real lengths of the paper's training split: 11 (rows, frames)
    shapes in every one of the first 20 epochs, about 5 % more decoder steps."""
    frames = read_lengths(ljspeech_lengths_tsv)
    frames = frames[train_split(len(frames))]
    cfg = BatchingConfig.from_dict({"batching": "ssb", "dbs": True, "br": True, "seed": 0})
    steps = own = 0
    for epoch in range(20):
        batches = plan_global(frames, cfg, epoch).batches()
        table = bucket_table(batches, frames, 64)
        buckets = [bucket_of(table, len(b), int(frames[b].max()), 16, 64) for b in batches]
        assert len({bk[:2] for bk in buckets}) == 11
        steps += sum(bk.frames for bk in buckets)
        own += sum(int(frames[b].max()) for b in batches)
    assert 1.03 < steps / own < 1.07


def test_a_bucketed_run_trains_like_a_plain_one(tmp_path):
    """The same tiny run with and without graph_bucket: per-epoch losses agree to float32 rounding."""
    import train
    from tests.test_train import tiny
    from training.rundir import read_metrics

    losses = {}
    for g in (0, 16):
        out = tmp_path / f"g{g}"
        assert train.main(["--hparams", tiny(out, f"epochs=2,validate_every=2,graph_bucket={g}")]) == 0
        losses[g] = [(r["train_loss"], r.get("val_loss")) for r in read_metrics(out / "run")]
    for (a, va), (b, vb) in zip(losses[0], losses[16]):
        assert a == pytest.approx(b, rel=1e-4) and (va is None) == (vb is None)
        assert va is None or va == pytest.approx(vb, rel=1e-4)
