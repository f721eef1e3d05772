"""Tacotron2Loss: both normalisations by hand, their (in)dependence on padding, the selector."""

import dataclasses
import math

import pytest
import torch

from model import LossTerms, Tacotron2Loss, Tacotron2Output
from model.tacotron2 import GATE_PAD_LOGIT
from tests.kit import batch_of


def hand_example():
    """One utterance of 2 symbols, 2 mel channels, 2 real frames + 1 padded (outputs masked as the
    model does): the output and its batch."""
    target = torch.tensor([[[1.0, 2.0, 0.0], [3.0, 4.0, 0.0]]])
    mel = torch.tensor([[[0.0, 2.0, 0.0], [3.0, 2.0, 0.0]]])  # squared errors 1 and 4
    gate = torch.tensor([[0.0, 0.0, GATE_PAD_LOGIT]])  # BCE ln 2 at each real frame, 0 at the pad
    gate_target = torch.tensor([[0.0, 1.0, 1.0]])
    out = Tacotron2Output(mel, target.clone(), gate, torch.zeros(1, 3, 2))
    return out, batch_of(torch.ones(1, 2, dtype=torch.long), torch.tensor([2]), target, torch.tensor([2]), gate_target)


def test_hand_checked_values():
    terms = Tacotron2Loss(loss_norm="valid")(*hand_example())
    ln2 = math.log(2.0)
    expected = {
        "valid/mel": 5 / 4,
        "valid/mel_postnet": 0.0,
        "valid/gate": ln2,
        "valid/total": 5 / 4 + ln2,
        "padded/mel": 5 / 6,
        "padded/mel_postnet": 0.0,
        "padded/gate": 2 * ln2 / 3,
        "padded/total": 5 / 6 + 2 * ln2 / 3,
        "guided_attention": 0.0,
    }
    got = terms.to_dict()
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-6), key


def test_gate_pos_weight_weighs_the_stop_frames_as_bce_pos_weight_does():
    """The stop-frame weight equals BCE's pos_weight (float64, logits of both signs, padding too)."""
    g = torch.Generator().manual_seed(0)
    out, batch = hand_example()
    batch = dataclasses.replace(batch, mel=batch.mel.double(), gate=batch.gate.double())
    out = out._replace(
        gate=torch.randn(1, 3, generator=g, dtype=torch.float64) * 3,
        mel=out.mel.double(),
        mel_postnet=out.mel_postnet.double(),
    )
    terms = Tacotron2Loss(loss_norm="padded", gate_pos_weight=8.0)(out, batch)
    reference = torch.nn.functional.binary_cross_entropy_with_logits(
        out.gate, batch.gate, pos_weight=torch.tensor(8.0, dtype=torch.float64)
    )
    assert terms.padded.gate.item() == pytest.approx(reference.item(), rel=1e-12)


@pytest.mark.parametrize("norm", ["valid", "padded"])
def test_loss_norm_selects_the_backpropagated_total(norm):
    out, batch = hand_example()
    mel = out.mel.clone().requires_grad_()
    terms = Tacotron2Loss(loss_norm=norm)(out._replace(mel=mel), batch)
    assert isinstance(terms, LossTerms)
    assert terms.loss.item() == pytest.approx(getattr(terms, norm).total.item())
    terms.loss.backward()
    assert mel.grad is not None
    assert not terms.valid.total.requires_grad and not terms.padded.mel.requires_grad


def append_padding(out: Tacotron2Output, batch, frames: int):
    pad = lambda x, value=0.0: torch.nn.functional.pad(x, (0, frames), value=value)  # noqa: E731
    return (
        out._replace(mel=pad(out.mel), mel_postnet=pad(out.mel_postnet), gate=pad(out.gate, GATE_PAD_LOGIT)),
        dataclasses.replace(batch, mel=pad(batch.mel), gate=pad(batch.gate, 1.0)),
    )


def test_valid_ignores_extra_padding_padded_shrinks():
    out, batch = hand_example()
    criterion = Tacotron2Loss()
    before = criterion(out, batch).to_dict()
    after = criterion(*append_padding(out, batch, 9)).to_dict()
    for part in ("total", "mel", "gate"):
        assert after[f"valid/{part}"] == pytest.approx(before[f"valid/{part}"], abs=1e-6)
    # 3 frames -> 12 frames: every padded mean is a quarter of what it was.
    assert after["padded/total"] == pytest.approx(before["padded/total"] / 4, abs=1e-6)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="loss_norm='mean'.*valid, padded"):
        Tacotron2Loss(loss_norm="mean")
    out, batch = hand_example()
    with pytest.raises(ValueError, match="do not match"):
        Tacotron2Loss()(out, dataclasses.replace(batch, mel=batch.mel[:, :, :2]))


def test_guided_attention_penalises_off_diagonal_attention_only():
    from model.loss import guided_attention_penalty

    steps, symbols = 20, 10
    diagonal = torch.zeros(1, steps, symbols)
    diagonal[0, torch.arange(steps), torch.arange(steps) * symbols // steps] = 1.0
    uniform = torch.full((1, steps, symbols), 1.0 / symbols)
    stuck = torch.zeros(1, steps, symbols)
    stuck[0, :, 0] = 1.0
    lengths = (torch.tensor([symbols]), torch.tensor([steps]))
    pen = {
        name: float(guided_attention_penalty(a, *lengths, 0.2))
        for name, a in [("diagonal", diagonal), ("uniform", uniform), ("stuck", stuck)]
    }
    assert pen["diagonal"] < 0.05 < pen["uniform"] < pen["stuck"] < 1.0
    # padding beyond either length does not count, whatever it holds
    padded = torch.nn.functional.pad(diagonal, (0, 3, 0, 5), value=1.0)
    assert float(guided_attention_penalty(padded, *lengths, 0.2)) == pytest.approx(pen["diagonal"])


def test_guided_attention_adds_to_the_selected_loss_only_when_on():
    out, batch = hand_example()
    out = out._replace(alignments=torch.full((1, 3, 2), 0.5))  # off the diagonal: a penalty above 0
    off = Tacotron2Loss()(out, batch)
    on = Tacotron2Loss(guided_attention=2.0)(out, batch)
    assert float(off.guided_attention) == 0.0 < float(on.guided_attention)
    assert float(on.loss) == pytest.approx(float(off.loss) + 2.0 * float(on.guided_attention))
    assert float(on.valid.total) == pytest.approx(float(off.valid.total))  # the logged totals stay comparable


def test_the_loss_takes_the_decoder_steps_from_the_output():
    """r is the model's: the loss reads it off the output (T frames in T / r steps), so the guide
    of an output of 4 frames in 2 steps is the guide of 2 decoder steps (r = 2)."""
    from model.loss import guided_attention_penalty

    alignments = torch.tensor([[[0.9, 0.1], [0.2, 0.8]]])
    pad = torch.zeros(1, 2, 1)
    out = Tacotron2Output(pad.expand(1, 2, 4), pad.expand(1, 2, 4), torch.zeros(1, 4), alignments)
    batch = batch_of(torch.ones(1, 2, dtype=torch.long), torch.tensor([2]), torch.zeros(1, 2, 4), torch.tensor([3]))
    assert out.n_frames_per_step == 2
    terms = Tacotron2Loss(guided_attention=1.0)(out, batch)
    want = guided_attention_penalty(alignments, torch.tensor([2]), torch.tensor([2]), 0.2)
    assert float(terms.guided_attention) == pytest.approx(float(want)) and float(want) > 0
