"""Tacotron2 model: shapes, masking, padding invariance, gradients, overfitting, inference stop."""

import warnings

import pytest
import torch

from model import Tacotron2, Tacotron2Loss, Tacotron2Output
from model.tacotron2 import GATE_PAD_LOGIT
from tests.kit import N_MELS, N_SYMBOLS, batch_of, make_batch, tiny_model


def real_parts(out: Tacotron2Output, i: int, mel_len: int, text_len: int, r: int):
    steps = -(-mel_len // r)
    return (
        out.mel[i, :, :mel_len],
        out.mel_postnet[i, :, :mel_len],
        out.gate[i, :mel_len],
        out.alignments[i, :steps, :text_len],
    )


@pytest.mark.parametrize("r", [1, 2, 3])
def test_forward_shapes_and_masking_unsorted(r):
    text_lengths, mel_lengths = [4, 7, 2], [5, 9, 7]
    model = tiny_model(n_frames_per_step=r)
    batch = make_batch(text_lengths, mel_lengths, r)
    out = model(batch)
    b, t, t_text = 3, batch.mel.size(2), batch.text.size(1)
    assert out.mel.shape == out.mel_postnet.shape == (b, N_MELS, t)
    assert out.gate.shape == (b, t)
    assert out.alignments.shape == (b, t // r, t_text)
    assert out.n_frames_per_step == r
    for i, (lt, lm) in enumerate(zip(text_lengths, mel_lengths)):
        assert torch.all(out.mel[i, :, lm:] == 0) and torch.all(out.mel_postnet[i, :, lm:] == 0)
        assert torch.all(out.gate[i, lm:] == GATE_PAD_LOGIT)
        steps = -(-lm // r)
        # Real decoder steps attend only to real symbols, with weights summing to one.
        assert torch.allclose(out.alignments[i, :steps].sum(1), torch.ones(steps), atol=1e-5)
        assert torch.all(out.alignments[i, :, lt:] == 0)
        assert torch.all(out.alignments[i, steps:] == 0)


@pytest.mark.parametrize("r", [1, 2])
def test_real_outputs_ignore_padding_content_amount_and_batchmates(r):
    """What padding holds, how much there is, and who shares the batch, change no real output."""
    text_lengths, mel_lengths = [3, 6, 5], [4, 8, 6]
    model = tiny_model(n_frames_per_step=r, prenet_dropout=0.0).eval()
    batch = make_batch(text_lengths, mel_lengths, r)
    text, tl, mel, ml = batch.text, batch.text_lengths, batch.mel, batch.mel_lengths
    with torch.no_grad():
        base = model(batch)
        noisy_text, noisy_mel = text.clone(), mel.clone()
        noisy_text[text == 0] = 5
        noisy_mel[mel == 0] = 3.0
        noisy = model(batch_of(noisy_text, tl, noisy_mel, ml))
        wider = model(batch_of(torch.nn.functional.pad(text, (0, 4)), tl, torch.nn.functional.pad(mel, (0, 2 * r)), ml))
        alone = model(batch_of(text[:1, :3], tl[:1], mel[:1, :, :4], ml[:1]))
    for i, (lt, lm) in enumerate(zip(text_lengths, mel_lengths)):
        for other in (noisy, wider):
            for x, y in zip(real_parts(base, i, lm, lt, r), real_parts(other, i, lm, lt, r)):
                torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-5)
    for x, y in zip(real_parts(base, 0, 4, 3, r), real_parts(alone, 0, 4, 3, r)):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-5)


def test_valid_loss_of_the_model_ignores_extra_padding_padded_loss_shrinks():
    model = tiny_model(n_frames_per_step=2, prenet_dropout=0.0).eval()
    batch = make_batch([3, 6], [5, 8], r=2)
    pad = torch.nn.functional.pad
    wide = batch_of(
        pad(batch.text, (0, 3)),
        batch.text_lengths,
        pad(batch.mel, (0, 8)),
        batch.mel_lengths,
        pad(batch.gate, (0, 8), value=1.0),
    )
    criterion = Tacotron2Loss()
    with torch.no_grad():
        base = criterion(model(batch), batch).to_dict()
        more = criterion(model(wide), wide).to_dict()
    assert more["valid/total"] == pytest.approx(base["valid/total"], rel=1e-5)
    assert more["padded/total"] < 0.7 * base["padded/total"]


def test_folded_location_features_equal_conv_then_dense():
    attention = tiny_model().decoder.attention
    torch.manual_seed(1)
    weights_cat, query = torch.rand(3, 2, 9), torch.randn(3, 16)
    memory = torch.randn(3, 9, 8)
    processed = attention.memory_layer(memory)
    location = attention.location_dense(attention.location_conv(weights_cat).transpose(1, 2))
    expected = torch.softmax(
        attention.v(torch.tanh(attention.query_layer(query).unsqueeze(1) + location + processed)).squeeze(2), 1
    )
    _, weights = attention(query, memory, processed, weights_cat, attention.location_matrix(), torch.zeros(3, 9))
    torch.testing.assert_close(weights, expected)


def test_mel_frames_must_be_a_multiple_of_r():
    model = tiny_model(n_frames_per_step=2)
    with pytest.raises(ValueError, match="n_frames_per_step=2"):
        model(make_batch([3], [5], r=1))


def test_gradients_reach_every_parameter():
    model = tiny_model(n_frames_per_step=2).train()
    batch = make_batch([4, 6], [7, 5], r=2)
    Tacotron2Loss()(model(batch), batch).loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, f"no gradient reaches {name}"


NO_DROPOUT = dict(
    encoder_dropout=0.0, prenet_dropout=0.0, p_attention_dropout=0.0, p_decoder_dropout=0.0, postnet_dropout=0.0
)


@pytest.mark.parametrize("r", [1, 2])
def test_tiny_model_overfits_one_batch(r):
    """Capacity and wiring: without dropout (whose noise dominates at these widths) it memorises."""
    model = tiny_model(n_frames_per_step=r, **NO_DROPOUT).train()
    batch = make_batch([5, 7, 4], [10, 12, 8], r)
    criterion = Tacotron2Loss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        opt.zero_grad()
        terms = criterion(model(batch), batch)
        terms.loss.backward()
        opt.step()
        losses.append(terms.loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


def _force_gate_bias(model: Tacotron2, value: float) -> None:
    with torch.no_grad():
        model.decoder.gate_layer.weight.zero_()
        model.decoder.gate_layer.bias.fill_(value)


@pytest.mark.parametrize("r", [1, 3])
def test_inference_stops_on_the_gate(r):
    model = tiny_model(n_frames_per_step=r).eval()
    _force_gate_bias(model, 10.0)  # every frame says stop: the first frame ends the utterance
    text = torch.randint(1, N_SYMBOLS, (1, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mel, gate, alignments = model.inference(text)
    assert mel.shape == (1, N_MELS, 1) and gate.shape == (1, 1)
    assert alignments.shape == (1, 1, 5)


@pytest.mark.parametrize("r", [1, 2])
def test_inference_warns_at_max_decoder_steps(r):
    model = tiny_model(n_frames_per_step=r, max_decoder_steps=6).eval()
    _force_gate_bias(model, -10.0)  # never stops
    with pytest.warns(RuntimeWarning, match="max_decoder_steps=6"):
        mel, gate, alignments = model.inference(torch.randint(1, N_SYMBOLS, (1, 4)))
    assert mel.shape == (1, N_MELS, 6 * r) and gate.shape == (1, 6 * r)
    assert alignments.shape == (1, 6, 4)


def test_padded_batch_inference_matches_single_items():
    model = tiny_model(n_frames_per_step=2, prenet_dropout=0.0, max_decoder_steps=4).eval()
    _force_gate_bias(model, -10.0)
    padded = make_batch([3, 5], [1, 1])
    text, tl = padded.text, padded.text_lengths
    with pytest.warns(RuntimeWarning):
        batch = model.inference(text, tl)
        singles = [model.inference(text[i : i + 1, :n]) for i, n in enumerate([3, 5])]
    for i, single in enumerate(singles):
        torch.testing.assert_close(batch.mel_postnet[i], single.mel_postnet[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(batch.alignments[i, :, : tl[i]], single.alignments[0], atol=1e-5, rtol=1e-5)


def test_masked_batchnorm_ignores_padding_in_training():
    """Training statistics (and so outputs and running averages) do not depend on padding."""
    from model.layers import MaskedBatchNorm1d

    torch.manual_seed(0)
    x = torch.randn(2, 3, 5)
    valid = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.float32).unsqueeze(1)
    padded_x = torch.cat([x, torch.randn(2, 3, 4) * 100], dim=2)  # junk padding on both rows
    padded_valid = torch.nn.functional.pad(valid, (0, 4))
    a, b = MaskedBatchNorm1d(3), MaskedBatchNorm1d(3)
    out_a, out_b = a(x, valid), b(padded_x, padded_valid)
    real = valid.bool().expand_as(x)
    assert torch.allclose(out_a[real], out_b[:, :, :5][real], atol=1e-5)
    assert torch.allclose(a.running_mean, b.running_mean) and torch.allclose(a.running_var, b.running_var)
    reference = torch.cat([x[0], x[1, :, :3]], dim=1)  # the 8 real positions per channel
    assert torch.allclose(a.running_mean, 0.1 * reference.mean(1), atol=1e-6)
    assert torch.allclose(a.running_var, 0.9 + 0.1 * reference.var(1, unbiased=True), atol=1e-6)


def test_training_step_runs_under_bf16_autocast():
    """amp=bf16: BatchNorm statistics stay fp32 while activations are bf16 (checked on the CPU)."""
    from model.layers import MaskedBatchNorm1d

    norm = MaskedBatchNorm1d(4)
    x = torch.randn(2, 4, 6)
    valid = torch.ones(2, 1, 6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = norm(torch.nn.functional.conv1d(x, torch.randn(4, 4, 1)), valid)
    assert out.dtype == torch.bfloat16 and norm.running_mean.dtype == torch.float32
    assert torch.isfinite(norm.running_var).all()
