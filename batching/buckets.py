"""Shape buckets for a graph-ready decoder loop: few shapes per run, the plan untouched.

A CUDA graph replays one fixed shape, and the decoder loop's shape is (B, decoder steps, T_text),
which differs for nearly every batch. Rounding each batch's frames up to a multiple of
`graph_bucket` and its size up to the largest batch of the epoch in that frame bucket leaves a
handful of shapes for the whole run (text is rounded up to a multiple of TEXT_MULTIPLE). The
rounding happens inside the decoder (model/fast_decoder.py), which runs the bigger shape on
zero-padded inputs and slices the results back, so the plan, ZPR, ABL and the loss stay the
paper's; only the decoder computes a few more steps and rows.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: Text positions are rounded up to a multiple of this.
TEXT_MULTIPLE = 16


class Bucket(NamedTuple):
    """The padded shape a batch's decoder loop runs: rows, mel frames (a multiple of r) and text."""

    batch: int
    frames: int
    text: int


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def bucket_table(batches: list[np.ndarray], lengths: np.ndarray, graph_bucket: int) -> dict[int, int]:
    """Frame bucket -> the largest batch size among the batches whose longest utterance falls in it
    (every rank's batches of the epoch, so every rank uses the same shapes)."""
    table: dict[int, int] = {}
    lengths = np.asarray(lengths)
    for batch in batches:
        frames = round_up(int(lengths[batch].max()), graph_bucket)
        table[frames] = max(table.get(frames, 0), len(batch))
    return table


def bucket_of(table: dict[int, int], batch: int, frames: int, text: int, graph_bucket: int) -> Bucket:
    """The bucket of a batch of `batch` rows padded to `frames` mel frames and `text` symbols. A
    batch the table does not cover (another epoch's plan) keeps its own size in its frame bucket."""
    bucket_frames = round_up(frames, graph_bucket)
    return Bucket(max(batch, table.get(bucket_frames, 0)), bucket_frames, round_up(text, TEXT_MULTIPLE))
