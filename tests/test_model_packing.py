"""Tacotron2 on BLoad blocks: an utterance inside a block is computed as if it ran alone (resets,
attention masking, encoder and postnet separation), the loss ignores block padding, and training
with batching=bload runs end to end."""

import dataclasses

import pytest
import torch

from model import Tacotron2, Tacotron2Loss
from model.tacotron2 import GATE_PAD_LOGIT
from tests.kit import (
    N_MELS,
    batch_of,
    double,
    packed_batch,
    sinusoid_mel,
    tiny,
    tiny_config,
    torchrun,
)
from training.rundir import read_metrics

# (row, text length, mel length): rows of several utterances, lengths not multiples of 2
UTTERANCES = [(0, 5, 9), (0, 3, 7), (0, 1, 1), (1, 6, 13), (1, 2, 4), (1, 4, 5), (2, 7, 20)]


def utterances_packed(r, seed=1, extra_frames=3):
    """UTTERANCES laid out back to back in their rows (each starting on a multiple of r), block end padded."""
    return packed_batch(UTTERANCES, r, seed, extra_frames, mel=sinusoid_mel)


def alone(model, ids, spec, r):
    n = spec.shape[-1]
    mel = torch.zeros(1, N_MELS, -(-n // r) * r)
    mel[0, :, :n] = spec
    return model(batch_of(ids[None], torch.tensor([len(ids)]), mel, torch.tensor([n])))


@pytest.mark.parametrize("r", [1, 2])
def test_utterance_in_a_block_equals_the_utterance_alone(r):
    torch.manual_seed(0)
    model = Tacotron2(tiny_config(n_frames_per_step=r, prenet_dropout=0.0)).eval()
    items, batch = utterances_packed(r)
    with torch.no_grad():
        out = model(batch)
        assert out.n_frames_per_step == r
        assert out.mel.shape == batch.mel.shape and out.alignments.shape[1:] == (
            batch.mel.size(2) // r,
            batch.packing.n_text,
        )
        for u, (row, start, ids, spec) in enumerate(items):
            ref = alone(model, ids, spec, r)
            n, steps = spec.shape[-1], -(-spec.shape[-1] // r)
            t0 = int(batch.packing.text_start[u])
            torch.testing.assert_close(out.mel[row, :, start : start + n], ref.mel[0, :, :n], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(
                out.mel_postnet[row, :, start : start + n], ref.mel_postnet[0, :, :n], rtol=1e-5, atol=1e-5
            )
            torch.testing.assert_close(out.gate[row, start : start + n], ref.gate[0, :n], rtol=1e-5, atol=1e-5)
            align = out.alignments[row, start // r : start // r + steps]
            torch.testing.assert_close(align[:, t0 : t0 + len(ids)], ref.alignments[0, :steps], rtol=1e-5, atol=1e-6)
            assert align[:, :t0].abs().sum() == 0 and align[:, t0 + len(ids) :].abs().sum() == 0, (
                "a step attends only to its own utterance's text"
            )
    mask = batch.frame_mask()
    assert (out.mel.transpose(1, 2)[~mask] == 0).all() and (out.gate[~mask] == GATE_PAD_LOGIT).all()


@pytest.mark.parametrize("r", [1, 2])
def test_packed_loss_equals_the_unpacked_loss_and_ignores_block_padding(r):
    from data.collate import TextMelCollate

    torch.manual_seed(0)
    model = Tacotron2(tiny_config(n_frames_per_step=r, prenet_dropout=0.0)).eval()
    criterion = Tacotron2Loss(guided_attention=1.0)
    items, packed = utterances_packed(r)
    plain = TextMelCollate(r)([(ids, spec) for _, _, ids, spec in items])
    with torch.no_grad():
        out = model(packed)
        ref = model(plain)
    got = criterion(out, packed)
    want = criterion(ref, plain)
    for key in ("valid/total", "valid/mel", "valid/mel_postnet", "valid/gate", "guided_attention"):
        assert got.to_dict()[key] == pytest.approx(want.to_dict()[key], rel=1e-5), key
    # Block padding holds no data: whatever the targets say there, the valid loss stays the same ...
    mask = packed.frame_mask()
    noisy = packed.mel.masked_fill(~mask.unsqueeze(1), 7.0)
    again = criterion(out, dataclasses.replace(packed, mel=noisy))
    assert again.valid.total == pytest.approx(float(got.valid.total), rel=1e-6)
    # ... while silence (zeros) inside an utterance is data: the mask, not the values, decides.
    silent = packed.mel.clone()
    silent[0, :, :4] = 0.0
    changed = criterion(out, dataclasses.replace(packed, mel=silent))
    assert changed.valid.mel != pytest.approx(float(got.valid.mel), rel=1e-6)


@pytest.mark.parametrize("fast", [False, True], ids=["plain", "fast"])
def test_packed_gradients_equal_the_unpacked_gradients_in_float64(fast):
    """The packed path's gathers and scatters (fixed-size index grids) pass every gradient back to
    where the unpacked batch has it: the valid loss (with guided attention) of the same utterances
    has the same gradient for every parameter, in eval mode without the prenet's dropout, in float64."""
    from data.collate import TextMelCollate

    criterion = Tacotron2Loss(guided_attention=1.0)
    items, packed = utterances_packed(2)
    plain = TextMelCollate(2)([(ids, spec) for _, _, ids, spec in items])
    grads = []
    for batch in (double(packed), double(plain)):
        torch.manual_seed(0)
        model = Tacotron2(tiny_config(n_frames_per_step=2, fast_decoder=fast, prenet_dropout=0.0)).double().eval()
        criterion(model(batch), batch).loss.backward()
        grads.append({name: p.grad for name, p in model.named_parameters()})
    for name, grad in grads[0].items():
        torch.testing.assert_close(grad, grads[1][name], rtol=1e-9, atol=1e-12, msg=name)
    assert all(g.abs().sum() > 0 for g in grads[0].values())


def test_packed_training_step_has_finite_gradients():
    torch.manual_seed(0)
    model = Tacotron2(tiny_config(n_frames_per_step=2))
    _, batch = utterances_packed(2)
    terms = Tacotron2Loss(guided_attention=2.0)(model(batch), batch)
    terms.loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert model.embedding.weight.grad.abs().sum() > 0


@pytest.mark.slow
def test_training_with_bload_runs_whole_blocks_and_the_losses_fall(tmp_path, demo_corpus):
    """batching=bload end to end (its sampler, PackedView, PackedCollate, the packed model path, the loss):
    every epoch is recorded, each batch runs whole decoder blocks in one step, and training and validation
    losses fall. That training on blocks learns what training on padded batches learns follows from three
    checks, so no learning run of its own repeats test_training_run.test_demo_learns_at_reduced_size (the
    alignment turns diagonal): above, a packed utterance's outputs and loss equal its unpacked ones, and
    in float64 every gradient does; tests/test_batching_bload.py shows the sampler and collate lay each
    utterance's frames, gate and text out where the plan puts them."""
    import train

    assert train.main(["--hparams", tiny(tmp_path, "epochs=3,batching=bload,learning_rate=0.003", demo_corpus)]) == 0
    records = read_metrics(tmp_path / "run")
    assert [r["epoch"] for r in records] == list(range(3))
    for record in records:
        assert 0 <= record["zpr"] < 100 and record["steps"] == record["n_batches"] and record["skipped"] == 0
        assert record["decoder_steps"] % record["n_batches"] == 0  # every batch runs whole blocks
    assert records[-1]["train_loss_valid"] < 0.8 * records[0]["train_loss_valid"]
    assert records[-1]["val_loss_valid"] < records[0]["val_loss_valid"]


@pytest.mark.slow
def test_two_ranks_with_bload_take_equal_steps(tmp_path, demo_corpus):
    result = torchrun(2, tiny(tmp_path, "epochs=2,batching=bload", demo_corpus))
    assert "parameters identical on all 2 ranks" in result.stdout
    for record in read_metrics(tmp_path / "run"):
        steps = record["steps_per_rank"]
        assert steps[0] == steps[1] > 0 and 2 * steps[0] == record["n_batches"]
