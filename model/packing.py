"""The BLoad table as tensors, and what the model derives from it for a batch of packed blocks.

A packed batch has R rows (blocks) of T frames. Each of its N utterances sits in one row,
starting at a frame that is a multiple of r (n_frames_per_step) and occupying ceil(len / r) * r
frames; the frames after its end up to the next utterance, and the end of the block, are
padding. The row's text axis is the concatenation of its utterances' texts (in the same order),
so utterance u's symbols are positions text_start[u] .. text_start[u] + text_len[u] - 1.

Decoder steps: step s of a row belongs to the last utterance that started at or before frame
s * r (its "segment"); block-end padding steps continue the row's last utterance (their outputs
are masked out and come after every real step of the row, so they change nothing real).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .shapes import ceil_div


class Packing(NamedTuple):
    """Where each utterance of a packed batch sits. Utterances must be listed row by row, and in
    order of their start frame inside a row (the collate builds them so)."""

    row: torch.Tensor  # long [N]: the block (row of the batch) holding the utterance
    start: torch.Tensor  # long [N]: its first frame in that block, a multiple of r
    text_start: torch.Tensor  # long [N]: its first symbol in the block's concatenated text axis
    n_text: int  # width of the block text axis (the longest row's total text)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Packing:
        return Packing(
            self.row.to(device, non_blocking=non_blocking),
            self.start.to(device, non_blocking=non_blocking),
            self.text_start.to(device, non_blocking=non_blocking),
            self.n_text,
        )

    def pin_memory(self) -> Packing:
        return Packing(self.row.pin_memory(), self.start.pin_memory(), self.text_start.pin_memory(), self.n_text)

    def frame_mask(self, mel_lengths: torch.Tensor, rows: int, frames: int) -> torch.Tensor:
        """bool [rows, frames]: True at real frames, False at every padding frame."""
        index, valid = self.frame_index(mel_lengths, frames, width=frames)  # no utterance is longer than a block
        return positions_mask(index, valid, rows * frames).view(rows, frames)

    def frame_index(self, mel_lengths: torch.Tensor, frames: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(index, valid), both [N, width]: valid marks each utterance's real frames (width: at least
        the longest utterance, a host number), index their positions in the flattened
        [rows * frames] block axis (meaningless where not valid). Fixed shapes, no compaction:
        selecting x[valid] would size its result from device values, a host sync on a GPU."""
        t = torch.arange(width, device=mel_lengths.device)
        return (self.row * frames + self.start).unsqueeze(1) + t, t < mel_lengths.unsqueeze(1)

    def text_index(self, text_lengths: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(index, valid) as frame_index, for symbols: positions in the flattened [rows * n_text] axis."""
        t = torch.arange(width, device=text_lengths.device)
        return (self.row * self.n_text + self.text_start).unsqueeze(1) + t, t < text_lengths.unsqueeze(1)


def _or_dump(index: torch.Tensor, valid: torch.Tensor, dump: int) -> torch.Tensor:
    """index where valid, else `dump` (a slot one past the real ones, dropped afterwards)."""
    return torch.where(valid, index, dump)


def positions_mask(index: torch.Tensor, valid: torch.Tensor, size: int) -> torch.Tensor:
    """bool [size]: True at the positions `index` holds where valid (a frame_index or text_index grid)."""
    mask = torch.zeros(size + 1, dtype=torch.bool, device=index.device)  # + the dump slot
    return mask.index_fill_(0, _or_dump(index, valid, size).flatten(), True)[:-1]


def gather_utterances(by_position: torch.Tensor, index: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """by_position [M, D] (flattened block axis) -> [N, width, D]: each utterance's rows, zero
    beyond its length. Fixed-size gather: index_select and masked_fill, no host sync."""
    n, width = index.shape
    rows = by_position.index_select(0, torch.where(valid, index, 0).flatten()).view(n, width, -1)
    return rows.masked_fill(~valid.unsqueeze(2), 0.0)


def scatter_utterances(values: torch.Tensor, index: torch.Tensor, valid: torch.Tensor, size: int) -> torch.Tensor:
    """values [N, width, D] -> [size, D]: each utterance's valid rows at its positions, zeros
    elsewhere (the inverse of gather_utterances). Invalid rows go to a dump slot that is dropped."""
    out = values.new_zeros(size + 1, values.size(2))
    return out.index_put((_or_dump(index, valid, size).flatten(),), values.flatten(0, 1))[:-1]


class StepLayout(NamedTuple):
    """Per decoder step of every row: which utterance it serves and whether it restarts."""

    segment: torch.Tensor  # long [R, steps]: utterance of each step
    step_in_segment: torch.Tensor  # long [R, steps]: steps since that utterance started
    real: torch.Tensor  # bool [R, steps]: the step emits at least one real frame
    resets: torch.Tensor  # bool [R, steps]: an utterance starts at this step


def step_layout(packing: Packing, mel_lengths: torch.Tensor, rows: int, steps: int, r: int) -> StepLayout:
    """Segments, real steps and resets of every row (on the device: no host read)."""
    device = mel_lengths.device
    n = mel_lengths.numel()
    first_step = torch.div(packing.start, r, rounding_mode="floor")
    marker = torch.zeros(rows, steps, dtype=torch.long, device=device)
    marker.index_put_((packing.row, first_step), torch.arange(1, n + 1, device=device))
    segment = torch.cummax(marker, dim=1).values - 1
    step_in_segment = torch.arange(steps, device=device) - first_step[segment]
    n_steps = ceil_div(mel_lengths, r)
    return StepLayout(segment, step_in_segment, step_in_segment < n_steps[segment], marker > 0)


def step_mask_bias(
    packing: Packing, layout: StepLayout, text_lengths: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """[steps, R, n_text]: 0 at the symbols of the step's own utterance, -inf elsewhere."""
    lo = packing.text_start[layout.segment]  # [R, steps]
    hi = lo + text_lengths[layout.segment]
    pos = torch.arange(packing.n_text, device=lo.device)
    allowed = (pos >= lo.unsqueeze(2)) & (pos < hi.unsqueeze(2))  # [R, steps, n_text]
    bias = torch.zeros(allowed.shape, dtype=dtype, device=lo.device).masked_fill_(~allowed, float("-inf"))
    return bias.transpose(0, 1).contiguous()


def scatter_text(memory: torch.Tensor, text_lengths: torch.Tensor, packing: Packing, rows: int) -> torch.Tensor:
    """Per-utterance encoder outputs [N, T_text, D] -> the blocks' text axes [R, n_text, D] (zeros between)."""
    index, valid = packing.text_index(text_lengths, memory.size(1))
    return scatter_utterances(memory, index, valid, rows * packing.n_text).view(rows, packing.n_text, memory.size(2))


def packed_guided_attention(
    alignments: torch.Tensor,
    packing: Packing,
    text_lengths: torch.Tensor,
    mel_lengths: torch.Tensor,
    r: int,
    sigma: float,
) -> torch.Tensor:
    """loss.guided_attention_penalty for packed blocks: each utterance's steps against its own
    text, normalised by the total real steps, so it equals the penalty of the same utterances
    in an ordinary padded batch."""
    rows, steps, n_text = alignments.shape
    layout = step_layout(packing, mel_lengths, rows, steps, r)
    n_steps = ceil_div(mel_lengths, r)
    seg = layout.segment
    t = layout.step_in_segment / n_steps[seg]  # [R, steps]
    lo, length = packing.text_start[seg], text_lengths[seg]
    pos = torch.arange(n_text, device=alignments.device)
    offset = pos - lo.unsqueeze(2)  # [R, steps, n_text]
    n = offset / length.unsqueeze(2)
    guide = 1.0 - torch.exp(-(n - t.unsqueeze(2)).pow(2) / (2 * sigma**2))
    real = layout.real.unsqueeze(2) & (offset >= 0) & (offset < length.unsqueeze(2))
    return (alignments * guide * real).sum() / n_steps.sum()
