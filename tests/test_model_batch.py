"""model/batch.py, the seam between the data and the model: a new batch field (a speaker id) is added
by the collate and read by the model and the loss, and nothing else changes: the project's own
DataLoader path, device copy and training step carry it through untouched."""

import dataclasses

import pytest
import torch
from torch.utils.data import DataLoader

from data.collate import TextMelCollate
from model import Batch, Tacotron2, Tacotron2Loss, Tacotron2Output
from tests.kit import N_MELS, N_SYMBOLS, tiny_config
from training.loop import device_batches
from training.step import StepParts, train_step

N_SPEAKERS = 3


@dataclasses.dataclass(frozen=True)
class SpeakerBatch(Batch):
    speaker: torch.Tensor | None = None  # long [N]


class SpeakerCollate(TextMelCollate):
    """(text ids, mel, speaker id) items: the padding collate's batch, plus the speakers."""

    def __call__(self, items) -> SpeakerBatch:
        batch = super().__call__([(text, mel) for text, mel, _ in items])
        return SpeakerBatch(**vars(batch), speaker=torch.tensor([speaker for *_, speaker in items]))


class SpeakerTacotron2(Tacotron2):
    """Scales each utterance's mel channels by a learnt per-speaker gain (zeros stay zeros)."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.speaker_gain = torch.nn.Embedding(N_SPEAKERS, cfg.n_mel_channels)
        torch.nn.init.zeros_(self.speaker_gain.weight)

    def forward(self, batch: SpeakerBatch, shape=None) -> Tacotron2Output:
        out = super().forward(batch, shape)
        gain = 1.0 + self.speaker_gain(batch.speaker).unsqueeze(2)  # [N, n_mels, 1]
        return out._replace(mel=out.mel * gain, mel_postnet=out.mel_postnet * gain)


class SpeakerLoss(Tacotron2Loss):
    """The loss, weighted by the batch's speakers."""

    weights = torch.tensor([1.0, 0.5, 2.0])

    def __call__(self, out: Tacotron2Output, batch: SpeakerBatch):
        terms = super().__call__(out, batch)
        return dataclasses.replace(terms, loss=terms.loss * self.weights[batch.speaker].mean())


def items(seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randint(1, N_SYMBOLS, (n,), generator=g), torch.randn(N_MELS, m, generator=g), speaker)
        for n, m, speaker in ((4, 9, 0), (6, 12, 2), (3, 5, 0))
    ]


def test_a_speaker_field_touches_the_collate_the_model_and_the_loss_only():
    torch.manual_seed(0)
    model = SpeakerTacotron2(tiny_config(n_frames_per_step=2))
    parts = StepParts(
        model=model,
        core=model,
        optimizer=torch.optim.Adam(model.parameters(), lr=1e-3, fused=True),
        criterion=SpeakerLoss(),
        scaler=torch.amp.GradScaler("cuda", enabled=False),
        amp_dtype=None,
        grad_clip=1.0,
    )
    loader = DataLoader([items()], batch_size=None, collate_fn=SpeakerCollate(n_frames_per_step=2))
    (batch,) = device_batches(loader, torch.device("cpu"))
    assert isinstance(batch, SpeakerBatch) and batch.speaker.tolist() == [0, 2, 0]

    torch.manual_seed(1)  # the same dropout masks for both passes
    with torch.no_grad():
        plain = Tacotron2Loss()(model(batch), batch)
    torch.manual_seed(1)
    result = train_step(parts, batch)
    weight = float(SpeakerLoss.weights[[0, 2, 0]].mean())
    assert float(result.terms.loss.detach()) == pytest.approx(float(plain.loss) * weight, rel=1e-6)
    grad = model.speaker_gain.weight.grad
    assert grad[0].abs().sum() > 0 and grad[2].abs().sum() > 0 and (grad[1] == 0).all(), (
        "only the batch's speakers' gains learn"
    )
