import dataclasses

import pytest
import torch

from data.collate import TextMelCollate
from model import Batch
from tests.kit import packed_batch


def pairs():
    return [(torch.tensor([3, 4]), torch.full((80, 5), 2.0)), (torch.tensor([5, 6, 7, 8]), torch.full((80, 3), -1.0))]


def test_shapes_padding_and_order_are_kept():
    batch = TextMelCollate()(pairs())
    assert batch.text.tolist() == [[3, 4, 0, 0], [5, 6, 7, 8]]
    assert batch.text_lengths.tolist() == [2, 4] and batch.mel_lengths.tolist() == [5, 3]
    assert batch.mel.shape == (2, 80, 5) and batch.mel.dtype == torch.float32
    assert (batch.mel[0] == 2.0).all() and (batch.mel[1, :, :3] == -1.0).all() and (batch.mel[1, :, 3:] == 0).all()
    assert batch.gate.tolist() == [[0, 0, 0, 0, 1], [0, 0, 1, 1, 1]]
    assert batch.text.dtype == batch.text_lengths.dtype == batch.mel_lengths.dtype == torch.long


def test_frames_per_step_rounds_up_and_gate_covers_padding():
    batch = TextMelCollate(n_frames_per_step=4)(pairs())
    assert batch.mel.shape == (2, 80, 8)
    assert batch.gate.tolist() == [[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1, 1, 1]]
    assert batch.mel_lengths.tolist() == [5, 3]


@dataclasses.dataclass(frozen=True)
class SpeakerBatch(Batch):
    speaker: torch.Tensor | None = None


def test_to_device_moves_every_tensor_but_the_host_fields_and_keeps_the_class():
    batch = TextMelCollate()(pairs())
    moved = SpeakerBatch(**vars(batch), speaker=torch.tensor([0, 1])).to("meta")
    assert isinstance(moved, SpeakerBatch) and moved.frames == batch.frames == 8
    assert {
        t.device.type for t in (moved.text, moved.text_lengths, moved.mel, moved.gate, moved.mel_lengths, moved.speaker)
    } == {"meta"}
    assert moved.text_lengths_host is batch.text_lengths_host and moved.packing is None
    packed = packed_batch([(0, 2, 3), (0, 1, 2), (1, 3, 4)], 1, seed=0, extra_frames=0)[1].to("meta")
    assert packed.packing.row.device.type == "meta" and packed.text_lengths_host.device.type == "cpu"


def test_bad_step_is_rejected():
    with pytest.raises(ValueError):
        TextMelCollate(0)
