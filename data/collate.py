"""Collates: a list of dataset items -> one Batch (model/batch.py, the model's input), in the sampler's order.

TextMelCollate pads (text ids, mel) pairs. The order is kept on purpose: the batch planner
decides what goes together and in what order, and a model that needs sorted lengths (packed
RNNs) sorts for itself.

PackedCollate lays BLoad blocks out (items from PackedView, data/dataset.py): a Batch of

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

from collections.abc import Sequence

import torch

from model.batch import Batch
from model.packing import Packing
from model.shapes import round_up


class TextMelCollate:
    """Zero-pad texts and mels; T_max is rounded up to a multiple of n_frames_per_step."""

    def __init__(self, n_frames_per_step: int = 1):
        if n_frames_per_step < 1:
            raise ValueError(f"n_frames_per_step must be >= 1, got {n_frames_per_step}")
        self.n_frames_per_step = n_frames_per_step

    def __call__(self, pairs: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> Batch:
        texts, mels = zip(*pairs)
        text_lengths = torch.tensor([len(t) for t in texts], dtype=torch.long)
        mel_lengths = torch.tensor([m.shape[-1] for m in mels], dtype=torch.long)
        step = self.n_frames_per_step
        t_max = round_up(int(mel_lengths.max()), step)

        text = torch.zeros(len(texts), int(text_lengths.max()), dtype=torch.long)
        mel = torch.zeros(len(mels), mels[0].shape[0], t_max, dtype=torch.float32)
        gate = torch.zeros(len(mels), t_max, dtype=torch.float32)
        for i, (ids, spec) in enumerate(pairs):
            text[i, : len(ids)] = ids
            mel[i, :, : spec.shape[-1]] = spec
            gate[i, spec.shape[-1] - 1 :] = 1.0
        return Batch(
            text=text,
            text_lengths=text_lengths,
            mel=mel,
            gate=gate,
            mel_lengths=mel_lengths,
            text_lengths_host=text_lengths,
            frames=sum(m.shape[-1] for m in mels),
        )


class PackedCollate:
    """(row, start, text, mel) items -> a Batch of blocks of block_length frames (module doc)."""

    def __init__(self, n_frames_per_step: int, block_length: int):
        if n_frames_per_step < 1 or block_length < 1 or block_length % n_frames_per_step:
            raise ValueError(
                f"block_length={block_length} must be a positive multiple of n_frames_per_step={n_frames_per_step}"
            )
        self.r, self.block_length = n_frames_per_step, block_length

    def __call__(self, items: Sequence[tuple[int, int, torch.Tensor, torch.Tensor]]) -> Batch:
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
                raise ValueError(
                    f"utterance at row {row} frame {start} ({length} frames) does not fit the "
                    f"block layout (block_length={frames}, n_frames_per_step={r})"
                )
            end[row] = start + round_up(length, r)
            text[i, : len(ids)] = ids
            mel[row, :, start : start + length] = spec
            gate[row, start : start + length - 1] = 0.0
            row_of.append(row)
            start_of.append(start)
            text_start.append(used[row])
            used[row] += len(ids)
        if len(end) != rows:
            raise ValueError(f"rows {sorted(set(range(rows)) - set(end))} of the batch hold no utterance")
        packing = Packing(torch.tensor(row_of), torch.tensor(start_of), torch.tensor(text_start), max(used))
        return Batch(
            text=text,
            text_lengths=text_lengths,
            mel=mel,
            gate=gate,
            mel_lengths=mel_lengths,
            text_lengths_host=text_lengths,
            frames=sum(mel.shape[-1] for *_, mel in items),
            packing=packing,
        )
